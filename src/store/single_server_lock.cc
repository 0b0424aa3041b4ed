#include "store/single_server_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string_view>

#include "store/store_url.h"

namespace corral::store {

Result<std::unique_ptr<SingleServerLock>> SingleServerLock::Acquire(const std::string& store_url) {
  if (UrlScheme(store_url) != "sqlite") return std::unique_ptr<SingleServerLock>();
  const std::string path = SqlitePath(store_url) + ".lock";
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC, 0600);
  if (fd < 0) return IoError("cannot open the store's lock file " + path + ": " + strerror(errno));
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder;
    if (err == EWOULDBLOCK) {
      char buf[32] = {};
      const ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
      std::string_view text(buf, n > 0 ? static_cast<size_t>(n) : 0);
      while (!text.empty() && (text.back() == '\n' || text.back() == ' ')) text.remove_suffix(1);
      if (!text.empty() && text.find_first_not_of("0123456789") == std::string_view::npos) {
        holder = " (pid " + std::string(text) + ")";
      }
    }
    close(fd);
    if (err != EWOULDBLOCK) return IoError("cannot lock " + path + ": " + strerror(err));
    return FailedPrecondition("the SQLite store " + SqlitePath(store_url) +
                              " is in use by another corral server" + holder + " (it holds " +
                              path +
                              "); SQLite serves one server: use PostgreSQL for more than "
                              "one server");
  }
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    const int err = errno;
    close(fd);
    return IoError("cannot write " + path + ": " + strerror(err));
  }
  return std::unique_ptr<SingleServerLock>(new SingleServerLock(fd));
}

SingleServerLock::~SingleServerLock() { close(fd_); }

}  // namespace corral::store
