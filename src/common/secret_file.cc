#include "common/secret_file.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace corral {

Status WriteSecretFile(const std::string& path, const std::string& content) {
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot write '" + path + "'");
  ::fchmod(fd, 0600);  // an existing file keeps its mode on open
  const bool ok =
      ::write(fd, content.data(), content.size()) == static_cast<ssize_t>(content.size());
  ::close(fd);
  return ok ? Status::Ok() : IoError("cannot write '" + path + "'");
}

}  // namespace corral
