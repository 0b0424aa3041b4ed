// The reconcile core: the decisions the controller makes about a job's run and its nodes, as
// pure functions of typed values. No store, no lock, no clock (the time is passed in), no I/O:
// the controller loads what a decision needs, calls one of these, and only applies (persists,
// notifies) what it returns. Tested as plain functions by text scenarios
// (reconcile_scenario_test.cc, testdata/reconcile.scenario), the way src/sched/ is.
//
// What is decided here (docs/control-plane.md, "The reconcile core"):
//  - a task report from an agent (DecideReport): ignored, answered with a kill (stale: an
//    allocation no live job holds, another generation or node, a task already ended on the
//    server), or a new task record to store;
//  - a task a full heartbeat left out (DecideUnreported): lost, stopped, or left as it is;
//  - what a heartbeat's answer orders for a job's tasks on the node (HeartbeatOrders): launches
//    and stop orders;
//  - which nodes are unreachable or given up for want of heartbeats (TimedOutNodes), a job's
//    run when one of its nodes becomes unreachable (NodeUnreachable: fenced when requeue-able,
//    kept otherwise) or is lost (LoseNode), and whether the timings make fencing safe
//    (CheckNodeTimings);
//  - a job's run when the scheduler preempts it (Preempt): requeued with its tasks killed, or
//    left to the stop it was already in; which of its tasks the reclaiming job waits for;
//  - a cancellation (DecideCancel, CancelRequested): a pending job ends at once, a started
//    run is stopped;
//  - a job's run after any change to its tasks (EvaluateRun): whether it is failing (and why,
//    and as what final state), which unlaunched tasks to stop, and whether it starts running,
//    goes on, ends (succeeded, failed, timeout, oom, lost, cancelled) or is requeued.
//
// Time limits are not decided here: agents enforce them and report the end cause
// (model::TaskEndCause::kTimeLimit), which EvaluateRun reads.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/launcher.h"
#include "model/states.h"
#include "protocol/agent_messages.h"
#include "protocol/task.h"
#include "store/task_record.h"

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
  int resizes = 0;       // of those, an elastic job's resizes (which do not use them up either)
  bool elastic = false;  // the job has a size range (model::Job::elastic)
  // An elastic job's lost runs are requeued while its failed and lost runs are under the larger
  // of max_restarts and this (ControllerConfig::resize_budget).
  int resize_budget = 0;
};

// The task view EvaluateRun and Preempt read: the current generation's records, the
// allocations whose launch went out in a heartbeat answer, and the agents' latest notes on them
// (allocation id -> note: what a task's agent said when it started, replaced by what it said
// when it ended; an end's note repeats the start's).
struct RunTasks {
  const std::vector<store::TaskRecord>& tasks;
  const std::set<int64_t>& launched;
  const std::map<int64_t, std::string>& notes;
};

// True when a failed or lost run of the job is requeued rather than ended: its restarts, less
// its preemptions and resizes, are under max_restarts.
bool Requeueable(const RunFacts& facts);
// True when the job's tasks may be fenced: stopped by an agent that reaches no server, the run
// requeued when its node times out (a requeue-able job, or an elastic one whose failed and lost
// runs are under max(max_restarts, resize_budget): it restarts from its checkpoint at whatever
// size fits, as after a resize). A launch carries it (TaskLaunch::requeueable): what the agent
// fences is what the server requeues.
bool Fenceable(const RunFacts& facts);

enum class RunVerdict {
  kGoOn,  // nothing to settle: some task has not ended (or the job has no tasks)
  // starting -> running: every task runs (reason "all tasks running", then each task's note:
  // "; task 0: running in a scratch folder: ...")
  kStartRunning,
  kEnd,      // every task ended: the job ends in `end_state`
  kRequeue,  // every task ended, its run failed, restarts are left: back to pending
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
  kUpdate,  // store `updated` (and keep `note`), then evaluate the job's run
};

struct ReportDecision {
  ReportAction action = ReportAction::kIgnore;
  std::string kill_reason;    // kKill
  store::TaskRecord updated;  // kUpdate: the task's new record
  // kUpdate of a start or an end: the agent's note on it (truncated), when it gave one.
  std::optional<std::string> note;
};

// Longest task note kept (bytes, cut at a UTF-8 character boundary).
inline constexpr size_t kMaxTaskNote = 500;

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

// A node as the node check sees it.
struct NodeLiveness {
  std::string name;
  model::NodeState state = model::NodeState::kReady;
  Seconds last_heartbeat{0};  // Unix seconds: its agent's last heartbeat (or registration)
  bool unreachable = false;   // timed out already (NodeUnreachable was applied)
};

// How long a silent node is waited for (docs/control-plane.md, "Fencing").
struct NodeTimings {
  // Silent this long: unreachable. Its requeue-able runs are fenced (their agent stopped them
  // by then) and requeued; the others keep running, their GPUs allocated.
  Seconds node_timeout{30};
  Seconds fence_after{10};  // an agent that reached no server this long fences
  Seconds kill_grace{10};   // SIGTERM -> SIGKILL
  // Silent this long: lost, and every job on it with it (requeued or ended lost).
  Seconds give_up{3600};
};

// OK when an agent cut off from the servers has stopped its requeue-able tasks before the
// server declares its node unreachable: fence_after + kill_grace + protocol::kAgentRequestTimeout
// < node_timeout, fence_after >= protocol::kMinFenceAfter, give_up >= node_timeout. Otherwise
// InvalidArgument naming the server's flags (--fence-after, --kill-grace, --node-timeout,
// --node-give-up) and values.
Status CheckNodeTimings(const NodeTimings& timings);

enum class NodeVerdict {
  kUnreachable,  // silent past node_timeout: NodeUnreachable for each of its jobs
  kGiveUp,       // silent past give_up: lost (LoseNode for each of its jobs)
};

struct LostNode {
  std::string name;
  NodeVerdict verdict = NodeVerdict::kGiveUp;
  // kUnreachable: "node NAME unreachable since 2026-12-04 23:40:05 UTC (no heartbeat for 30 s)";
  // kGiveUp: "node NAME lost (no heartbeat for 3600 s)": its jobs' failure.
  std::string reason;
};

// The nodes that time out at `now` (Unix seconds), in the order given: not lost already, and
// silent more than give_up (kGiveUp), or more than node_timeout and not unreachable already
// (kUnreachable). One silent exactly a timeout still counts. The controller then applies each
// (NodeUnreachable or LoseNode for its jobs) and marks the node, so that nothing is done twice.
std::vector<LostNode> TimedOutNodes(const std::vector<NodeLiveness>& nodes,
                                    const NodeTimings& timings, Seconds now);

// A job's run when node `node` becomes unreachable (`reason`: TimedOutNodes'). A requeue-able
// run (Requeueable: its agent fenced its tasks there) is fenced: its tasks there are lost and
// the run fails as lost with the reason "fenced: " + `reason` (then EvaluateRun requeues it).
// Any other run keeps running (nullopt): its tasks and GPUs stay, and its agent's reports
// re-adopt them when it comes back.
std::optional<NodeLoss> NodeUnreachable(const RunFacts& facts, const RunEnd& end,
                                        const std::vector<store::TaskRecord>& tasks,
                                        const std::string& node, const std::string& reason,
                                        Seconds now);

// A task that stands in the way of another job's launches: its node and its allocation id.
using TaskOnNode = std::pair<std::string, int64_t>;

// What a heartbeat's answer from node `node` orders for one job's tasks there. The pointers
// are into the tasks given to HeartbeatOrders, valid while those are.
struct NodeOrders {
  // Its assigned tasks to launch (the controller builds each launch and marks it launched).
  std::vector<const store::TaskRecord*> launch;
  // Its tasks to stop, with `stop_reason` (the run's failure or cancellation).
  std::vector<const store::TaskRecord*> stop;
  std::string stop_reason;
};

// A run that is not stopping launches its assigned tasks on `node`, unless it waits for
// preempted tasks to stop (`waits_for` not empty: they still hold its GPUs) or the agent
// accepted the launch already and is starting it (`starting`, allocation ids: it would only be
// sent back). A stopping run stops every task of it on `node` that has not ended, a launch that
// went out without a report yet included (it may be running).
NodeOrders HeartbeatOrders(const std::string& node, const std::vector<store::TaskRecord>& tasks,
                           const RunEnd& end, const std::set<TaskOnNode>& waits_for,
                           const std::set<int64_t>& starting);

enum class PreemptVerdict {
  // Its run is given up: its tasks not ended are killed, and the job is pending again (the
  // scheduler queued it already and gave the reason) with one more preemption.
  kRequeue,
  // Its run was stopping already (cancelled or failing): that stop goes on (kill orders, then
  // its end or requeue once its tasks reported); the scheduler must not queue it a second time.
  kStopGoesOn,
};

struct PreemptDecision {
  PreemptVerdict verdict = PreemptVerdict::kRequeue;
  // Its tasks that may run (not ended, and not an assignment whose launch never went out):
  // they hold the GPUs the reclaiming job got, which launches only once they stopped.
  std::vector<TaskOnNode> waits;
  // kRequeue: its tasks not ended, as they are to be stored: killed, ended `now` (their nodes'
  // next heartbeats report them, now stale, and are answered with kills).
  std::vector<store::TaskRecord> killed;
  // The job's preemptions after this one (kRequeue counts one; they use up none of
  // max_restarts).
  int preemptions = 0;
};

// A job's run when the scheduler preempts it. `preemptions`: the job's so far; `now` (Unix
// seconds): the end time of the tasks it kills.
PreemptDecision Preempt(const RunEnd& end, int preemptions, const RunTasks& run, Seconds now);

enum class CancelVerdict {
  kEndNow,   // nothing of it was started (pending): it ends cancelled at once
  kStopRun,  // started: the request is stored first (a restarted server goes on stopping it),
             // then its run stops (CancelRequested, then EvaluateRun)
};

// What cancelling a job in `state` does.
CancelVerdict DecideCancel(model::JobState state);

// The ending of a run whose cancellation (`reason`) was requested (also read back from the
// store after a restart): cancelled, even when it was failing already. `reason` becomes the
// kill orders' reason and the job's final one.
RunEnd CancelRequested(RunEnd end, const std::string& reason);

}  // namespace corral::server::reconcile
