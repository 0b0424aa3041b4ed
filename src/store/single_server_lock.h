// SQLite serves one server (docs/control-plane.md, "Several servers on one PostgreSQL"): a server
// on a SQLite store holds an exclusive lock on a file beside the database for its whole life, so
// that a second server opening the same file fails to start instead of scheduling the same jobs
// twice. PostgreSQL stores are shared by several servers under the leader's lease instead.
#pragma once

#include <memory>
#include <string>

#include "common/status.h"

namespace corral::store {

class SingleServerLock {
 public:
  // For "sqlite:PATH": takes an exclusive flock on "PATH.lock" (created mode 0600 when missing)
  // and writes this process's pid into it; held until the lock is destroyed (or the process
  // ends). When another process holds it: FailedPrecondition naming the file, the other
  // server's pid (when the file says), and "use PostgreSQL for more than one server". For any
  // other store URL: nullptr (no lock: PostgreSQL servers share the store).
  static Result<std::unique_ptr<SingleServerLock>> Acquire(const std::string& store_url);
  ~SingleServerLock();
  SingleServerLock(const SingleServerLock&) = delete;
  SingleServerLock& operator=(const SingleServerLock&) = delete;

 private:
  explicit SingleServerLock(int fd) : fd_(fd) {}
  int fd_;  // the lock file, flocked
};

}  // namespace corral::store
