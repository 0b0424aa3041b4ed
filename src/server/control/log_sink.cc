#include "server/control/log_sink.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <set>
#include <vector>

namespace corral::server {

namespace {

// "1 GiB", "64 KiB", "100000 bytes".
std::string Bytes(int64_t n) {
  for (auto [unit, size] : {std::pair{"GiB", int64_t{1} << 30}, {"MiB", 1 << 20}, {"KiB", 1024}}) {
    if (n >= size && n % size == 0) return std::to_string(n / size) + " " + unit;
  }
  return std::to_string(n) + " bytes";
}

}  // namespace

LogSink::LogSink(std::string dir, int64_t max_bytes)
    : dir_(std::move(dir)), max_bytes_(std::max(max_bytes, kMinMaxBytes)) {}

std::string LogSink::DroppedNote(int64_t dropped, int64_t max_bytes) {
  return "[corral: " + std::to_string(dropped) +
         " bytes of older output dropped: log over its cap of " + Bytes(max_bytes) + "]\n";
}

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

Status LogSink::RemoveJobs(const std::vector<JobId>& jobs) {
  {
    const std::set<JobId> gone(jobs.begin(), jobs.end());
    std::lock_guard lock(mu_);
    std::erase_if(closed_, [&](const auto& entry) { return gone.count(entry.second.job) > 0; });
  }
  if (dir_.empty()) return Status::Ok();
  Status first;
  for (JobId job : jobs) {
    std::error_code ec;
    const std::string folder = dir_ + "/" + std::to_string(job.value());
    std::filesystem::remove_all(folder, ec);
    if (ec && first.ok()) first = IoError("remove " + folder + ": " + ec.message());
  }
  return first;
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

void LogSink::WriteChunk(const Target& target, const protocol::LogChunk& chunk) {
  std::error_code ec;
  std::filesystem::create_directories(dir_ + "/" + std::to_string(target.job.value()), ec);
  const std::string path = PathOf(dir_, target.job, target.task_index, target.generation,
                                  protocol::LogStreamName(chunk.stream));
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  // Chunks arrive in order from one agent: never leave a hole (no sparse files from bad input).
  const int64_t size = ::lseek(fd, 0, SEEK_END);
  if (chunk.offset > size) {
    ::close(fd);
    return;
  }
  int64_t length = static_cast<int64_t>(chunk.data.size());
  if (keep_oldest_) length = std::clamp<int64_t>(max_bytes_ - chunk.offset, 0, length);
  // Written at the agent's offset: a chunk sent twice lands on the same bytes.
  if (length > 0 && ::pwrite(fd, chunk.data.data(), length, chunk.offset) == length) {
    const int64_t end = std::max(size, chunk.offset + length);
    if (end > max_bytes_) DropOlderOutput(fd, end);
  }
  ::close(fd);
}

void LogSink::DropOlderOutput(int fd, int64_t end) {
  struct stat st {};
  const int64_t block = ::fstat(fd, &st) == 0 && st.st_blksize > 0 ? st.st_blksize : 4096;
  // Whole blocks only: a punched part block would stay on disk as zeros before the data.
  const int64_t drop_to = (end - max_bytes_) / block * block;
  const int64_t data = ::lseek(fd, 0, SEEK_DATA);  // where the kept output starts
  if (drop_to <= 0 || (data >= 0 && data >= drop_to)) return;
  const int64_t from = std::max<int64_t>(data, 0);
  if (::fallocate(fd, FALLOC_FL_PUNCH_HOLE | FALLOC_FL_KEEP_SIZE, from, drop_to - from) == 0) {
    return;
  }
  // No holes here (EOPNOTSUPP): the disk stays bounded by keeping the oldest output instead.
  const std::string why = std::strerror(errno);
  if (!keep_oldest_.exchange(true)) {
    std::cerr << "corral server: warning: the logs folder " << dir_
              << " cannot drop older output (fallocate: " << why
              << "): each stream keeps its first " << Bytes(max_bytes_) << " instead\n";
  }
  (void)::ftruncate(fd, max_bytes_);
}

Result<LogSink::Page> LogSink::Read(JobId job, int task_index, int64_t generation,
                                    const std::string& stream, int64_t offset,
                                    int64_t max_bytes) const {
  Page page{.next_offset = offset};
  if (dir_.empty()) return page;
  const std::string path = PathOf(dir_, job, task_index, generation, stream);
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return page;
    return IoError("open log file: " + std::string(std::strerror(errno)));
  }
  Status s;
  struct stat st {};
  if (::fstat(fd, &st) != 0) {
    s = IoError("stat log file: " + std::string(std::strerror(errno)));
  } else {
    page.size = st.st_size;
    // What was dropped is a hole at the start: the data starts after it (none: ENXIO).
    const int64_t data = offset < page.size ? ::lseek(fd, 0, SEEK_DATA) : 0;
    const bool dropped = data > offset;
    const int64_t from = dropped ? data : offset;
    const int64_t room = max_bytes - (dropped ? kNoteRoom : 0);
    std::string text(std::clamp<int64_t>(page.size - from, 0, room), '\0');
    size_t done = 0;
    while (done < text.size()) {
      const ssize_t n =
          ::pread(fd, text.data() + done, text.size() - done, from + static_cast<int64_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        s = IoError("read log file: " + std::string(std::strerror(errno)));
        break;
      }
      if (n == 0) break;  // the file shrank meanwhile
      done += n;
    }
    text.resize(done);
    // A write may have dropped more meanwhile (a hole reads as zeros): keep only what is still
    // data after the read.
    const int64_t data_after = offset < page.size ? ::lseek(fd, 0, SEEK_DATA) : 0;
    int64_t start = from;
    if (data_after > from) {
      const int64_t lost = std::min<int64_t>(data_after - from, static_cast<int64_t>(text.size()));
      text.erase(0, static_cast<size_t>(lost));
      start = from + lost;
    }
    const bool dropped_now = dropped || start > from;
    page.next_offset = start + static_cast<int64_t>(text.size());
    if (dropped_now && page.next_offset > start) {
      // Whole blocks were dropped: the first line kept is cut; drop its start too (when the
      // line ends soon), so that the note is followed by whole lines.
      const size_t line_end = text.find('\n');
      const size_t cut = line_end != std::string::npos && line_end < static_cast<size_t>(kNoteRoom)
                             ? line_end + 1
                             : 0;
      page.data = DroppedNote(start + static_cast<int64_t>(cut), max_bytes_) + text.substr(cut);
    } else {
      page.data = std::move(text);
    }
  }
  ::close(fd);
  if (!s.ok()) return s;
  return page;
}

}  // namespace corral::server
