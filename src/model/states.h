// The states of jobs, tasks and nodes, and why a task ended: defined once here and used by the
// store (which keeps their names as text), the server, the agent protocol, the API and the CLI.
// A state's name is its lowercase spelling in the API and the database ("pending", "timeout").
// Which transitions are allowed is the server's rule (docs/control-plane.md); the list of
// states is the contract later work builds on: anything else (fenced, dependency never
// satisfied, resized, preempted, requeued) is a reason or an event, never a state
// (docs/decisions.md).
//
// Everything here is a pure function of its arguments: thread-safe, no allocation but the
// error messages.
#pragma once

#include <array>
#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace corral::model {

// A job's state:
//   pending -> starting -> running -> succeeded | failed | timeout | oom | cancelled | lost
// and back to pending when a job is requeued (preemption, a lost node, a failed, timed-out or
// OOM-killed run with restarts left). A job in any live state (pending, starting, running) may
// be cancelled.
enum class JobState {
  kPending,    // queued: waiting for the scheduler to place it
  kStarting,   // placed: its tasks are assigned and being launched
  kRunning,    // every task runs
  kSucceeded,  // every task exited with code 0 (with mpi: task 0 did)
  kFailed,     // a task failed (non-zero exit, a signal, failed to start)
  kCancelled,  // a user or an admin cancelled it
  kLost,       // its node was lost with no restart left
  kTimeout,    // a task was stopped because it reached the job's time limit
  kOom,        // a task was killed by the kernel's OOM killer at its memory limit
};
inline constexpr std::array<JobState, 9> kJobStates = {
    JobState::kPending,   JobState::kStarting, JobState::kRunning,
    JobState::kSucceeded, JobState::kFailed,   JobState::kCancelled,
    JobState::kLost,      JobState::kTimeout,  JobState::kOom};

// A task's state as the server records it:
//   assigned (stored, its agent not yet told or not yet reporting) -> running -> exited |
//   killed | lost
// An assigned task whose launch never went out, of a job being stopped, ends killed.
enum class TaskState {
  kAssigned,
  kRunning,
  kExited,  // ended on its own (exit code or signal)
  kKilled,  // stopped by its agent (a kill order, its time limit) or never started
  kLost,    // its agent or its node lost it
};
inline constexpr std::array<TaskState, 5> kTaskStates = {TaskState::kAssigned, TaskState::kRunning,
                                                         TaskState::kExited, TaskState::kKilled,
                                                         TaskState::kLost};

// A node's state: ready takes new tasks; cordoned takes none; drained takes none either (an
// admin's `corral node drain`: its running jobs finish where they are, as for cordoned, and it
// says the node is to leave); lost missed its heartbeats.
enum class NodeState { kReady, kCordoned, kDrained, kLost };
inline constexpr std::array<NodeState, 4> kNodeStates = {NodeState::kReady, NodeState::kCordoned,
                                                         NodeState::kDrained, NodeState::kLost};

// Why an agent's task process ended, as the agent saw it (sent in its task status; an older
// agent sends none). Only the agent knows: a time limit's kill and the kernel's OOM kill both
// look like "killed by signal" from outside.
enum class TaskEndCause {
  kExited,       // the process exited on its own (any code)
  kSignalled,    // a signal corral did not send ended it
  kStopped,      // the agent stopped it on the server's order (cancel, gang failure, stale)
  kTimeLimit,    // the agent stopped it at its time limit
  kOutOfMemory,  // the kernel's OOM killer killed it at its memory limit
  // The agent stopped it on its own, having reached no server for the server's fence_after: its
  // job would be requeued elsewhere once the node is declared lost (docs/control-plane.md,
  // "Fencing"). Only agents say it: the server records such a task as lost, without a cause.
  kFenced,
};
inline constexpr std::array<TaskEndCause, 6> kTaskEndCauses = {
    TaskEndCause::kExited,    TaskEndCause::kSignalled,   TaskEndCause::kStopped,
    TaskEndCause::kTimeLimit, TaskEndCause::kOutOfMemory, TaskEndCause::kFenced};

// Names: "pending", ..., "timeout", "oom"; "assigned", ...; "ready", ...; "exited",
// "signalled", "stopped", "time_limit", "out_of_memory", "fenced".
std::string_view ToString(JobState state);
std::string_view ToString(TaskState state);
std::string_view ToString(NodeState state);
std::string_view ToString(TaskEndCause cause);

// The state or cause named `name` (exactly, lowercase). InvalidArgument naming `field` and
// listing the valid names otherwise: "field 'state': unknown job state 'done' (one of pending,
// starting, running, succeeded, failed, cancelled, lost, timeout, oom)".
Result<JobState> ParseJobState(std::string_view name, std::string_view field = "state");
Result<TaskState> ParseTaskState(std::string_view name, std::string_view field = "state");
Result<NodeState> ParseNodeState(std::string_view name, std::string_view field = "state");
Result<TaskEndCause> ParseTaskEndCause(std::string_view name, std::string_view field = "end_cause");

// Comma-separated job state names ("failed,timeout"; what `corral jobs --state` and
// `GET /api/v1/jobs?state=` take), in the order given. Empty: none. Errors as ParseJobState's.
Result<std::vector<JobState>> ParseJobStates(std::string_view names,
                                             std::string_view field = "state");

// A job in a final state never runs again: succeeded, failed, cancelled, lost, timeout, oom.
bool IsFinal(JobState state);
// A task that ended (exited, killed, lost) never runs again; its job may run a new generation.
bool IsEnded(TaskState state);

// The final state of a job whose run failed because a task ended this way (none: an agent that
// says nothing): timeout for a time limit, oom for the OOM killer, failed otherwise.
JobState FailedStateFor(std::optional<TaskEndCause> cause);

}  // namespace corral::model
