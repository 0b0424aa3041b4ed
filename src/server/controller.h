// The controller: the live cluster's state machine around the pure scheduler. It takes
// submissions and cancellations from the API, agents' registrations and heartbeats from the
// gateway, and a periodic tick; it decides (through sched::Scheduler), commits every decision to
// the Store before anyone hears of it, and tells agents what to run and what to kill.
//
// Contracts (architecture.md, "Contracts that keep it simple"):
//  - Truth lives here; agents reconcile. A heartbeat reports what runs; the answer says what
//    should run (launches not yet reported) and what must stop (cancelled, failed gangs, stale
//    generations). A lost message is repaired by the next heartbeat.
//  - Durable before visible: Submit returns after the job is committed; an assignment is
//    committed before any agent hears of it.
//  - Fencing: every task run has (allocation id, generation); a report of any other pair for a
//    task is stale and answered with a kill.
//  - After a restart, Create() rebuilds the state from the store: pending jobs are queued again,
//    assigned and running tasks are re-adopted and re-sent (agents ignore launches they already
//    run, so no task runs twice).
//
// Thread safety: all methods may be called from any thread; one mutex guards the state. Store
// writes for submissions happen outside it (group commit), all others under it.
#pragma once

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "sched/scheduler.h"
#include "server/auth.h"
#include "server/job_spec.h"
#include "store/store.h"
#include "store/submission_batcher.h"

namespace corral::server {

struct ControllerConfig {
  std::string policy = "fgd";
  std::string default_project = "default";
  Seconds node_timeout{30};  // a node silent this long is lost
  Seconds kill_grace{10};    // SIGTERM -> SIGKILL
  std::string logs_dir;      // task logs: <logs_dir>/<job>/<task>-g<generation>.<stream>
  int heartbeat_interval_s = 5;
};

class Controller {
 public:
  // Rebuilds state from `store` (which must outlive the controller). Errors: unknown policy,
  // store failures.
  static Result<std::unique_ptr<Controller>> Create(ControllerConfig config, store::Store& store,
                                                    Clock& clock);
  ~Controller();

  // Starts / stops the scheduling loop thread (event-driven plus a 1 s tick).
  void Start();
  void Stop();

  // --- API -----------------------------------------------------------------------------------
  // Validates, commits, queues. Errors: InvalidArgument (names the field), PermissionDenied
  // (not a member of the project).
  Result<store::JobRecord> Submit(const Principal& who, const nlohmann::json& spec);
  Status Cancel(const Principal& who, JobId id);
  // The job with its events, tasks and, while pending, the pending reason.
  Result<nlohmann::json> JobView(const Principal& who, JobId id);
  Result<nlohmann::json> ListJobs(const Principal& who, const std::vector<std::string>& states,
                                  bool all_projects);
  nlohmann::json Nodes();
  // "cordon", "uncordon" or "drain" (cordon; running tasks finish). Admin only (checked by API).
  Status SetNodeState(const std::string& name, const std::string& action);
  // Path of a task's log file, if the caller may read it. stream: "stdout" | "stderr".
  Result<std::string> LogPath(const Principal& who, JobId id, int task, const std::string& stream);

  // --- Agent gateway -------------------------------------------------------------------------
  // Registers (or re-registers) a node; returns its node token.
  Result<std::string> RegisterNode(const std::string& name, const nlohmann::json& inventory);
  // True when `token` is the node token of `name`.
  bool AuthenticateNode(const std::string& name, const std::string& token);
  // Applies a heartbeat report and answers with launches and kills; when there is nothing to
  // say, waits up to `wait_ms` for something to change.
  Result<nlohmann::json> Heartbeat(const std::string& name, const nlohmann::json& report,
                                   int wait_ms);

  // One scheduling round (the loop calls it; tests may call it directly).
  void Tick();

 private:
  struct LiveJob {
    store::JobRecord record;
    JobSpec spec;
    std::vector<store::TaskRecord> tasks;  // the current generation; empty while pending
    bool cancel_requested = false;
    bool failing = false;
    std::string failure;  // why the gang is being stopped
  };
  struct LiveNode {
    nlohmann::json inventory;
    std::string token_hash;
    Seconds last_heartbeat{0};
    std::string state = "ready";  // ready | cordoned | drained | lost
    uint64_t version = 0;         // bumped when the node has something new to hear
  };

  Controller(ControllerConfig config, store::Store& store, Clock& clock,
             std::unique_ptr<sched::Scheduler> scheduler);
  Status Recover();
  void LoopMain();
  void Wake();

  // The following require mu_.
  void ScheduleLocked();
  void CheckNodesLocked();
  void ApplyTaskReportLocked(const std::string& node, const nlohmann::json& status,
                             std::vector<nlohmann::json>& kills);
  void EvaluateJobLocked(LiveJob& job);
  void EndJobLocked(LiveJob& job, std::string_view state, const std::string& reason);
  void RequeueOrEndLocked(LiveJob& job, std::string_view end_state, const std::string& reason);
  void NotifyNodesLocked(const LiveJob& job);
  nlohmann::json LaunchFor(const LiveJob& job, const store::TaskRecord& task) const;
  nlohmann::json ResponseForLocked(const std::string& node);
  Status AddNodeToSchedulerLocked(const std::string& name, const nlohmann::json& inventory);
  Result<Principal> CheckAccess(const Principal& who, const std::string& project) const;
  void WriteLogLocked(const std::string& node, const nlohmann::json& chunk);
  // Indexes a run's tasks by allocation id and node / removes them (keeping where their late
  // output goes).
  void IndexAllocationsLocked(const LiveJob& job);
  void ForgetAllocationsLocked(const LiveJob& job);

  ControllerConfig config_;
  store::Store& store_;
  Clock& clock_;
  store::SubmissionBatcher batcher_;

  std::mutex mu_;
  std::condition_variable changed_;  // heartbeats wait on it for node versions to move
  std::unique_ptr<sched::Scheduler> scheduler_;
  std::map<JobId, LiveJob> jobs_;                         // non-terminal jobs
  std::unordered_map<int64_t, JobId> job_of_allocation_;  // allocation id -> job
  // Where the logs of recently ended task runs go: output can arrive after the end is known.
  struct LogTarget {
    JobId job;
    int task_index = 0;
    int64_t generation = 0;
    std::string node;  // only this node may write the task's output
  };
  std::map<int64_t, LogTarget> ended_allocations_;
  // node -> jobs with a task of their current run there (heartbeats look only at these)
  std::map<std::string, std::set<JobId>> jobs_on_node_;  // allocation id -> target, newest 10,000
  std::map<std::string, LiveNode> nodes_;
  bool wake_ = false;
  bool stopping_ = false;
  std::thread loop_;
};

}  // namespace corral::server
