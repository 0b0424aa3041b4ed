#include "agent/node_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <string>

#include "agent/file_io.h"
#include "common/random_id.h"

namespace corral::agent {
namespace {

constexpr size_t kIdBytes = 16;  // 128 bits, 32 hex characters
constexpr char kFileName[] = "/node.id";
constexpr char kLockName[] = "/agent.lock";

// Writes `content` to `path` with mode 0600 from the start: a temp file, fsynced, renamed over
// `path`, then the directory fsynced so that the name survives a crash.
Status WritePrivateFileAtomic(const std::string& dir, const std::string& path,
                              const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError(tmp + ": " + ErrnoText(errno));
  Status s;
  if (fchmod(fd, 0600) != 0) s = IoError(tmp + ": chmod: " + ErrnoText(errno));
  if (s.ok() && write(fd, content.data(), content.size()) != static_cast<ssize_t>(content.size())) {
    s = IoError(tmp + ": write: " + ErrnoText(errno));
  }
  if (s.ok() && fsync(fd) != 0) s = IoError(tmp + ": fsync: " + ErrnoText(errno));
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = IoError("rename " + tmp + " -> " + path + ": " + ErrnoText(errno));
  }
  if (!s.ok()) {
    unlink(tmp.c_str());
    return s;
  }
  if (int dir_fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC); dir_fd >= 0) {
    fsync(dir_fd);
    close(dir_fd);
  }
  return Status::Ok();
}

}  // namespace

Result<std::string> LoadOrCreateNodeId(const std::string& work_dir) {
  const std::string path = work_dir + kFileName;
  Result<std::string> text = ReadFile(path);
  if (text.ok()) {
    std::string id = *text;
    if (!id.empty() && id.back() == '\n') id.pop_back();
    if (!IsHexId(id, kIdBytes)) {
      return InvalidArgument(path +
                             ": not a node id (expected 32 lowercase hex characters); it is this "
                             "node's identity towards the server: restore it, or delete it to "
                             "register as a new node");
    }
    return id;
  }
  if (text.status().code() != StatusCode::kNotFound) return text.status();
  Result<std::string> id = RandomHexId(kIdBytes);
  if (!id.ok()) return id.status();
  CORRAL_RETURN_IF_ERROR(WritePrivateFileAtomic(work_dir, path, *id + "\n"));
  return id;
}

Result<WorkDirLock> WorkDirLock::Acquire(const std::string& work_dir) {
  const std::string path = work_dir + kLockName;
  // O_CLOEXEC: tasks and engines the agent starts never hold it (the supervisor closes every
  // descriptor it does not need, too).
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0600);
  if (fd < 0) return IoError(path + ": " + ErrnoText(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int e = errno;
    Result<std::string> holder = ReadFile(path);
    close(fd);
    if (e != EWOULDBLOCK) return IoError(path + ": flock: " + ErrnoText(e));
    std::string pid = holder.ok() ? holder->substr(0, holder->find('\n')) : "";
    return FailedPrecondition("work dir " + work_dir + " is in use by another agent" +
                              (pid.empty() ? "" : " (pid " + pid + ")") +
                              ": give each agent its own --work-dir");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int e = errno;
    close(fd);
    return IoError(path + ": write: " + ErrnoText(e));
  }
  return WorkDirLock(fd);
}

WorkDirLock& WorkDirLock::operator=(WorkDirLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

WorkDirLock::~WorkDirLock() {
  if (fd_ >= 0) close(fd_);  // releases the flock
}

}  // namespace corral::agent
