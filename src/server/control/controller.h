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
//  - A heartbeat lists every task the agent knows (running, or ended and not yet acknowledged).
//    A running task it leaves out is lost; a launch it leaves out after it went out in an answer
//    never started (the answer was lost) and is sent again, or counted as stopped when its job is
//    being stopped. GPUs of a task whose launch went out are freed only once the agent's report
//    says the task is not running.
//  - A heartbeat is acknowledged (200) only after its task reports are committed; on a store
//    error it fails and the agent sends the same report again.
//  - Node identity: an agent proves it is the node it claims with a secret node id it keeps in
//    its work dir. A live node's name registered with another node id is refused (AlreadyExists);
//    the same node id registering again (an agent restart) gets a new node token; a changed
//    inventory replaces the node (its running jobs are requeued as after a node loss).
//  - After a restart, Create() rebuilds the state from the store: pending jobs are queued again,
//    assigned and running tasks are re-adopted and re-sent (agents ignore launches they already
//    run, so no task runs twice).
//
// Thread safety: all methods may be called from any thread; one mutex (mu_) guards the state.
// A submission never takes it: it is committed by the group commit, put in the inbox, and the
// loop woken; whoever takes mu_ next (LockState, and after every wait that released it) queues
// the inbox first, so every holder of mu_ sees every job committed before it took it (Create's
// recovery and Stop excepted: no submission is in flight then, or none matters). The inbox's
// order is the order submitters reached it, not the commit order: the scheduler orders its queue
// by its own key. Heartbeats and cancels are decided under mu_ and committed by the write group
// without it (PendingWrite): their effect on memory follows once durable, in decision order.
// Other store writes (a pass's starts, node loss, rounds) still happen under mu_; the store has
// one connection, so a commit may wait for another's.
// Reads (ListJobs, JobView, QueueView, Nodes, ClusterSummary, SummaryHistory, LiveNodes,
// PolicyView, WaitingHeartbeats) never take mu_: they read the store and the last published
// ReadView (read_view.h), which the loop publishes after every round and the writers after
// every change a read must see at once (PublishLocked); QueueView and ClusterSummary add the
// submissions committed since (unviewed_), so a job is seen as soon as Submit returned. What
// they may see late is in docs/control-plane.md, "What takes the controller's lock, and what
// does not".
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <functional>
#include <future>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <thread>
#include <unordered_map>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "model/dependency.h"
#include "model/states.h"
#include "predict/runtime_predictor.h"
#include "protocol/agent_messages.h"
#include "protocol/api_cluster.h"
#include "protocol/api_job.h"
#include "protocol/api_node.h"
#include "protocol/api_partitions.h"
#include "protocol/api_project.h"
#include "protocol/api_scheduling.h"
#include "protocol/api_session.h"
#include "sched/elastic.h"
#include "sched/policy_config.h"
#include "sched/scheduler.h"
#include "server/control/accounts.h"
#include "server/control/channel_rate_limiter.h"
#include "server/control/environment_catalog.h"
#include "server/control/job_submission.h"
#include "server/control/log_sink.h"
#include "server/control/node_credentials.h"
#include "server/control/principal_cache.h"
#include "server/control/read_view.h"
#include "server/control/reconcile.h"
#include "server/control/rendezvous_ports.h"
#include "server/control/submit_limiter.h"
#include "server/control/workload_profile.h"
#include "server/gateway/session.h"
#include "server/http/auth.h"
#include "server/monitoring/gpu_monitor.h"
#include "store/store.h"
#include "store/submission_batcher.h"
#include "store/write_batcher.h"

namespace corral::server {

// The job events that flag a job's GPUs idle ("GPUs idle: under 10 % for 1800 s") and unflag them.
inline constexpr char kGpusIdleEvent[] = "GPUs idle";
inline constexpr char kGpusBusyAgainEvent[] = "GPUs busy again";
// How the job event of an elastic job's resize starts ("resized from 8 to 4 GPUs: a pending job
// needs them"; controller_elastic.cc), and that of its start ("started at 8 GPUs").
inline constexpr char kResizedEventPrefix[] = "resized from ";
inline constexpr char kStartedAtEventPrefix[] = "started at ";
// Whether a job event is a resize's.
inline bool IsResizeEvent(std::string_view reason) {
  return reason.rfind(kResizedEventPrefix, 0) == 0;
}

// What a caller sees of other projects' work on nodes and GPUs (docs/security.md, "What others
// can see"). Admins see everything, members their own projects' jobs, whichever it is.
enum class WorkVisibility {
  // Another project's task is a share "in use": no job, task, user or project (as Slurm sites
  // set PrivateData=jobs). The default.
  kOwnProjects,
  // Every job on every GPU, with its user and project (`corral server --show-all-work`).
  kAll,
};

struct ControllerConfig {
  std::string policy{sched::kDefaultPolicy};
  // The workload profile fgd and best place against: learnt at start from the store's recent
  // jobs (the last 10,000), then from each job accepted, recomputed by its rules
  // (workload_profile.h; docs/control-plane.md, "The workload profile").
  WorkloadProfileOptions profile;
  std::string default_project = "default";
  // A node silent this long is unreachable: its requeue-able runs are fenced and requeued, the
  // others keep running (docs/control-plane.md, "Fencing").
  Seconds node_timeout{30};
  Seconds kill_grace{10};  // SIGTERM -> SIGKILL
  // The most a job's checkpoint_grace gets when it is preempted or resized (StopGraceLocked).
  Seconds max_checkpoint_grace{300};
  // How reclaim picks its victims, and how long a job runs before it may be one
  // (sched/scheduler.h, SchedulerConfig).
  sched::VictimOrder victims = sched::VictimOrder::kLeastLostWork;
  Seconds min_run_before_preemption{0};
  Seconds fence_after{10};     // an agent that reached no server this long stops what is requeued
  Seconds node_give_up{3600};  // a node silent this long is lost, and every job on it
  // (`corral server` refuses flags that break reconcile::CheckNodeTimings between these four.)
  // Elastic jobs (controller_elastic.cc): no growth sooner than resize_interval after a job's
  // last resize or its start (shrinks for a pending job are never held back), none once it
  // made resize_budget resizes, and none for a job with a time limit unless the time it saves
  // exceeds resize_cost (the progress a resize loses: sched::ResizeRules::restart_cost).
  Seconds resize_interval{60};
  Seconds resize_cost{60};
  int resize_budget = 20;
  // The key sessions' secrets are derived from (SessionToken); every server of a cluster has the
  // same one (ServerOptions::session_key_file).
  std::string session_key;
  std::string logs_dir;  // task logs: <logs_dir>/<job>/<task>-g<generation>.<stream>
  // The folder every node sees where jobs keep their checkpoints: each job's tasks get
  // <checkpoint_root>/<job id> (CORRAL_CHECKPOINT_DIR; docs/in-job.md). Absolute; empty: none.
  std::string checkpoint_root;
  // The most a task run's stream keeps on the server's disk (LogSink: older output is dropped).
  int64_t max_log_bytes = LogSink::kDefaultMaxBytes;
  // The cluster's cap on pending jobs (SubmitLimiter); users' and projects' are in the store.
  int64_t max_pending_jobs = SubmitLimiter::kDefaultMaxPendingJobs;
  // How long new tokens last when their creator asks nothing (Accounts); none: forever.
  std::optional<Seconds> default_token_expiry;
  int heartbeat_interval_s = 5;
  // The scheduling loop runs a round whenever something may have changed (a submission, an
  // end, a node) and at least this often (node timeouts, time-based rules).
  std::chrono::milliseconds loop_tick{1000};
  // The loop builds the pending jobs' part of the read view (read_view.h: every pending job's
  // reason, the queue's first rows and estimates; O(pending jobs)) at most this often (and
  // at most every four times its last build's duration), only after a pass; Tick builds it every
  // time. What a reader may see of a pending job is at most that plus one round old.
  std::chrono::milliseconds pending_view_interval{250};
  // The admin policy file (sched/policy_config.h, without "projects": project sharing is in the
  // store); re-read when it changes, a bad edit is refused and the rules in force stay. Empty:
  // sched::SchedulingPolicy's defaults.
  std::string policy_file;
  // Sessions (docs/sessions.md): the idle timeout of sessions whose spec gives none (0: never),
  // and how long an idle session's notice runs before it is stopped.
  Seconds session_idle_timeout{3600};
  Seconds session_idle_warning{300};
  // Asks an idle session's app about its own use before the notice and before the stop
  // (Jupyter's api/status: use through the direct URL, which the proxy never sees). Borrowed:
  // must outlive the controller. Null: apps are not asked.
  SessionAppProbe* session_app_probe = nullptr;
  // GPU metrics from the agents' heartbeats (docs/monitoring.md): windows and idle threshold;
  // whether a running job whose GPUs are flagged idle gets a job event saying so.
  GpuMonitor::Options gpu_monitor;
  bool notify_idle_gpus = true;
  // The CPU and memory of submitted specs that leave them out (job_submission.h).
  ResourceDefaults resource_defaults;
  // What a job's partition and qos mean here (--partitions-file; partitions.h).
  protocol::PartitionTable partitions;
  // Who a token belongs to is remembered this long; Accounts clears it on every change it
  // makes to tokens, users or memberships (principal_cache.h).
  PrincipalCache::Options principal_cache;
  WorkVisibility work_visibility = WorkVisibility::kOwnProjects;
};

class Controller {
 public:
  // Rebuilds state from `store` (which must outlive the controller). Errors: unknown policy,
  // store failures.
  static Result<std::unique_ptr<Controller>> Create(ControllerConfig config, store::Store& store,
                                                    Clock& clock);
  ~Controller();

  // Starts / stops the scheduling loop thread (event-driven plus a tick, config.loop_tick).
  void Start();
  void Stop();

  // --- API -----------------------------------------------------------------------------------
  // Checks, commits, queues one job: `spec` as the codec read it (protocol::ParseJobSpec, which
  // checked its fields), the default project filled in, its environment resolved. Errors:
  // InvalidArgument (names the field; a spec with an array is for SubmitArray; an environment
  // `who` may not see; more jobs than a submit limit allows at all), PermissionDenied (not a
  // member of the project), ResourceExhausted with retry_after (a submit limit reached:
  // SubmitLimiter, checked after the spec, before the commit).
  // The answer says which of the server's defaults the spec got.
  Result<protocol::SubmitAnswer> Submit(const Principal& who, JobSpec spec);
  // An array (docs/control-plane.md, "Job arrays"): one job per index of the spec's "array",
  // committed together (all or none, one transaction), then queued; the answer's `array_ids`
  // are the elements' in the order of the indices, the first one's id being the array's id.
  // Each element counts against the submit limits; an array that does not fit is refused whole.
  // Errors: as Submit; InvalidArgument without an array.
  Result<protocol::SubmitAnswer> SubmitArray(const Principal& who, JobSpec spec);
  // Cancels a job: a pending one at once, a started one once its tasks stopped. Errors: NotFound
  // (unknown, or in another project), PermissionDenied (neither the owner nor an admin),
  // FailedPrecondition (already ended).
  Status Cancel(const Principal& who, JobId id);
  // Cancels every element of `array` not yet ended, as Cancel does one (all pending elements in
  // one commit); returns their ids, ascending. Errors: as Cancel, for the array (NotFound when
  // `array` is not an array's id; FailedPrecondition when every element ended). A store error
  // while stopping the started elements leaves those already stopping so (call again).
  Result<std::vector<JobId>> CancelArray(const Principal& who, JobId array);
  // The job with its events, tasks and, while pending, the pending reason.
  // Errors: NotFound (unknown, or in another project), Internal (its stored spec is unreadable).
  Result<protocol::JobView> JobView(const Principal& who, JobId id);
  // The in-job channel (docs/in-job.md; controller_channel.cc). A report or a checkpoint of job
  // `id`, at the clock's time, by its job token, its owner or an admin (the report's bounds
  // checked by its parser, protocol/api_job_report.h). Errors: NotFound (unknown, or in another
  // project), PermissionDenied (a member who is not the owner), FailedPrecondition (ended),
  // InvalidArgument naming "metrics" (over the keys a job keeps: store.h), ResourceExhausted
  // with retry_after (the job writes faster than ChannelRateLimiter allows).
  Status Report(const Principal& who, JobId id, model::JobReport report);
  Status RecordCheckpoint(const Principal& who, JobId id, model::JobCheckpoint checkpoint);
  // The job's numeric metric history (store.h, JobMetricSeries). Errors: as JobView.
  Result<model::MetricSeries> MetricSeries(const Principal& who, JobId id);
  // "<checkpoint root>/<job id>": the job's CORRAL_CHECKPOINT_DIR; none without a root.
  std::optional<std::string> CheckpointDirOf(JobId id) const;
  // One page of ListJobs.
  struct JobPage {
    std::vector<protocol::JobSummary> jobs;  // in the listing's order
    // Set when more jobs match: the position of this page's last job, where the next starts
    // (the listing's `after`).
    std::optional<store::JobListPosition> next;
  };
  static constexpr int kMaxJobListLimit = 100000;  // the largest page ListJobs gives
  // A page of the jobs `who` may see that match `listing` (filters, sort, position; its limit
  // 1..kMaxJobListLimit, else InvalidArgument), with their pending reasons. What `who` may see:
  // all_projects false, their own jobs in their projects (admins: their own jobs); true, every job
  // of their projects (admins: every job). The listing's users and projects only narrow that: one
  // outside it matches nothing (an empty page, never an error that would tell which exist).
  Result<JobPage> ListJobs(const Principal& who, store::JobFilter listing, bool all_projects);
  // Every node with its inventory, state and free capacity; "gpu_tasks" lists, per GPU index,
  // the tasks of starting or running jobs on it, so that the dashboard's heatmap shows which
  // GPUs are in use and by whom: each task's owner (job, task, user, project) when `who` may
  // see its project's work (SeesWorkOf), else only its share.
  std::vector<protocol::NodeView> Nodes(const Principal& who);
  // True when `who` may see which jobs and users of `project` run on nodes and GPUs: an admin,
  // a member of `project`, or anyone under WorkVisibility::kAll.
  bool SeesWorkOf(const Principal& who, const std::string& project) const;
  // Counts for the dashboard's live summary: nodes not lost (and ready ones), their GPUs,
  // allocated GPUs (whole GPUs, fractional when shared), used GPUs (the sum of the GPUs' last
  // utilisation, in GPUs), jobs by live state (pending, starting, running). A job is counted
  // pending from the moment its submission returned.
  protocol::ClusterSummary ClusterSummary();
  // The summaries the loop recorded, one a minute for the last 7 days (in memory: a restart
  // starts afresh), from `since` on, oldest first: the overview's chart over time.
  std::vector<protocol::ClusterSummary> SummaryHistory(Seconds since);
  static constexpr int kSummaryHistoryMinutes = 7 * 24 * 60;
  // "cordon", "uncordon", "drain" (cordon; running tasks finish) or "remove" (lost now: its jobs
  // are requeued or end lost, its agent must register again). Admin only (checked by API).
  Status SetNodeState(const std::string& name, const std::string& action);
  // The pending jobs in queue order (the caller's projects only; positions are global) with
  // reasons and estimated starts; at most `limit`. The jobs submitted since the last pass's
  // order was published follow, in submit order, as not yet considered: a job is in the queue
  // from the moment its submission returned.
  // Errors: InvalidArgument (limit < 1).
  Result<std::vector<protocol::QueueRow>> QueueView(const Principal& who, int limit);
  // Projects the caller may see with their sharing and current use, by name.
  Result<std::vector<protocol::ProjectView>> ProjectsView(const Principal& who);
  // Replaces a project's sharing (checked against the scheduler's bounds; stored; in force at
  // once) and answers it as stored (GPU counts rounded to milli-GPU). Admin only (API).
  // Errors: InvalidArgument (names the field), NotFound (no such project).
  Result<protocol::ProjectSharing> SetProjectSharing(const std::string& project,
                                                     const protocol::ProjectSharing& sharing);
  // Replace the submit limits of a user or a project (stored; in force at once). Admin only
  // (API). Errors: InvalidArgument (names the field), NotFound (no such user or project).
  Status SetUserSubmitLimits(const std::string& user, const model::SubmitLimits& limits);
  Status SetProjectSubmitLimits(const std::string& project, const model::SubmitLimits& limits);
  // The rules in force, where they come from, and the last refused policy-file edit.
  protocol::PolicyView PolicyView();
  // The cluster's partitions and QoS (ControllerConfig::partitions; fixed while it runs).
  const protocol::PartitionTable& Partitions() const { return config_.partitions; }
  // Allocated and used GPU-hours per day from `since` to `until` ("YYYY-MM-DD", inclusive;
  // docs/monitoring.md): the rows of the caller and of the projects they belong to (admins: all).
  Result<std::vector<store::GpuUsageRow>> GpuUsage(const Principal& who, const std::string& since,
                                                   const std::string& until);
  // Every job not ended before `since` (running, pending, and those that ended later): what
  // capacity planning reads (monitoring_views.h). Reads the store only, without the lock.
  Result<std::vector<store::JobRecord>> JobsLiveSince(Seconds since);
  // The GPU demand per hour of the jobs purged past the retention (job_retention.h), of the
  // hours in [from, to): what capacity planning adds to JobsLiveSince's. Reads the store only.
  Result<std::vector<store::DemandHour>> PurgedDemand(Seconds from, Seconds to);
  // A page of task `task`'s output `stream` ("stdout" or "stderr") of job `id` from `offset`, at
  // most `max_bytes` (LogSink::Read), for run `generation` (>= 1; 1 is the first run; none: the
  // current run, restarts + 1). A run without output yet reads as empty. Errors:
  // InvalidArgument (stream), NotFound (a job `who` may not see, or a run it has not had yet),
  // IoError.
  Result<LogSink::Page> ReadLog(const Principal& who, JobId id, int task, const std::string& stream,
                                std::optional<int64_t> generation, int64_t offset,
                                int64_t max_bytes);

  // --- Sessions (docs/sessions.md) ------------------------------------------------------------
  // Submits `spec` as a session: a spec with "session" (the API adds an empty one to a body
  // without it, before the codec checks the spec as a session's). Errors: as Submit;
  // InvalidArgument without "session".
  Result<protocol::SubmitAnswer> SubmitSession(const Principal& who, JobSpec spec);
  // A session (protocol/api_session.h, without its URLs), with its token for its owner only.
  // Only its owner or an admin sees it: NotFound for anyone else and for a job that is not a
  // session.
  Result<protocol::SessionView> SessionView(const Principal& who, JobId id);
  // The caller's own sessions not yet ended, oldest first (as SessionView).
  std::vector<protocol::SessionView> ListSessions(const Principal& who);
  // Stops (cancels) a session. Errors: as SessionView, FailedPrecondition when it ended.
  Status StopSession(const Principal& who, JobId id);
  // Where the proxy sends a request for session `id`.
  struct SessionEndpoint {
    model::JobState state = model::JobState::kPending;  // the job's
    bool stopping = false;  // being cancelled or failing: it serves no more requests
    // Only a serving session (running, not stopping) has the fields below.
    std::string address;  // its node's address (inventory "address", else the node name)
    int port = 0;
    std::string token;  // the session's secret: the proxy authenticates to the app with it
    bool Serving() const { return state == model::JobState::kRunning && !stopping; }
  };
  // The session's endpoint for `who`: its owner only (NotFound for anyone else, admins too, as
  // for a job that is not a session): the proxy serves apps on the server's own origin, so an
  // app's pages must reach no other user's sessions. For a running session the request counts
  // as activity.
  Result<SessionEndpoint> ProxyTarget(const Principal& who, JobId id);
  // Session `id` was used (bytes moved on a session gateway connection): counts as activity
  // when it runs; nothing otherwise. The caller was admitted by ProxyTarget.
  void NoteSessionUse(JobId id);

  // The environments (docs/environments.md); jobs name them in their spec's "environment".
  EnvironmentCatalog& Environments() { return environments_; }
  // On how many registered nodes `spec` runs, and why on none (environment_runnable.h), from the
  // published read view.
  protocol::EnvironmentRunsHere RunsHere(const protocol::EnvironmentSpec& spec) const;
  // Users, tokens, project memberships, and who a token belongs to (accounts.h).
  server::Accounts& Accounts() { return accounts_; }
  // Where task output goes (log_sink.h): the retention of finished jobs removes theirs.
  LogSink& Logs() { return logs_; }

  // --- GPU metrics (docs/monitoring.md) --------------------------------------------------------
  // What the agents' heartbeats said about their GPUs, with the jobs holding them.
  GpuMonitor& Gpus() { return gpu_monitor_; }
  // The nodes not lost, as the scheduler models them, and the placement policy: what capacity
  // planning replays recorded jobs on (capacity.h).
  std::vector<model::Node> LiveNodes();
  // The scheduler's rules as they are now (policy file included), for replays of the cluster;
  // without the estimator (it reads the live predictor).
  sched::SchedulerConfig SchedulerRules();
  // Heartbeats whose "gpu_metrics" were refused (malformed); the rest of such a heartbeat is
  // applied all the same, and Nodes() shows the node's last reason ("gpu_metrics_error").
  int64_t RejectedGpuReports();
  // Write transactions committed to the store since the server started (store::Store::Commits).
  int64_t StoreCommits();
  int64_t StoreRoundTrips();  // the store's (Store::RoundTrips)

  // --- Agent gateway -------------------------------------------------------------------------
  // What a registered agent is told: its node token (the secret of its heartbeats) and the
  // cluster's id (the store's, store::Store::ClusterId), which the agent namespaces everything
  // it creates on its host with (docs/control-plane.md).
  // Registers (or re-registers) a node, from a request the codec accepted (which checked its
  // name: protocol::ParseRegisterRequest) and whose protocol version the caller checked
  // (protocol::CheckAgentProtocolVersion). Errors: InvalidArgument (the inventory as a node),
  // AlreadyExists (a live node of that name has another node id).
  // Answers with the node's new token, the store's cluster id and the heartbeat interval.
  Result<protocol::RegisterAnswer> RegisterNode(const protocol::RegisterRequest& request);
  // How long a node may be silent before it is lost (ControllerConfig::node_timeout): an agent
  // upgraded within it keeps its node's tasks.
  Seconds NodeTimeout() const { return config_.node_timeout; }
  // The registration of node `name` that `token` authenticates (NodeCredentials: without the
  // controller's lock, so before a heartbeat's body is parsed); nullopt when it authenticates
  // none.
  std::optional<uint64_t> AuthenticateNode(const std::string& name, const std::string& token) const;
  // Applies a report of node `name` (authenticated by the caller: AuthenticateNode) and answers
  // with launches and kills; when there is nothing to say, waits up to report.wait_ms for
  // something to change. At most kMaxWaitingHeartbeats wait at once (each holds an HTTP
  // thread); others answer at once with retry_after_ms. Errors: NotFound (not registered),
  // store failures (nothing acknowledged).
  // `registration`: AuthenticateNode's answer for the request; a node registered again since
  // (before the report is applied, or while it waits) is NotFound too. The report's output is
  // written before the lock is taken; its task changes are decided under the lock, committed by
  // the write group with the lock released (with other requests' writes), and applied once
  // durable (docs/control-plane.md, "The heartbeat path").
  Result<protocol::ReportAnswer> Heartbeat(const std::string& name, uint64_t registration,
                                           const protocol::Report& report);

  // One scheduling round (the loop calls it; tests may call it directly), then a read view
  // published with its pending part built afresh (so that a read right after sees this pass).
  void Tick();
  // Builds and publishes a read view now, without a round: for benchmarks of what a
  // publication costs. `with_pending`: the pending part too (what Tick does after its round);
  // else the last one is kept (what a cancel or an admin's node action does).
  void Publish(bool with_pending);

  // Writes decided and not yet applied (the write group: controller_writes.cc).
  int PendingWrites();
  // Entries of the dependency index (held jobs under each job they name), for tests: none left
  // once no job is held.
  size_t IndexedDependents();

  static constexpr int kMaxWaitingHeartbeats = 32;
  // Heartbeats waiting now (for metrics and tests).
  int WaitingHeartbeats();

 private:
  struct LiveJob {
    store::JobRecord record;
    JobSpec spec;
    std::vector<store::TaskRecord> tasks;  // the current generation; empty while pending
    // How its current run is ending (cancelled, failing, mpi's part 0 done): the reconcile
    // core's (reconcile.h), reset by a requeue.
    reconcile::RunEnd end;
    std::set<int64_t> launched;  // allocation ids whose launch went out in a heartbeat answer
    std::map<int64_t, std::string> notes;  // allocation id -> the agent's note (RunTasks)
    // Preempted tasks (node, allocation id) that must stop before this job's launches go out:
    // the scheduler gave their GPUs to this job already.
    std::set<reconcile::TaskOnNode> waits_for;
    int preemptions = 0;
    // The environment version the job is pinned to (its spec's "NAME@VERSION"); none: the host.
    std::optional<EnvironmentVersion> environment;
    // Sessions: the last proxied request (the start and a server restart count as one), the
    // last activity its app reported (SessionAppProbe; none: never said, this run), and when
    // the idle notice was given (none: not given, or used since).
    Seconds last_activity{0};
    std::optional<Seconds> app_last_activity;
    std::optional<Seconds> idle_notice_at;
    // This run's "GPUs idle" event was recorded, not yet "busy again"; false again at a requeue.
    bool gpus_idle_noted = false;
    // Set while pending with a dependency not met (controller_dependencies.cc): the job is not
    // in the scheduler's queue, and this says why it waits.
    std::optional<model::DependencyWait> held;
    // Elastic jobs (controller_elastic.cc sets them): the size of the current run in the job's
    // unit (GPUs or nodes; 0 while pending, and for rigid jobs), and how many resizes it had.
    int elastic_now = 0;
    int resizes = 0;
    // When its current run started at its size: its start, or its last resize (the hysteresis
    // counts from it).
    Seconds elastic_since{0};
    bool Stopping() const { return end.Stopping(); }
  };
  struct LiveNode {
    protocol::NodeInventory inventory;
    std::string gpu_metrics_error;  // why its last refused GPU report was refused; "" if none
    uint64_t registration = 0;      // NodeCredentials' number of its current registration
    std::string node_id_hash;       // empty for nodes registered before node ids existed
    // HashToken of its current node token, kept in the store too (so that the next leader
    // accepts its agent); empty once lost.
    std::string token_hash;
    Seconds last_heartbeat{0};
    model::NodeState state = model::NodeState::kReady;
    // Timed out, not heard since (not lost yet): unschedulable, since last_heartbeat; with the
    // node check's reason ("node a unreachable since ...").
    bool unreachable = false;
    std::string unreachable_reason;
    uint64_t version = 0;  // bumped when the node has something new to hear
    // What the reports of the agent's current registration said: the sequence number of the
    // newest one taken (0: none, or an agent that numbers none), and the allocations it
    // listed as accepted and starting (their launches are not sent again).
    struct Reports {
      int64_t last_seq = 0;
      std::set<int64_t> starting;
    } reports;
  };

  Controller(ControllerConfig config, store::Store& store, Clock& clock,
             std::unique_ptr<sched::Scheduler> scheduler, WorkloadProfile profile);
  Status Recover();
  // The store's record of node `name`.
  static store::NodeRecord NodeRecordOf(const std::string& name, const LiveNode& node);
  // Reads the policy file (when configured) and the projects' sharing from the store.
  Status LoadRulesLocked();
  // Gives the submit limiter the users' and projects' limits the store holds.
  Status LoadSubmitLimitsLocked();
  // Re-reads the policy file when its modification time changed.
  void ReloadPolicyIfChangedLocked();
  // Hands the scheduler a fresh workload profile when its policy uses one (fgd, best) and
  // WorkloadProfile::Due says so.
  void RefreshProfileIfDueLocked();
  sched::SchedulerConfig SchedulerConfigLocked() const;
  // A victim of reclaim, as reconcile::Preempt decides: requeued now (the scheduler already
  // did; a run stopping already goes on stopping); its tasks become stale and are killed at
  // their nodes' next heartbeat; `for_job` launches only after they stopped.
  void PreemptLocked(const sched::Preemption& preemption);
  // --- Checkpoint-aware stops (controller_checkpoints.cc; docs/in-job.md) ---
  // The SIGTERM -> SIGKILL grace a job's tasks get when preempted or resized: its spec's
  // checkpoint_grace capped by config_.max_checkpoint_grace, else config_.kill_grace.
  Seconds StopGraceLocked(const LiveJob& job) const { return StopGraceOf(job.spec); }
  Seconds StopGraceOf(const JobSpec& spec) const;  // reads only config_: no lock needed
  // The current run's tasks of `job`, once stale (preempted, resized), are answered with a
  // StopOrder of `grace` and `reason` instead of config_.kill_grace (StaleStopLocked), until
  // their agent reports them ended or leaves them out. `at_risk_gpu_s` is what the run would
  // lose if it ended now (the scheduler's LostWorkOf): its running tasks' GPUs × the time
  // since its last checkpoint; the loss is recorded as each task ends, from the newest
  // checkpoint by then (NoteGraceCheckpointLocked). Call before the run is forgotten.
  void NoteStoppingLocked(const LiveJob& job, Seconds grace, std::string reason,
                          double at_risk_gpu_s);
  // A checkpoint `job` reported at `at` while its stopped tasks end: their loss counts from it.
  void NoteGraceCheckpointLocked(JobId job, Seconds at);
  // The StopOrder for a stale running task: as NoteStoppingLocked noted it, else kill_grace.
  protocol::StopOrder StaleStopLocked(const protocol::TaskKey& key, std::string reason) const;
  // Forgets the notes of `node`'s tasks that are `ended` (by allocation id), recording the
  // work each lost: its GPUs × the time from the newest checkpoint (or the run's start) to now.
  void ForgetStoppedLocked(const std::string& node, const std::function<bool(int64_t)>& ended);
  // A cancel of `job` while its noted tasks stop: they keep at most the kill grace
  // (--kill-grace, as every cancel) and hear `reason`.
  void CancelStoppingLocked(JobId job, const std::string& reason);
  // Adds `gpu_s` lost GPU-seconds to the job and, for `corral usage`, to its user and project
  // on `now`'s day (store::Store::AddLostWork). A store error loses the figure, nothing else.
  void AddLostWorkLocked(JobId job, double gpu_s, Seconds now);
  // Drops the waits on `node`'s preempted or resized tasks that have `stopped` (by allocation
  // id), and their stop notes (ForgetStoppedLocked: their lost work is recorded).
  void ReleaseWaitsLocked(const std::string& node, const std::function<bool(int64_t)>& stopped);
  // --- The read view (read_view.h) ---
  // Whether PublishLocked builds the pending jobs' part again: kKeep (the last one stays),
  // kIfDue (when a pass ran since and config_.pending_view_interval passed since the last
  // build: the loop), kNow (Tick, Create).
  enum class PendingRebuild { kKeep, kIfDue, kNow };
  // Builds a view from memory and publishes it: readers see it from now on.
  void PublishLocked(PendingRebuild pending);
  // Every pending job's reason, the queue's first rows and their estimates, from the last pass.
  std::shared_ptr<const PendingPart> BuildPendingPartLocked();
  // The starting and running jobs, by id: those with tasks on nodes (jobs_on_node_), not a walk
  // of every live job (a publication after each cancel would cost O(queue)).
  std::vector<const LiveJob*> StartedJobsLocked() const;
  // Every node's row, its inventory and the tasks on each of its GPUs (`started`:
  // StartedJobsLocked()).
  std::vector<NodeEntryView> NodeEntriesLocked(const std::vector<const LiveJob*>& started) const;
  // The jobs with a task on an unreachable node and what their views say, by id.
  std::vector<std::pair<JobId, std::string>> UnreachableJobsLocked() const;
  // Every project with a policy or fair-share usage: its sharing and its use now, by name.
  std::vector<ProjectUseView> ProjectUsesLocked() const;
  // The jobs `part`'s queue rows or the unviewed submissions after it show that are no longer
  // pending in memory (ReadView::left_queue, by id), and how many of them are `part`'s rows.
  // Needs inbox_mu_ too.
  struct LeftQueue {
    std::vector<JobId> ids;
    int64_t part_rows = 0;
  };
  LeftQueue LeftQueueLocked(const PendingPart& part) const;
  protocol::PolicyView PolicyViewLocked() const;
  // The pending part of a view: the job's reason and estimate when the view has it, else
  // NotYetConsidered (the job was submitted or requeued after that pass).
  static void AddPendingReason(const PendingPart& pending, protocol::JobSummary& row);
  void LoopMain();
  // Asks the loop for a round now, not at its next tick (a submission, an end that freed GPUs, a
  // node back). Takes only loop_mu_: callable with or without mu_.
  void WakeLoop();
  // A committed submission not yet in jobs_ and the scheduler's queue.
  struct CommittedJob {
    store::JobRecord record;
    JobSpec spec;
    std::optional<EnvironmentVersion> environment;
  };
  // Puts committed jobs into the inbox (in order) and the unviewed submissions, numbering them,
  // and wakes the loop; never waits for mu_.
  void AddToInbox(std::vector<CommittedJob> committed);
  // A pending job's queue row as far as its record and spec say (no position, reason or
  // estimate: a pass's).
  static protocol::QueueRow QueueRowOf(const store::JobRecord& record, const JobSpec& spec);
  // A committed submission as QueueView shows it until a published pending part counts it.
  struct UnviewedJob {
    int64_t number = 0;  // the submission's (AddToInbox numbers them from 1)
    protocol::QueueRow row;
  };
  // Takes mu_, then queues the inbox's jobs (DrainInboxLocked) and applies the pending writes
  // already durable (ApplyAnsweredWritesLocked). Every method that reads or changes the state
  // takes mu_ so, and calls DrainInboxLocked after a wait that released it.
  std::unique_lock<std::mutex> LockState();
  void DrainInboxLocked();

  // The following require mu_.
  // A scheduling pass: elastic jobs' shrinks for pending jobs (MakeRoomLocked), the scheduler's
  // decisions, preemptions, then the pass's starts (elastic ones at the size SizeStartsLocked
  // chose) committed in one transaction (AssignStartsLocked), then elastic jobs' growth.
  void ScheduleLocked();
  void AssignStartsLocked(const std::vector<sched::JobStart>& starts, Seconds now);

  // --- Elastic jobs (controller_elastic.cc; docs/control-plane.md, "Elastic jobs") ---
  // The size of the job's current run in its unit (GPUs of its task, or tasks); 0 for a rigid
  // job or one without a run.
  static int ElasticSizeOf(const LiveJob& job);
  // The hysteresis of growth: config_.resize_interval, resize_cost and resize_budget.
  sched::ResizeRules ResizeRulesLocked() const;
  // The job's run as sched/elastic_plan.h sees it, from the scheduler's allocations; nullopt for
  // a rigid job or one the scheduler does not run.
  std::optional<sched::ElasticRun> ElasticRunLocked(const LiveJob& job, Seconds now) const;
  // Every started elastic job not stopping (elastic_started_), as ElasticRunLocked.
  std::vector<sched::ElasticRun> RunningElasticLocked(Seconds now) const;
  // Before a pass: shrinks running elastic jobs toward MIN where a pending job (in submit
  // order) could then start (sched::PlanRoom); never held back by the hysteresis.
  void MakeRoomLocked(Seconds now);
  // After the scheduler's pass: the elastic jobs of `starts` take the size the idle GPUs allow
  // (their allocations in `starts` replaced: not a resize), and returns the growth of the other
  // elastic jobs under the hysteresis (sched::PlanAfterPass), to apply once the starts are in.
  std::vector<sched::Resize> SizeStartsLocked(std::vector<sched::JobStart>& starts, Seconds now);
  void GrowLocked(const std::vector<sched::Resize>& grown, Seconds now);
  // Resizes a started elastic job from z.from to z.to: the scheduler's allocation at once, the
  // store's new generation with its event (store::Store::ResizeGang), the old run's tasks
  // stopped and the new run launched once they stopped (WaitForResizeStopsLocked). The job stays
  // starting or running; the resize uses none of max_restarts. Errors: a stopping job or one
  // without a run (FailedPrecondition), the scheduler's refusal, no ports, the store's error
  // (nothing changes then).
  Status ResizeLocked(LiveJob& job, const sched::Resize& z, Seconds now);
  // A started job (StartedLocked): waits for the old runs resizes are stopping on its nodes;
  // an elastic one's size and start noted, with the event "started at 8 GPUs".
  void NoteElasticStartLocked(LiveJob& job);
  // The job's tasks wait, on their nodes, for every old run a resize is still stopping there
  // (resize_stopping_): the GPUs they were given may be those.
  void WaitForResizeStopsLocked(LiveJob& job);
  // Drops the stopping old-run tasks on `node` that have `stopped` (ReleaseWaitsLocked).
  void ForgetResizeStopsLocked(const std::string& node,
                               const std::function<bool(int64_t)>& stopped);
  // A start the store took: the job is starting, its tasks indexed, its nodes told.
  void StartedLocked(LiveJob& job, std::vector<store::TaskRecord> tasks);
  // A start that could not be committed (or got no ports): back in the queue, nothing held.
  void UnstartLocked(LiveJob& job);
  // SetNodeState's change, made.
  Status SetNodeStateLocked(const std::string& name, const std::string& action);
  // Makes the nodes whose heartbeats stopped unreachable, or loses them past the give-up time
  // (reconcile::TimedOutNodes).
  void CheckNodesLocked();
  // The loop found `gap` between two of its rounds, over half the node timeout: the server was
  // paused (SIGSTOP, a VM freeze) or starved, and heard nothing meanwhile. Every reachable node
  // gets a full node timeout from now, as after a restart or a takeover, so that the server's own
  // silence declares no node unreachable.
  void ForgiveAPauseLocked(std::chrono::steady_clock::duration gap);
  // A node timed out: no new work goes there; its requeue-able runs are fenced (lost there,
  // requeued: reconcile::NodeUnreachable), the others keep running with an event saying so.
  void UnreachableNodeLocked(const std::string& name, LiveNode& node, const std::string& reason);
  // The agent of an unreachable node was heard again: the node takes work again and the jobs
  // kept on it hear so (its reports re-adopt their tasks).
  void ReachableAgainLocked(const std::string& name, LiveNode& node);
  // What a live job's views say while one of its tasks runs on an unreachable node (its record's
  // reason is its last transition's); nullopt otherwise.
  std::optional<std::string> UnreachableReasonLocked(JobId id) const;
  // Marks a node lost: its jobs' tasks are lost there and stale elsewhere; each job is requeued
  // or ends lost.
  void LoseNodeLocked(const std::string& name, LiveNode& node, const std::string& reason);
  // The facts the reconcile core decides a job's run on, the job being in `state`.
  reconcile::RunFacts FactsOf(const LiveJob& job, model::JobState state) const;
  // A change to a job's run, decided before anything is written (controller_reports.cc): the
  // run as it will be, and the writes that make it so.
  struct RunPlan {
    JobId job;
    model::JobState state = model::JobState::kPending;  // the job's, after `writes`
    std::vector<store::TaskRecord> tasks;               // the run's tasks, after `writes`
    std::map<int64_t, std::string> notes;
    reconcile::RunEnd end;
    store::WriteBatch writes;  // changed task records, then the job's transitions
    // Of writes.tasks, those an agent's report decided (not the stops the evaluation decided):
    // what must be durable before the report is acknowledged.
    std::vector<store::TaskRecord> reported;
    bool notify_nodes = false;  // the run is stopping: its nodes hear the kills
    bool started = false;       // one of the transitions is starting -> running
    reconcile::RunVerdict verdict = reconcile::RunVerdict::kGoOn;  // the last transition's
  };
  static RunPlan PlanFor(const LiveJob& job);
  // Puts task records into the plan (replacing the same allocations') and into its writes;
  // TakeReported also counts them as reported.
  static void ChangeTasks(RunPlan& plan, const std::vector<store::TaskRecord>& updates);
  static void TakeReported(RunPlan& plan, const std::vector<store::TaskRecord>& updates);
  // Settles the planned run (reconcile::EvaluateRun): stops, and a transition when it starts
  // running, ends or is requeued.
  void EvaluatePlanLocked(const LiveJob& job, RunPlan& plan, Seconds now) const;
  // The plan's writes are committed: memory and the scheduler follow (may erase `job`).
  void ApplyPlanLocked(LiveJob& job, RunPlan plan, Seconds now);
  // What a node's report changes (controller_reports.cc): the allocations it lists or accepted
  // as starting (`reported`), those it lists running, and those it lists ended.
  struct ReportedAllocations {
    std::set<int64_t> reported, starting, running, ended;
  };
  // Takes a report of node `name` (registration `registration`): its task changes planned per
  // job (stop orders for stale tasks go into `kills`), committed in one write of the write group
  // with `lock` released meanwhile, then applied with the node's record of the report (its
  // sequence number, the tasks starting, the waits its ended tasks release). Should that write
  // fail, each job is written alone, and a job whose settling cannot be written keeps at least
  // its reported tasks (settled at the next tick, `unsettled_`). Errors: a job's reported tasks
  // could not be written (nothing of that job is applied; the agent sends its report again).
  Status TakeReportLocked(std::unique_lock<std::mutex>& lock, const std::string& name,
                          uint64_t registration, const protocol::Report& report,
                          ReportedAllocations allocations, std::vector<protocol::StopOrder>& kills);
  // A node's first full report since Recover (unreported_nodes_): the tasks of live jobs'
  // previous runs (older_runs_) it lists running are stopped with their job's stop grace
  // (stopping_tasks_) and waited for by the jobs on the node, as a resize's old run is
  // (resize_stopping_); then launches may go there. Anything else: nothing.
  void TakeOlderRunsLocked(const std::string& name, const protocol::Report& report);
  // The plans of a report (TakeReportLocked), decided against memory at `now`.
  std::map<JobId, RunPlan> PlanReportLocked(const std::string& name, const protocol::Report& report,
                                            const std::set<int64_t>& reported,
                                            std::vector<protocol::StopOrder>& kills, Seconds now);
  // Applies `plans` whose write together ended in `committed` (TakeReportLocked's fallbacks).
  Status FinishReportLocked(std::map<JobId, RunPlan>& plans, const Status& committed, Seconds now);
  // Whether the report of node `name` changes a job (or the node) that a pending write changes.
  bool ReportMeetsPendingWriteLocked(const std::string& name, const protocol::Report& report) const;
  // Queues `job` in the scheduler. A refusal (an invalid model job or an id it knows: a bug,
  // since specs are checked before they are stored) is said in the server's log, naming the
  // job, which would otherwise wait unseen.
  void QueueInSchedulerLocked(const LiveJob& job);

  // --- Dependencies (controller_dependencies.cc; docs/control-plane.md, "Dependencies") ---
  // InvalidArgument naming field 'dependency' when a dependency names a job that does not exist
  // or that `who` may not see (the same answer for both).
  Status CheckDependencyTargets(const Principal& who, const JobSpec& spec) const;
  // What the jobs an id names did, from the store's records (its thread safety: no lock
  // needed): the job, or every element when it is an array's id; none when there is no such
  // job. Read from `cache` when there, and kept in it (when given). Errors: the store's.
  using DependencyTargetCache = std::map<JobId, std::vector<model::DependencyTarget>>;
  Result<std::vector<model::DependencyTarget>> DependencyTargets(
      JobId named, DependencyTargetCache* cache) const;
  // Where each of `dependencies` stands (DependencyTargets, through `cache` when given).
  Result<std::vector<model::DependencyCheck>> CheckDependencies(
      const std::vector<model::Dependency>& dependencies,
      DependencyTargetCache* cache = nullptr) const;
  // A pending job of a first run: queued in the scheduler when its dependencies are met, else
  // held (LiveJob::held) and indexed under the jobs it names. A job that can never be met with
  // kill_on_invalid_dep is cancelled at the next pass (SettleDependenciesLocked).
  void QueueOrHoldLocked(LiveJob& job);
  // `job` started or ended: the held jobs that name it (or its array) are checked again at the
  // start of the next pass, which this wakes.
  void NoteDependencyEventLocked(const LiveJob& job);
  // Takes `job` out of dependents_ (ForgetJobLocked: it will never be checked again).
  void ForgetDependentLocked(const LiveJob& job);
  // Sets or clears LiveJob::held, keeping held_jobs_ in step.
  void SetHeldLocked(LiveJob& job, std::optional<model::DependencyWait> wait);
  // Checks the held jobs noted: queues those now met, cancels those never met that asked for
  // it (kill_on_invalid_dep, through the write group: ended once durable; the cancel's reason
  // says why), and updates the others' reasons. A job with a write pending waits a pass.
  void SettleDependenciesLocked(Seconds now);

  // --- The write group (controller_writes.cc; docs/control-plane.md, "The heartbeat path") ---
  // A change decided under mu_ whose store write is committed by writes_ (one transaction and
  // one fsync for every write waiting) while mu_ is free, and whose effect on memory is applied
  // under mu_ once durable, in the order the changes were decided: nothing is acknowledged or
  // visible before it is on disk, and the lock is never held for an fsync on this path.
  //
  // Rule: memory and the store change in the same order. A change that reads or writes a job
  // or node a pending write changes settles the pending writes first (SettleWritesLocked), and
  // so does every path that still writes the store directly (rounds, passes, node loss, array
  // cancels, registrations, admin actions), before it holds a reference into jobs_ or nodes_.
  struct PendingWrite {
    std::shared_future<Status> durable;
    std::vector<JobId> jobs;  // the jobs its apply changes
    std::string node;         // the node whose report it is; empty for other writes
    // Under mu_, once the commit answered (Ok or the batch's error), after every earlier
    // write's apply.
    std::function<void(const Status&)> apply;
  };
  // Queues `batch` (stamped `now`) for commit and `write` (jobs, node, apply) to be applied
  // once it is answered; returns the commit's future. An empty batch is applied at once (a quiet
  // heartbeat writes nothing and waits for nothing): the caller settled whatever it meets.
  std::shared_future<Status> WriteLocked(store::WriteBatch batch, Seconds now, PendingWrite write);
  // Applies, in order, the pending writes whose commits are answered; waits for none.
  void ApplyAnsweredWritesLocked();
  // Waits (holding mu_) until every pending write is answered and applies them all.
  void SettleWritesLocked();
  // Releases `lock` until `durable` is ready, then takes it again and applies the answered
  // writes (the one `durable` belongs to included).
  void AwaitWriteLocked(std::unique_lock<std::mutex>& lock,
                        const std::shared_future<Status>& durable);
  bool JobHasPendingWriteLocked(JobId id) const { return pending_jobs_.count(id) > 0; }
  bool NodeHasPendingWriteLocked(const std::string& node) const {
    return pending_nodes_.count(node) > 0;
  }
  // A distributed job's rendezvous (part 0's address, a port block, every part's address),
  // added to each task's allocation before the gang is stored. Errors: no free ports.
  Status AddRendezvousLocked(const LiveJob& job, std::vector<store::TaskAssignment>& tasks);
  // A session's port on its node, added to its task's allocation before the task is stored.
  // Errors: no free port.
  Status AddSessionPortLocked(const LiveJob& job, std::vector<store::TaskAssignment>& tasks);
  // Takes back the port block (or a session's port) of a job recovered from the store.
  void RestoreRendezvousLocked(const LiveJob& job);
  // How other machines reach `node`: its inventory's "address", else its name.
  std::string NodeAddressLocked(const std::string& node) const;
  // Gives idle running sessions their notice, clears it when they are used again, and stops
  // those still idle after the warning (docs/sessions.md); asks their apps first
  // (AskIdleSessionAppsLocked), so `lock` (on mu_) is released for a while.
  void CheckSessionsLocked(std::unique_lock<std::mutex>& lock);
  // One round of the loop (Tick and the loop thread): policy file, unsettled jobs, lost nodes,
  // idle sessions, idle GPUs, then a scheduling pass.
  void RoundLocked(std::unique_lock<std::mutex>& lock);
  // With notify_idle_gpus: a job event when a running job's GPUs are all flagged idle
  // (GpuMonitor), and one when they are busy again.
  void CheckIdleGpusLocked();
  // The cluster's counts now (`started`: StartedJobsLocked()).
  protocol::ClusterSummary ClusterSummaryLocked(const std::vector<const LiveJob*>& started);
  // Once a minute: ClusterSummaryLocked into summary_history_.
  void RecordSummaryLocked();
  // Asks the apps of the running sessions whose next step at `now` is the notice or the stop
  // for their own last activity (config_.session_app_probe) and records it. `lock` holds mu_;
  // it is released while the apps are asked (16 at a time, each within the probe's timeout)
  // and held again after, so that neither heartbeats nor the API wait for apps.
  void AskIdleSessionAppsLocked(std::unique_lock<std::mutex>& lock, Seconds now);
  // A running session's activity for the idle rule (session.h).
  SessionActivity ActivityOf(const LiveJob& job, Seconds now) const;
  // The session's idle timeout: its spec's, else the server's default.
  Seconds IdleTimeoutOf(const JobSpec& spec) const;
  // The session's secret (CORRAL_SESSION_TOKEN): derived from its salt with the server's session
  // key, so that the store never holds it (a spec stored before that holds it as is).
  std::string SessionToken(const protocol::SessionSpec& session) const;
  // SessionView's answer for a session; `live` is its in-memory state when not ended.
  protocol::SessionView SessionOfLocked(const Principal& who, const store::JobRecord& record,
                                        const JobSpec& spec,
                                        const std::vector<store::TaskRecord>& tasks,
                                        const LiveJob* live) const;
  // Settles the job from its tasks' states (reconcile::EvaluateRun decides: failing gang,
  // running, ended, requeued): a RunPlan, committed, then applied. A store error changes
  // nothing and leaves the job in `unsettled_` for the next tick.
  void EvaluateJobLocked(LiveJob& job);
  // The scheduler's view of a job: its spec's, placed only where its environment can run; an
  // elastic job with a run at its current size.
  static model::Job ModelJobOf(const LiveJob& job);
  // The job's end in `state` at `now` is committed: the predictor learns its run time, and it
  // is forgotten (erases `job`).
  void EndedLocked(LiveJob& job, model::JobState state, Seconds now);
  // The job's end is committed: it leaves the scheduler and memory (erases `job`).
  void ForgetJobLocked(LiveJob& job);
  // The job's move back to pending is committed: it is queued again for a new run.
  void RequeuedLocked(LiveJob& job);
  void RetryUnsettledLocked();
  void NotifyNodesLocked(const LiveJob& job);
  protocol::TaskLaunch LaunchFor(const LiveJob& job, const store::TaskRecord& task) const;
  // The answer for `node`: the launches (marked launched) and kills reconcile::HeartbeatOrders
  // decides for each job with tasks there; no launches before its first full report since a
  // restart (unreported_nodes_).
  protocol::ReportAnswer ResponseForLocked(const std::string& node);
  Status AddNodeToSchedulerLocked(const std::string& name,
                                  const protocol::NodeInventory& inventory);
  Result<Principal> CheckAccess(const Principal& who, const std::string& project) const;
  // A submitted spec with its project (default filled in) open to `who`, a session's token
  // generated, and its environment (one `who` may see) resolved and applied (ApplyEnvironment).
  struct Submission {
    JobSpec spec;
    std::optional<EnvironmentVersion> environment;
    std::vector<protocol::ResourceDefault> defaults;  // what ApplyResourceDefaults filled in
    std::vector<std::string> warnings;                // what ApplyPartitions ignored
  };
  Result<Submission> Admit(const Principal& who, JobSpec spec);
  // The version a stored spec's "NAME@VERSION" pins; none when the spec names no environment.
  Result<std::optional<EnvironmentVersion>> PinnedEnvironment(const JobSpec& spec);
  // Commits `records` (a single job through the group commit, an array's elements in one
  // transaction) once the submit limits take them (SubmitLimiter::Take: given back when the
  // commit fails); returns their ids in order.
  Result<std::vector<JobId>> CommitSubmission(const Principal& who,
                                              std::vector<store::JobRecord>& records, bool array);
  // Takes a committed new job into memory and the scheduler's queue.
  void QueueLocked(const store::JobRecord& record, JobSpec spec,
                   std::optional<EnvironmentVersion> environment);
  // A started job's cancellation, decided: the request (a restarted server goes on stopping the
  // job) and the stops of its tasks, in one plan.
  RunPlan CancelPlanLocked(const LiveJob& job, const std::string& reason, Seconds now) const;
  // Stops a started job: CancelPlanLocked committed at once (not through the write group),
  // then applied. May erase `job` (when nothing of it runs any more).
  Status RequestCancelLocked(LiveJob& job, const std::string& reason);
  // CancelArray's work under the lock: every element of `array` (`what` names it in errors).
  Result<std::vector<JobId>> CancelArrayLocked(JobId array, const std::string& what,
                                               const std::string& reason);
  // Indexes a run's tasks by allocation id and node / removes them (keeping where their late
  // output goes).
  void IndexAllocationsLocked(const LiveJob& job);
  void ForgetAllocationsLocked(const LiveJob& job);
  // The job's current run is over and it is pending again (the store already says so).
  void ForgetRunLocked(LiveJob& job);
  // The jobs that hold the GPUs a node's report names: allocations of current runs on `node`.
  std::map<int64_t, GpuHolder> GpuHoldersLocked(const std::string& node,
                                                const std::vector<ReportedGpu>& gpus);

  ControllerConfig config_;
  store::Store& store_;
  Clock& clock_;
  store::SubmissionBatcher batcher_;
  store::WriteBatcher writes_;  // the write group
  EnvironmentCatalog environments_;
  server::Accounts accounts_;
  GpuMonitor gpu_monitor_;             // its own lock; taken after mu_ when both are held
  NodeCredentials credentials_;        // its own lock; taken after mu_ when both are held
  LogSink logs_;                       // its own lock; never held for I/O
  SubmitLimiter submit_limits_;        // its own lock; taken after mu_ when both are held
  ChannelRateLimiter channel_writes_;  // its own lock; never held with mu_
  std::atomic<int64_t> rejected_gpu_reports_{0};

  std::mutex mu_;
  std::condition_variable changed_;  // heartbeats wait on it (with mu_) for node versions to move
  std::unique_ptr<sched::Scheduler> scheduler_;
  WorkloadProfile profile_;        // the shapes of jobs accepted lately (fgd's and best's profile)
  std::map<JobId, LiveJob> jobs_;  // non-terminal jobs
  // The jobs of jobs_ that are sessions (QueueLocked, Recover; ForgetJobLocked erases): the
  // session rounds look only at these.
  std::set<JobId> sessions_;
  // Dependencies: job id named -> held jobs that name it (an array's id: any element's event),
  // pruned of jobs no longer held when an event comes; and the held jobs to check at the next
  // pass.
  std::map<JobId, std::set<JobId>> dependents_;
  std::set<JobId> dependency_checks_;
  int64_t held_jobs_ = 0;  // live jobs with `held` set: pending, beside the scheduler's queue
  std::unordered_map<int64_t, JobId> job_of_allocation_;  // allocation id -> job
  // node -> jobs with a task of their current run there (heartbeats look only at these)
  std::map<std::string, std::set<JobId>> jobs_on_node_;
  std::map<std::string, LiveNode> nodes_;
  std::set<JobId> unsettled_;  // jobs whose last transition failed to commit; retried each tick
  std::deque<PendingWrite> pending_writes_;   // decided, not applied yet; in the order decided
  std::multiset<JobId> pending_jobs_;         // the jobs of pending_writes_, once per write
  std::multiset<std::string> pending_nodes_;  // the nodes of pending_writes_, once per write
  std::map<std::string, std::set<JobId>> waiting_on_node_;  // node -> jobs with waits_for there
  // Elastic jobs with a run (IndexAllocationsLocked / ForgetAllocationsLocked keep it), and the
  // tasks of old runs that resizes are stopping, node -> allocation ids, until they stopped.
  std::set<JobId> elastic_started_;
  std::map<std::string, std::set<int64_t>> resize_stopping_;
  // After a restart (Recover): the recovered nodes whose first full report has not been taken.
  // Nothing launches there until it has (TakeOlderRunsLocked): an old run that a resize or a
  // preemption was stopping, in memory only, may still hold GPUs there. And the tasks of the
  // live jobs' previous runs (generation `restarts`), allocation id -> job, until every
  // recovered node reported.
  std::set<std::string> unreported_nodes_;
  std::unordered_map<int64_t, JobId> older_runs_;
  sched::SchedulingPolicy policy_;
  std::string policy_error_;  // why the last policy-file edit was refused; empty if none
  std::optional<std::filesystem::file_time_type> policy_mtime_;
  std::map<std::string, sched::ProjectPolicy> sharing_;  // projects' sharing, from the store
  // Run times learned from finished jobs (at start: from the store's recent history); the
  // scheduler's estimates (QSSF, reservations, estimated starts) come from it.
  predict::RuntimePredictor predictor_;
  // Stale runs' tasks and the stop order they get (NoteStoppingLocked), by allocation id.
  struct StoppingTask {
    JobId job;
    std::string node;
    double gpus = 0;   // its GPUs when running (0: not started, nothing to lose)
    Seconds since{0};  // the run's last checkpoint (or start): its loss counts from here
    Seconds grace{0};
    std::string reason;
  };
  std::map<int64_t, StoppingTask> stopping_tasks_;
  RendezvousPorts ports_;  // port blocks of running distributed jobs
  int64_t passes_ = 0;     // scheduling passes so far
  // The run-time predictor's own lock (JobView reads it without mu_): taken after mu_ when
  // both are held, and by the scheduler's estimator (which runs under mu_).
  mutable std::mutex predictor_mu_;
  // RecordSummaryLocked, oldest first; replaced (not changed) so that views share it.
  std::shared_ptr<const std::deque<protocol::ClusterSummary>> summary_history_ =
      std::make_shared<const std::deque<protocol::ClusterSummary>>();
  Seconds next_summary_at_{0};
  std::atomic<int> waiting_heartbeats_{0};  // changed under mu_, read without
  ReadViewSlot view_;                       // the published read view (its own leaf lock)
  // When the pending part was last built, and after which pass.
  std::chrono::steady_clock::time_point pending_built_at_{};
  // How long its last build took: the loop waits at least four times that between builds.
  std::chrono::steady_clock::duration pending_build_cost_{};
  int64_t pending_built_pass_ = -1;
  bool stopping_ = false;
  // Committed submissions on their way to jobs_ (AddToInbox, DrainInboxLocked), in commit
  // order. inbox_mu_ is taken after mu_ when both are held, and held only to move the vector
  // and the unviewed submissions' rows; the reads that add those take view_'s lock inside it.
  std::mutex inbox_mu_;
  std::vector<CommittedJob> inbox_;
  int64_t submitted_ = 0;  // guarded by inbox_mu_: the submissions numbered so far
  // Guarded by inbox_mu_: every submission the last published pending part does not count (its
  // `drained` on), in number order; PublishLocked drops those a new part counts.
  std::deque<UnviewedJob> unviewed_;
  int64_t drained_ = 0;  // the submissions taken into jobs_ (changed under mu_ and inbox_mu_)
  // The loop's wake-up: its own mutex, so that waking it never waits for mu_ (a leaf lock).
  std::mutex loop_mu_;
  std::condition_variable loop_wake_cv_;
  bool loop_wake_ = false;  // guarded by loop_mu_
  bool loop_stop_ = false;  // guarded by loop_mu_
  std::thread loop_;
};

}  // namespace corral::server
