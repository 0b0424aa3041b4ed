#include "agent/node_identity.h"

#include <errno.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

constexpr size_t kIdBytes = 16;  // 128 bits, 32 hex characters
constexpr char kFileName[] = "/node.id";

bool IsNodeId(const std::string& text) {
  return text.size() == 2 * kIdBytes && std::all_of(text.begin(), text.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

Result<std::string> RandomHex() {
  unsigned char bytes[kIdBytes];
  int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
  if (fd < 0) return IoError("/dev/urandom: " + ErrnoText(errno));
  size_t got = 0;
  while (got < sizeof(bytes)) {
    ssize_t n = read(fd, bytes + got, sizeof(bytes) - got);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      int e = n < 0 ? errno : EIO;
      close(fd);
      return IoError("/dev/urandom: read: " + ErrnoText(e));
    }
    got += static_cast<size_t>(n);
  }
  close(fd);
  static constexpr char kHex[] = "0123456789abcdef";
  std::string out;
  for (unsigned char b : bytes) {
    out.push_back(kHex[b >> 4]);
    out.push_back(kHex[b & 0xf]);
  }
  return out;
}

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
    if (!IsNodeId(id)) {
      return InvalidArgument(path +
                             ": not a node id (expected 32 lowercase hex characters); it is this "
                             "node's identity towards the server: restore it, or delete it to "
                             "register as a new node");
    }
    return id;
  }
  if (text.status().code() != StatusCode::kNotFound) return text.status();
  Result<std::string> id = RandomHex();
  if (!id.ok()) return id.status();
  CORRAL_RETURN_IF_ERROR(WritePrivateFileAtomic(work_dir, path, *id + "\n"));
  return id;
}

}  // namespace corral::agent
