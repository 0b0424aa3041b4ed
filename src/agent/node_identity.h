// The node's identity towards the server: a random secret created once per work dir and sent
// with every registration. The server binds a live node name to it, so that holding the join
// token is not enough to take over another node's name; a restarted agent (same work dir)
// proves it is the same node. A work dir belongs to one agent at a time (WorkDirLock).
#pragma once

#include <string>

#include "common/status.h"

namespace corral::agent {

// Reads <work_dir>/node.id, or creates it (32 lowercase hex characters from getrandom() and a
// newline; mode 0600, written to a temp file and renamed, so a crash leaves no partial id) when
// it does not exist. `work_dir` must exist. Errors name the path: a malformed file is
// InvalidArgument (never replaced: the id is this node's identity), I/O failures IoError.
Result<std::string> LoadOrCreateNodeId(const std::string& work_dir);

// One agent per work dir: its node id is the node's identity, and its runtime adopts every task
// found there (process_runtime.h), so a second agent on the same work dir would register as the
// same node and supervise the same tasks twice. Held, as an flock(2) on <work_dir>/agent.lock
// (which also names the holder's pid), for the lifetime of the object; the kernel releases it
// however the process ends, so a stale lock file never blocks a restart. Move-only.
class WorkDirLock {
 public:
  // Takes the lock without waiting. FailedPrecondition naming the work dir and the holder's pid
  // when another process holds it; IoError when the file cannot be opened.
  static Result<WorkDirLock> Acquire(const std::string& work_dir);

  WorkDirLock(WorkDirLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }
  WorkDirLock& operator=(WorkDirLock&& other) noexcept;
  WorkDirLock(const WorkDirLock&) = delete;
  WorkDirLock& operator=(const WorkDirLock&) = delete;
  ~WorkDirLock();

 private:
  explicit WorkDirLock(int fd) : fd_(fd) {}
  int fd_ = -1;  // open (O_CLOEXEC) while held
};

}  // namespace corral::agent
