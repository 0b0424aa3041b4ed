#include "server/control/log_sink.h"

#include <fcntl.h>
#include <unistd.h>

#include <filesystem>
#include <vector>

namespace corral::server {

LogSink::LogSink(std::string dir) : dir_(std::move(dir)) {}

std::string LogSink::PathOf(const std::string& dir, JobId job, int task_index, int64_t generation,
                            const std::string& stream) {
  return dir + "/" + std::to_string(job.value()) + "/" + std::to_string(task_index) + "-g" +
         std::to_string(generation) + "." + stream;
}

void LogSink::Open(int64_t allocation, Target target) {
  std::lock_guard lock(mu_);
  closed_.erase(allocation);
  open_[allocation] = std::move(target);
}

void LogSink::Close(int64_t allocation) {
  std::lock_guard lock(mu_);
  auto it = open_.find(allocation);
  if (it == open_.end()) return;
  closed_[allocation] = std::move(it->second);
  open_.erase(it);
  while (closed_.size() > kRecentlyClosed) closed_.erase(closed_.begin());
}

std::optional<LogSink::Target> LogSink::TargetFor(const std::string& node,
                                                  const protocol::TaskKey& key) const {
  const int64_t allocation = key.allocation.value();
  const Target* target = nullptr;
  if (auto it = open_.find(allocation); it != open_.end()) {
    target = &it->second;
  } else if (auto closed = closed_.find(allocation); closed != closed_.end()) {
    target = &closed->second;
  }
  if (target == nullptr || target->node != node || target->generation != key.generation) {
    return std::nullopt;
  }
  return *target;
}

void LogSink::Write(const std::string& node, const std::vector<protocol::LogChunk>& chunks) {
  if (dir_.empty() || chunks.empty()) return;
  std::vector<std::pair<Target, const protocol::LogChunk*>> writes;
  {
    std::lock_guard lock(mu_);
    for (const protocol::LogChunk& chunk : chunks) {
      if (auto target = TargetFor(node, chunk.key)) writes.emplace_back(*target, &chunk);
    }
  }
  for (const auto& [target, chunk] : writes) WriteChunk(target, *chunk);
}

void LogSink::WriteChunk(const Target& target, const protocol::LogChunk& chunk) const {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/" + std::to_string(target.job.value()), ec);
  const std::string path = PathOf(dir_, target.job, target.task_index, target.generation,
                                  protocol::LogStreamName(chunk.stream));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  // Chunks arrive in order from one agent: never leave a hole (no sparse files from bad input).
  if (chunk.offset > ::lseek(fd, 0, SEEK_END)) {
    ::close(fd);
    return;
  }
  // Written at the agent's offset: a chunk sent twice lands on the same bytes.
  (void)::pwrite(fd, chunk.data.data(), chunk.data.size(), chunk.offset);
  ::close(fd);
}

}  // namespace corral::server
