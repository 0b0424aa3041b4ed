// The reconcile core: the decisions the controller makes about a started job's run, as pure
// functions of typed values. No store, no lock, no clock (the time is passed in), no I/O: the
// controller loads what a decision needs, calls one of these, and only applies (persists,
// notifies) what it returns. Tested as plain functions by text scenarios
// (reconcile_scenario_test.cc, testdata/reconcile.scenario), the way src/sched/ is.
//
// What is decided here (docs/control-plane.md, "The reconcile core"):
//  - a task report from an agent (DecideReport): ignored, answered with a kill (stale: an
//    allocation no live job holds, another generation or node, a task already ended on the
//    server), or a new task record to store;
//  - a task a full heartbeat left out (DecideUnreported): lost, stopped, or left as it is;
//  - a job's run when one of its nodes is lost (LoseNode);
//  - a job's run after any change to its tasks (EvaluateRun): whether it is failing (and why,
//    and as what final state), which unlaunched tasks to stop, and whether it starts running,
//    goes on, ends (succeeded, failed, timeout, oom, lost, cancelled) or is requeued.
#pragma once

#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "common/units.h"
#include "model/launcher.h"
#include "model/states.h"
#include "protocol/task.h"
#include "store/store.h"

namespace corral::server::reconcile {

// How a job's current run is ending, kept by the controller between evaluations (LiveJob::end)
// and updated only from EvaluateRun's answer, a cancellation or a node loss. A fresh run (a
// requeue) starts from a default RunEnd.
struct RunEnd {
  bool cancel_requested = false;  // a user or admin cancelled it (durable in the store)
  bool failing = false;           // a task failed (or its node was lost): the gang is stopped
  std::string failure;            // why the gang is being stopped (also the kill orders' reason)
  // How it ends if not requeued: failed, timeout or oom (by its first failed task's end cause),
  // or lost (its node was).
  model::JobState failed_state = model::JobState::kFailed;
  // launcher mpi: part 0 (the mpirun) ended well; the other parts are being stopped and the
  // job succeeds once they have.
  bool primary_done = false;

  bool Stopping() const { return cancel_requested || failing || primary_done; }
};

// What EvaluateRun needs to know of a job besides its tasks.
struct RunFacts {
  model::JobState state = model::JobState::kStarting;  // the job's stored state
  model::Launcher launcher = model::Launcher::kNone;
  int max_restarts = 0;  // the spec's: requeues allowed after failure or node loss
  int restarts = 0;      // times the job went back to pending (preemptions included)
  int preemptions = 0;   // of those, preemptions (which do not use up max_restarts)
};

// The task view EvaluateRun reads: the current generation's records, the allocations whose
// launch went out in a heartbeat answer, and the agents' notes on ends (allocation id -> note).
struct RunTasks {
  const std::vector<store::TaskRecord>& tasks;
  const std::set<int64_t>& launched;
  const std::map<int64_t, std::string>& end_notes;
};

enum class RunVerdict {
  kGoOn,          // nothing to settle: some task has not ended (or the job has no tasks)
  kStartRunning,  // starting -> running: every task runs (reason "all tasks running")
  kEnd,           // every task ended: the job ends in `end_state`
  kRequeue,       // every task ended, its run failed, restarts are left: back to pending
};

struct RunDecision {
  RunEnd end;  // the run's ending as it is now (the controller keeps it)
  // Tasks assigned and never launched, of a run that is stopping, as they are to be stored:
  // killed, ended `now`. The verdict counts them as ended; when storing one fails, the
  // controller must not apply the verdict (and tries again later).
  std::vector<store::TaskRecord> stop;
  bool notify_nodes = false;  // the run is stopping (and started): its nodes hear the kills
  RunVerdict verdict = RunVerdict::kGoOn;
  model::JobState end_state = model::JobState::kSucceeded;  // kEnd: the final state
  std::string reason;  // kStartRunning, kEnd, kRequeue: the transition's reason
};

// The job's run after a change to its tasks (a report, a loss, a cancellation, a restart of the
// server). Decided in this order: mpi's part 0 ending well stops the run as succeeded; else the
// failed task that explains the run (one the server did not stop comes first) makes it failing
// as FailedStateFor its end cause; a stopping run stops its unlaunched tasks; then every task
// running starts the job, every task ended ends it: cancelled, else failed (requeued while
// restarts - preemptions < max_restarts), else succeeded. `now` (Unix seconds): the end time
// of the tasks it stops.
RunDecision EvaluateRun(const RunFacts& facts, const RunEnd& end, const RunTasks& tasks,
                        Seconds now);

// True when a task's end counts as a failure of its run: lost, stopped at its time limit
// (however it exited), killed by a signal, a non-zero exit, or killed with no exit code.
bool TaskFailed(const store::TaskRecord& task);

// "task 1 exited with code 3" ("was stopped and exited with code 0" when its agent stopped it),
// with the agent's note when it gave one: "...: time limit of 60 s reached".
std::string DescribeEnd(const store::TaskRecord& task, const std::string& note);

enum class ReportAction {
  kIgnore,  // nothing to do (a report of an end already taken, a running task already running)
  kKill,    // stale: answer with a kill order (`kill_reason`); only for a running report
  kUpdate,  // store `updated` (and keep `end_note`), then evaluate the job's run
};

struct ReportDecision {
  ReportAction action = ReportAction::kIgnore;
  std::string kill_reason;              // kKill
  store::TaskRecord updated;            // kUpdate: the task's new record
  std::optional<std::string> end_note;  // kUpdate of an end: the agent's note (truncated)
};

// Longest end note kept (bytes, cut at a UTF-8 character boundary).
inline constexpr size_t kMaxEndNote = 500;

// What to do with one task report from node `node`. `job_tasks`: the tasks of the live job
// holding the report's allocation id (nullptr: no live job does). `now` (Unix seconds) stands
// in for a start or end time the agent did not give.
ReportDecision DecideReport(const std::vector<store::TaskRecord>* job_tasks,
                            const std::string& node, const protocol::TaskStatus& status,
                            Seconds now);

// A task of this node that a full heartbeat left out (neither reported nor accepted as
// starting): a running task is lost; a launched, never started task of a stopping run is
// stopped (killed); otherwise nothing (nullopt), e.g. a launch whose answer was lost is sent
// again. `now`: the end time.
std::optional<store::TaskRecord> DecideUnreported(const store::TaskRecord& task, bool launched,
                                                  bool stopping, Seconds now);

struct NodeLoss {
  RunEnd end;  // the run's ending: failing as lost (`reason`) unless it was stopping already
  std::vector<store::TaskRecord> lost;  // its live tasks on the node, now lost (ended `now`)
};

// A job's run when node `node` is lost: its tasks there are lost; the rest of its gang is
// stopped (EvaluateRun then requeues it or ends it lost).
NodeLoss LoseNode(const RunEnd& end, const std::vector<store::TaskRecord>& tasks,
                  const std::string& node, const std::string& reason, Seconds now);

}  // namespace corral::server::reconcile
