#include "agent/file_io.h"

#include <errno.h>
#include <fcntl.h>
#include <string.h>
#include <unistd.h>

namespace corral::agent {

std::string ErrnoText(int errno_value) {
  char buffer[256];
  // GNU strerror_r returns the message (possibly a static string, not `buffer`).
  return strerror_r(errno_value, buffer, sizeof(buffer));
}

Result<std::string> ReadFile(const std::string& path) {
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return NotFound(path + ": no such file");
    return IoError(path + ": " + ErrnoText(e));
  }
  std::string out;
  char buffer[8192];
  while (true) {
    ssize_t n = read(fd, buffer, sizeof(buffer));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return IoError(path + ": read: " + ErrnoText(e));
    }
    if (n == 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  close(fd);
  return out;
}

namespace {

Status WriteAll(int fd, const std::string& content, const std::string& path) {
  size_t done = 0;
  while (done < content.size()) {
    ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return IoError(path + ": write: " + ErrnoText(errno));
    done += static_cast<size_t>(n);
  }
  return Status::Ok();
}

}  // namespace

Status WriteFileAtomic(const std::string& path, const std::string& content) {
  const std::string tmp = path + ".tmp";
  int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return IoError(tmp + ": " + ErrnoText(errno));
  Status s = WriteAll(fd, content, tmp);
  if (s.ok() && fsync(fd) != 0) s = IoError(tmp + ": fsync: " + ErrnoText(errno));
  close(fd);
  if (s.ok() && rename(tmp.c_str(), path.c_str()) != 0) {
    s = IoError("rename " + tmp + " -> " + path + ": " + ErrnoText(errno));
  }
  if (!s.ok()) unlink(tmp.c_str());
  return s;
}

Status WriteExisting(const std::string& path, const std::string& content) {
  int fd = open(path.c_str(), O_WRONLY | O_CLOEXEC);
  if (fd < 0) return IoError(path + ": " + ErrnoText(errno));
  Status s = WriteAll(fd, content, path);
  close(fd);
  return s;
}

}  // namespace corral::agent
