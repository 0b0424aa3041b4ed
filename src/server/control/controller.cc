// Controller, core: creation, the scheduling rules and the policy file, recovery from the
// store after a restart, and the loop that drives rounds (scheduling, node and session checks,
// retries). The other parts of the class: controller_jobs.cc (submissions, cancellation, job
// and queue views), controller_sessions.cc, controller_scheduling.cc (placing, launching,
// preempting and ending jobs) and controller_nodes.cc (agents, heartbeats, node loss).

#include "server/control/controller.h"

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <system_error>

#include "common/config_file.h"
#include "model/allocation.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// Recent jobs read at start: they teach the run-time predictor and seed the workload profile
// (which keeps the last ControllerConfig::profile.capacity of them).
constexpr int kRecentJobsAtStart = 10000;

// The policy file's fields: project sharing lives in the store (corral project set-quota).
const std::set<std::string> kPolicyFileFields = {"order", "blocking", "reclaim",
                                                 "las_thresholds_gpu_s", "fair_share"};

// A stored task's allocation as the scheduler holds it on `node`.
sched::Allocation SchedAllocationOf(const model::Allocation& a, sched::NodeIndex node) {
  sched::Allocation out;
  out.node = node;
  out.gpus = a.gpus;
  out.cpu = a.cpu;
  out.memory = a.memory;
  return out;
}

}  // namespace

Result<std::unique_ptr<Controller>> Controller::Create(ControllerConfig config, store::Store& store,
                                                       Clock& clock) {
  // fgd and best score against the workload's typical tasks: learn them from recent history
  // (kept up to date while running: RefreshProfileIfDueLocked). Other policies place without.
  store::JobFilter recent;
  recent.direction = store::SortDirection::kDescending;
  recent.limit = kRecentJobsAtStart;
  auto history = store.ListJobs(recent);
  if (!history.ok()) return history.status();
  std::vector<model::TaskResources> tasks;           // newest first
  std::vector<std::pair<model::Job, Seconds>> runs;  // succeeded jobs and their run times
  for (const auto& j : *history) {
    auto spec =
        ParseJobSpec(nlohmann::json::parse(j.spec_json, nullptr, false), SpecOrigin::kStored);
    if (!spec.ok()) continue;
    tasks.push_back(spec->resources);
    if (j.state == JobState::kSucceeded && j.start_time && j.end_time) {
      runs.emplace_back(ToModelJob(*spec, j), Seconds(j.end_time->value() - j.start_time->value()));
    }
  }
  WorkloadProfile profile(config.profile);
  for (auto it = tasks.rbegin(); it != tasks.rend(); ++it) profile.Observe(*it);  // oldest first
  sched::PolicyContext context;
  if (sched::PolicyUsesWorkloadProfile(config.policy)) {
    context.typical_tasks = profile.Refresh(clock.Now());
  }
  auto scheduler = sched::Scheduler::Create(sched::SchedulerConfig{config.policy}, context);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<Controller> c(new Controller(std::move(config), store, clock,
                                               std::move(scheduler).value(), std::move(profile)));
  {
    std::lock_guard lock(c->mu_);
    {
      std::lock_guard predictor(c->predictor_mu_);  // not held further: the estimator takes it
      // Oldest first, as they happened.
      for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
        c->predictor_.Observe(predict::RuntimePredictor::FeaturesOf(it->first), it->second);
      }
    }
    CORRAL_RETURN_IF_ERROR(c->LoadRulesLocked());
    if (!c->policy_error_.empty()) return InvalidArgument(c->policy_error_);
  }
  CORRAL_RETURN_IF_ERROR(c->Recover());
  {
    auto lock = c->LockState();
    c->PublishLocked(PendingRebuild::kNow);
  }
  return c;
}

sched::SchedulerConfig Controller::SchedulerConfigLocked() const {
  sched::SchedulerConfig config{config_.policy};
  config.order = policy_.order;
  config.blocking = policy_.blocking;
  config.sharing.fair_share = policy_.sharing.fair_share;
  config.sharing.reclaim = policy_.sharing.reclaim;
  config.sharing.projects = sharing_;
  config.las_thresholds_gpu_s = policy_.las_thresholds_gpu_s;
  config.victims = config_.victims;
  config.min_run_before_preemption = config_.min_run_before_preemption;
  config.estimate = [this](const model::Job& job) {
    std::lock_guard predictor(predictor_mu_);
    return predictor_.Predict(predict::RuntimePredictor::FeaturesOf(job)).estimate;
  };
  return config;
}

sched::SchedulerConfig Controller::SchedulerRules() {
  auto lock = LockState();
  sched::SchedulerConfig rules = SchedulerConfigLocked();
  rules.estimate = nullptr;
  return rules;
}

Status Controller::LoadRulesLocked() {
  auto projects = store_.ListProjects();
  if (!projects.ok()) return projects.status();
  sharing_.clear();
  for (const auto& p : *projects) {
    // Validated when set; a row edited by hand into nonsense keeps the defaults.
    auto sharing =
        sched::ParseProjectSharing(nlohmann::json::parse(p.sharing_json, nullptr, false));
    if (sharing.ok()) sharing_[p.name] = *sharing;
  }
  policy_error_.clear();
  if (!config_.policy_file.empty()) {
    std::error_code ec;
    policy_mtime_ = std::filesystem::last_write_time(config_.policy_file, ec);
    auto file = ReadJsonOrYamlFile(config_.policy_file);
    auto policy = file.ok() ? sched::ParseSchedulingPolicy(*file, kPolicyFileFields)
                            : Result<sched::SchedulingPolicy>(file.status());
    if (policy.ok()) {
      policy_ = *policy;
    } else {
      policy_error_ = config_.policy_file + ": " + policy.status().message();
    }
  }
  return scheduler_->Reconfigure(SchedulerConfigLocked());
}

Status Controller::LoadSubmitLimitsLocked() {
  auto users = store_.ListUsers();
  if (!users.ok()) return users.status();
  for (const store::UserRecord& u : *users) submit_limits_.SetUserLimits(u.name, u.submit_limits);
  auto projects = store_.ListProjects();
  if (!projects.ok()) return projects.status();
  for (const store::ProjectRecord& p : *projects) {
    submit_limits_.SetProjectLimits(p.name, p.submit_limits);
  }
  return Status::Ok();
}

void Controller::ReloadPolicyIfChangedLocked() {
  if (config_.policy_file.empty()) return;
  std::error_code ec;
  auto mtime = std::filesystem::last_write_time(config_.policy_file, ec);
  if (ec || mtime == policy_mtime_) return;
  policy_mtime_ = mtime;
  auto file = ReadJsonOrYamlFile(config_.policy_file);
  auto policy = file.ok() ? sched::ParseSchedulingPolicy(*file, kPolicyFileFields)
                          : Result<sched::SchedulingPolicy>(file.status());
  if (!policy.ok()) {
    // The rules in force stay; the refusal is shown by PolicyView (GET /api/v1/policy).
    policy_error_ = config_.policy_file + ": " + policy.status().message();
    return;
  }
  const sched::SchedulingPolicy previous = policy_;
  policy_ = *policy;
  if (Status s = scheduler_->Reconfigure(SchedulerConfigLocked()); !s.ok()) {
    policy_ = previous;
    policy_error_ = config_.policy_file + ": " + s.message();
    return;
  }
  policy_error_.clear();
  WakeLoop();
}

Controller::Controller(ControllerConfig config, store::Store& store, Clock& clock,
                       std::unique_ptr<sched::Scheduler> scheduler, WorkloadProfile profile)
    : config_(std::move(config)),
      store_(store),
      clock_(clock),
      batcher_(&store),
      writes_(&store),
      environments_(store, clock),
      accounts_(store, clock, config_.principal_cache, config_.default_token_expiry,
                config_.session_key),
      gpu_monitor_(config_.gpu_monitor),
      logs_(config_.logs_dir, config_.max_log_bytes),
      submit_limits_(config_.max_pending_jobs),
      scheduler_(std::move(scheduler)),
      profile_(std::move(profile)),
      ports_(RendezvousPorts::SearchStartFor(store.ClusterId())) {}

Controller::~Controller() { Stop(); }

Status Controller::Recover() {
  std::lock_guard lock(mu_);
  CORRAL_RETURN_IF_ERROR(LoadSubmitLimitsLocked());
  auto nodes = store_.ListNodes();
  if (!nodes.ok()) return nodes.status();
  for (const auto& n : *nodes) {
    if (n.state == NodeState::kLost) continue;
    // Written by this server or a predecessor; one that no longer reads is skipped (its agent
    // registers again).
    auto inventory =
        protocol::ParseNodeInventory(nlohmann::json::parse(n.inventory_json, nullptr, false));
    if (!inventory.ok() || !AddNodeToSchedulerLocked(n.name, *inventory).ok()) continue;
    LiveNode& live = nodes_[n.name];
    live.inventory = std::move(inventory).value();
    live.node_id_hash = n.node_id_hash;
    live.state = n.state;
    if (!n.node_token_hash.empty()) {
      // Registered with a predecessor (a server that stopped, or the leader before a failover):
      // its agent goes on with the token it has, instead of every agent registering again.
      live.token_hash = n.node_token_hash;
      live.registration = credentials_.Set(n.name, n.node_token_hash);
    }
    // Agents get a full timeout to come back before their node is declared lost.
    live.last_heartbeat = clock_.Now();
    unreported_nodes_.insert(n.name);
    if (n.state != NodeState::kReady) (void)scheduler_->SetSchedulable(n.name, false);
  }
  // The previous run of a job (generation `restarts`): a resize or a preemption may have been
  // stopping it (TakeOlderRunsLocked).
  auto note_older_run = [&](const store::JobRecord& r, const std::vector<store::TaskRecord>& ts) {
    for (const store::TaskRecord& t : ts) {
      if (r.restarts > 0 && t.generation == r.restarts) older_runs_[t.allocation_id] = r.id;
    }
  };
  store::JobFilter active;
  active.states = {JobState::kPending, JobState::kStarting, JobState::kRunning};
  active.limit = 0;
  auto jobs = store_.ListJobs(active);
  if (!jobs.ok()) return jobs.status();
  for (const auto& record : *jobs) {
    auto spec =
        ParseJobSpec(nlohmann::json::parse(record.spec_json, nullptr, false), SpecOrigin::kStored);
    if (!spec.ok()) continue;  // validated at submission; a corrupt row is left alone
    auto environment = PinnedEnvironment(*spec);
    if (!environment.ok()) {
      // Only this job cannot run again; the others recover.
      const std::string reason = "cannot recover: " + environment.status().message();
      CORRAL_RETURN_IF_ERROR(
          store_.TransitionJob(record.id, record.state, JobState::kFailed, reason, clock_.Now()));
      continue;
    }
    LiveJob& job = jobs_[record.id];
    if (spec->session) sessions_.insert(record.id);
    job.record = record;
    job.spec = *spec;
    job.environment = std::move(environment).value();
    job.last_activity = clock_.Now();  // a session's idle time starts again with the server
    if (record.cancel_reason) job.end = reconcile::CancelRequested(job.end, *record.cancel_reason);
    job.elastic_since = record.start_time.value_or(record.submit_time);
    if (record.restarts > 0 || record.state == JobState::kRunning) {
      auto events = store_.JobEvents(record.id);
      if (!events.ok()) return events.status();
      std::optional<Seconds> run_since;  // this run's last resize, or its start
      for (const auto& e : *events) {
        // Preemptions do not use up max_restarts: count them back from the job's history.
        job.preemptions += e.reason.rfind(sched::kPreemptedReasonPrefix, 0) == 0;
        // An idle event of this run, said before the server restarted, is not said again; one
        // before the run's start (a change of state) was another run's. Events are in order,
        // whereas start_time is in seconds: one second may hold a requeue and the next start.
        if (e.from_state != e.to_state) job.gpus_idle_noted = false;
        if (e.reason.rfind(kGpusIdleEvent, 0) == 0) job.gpus_idle_noted = true;
        if (e.reason == kGpusBusyAgainEvent) job.gpus_idle_noted = false;
        // Resizes do not use up max_restarts either; the hysteresis counts from the run's
        // start ("started at ...") or its last resize since (a change of state ends a run:
        // resizes before it were another run's).
        if (e.from_state != e.to_state) run_since.reset();
        if (IsResizeEvent(e.reason)) {
          ++job.resizes;
          run_since = e.time;
        }
        if (e.reason.rfind(kStartedAtEventPrefix, 0) == 0) run_since = e.time;
      }
      if (run_since) job.elastic_since = std::max(job.elastic_since, *run_since);
    }
    submit_limits_.AddSubmitted(record.user, record.project, record.submit_time, clock_.Now());
    if (record.state == JobState::kPending) {
      if (record.restarts > 0) {
        auto tasks = store_.TasksOfJob(record.id);
        if (!tasks.ok()) return tasks.status();
        note_older_run(record, *tasks);
      }
      QueueOrHoldLocked(job);
      submit_limits_.AddPending(record.user, record.project, 1);
      continue;
    }
    auto tasks = store_.TasksOfJob(record.id);
    if (!tasks.ok()) return tasks.status();
    note_older_run(record, *tasks);
    std::vector<sched::Allocation> allocations;
    for (const auto& t : *tasks) {
      if (t.generation != record.restarts + 1) continue;  // an older run
      job.tasks.push_back(t);
      // The previous server may have sent the launch: the agent's first report settles it.
      if (t.state == TaskState::kAssigned) job.launched.insert(t.allocation_id);
      const sched::NodeIndex node = scheduler_->state().FindNode(t.node);
      if (!model::IsEnded(t.state) && node >= 0) {
        allocations.push_back(SchedAllocationOf(t.allocation, node));
      }
    }
    IndexAllocationsLocked(job);
    RestoreRendezvousLocked(job);
    job.elastic_now = ElasticSizeOf(job);
    // An elastic job's run (for min-run-before-preemption) starts at its last resize.
    const Seconds started =
        job.spec.elastic ? job.elastic_since : record.start_time.value_or(record.submit_time);
    const Status adopted = scheduler_->Adopt(ModelJobOf(job), allocations, started);
    if (adopted.ok()) {
      // What a preemption would lose counts from its last checkpoint, as before the restart.
      auto progress = store_.JobProgress(record.id);
      if (progress.ok() && progress->checkpoint) {
        (void)scheduler_->NoteCheckpoint(record.id, progress->checkpoint->time);
      }
      EvaluateJobLocked(job);
      continue;
    }
    // Its GPUs are not held in the scheduler: the job is stopped at once rather than left running
    // on GPUs the scheduler may give to another job.
    const std::string reason = "cannot recover: its allocations do not fit the nodes as stored (" +
                               adopted.message() + ")";
    std::cerr << "corral server: job " << record.id.value() << ": " << reason << std::endl;
    CORRAL_RETURN_IF_ERROR(RequestCancelLocked(job, reason));
  }
  return Status::Ok();
}

void Controller::Start() {
  auto lock = LockState();
  if (loop_.joinable()) return;
  stopping_ = false;
  {
    std::lock_guard wait(loop_mu_);
    loop_stop_ = false;
  }
  loop_ = std::thread([this] { LoopMain(); });
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  {
    std::lock_guard wait(loop_mu_);
    loop_stop_ = true;
  }
  changed_.notify_all();
  loop_wake_cv_.notify_all();
  if (loop_.joinable()) loop_.join();
  batcher_.Close();
  writes_.Close();
}

void Controller::WakeLoop() {
  {
    std::lock_guard wait(loop_mu_);
    loop_wake_ = true;
  }
  loop_wake_cv_.notify_one();
}

std::unique_lock<std::mutex> Controller::LockState() {
  std::unique_lock lock(mu_);
  DrainInboxLocked();
  ApplyAnsweredWritesLocked();
  return lock;
}

void Controller::DrainInboxLocked() {
  std::vector<CommittedJob> committed;
  {
    std::lock_guard inbox(inbox_mu_);
    committed.swap(inbox_);
    drained_ = submitted_;
  }
  for (CommittedJob& c : committed) {
    profile_.Observe(c.spec.resources);
    QueueLocked(c.record, std::move(c.spec), std::move(c.environment));
  }
}

void Controller::AddToInbox(std::vector<CommittedJob> committed) {
  {
    std::lock_guard inbox(inbox_mu_);
    for (CommittedJob& c : committed) {
      unviewed_.push_back({++submitted_, QueueRowOf(c.record, c.spec)});
      inbox_.push_back(std::move(c));
    }
  }
  WakeLoop();
}

void Controller::LoopMain() {
  // Measured on the steady clock, not clock_ (which tests move by hand between rounds).
  auto last_round = std::chrono::steady_clock::now();
  while (true) {
    {
      std::unique_lock wait(loop_mu_);
      loop_wake_cv_.wait_for(wait, config_.loop_tick, [&] { return loop_wake_ || loop_stop_; });
      if (loop_stop_) break;
      loop_wake_ = false;
    }
    auto lock = LockState();
    if (stopping_) break;
    const auto now = std::chrono::steady_clock::now();
    if (now - last_round > std::chrono::seconds(config_.node_timeout.value()) / 2) {
      ForgiveAPauseLocked(now - last_round);
    }
    last_round = now;
    RoundLocked(lock);
    PublishLocked(PendingRebuild::kIfDue);
  }
}

void Controller::ForgiveAPauseLocked(std::chrono::steady_clock::duration gap) {
  const Seconds now = clock_.Now();
  for (auto& [name, node] : nodes_) {
    if (!node.unreachable && node.state != NodeState::kLost) {
      node.last_heartbeat = std::max(node.last_heartbeat, now);
    }
  }
  std::cerr << "corral server: no scheduling round for "
            << std::chrono::duration_cast<std::chrono::seconds>(gap).count()
            << " s (the server was paused or starved): every node gets a full node timeout ("
            << config_.node_timeout.value() << " s) from now\n";
}

void Controller::Tick() {
  auto lock = LockState();
  RoundLocked(lock);
  PublishLocked(PendingRebuild::kNow);
}

void Controller::RoundLocked(std::unique_lock<std::mutex>& lock) {
  SettleWritesLocked();  // the round writes directly
  ReloadPolicyIfChangedLocked();
  RetryUnsettledLocked();
  CheckNodesLocked();
  CheckSessionsLocked(lock);
  CheckIdleGpusLocked();
  RefreshProfileIfDueLocked();
  ScheduleLocked();
  RecordSummaryLocked();
}

void Controller::RefreshProfileIfDueLocked() {
  const Seconds now = clock_.Now();
  // Under other policies a refresh would rebuild the policy and drop its cached scores for
  // nothing: profile_jobs stays 0.
  if (!scheduler_->UsesWorkloadProfile() || !profile_.Due(now)) return;
  if (Status s = scheduler_->SetTypicalTasks(profile_.Refresh(now)); !s.ok()) {
    // Not expected (the policy's name was accepted at start, and its flags do not depend on
    // its typical tasks): the previous profile stays.
    std::cerr << "corral server: the workload profile was not taken: " << s.message() << std::endl;
  }
}

void Controller::CheckIdleGpusLocked() {
  if (!config_.notify_idle_gpus) return;
  const Seconds now = clock_.Now();
  const int64_t idle_after_ms = gpu_monitor_.options().idle_after_ms;
  const std::map<JobId, GpuMonitor::JobBusy> last_busy =
      gpu_monitor_.LastBusyByJob(now.value() * 1000);
  // Only jobs with fresh readings: without, no news either way.
  for (const auto& [id, busy] : last_busy) {
    auto it = jobs_.find(id);
    if (it == jobs_.end() || it->second.record.state != JobState::kRunning) continue;
    LiveJob& job = it->second;
    const bool idle = now.value() * 1000 - busy.last_busy_ms >= idle_after_ms;
    // Only a busy reading ends an idle span: not stale readings, nor none yet after a restart.
    if (job.gpus_idle_noted ? !busy.busy_now : !idle) continue;
    const std::string reason =
        idle ? std::string(kGpusIdleEvent) + ": under " +
                   std::to_string(gpu_monitor_.options().idle_threshold_percent) + " % for " +
                   std::to_string((now.value() * 1000 - busy.last_busy_ms) / 1000) + " s"
             : std::string(kGpusBusyAgainEvent);
    // Recorded first: an event the store did not take is tried again at the next round.
    if (store_.AddJobEvent(id, reason, now).ok()) job.gpus_idle_noted = idle;
  }
}

void Controller::RetryUnsettledLocked() {
  std::set<JobId> retry;
  retry.swap(unsettled_);
  for (JobId id : retry) {
    if (auto it = jobs_.find(id); it != jobs_.end()) EvaluateJobLocked(it->second);
  }
}

}  // namespace corral::server
