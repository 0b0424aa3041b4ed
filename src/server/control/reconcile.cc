#include "server/control/reconcile.h"

#include <algorithm>
#include <ctime>
#include <map>
#include <set>

namespace corral::server::reconcile {

namespace {

using model::JobState;
using model::TaskState;

// At most `max` bytes of `text`, cut before a UTF-8 continuation byte so no character is split.
std::string TruncateNote(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// What the agents said of the run's tasks (a scratch folder instead of the submit folder, limits
// not applied), each note once with the tasks that gave it, by first task: "; task 0: ...",
// "; tasks 0, 1 and 2: ...", "; tasks 0, 1, 2 and 509 more: ..."; "" when none. At most
// kMaxTaskNote bytes per note, so a large gang's start event stays small.
std::string NotesOf(const RunTasks& run) {
  std::map<std::string, std::vector<int>> tasks_of;  // note -> task indices
  for (const auto& t : run.tasks) {
    auto note = run.notes.find(t.allocation_id);
    if (note != run.notes.end()) tasks_of[note->second].push_back(t.task_index);
  }
  std::vector<std::pair<std::vector<int>, const std::string*>> noted;
  for (auto& [note, tasks] : tasks_of) {
    std::sort(tasks.begin(), tasks.end());
    noted.push_back({tasks, &note});
  }
  std::sort(noted.begin(), noted.end());
  constexpr size_t kNamed = 3;  // task indices named before "and N more"
  std::string out;
  for (const auto& [tasks, note] : noted) {
    std::string who = tasks.size() == 1 ? "task " : "tasks ";
    for (size_t i = 0; i < tasks.size() && i < kNamed; ++i) {
      const bool last = i + 1 == tasks.size();
      who += (i == 0 ? "" : (last ? " and " : ", ")) + std::to_string(tasks[i]);
    }
    if (tasks.size() > kNamed) who += " and " + std::to_string(tasks.size() - kNamed) + " more";
    out += "; " + who + ": " + *note;
  }
  return out;
}

// The failed task that explains the gang's end: after a restart the parts the server had
// stopped because of it look failed too (killed), so one it did not stop comes first.
const store::TaskRecord* ExplainingFailure(const std::vector<store::TaskRecord>& tasks) {
  const store::TaskRecord* failed = nullptr;
  for (const auto& t : tasks) {
    if (!model::IsEnded(t.state) || !TaskFailed(t)) continue;
    if (!failed || (failed->end_cause == model::TaskEndCause::kStopped &&
                    t.end_cause != model::TaskEndCause::kStopped)) {
      failed = &t;
    }
  }
  return failed;
}

// "2026-12-04 23:40:05 UTC".
std::string UtcTime(Seconds t) {
  const std::time_t seconds = static_cast<std::time_t>(t.value());
  std::tm tm{};
  gmtime_r(&seconds, &tm);
  char text[32];
  std::strftime(text, sizeof(text), "%Y-%m-%d %H:%M:%S UTC", &tm);
  return text;
}

// Its runs that failed or were lost: preemptions and resizes are restarts the job did not ask
// for.
int FailedRuns(const RunFacts& facts) { return facts.restarts - facts.preemptions - facts.resizes; }

}  // namespace

bool Requeueable(const RunFacts& facts) { return FailedRuns(facts) < facts.max_restarts; }

bool Fenceable(const RunFacts& facts) {
  if (!facts.elastic) return Requeueable(facts);
  return FailedRuns(facts) < std::max(facts.max_restarts, facts.resize_budget);
}

// A task stopped at its time limit failed however it exited (Slurm's TIMEOUT): a program that
// handles SIGTERM and exits 0 did not finish its work.
bool TaskFailed(const store::TaskRecord& t) {
  return t.state == TaskState::kLost || t.end_cause == model::TaskEndCause::kTimeLimit ||
         t.signal.has_value() || t.exit_code.value_or(0) != 0 ||
         (t.state == TaskState::kKilled && !t.exit_code.has_value());
}

std::string DescribeEnd(const store::TaskRecord& t, const std::string& note) {
  std::string what = "task " + std::to_string(t.task_index);
  if (t.state == TaskState::kLost) {
    what += " was lost";
  } else if (t.signal) {
    what += " was killed by signal " + std::to_string(*t.signal);
  } else if (t.exit_code && (t.end_cause == model::TaskEndCause::kStopped ||
                             t.end_cause == model::TaskEndCause::kTimeLimit)) {
    // Stopped by its agent (a time limit, a cancellation), it exited on its own terms.
    what += " was stopped and exited with code " + std::to_string(*t.exit_code);
  } else if (t.exit_code) {
    what += " exited with code " + std::to_string(*t.exit_code);
  } else {
    what += " ended (" + std::string(model::ToString(t.state)) + ")";
  }
  return note.empty() ? what : what + ": " + note;
}

RunDecision EvaluateRun(const RunFacts& facts, const RunEnd& end, const RunTasks& run,
                        Seconds now) {
  RunDecision d;
  d.end = end;
  // With mpi, part 0 runs mpirun and the other parts only hold their nodes: part 0's good end is
  // the job's, however the holders end (decided first, so that a holder stopped afterwards, or
  // seen first after a server restart, does not count as a failure).
  if (!d.end.Stopping() && facts.launcher == model::Launcher::kMpi) {
    for (const auto& t : run.tasks) {
      if (t.task_index == 0 && model::IsEnded(t.state) && !TaskFailed(t)) {
        d.end.primary_done = true;
      }
    }
  }
  if (!d.end.Stopping()) {
    if (const store::TaskRecord* failed = ExplainingFailure(run.tasks)) {
      d.end.failing = true;
      auto note = run.notes.find(failed->allocation_id);
      d.end.failure = DescribeEnd(*failed, note == run.notes.end() ? "" : note->second);
      // Its agent's typed cause, never the note: timeout, oom or failed.
      d.end.failed_state = model::FailedStateFor(failed->end_cause);
    }
  }
  const bool stopping = d.end.Stopping() && facts.state != JobState::kPending;
  if (stopping) {
    // The rest of the gang is stopped: launches that never went out end here, the others by
    // the kill orders their nodes hear.
    d.notify_nodes = true;
    for (const auto& t : run.tasks) {
      if (t.state != TaskState::kAssigned || run.launched.count(t.allocation_id)) continue;
      store::TaskRecord stopped = t;
      stopped.state = TaskState::kKilled;
      stopped.end_time = now;
      d.stop.push_back(std::move(stopped));
    }
  }
  std::set<int64_t> stopped_now;
  for (const auto& t : d.stop) stopped_now.insert(t.allocation_id);
  bool all_ended = !run.tasks.empty();
  bool all_running = !run.tasks.empty();
  for (const auto& t : run.tasks) {
    all_ended &= model::IsEnded(t.state) || stopped_now.count(t.allocation_id) > 0;
    all_running &= t.state == TaskState::kRunning;
  }
  if (all_running && facts.state == JobState::kStarting) {
    d.verdict = RunVerdict::kStartRunning;
    d.reason = "all tasks running" + NotesOf(run);
  }
  if (!all_ended) return d;
  d.verdict = RunVerdict::kEnd;
  if (d.end.cancel_requested) {
    d.end_state = JobState::kCancelled;
    d.reason = d.end.failure;
  } else if (d.end.failing) {
    d.end_state = d.end.failed_state;
    d.reason = d.end.failure;
    if (Requeueable(facts)) {
      d.verdict = RunVerdict::kRequeue;
      d.reason += "; requeued (restart " + std::to_string(FailedRuns(facts) + 1) + " of " +
                  std::to_string(facts.max_restarts) + ")";
    } else if (d.end.failed_state == JobState::kLost && Fenceable(facts)) {
      d.verdict = RunVerdict::kRequeue;  // fenced or lost: it goes on at whatever size fits
      d.reason += "; requeued (elastic)";
    }
  } else if (d.end.primary_done) {
    d.end_state = JobState::kSucceeded;
    d.reason = "task 0 (mpirun) exited with code 0";
  } else {
    d.end_state = JobState::kSucceeded;
    d.reason = "all tasks exited with code 0";
    // Ended before its start was recorded: the notes the start event would have carried.
    if (facts.state == JobState::kStarting) d.reason += NotesOf(run);
  }
  return d;
}

ReportDecision DecideReport(const std::vector<store::TaskRecord>* job_tasks,
                            const std::string& node, const protocol::TaskStatus& s, Seconds now) {
  ReportDecision d;
  const bool running = s.state == protocol::ProcessState::kRunning;
  // A report of an end the server cannot place is only acknowledged; a task that runs where it
  // should not is stopped.
  auto stale = [&](const char* why) {
    if (running) {
      d.action = ReportAction::kKill;
      d.kill_reason = why;
    }
    return d;
  };
  if (job_tasks == nullptr) return stale("stale task: not assigned here any more");
  const int64_t alloc = s.key.allocation.value();
  auto task = std::find_if(job_tasks->begin(), job_tasks->end(),
                           [&](const auto& t) { return t.allocation_id == alloc; });
  if (task == job_tasks->end() || task->generation != s.key.generation || task->node != node) {
    return stale("stale generation");
  }
  if (model::IsEnded(task->state)) return stale("task already ended on the server");
  store::TaskRecord updated = *task;
  if (running) {
    if (task->state != TaskState::kAssigned) return d;  // known to run already
    updated.state = TaskState::kRunning;
    updated.start_time = s.started_at.value() > 0 ? s.started_at : now;
    if (!s.message.empty()) d.note = TruncateNote(s.message, kMaxTaskNote);
  } else {
    // exited | killed | failed_to_start | lost
    updated.state =
        s.state == protocol::ProcessState::kExited
            ? TaskState::kExited
            : (s.state == protocol::ProcessState::kLost ? TaskState::kLost : TaskState::kKilled);
    // Why it ended, as its agent saw it (an older agent says none). A task its agent fenced
    // (it reached no server) is lost, as the node's timeout would have made it.
    updated.end_cause = s.end_cause;
    if (s.end_cause == model::TaskEndCause::kFenced) {
      updated.state = TaskState::kLost;
      updated.end_cause.reset();
    }
    if (s.exit_code) updated.exit_code = s.exit_code;
    if (s.signal) updated.signal = s.signal;
    if (s.state == protocol::ProcessState::kFailedToStart && !updated.exit_code) {
      updated.exit_code = 127;
    }
    updated.end_time = s.ended_at.value_or(now);
    if (!s.message.empty()) d.note = TruncateNote(s.message, kMaxTaskNote);
  }
  d.action = ReportAction::kUpdate;
  d.updated = std::move(updated);
  return d;
}

std::optional<store::TaskRecord> DecideUnreported(const store::TaskRecord& t, bool launched,
                                                  bool stopping, Seconds now) {
  // The answer carrying its launch was lost: this heartbeat's answer carries it again. Only a
  // stopping job's launch is settled here.
  if (t.state == TaskState::kAssigned && launched && !stopping) return std::nullopt;
  if (t.state != TaskState::kRunning && !(t.state == TaskState::kAssigned && launched)) {
    return std::nullopt;
  }
  store::TaskRecord ended = t;
  // A running task the agent no longer knows is lost; a launch that never started, of a job
  // being stopped, is stopped.
  ended.state = t.state == TaskState::kRunning ? TaskState::kLost : TaskState::kKilled;
  ended.end_time = now;
  return ended;
}

NodeLoss LoseNode(const RunEnd& end, const std::vector<store::TaskRecord>& tasks,
                  const std::string& node, const std::string& reason, Seconds now) {
  NodeLoss loss{end, {}};
  for (const auto& t : tasks) {
    if (model::IsEnded(t.state) || t.node != node) continue;
    store::TaskRecord lost = t;
    lost.state = TaskState::kLost;
    lost.end_time = now;
    loss.lost.push_back(std::move(lost));
  }
  // The gang's tasks on other nodes are stopped (their GPUs stay taken until their nodes say
  // they ended); then the job is requeued or ends lost.
  if (!loss.end.Stopping()) {
    loss.end.failing = true;
    loss.end.failure = reason;
    loss.end.failed_state = JobState::kLost;
  }
  return loss;
}

Status CheckNodeTimings(const NodeTimings& t) {
  if (t.fence_after < protocol::kMinFenceAfter) {
    // Shorter, a heard agent would fence between two answers of its long poll.
    return InvalidArgument(
        "--fence-after must be at least " + std::to_string(protocol::kMinFenceAfter.value()) +
        " s (an agent's long poll and its answer), got " + std::to_string(t.fence_after.value()));
  }
  const Seconds fenced_by = t.fence_after + t.kill_grace + protocol::kAgentRequestTimeout;
  if (!(fenced_by < t.node_timeout)) {
    return InvalidArgument(
        "--fence-after " + std::to_string(t.fence_after.value()) + " s + --kill-grace " +
        std::to_string(t.kill_grace.value()) + " s + the agents' request timeout " +
        std::to_string(protocol::kAgentRequestTimeout.value()) +
        " s = " + std::to_string(fenced_by.value()) + " s must be less than --node-timeout " +
        std::to_string(t.node_timeout.value()) +
        " s: an agent cut off from the servers must have stopped its requeue-able tasks before "
        "their jobs are requeued elsewhere");
  }
  if (t.give_up < t.node_timeout) {
    return InvalidArgument("--node-give-up " + std::to_string(t.give_up.value()) +
                           " s must be at least --node-timeout " +
                           std::to_string(t.node_timeout.value()) + " s");
  }
  return Status::Ok();
}

std::vector<LostNode> TimedOutNodes(const std::vector<NodeLiveness>& nodes,
                                    const NodeTimings& timings, Seconds now) {
  std::vector<LostNode> out;
  for (const NodeLiveness& n : nodes) {
    if (n.state == model::NodeState::kLost) continue;
    const Seconds silent = now - n.last_heartbeat;
    if (silent > timings.give_up) {
      out.push_back({n.name, NodeVerdict::kGiveUp,
                     "node " + n.name + " lost (no heartbeat for " +
                         std::to_string(timings.give_up.value()) + " s)"});
    } else if (silent > timings.node_timeout && !n.unreachable) {
      out.push_back({n.name, NodeVerdict::kUnreachable,
                     "node " + n.name + " unreachable since " + UtcTime(n.last_heartbeat) +
                         " (no heartbeat for " + std::to_string(timings.node_timeout.value()) +
                         " s)"});
    }
  }
  return out;
}

std::optional<NodeLoss> NodeUnreachable(const RunFacts& facts, const RunEnd& end,
                                        const std::vector<store::TaskRecord>& tasks,
                                        const std::string& node, const std::string& reason,
                                        Seconds now) {
  // Its agent stops only what its launches called requeue-able: everything else may still run.
  if (!Fenceable(facts)) return std::nullopt;
  return LoseNode(end, tasks, node, "fenced: " + reason, now);
}

NodeOrders HeartbeatOrders(const std::string& node, const std::vector<store::TaskRecord>& tasks,
                           const RunEnd& end, const std::set<TaskOnNode>& waits_for,
                           const std::set<int64_t>& starting) {
  NodeOrders orders;
  const bool stopping = end.Stopping();
  for (const auto& t : tasks) {
    if (t.node != node) continue;
    if (stopping) {
      // A launch that went out may be running without a report yet: it is stopped too.
      if (!model::IsEnded(t.state)) orders.stop.push_back(&t);
    } else if (waits_for.empty() && t.state == TaskState::kAssigned &&
               !starting.count(t.allocation_id)) {
      // Sent again until the agent says it is starting it: an answer may have been lost.
      orders.launch.push_back(&t);
    }
  }
  if (!orders.stop.empty()) orders.stop_reason = end.failure;
  return orders;
}

PreemptDecision Preempt(const RunEnd& end, int preemptions, const RunTasks& run, Seconds now) {
  PreemptDecision d;
  d.preemptions = preemptions;
  for (const auto& t : run.tasks) {
    if (model::IsEnded(t.state)) continue;
    // A launch that never went out holds nothing on its node: nobody waits for it.
    if (t.state == TaskState::kAssigned && !run.launched.count(t.allocation_id)) continue;
    d.waits.emplace_back(t.node, t.allocation_id);
  }
  if (end.Stopping()) {
    d.verdict = PreemptVerdict::kStopGoesOn;
    return d;
  }
  d.verdict = PreemptVerdict::kRequeue;
  for (const auto& t : run.tasks) {
    if (model::IsEnded(t.state)) continue;
    store::TaskRecord killed = t;
    killed.state = TaskState::kKilled;
    killed.end_time = now;
    d.killed.push_back(std::move(killed));
  }
  ++d.preemptions;
  return d;
}

CancelVerdict DecideCancel(model::JobState state) {
  return state == JobState::kPending ? CancelVerdict::kEndNow : CancelVerdict::kStopRun;
}

RunEnd CancelRequested(RunEnd end, const std::string& reason) {
  // A cancellation outranks a failure already being stopped: the job ends cancelled, and the
  // kill orders say who cancelled it.
  end.cancel_requested = true;
  end.failure = reason;
  return end;
}

}  // namespace corral::server::reconcile
