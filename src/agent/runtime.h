// How an agent runs tasks on its node. The reconcile loop drives a Runtime: it starts the
// launches the server wants, kills what the server cancels or preempts, and reports what Poll()
// says. Implementation: ProcessRuntime (process_runtime.h), which also runs containers.
//
// A Runtime never forgets a task by itself: a task stays in Poll()'s answer, running or ended,
// until Forget() is called (after the server has acknowledged its end), also across agent
// restarts for runtimes that survive them.
//
// Threads: one thread calls every method (the agent's runtime thread, runtime_thread.h), except
// ReadLog() and ExitNoticeFd(), which any thread may call at any time, so that reports carry
// output without waiting for launches in progress.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "agent/task_setup.h"
#include "common/status.h"
#include "common/units.h"
#include "model/states.h"

namespace corral::agent {

using protocol::LogStream;

// A running task as the runtime runs it, for GPU metrics (gpu_metrics.h): its launch (with the
// runtime it really runs in: a fallback may turn a "process" launch into a container), its
// process id, and whether it runs in a container (whose processes are not the task's
// descendants on the host).
struct RunningTask {
  TaskLaunch launch;
  int pid = 0;
  bool in_container = false;
};

class Runtime {
 public:
  virtual ~Runtime() = default;

  // Starts a task and returns its status: kRunning, or kFailedToStart with the reason (invalid
  // launch, program not found, exec failed, ...) — a failure is a status to report, not an
  // error of the call. Idempotent: a launch whose key the runtime already knows returns that
  // task's current status and starts nothing. A launch without a workdir runs in a scratch
  // directory that the runtime makes for the task.
  virtual TaskStatus Start(const TaskLaunch& launch) = 0;

  // Observes every known task: collects exits, sends SIGKILL when a kill's grace has run out,
  // and stops tasks past their time limit. Returns all known tasks sorted by key. Call it
  // regularly (the reconcile loop's tick); nothing happens between calls.
  virtual std::vector<TaskStatus> Poll() = 0;

  // Stops a running task: SIGTERM to its processes now, SIGKILL once `grace` has passed (at the
  // first Poll() after it); grace 0 kills at once. The task ends as kKilled with `reason` as its
  // message and `cause` as its end cause (kStopped on the server's order, kFenced when the agent
  // fences). Killing an ended task does nothing; a second Kill may shorten the grace, never
  // lengthen it, and keeps the first one's reason and cause. NotFound for an unknown key.
  virtual Status Kill(const TaskKey& key, Seconds grace, const std::string& reason,
                      model::TaskEndCause cause) = 0;
  // Kill on the server's order (kStopped).
  Status Kill(const TaskKey& key, Seconds grace, const std::string& reason) {
    return Kill(key, grace, reason, model::TaskEndCause::kStopped);
  }

  // Drops an ended task and its files (logs included). FailedPrecondition while it runs,
  // NotFound for an unknown key.
  virtual Status Forget(const TaskKey& key) = 0;

  // Up to `max_bytes` of a task's output from byte `offset` on ("" at the end). NotFound when
  // the task has no output here: an unknown or forgotten key, or a task that failed before
  // it had files. Thread-safe (see above).
  virtual Result<std::string> ReadLog(const TaskKey& key, LogStream stream, int64_t offset,
                                      int64_t max_bytes) = 0;

  // The tasks running as of the last Poll(), sorted by key.
  virtual std::vector<RunningTask> Running() const = 0;

  // A file descriptor that becomes readable when a task may have ended since the last Poll(),
  // which drains it; the caller only waits on it (poll(2)) and never reads it. Owned by the
  // runtime, valid for its lifetime. -1: the runtime has none, and its caller learns of ends by
  // calling Poll() on a timer. Thread-safe.
  virtual int ExitNoticeFd() const { return -1; }
};

}  // namespace corral::agent
