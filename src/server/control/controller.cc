#include "server/control/controller.h"

#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <future>
#include <system_error>

#include "common/config_file.h"
#include "common/random_id.h"
#include "model/allocation.h"
#include "model/node.h"
#include "model/session.h"
#include "sched/fragmentation.h"
#include "server/gateway/session.h"

namespace corral::server {

namespace {

constexpr int kHistoryForProfile = 10000;  // recent jobs that shape FGD's workload profile
constexpr int kEstimateHorizon = 1000;     // queued jobs that get an estimated start
// The policy file's fields: project sharing lives in the store (corral project set-quota).
const std::set<std::string> kPolicyFileFields = {"order", "blocking", "reclaim",
                                                 "las_thresholds_gpu_s", "fair_share"};

using model::JobState;
using model::NodeState;
using model::TaskState;

// A state's name, for JSON and messages.
std::string Name(auto state) { return std::string(model::ToString(state)); }

// A new pending job of `who` running `spec`, submitted at `now` (its id comes from the store).
// Its submission event says which of the server's defaults it got (`defaulted`, when any).
store::JobRecord NewJobRecord(const Principal& who, const JobSpec& spec, Seconds now,
                              const std::string& defaulted) {
  store::JobRecord record;
  // As the store records it ("submitted" when empty), so views agree before and after a restart.
  record.reason = defaulted.empty() ? "submitted" : "submitted with defaults: " + defaulted;
  record.name = spec.name;
  record.user = who.name;
  record.project = spec.project;
  record.spec_json = ToJson(spec).dump();
  record.state = JobState::kPending;
  record.priority = spec.priority;
  record.submit_time = now;
  return record;
}

// PermissionDenied unless `who` owns `record` or is an admin; `what` names it ("job 7").
Status MayCancel(const Principal& who, const store::JobRecord& record, const std::string& what) {
  if (who.admin || who.name == record.user) return Status::Ok();
  return PermissionDenied(what + " belongs to " + record.user +
                          ": only its owner or an admin may cancel it");
}

// An array element's fields of the job JSON (absent for other jobs).
void AddArrayFields(const store::JobRecord& record, nlohmann::json& out) {
  if (!record.array_id) return;
  out["array_id"] = record.array_id->value();
  if (record.array_index) out["array_index"] = *record.array_index;
  if (record.array_max_running) out["array_max_running"] = *record.array_max_running;
}

// A task stopped at its time limit failed however it exited (Slurm's TIMEOUT): a program that
// handles SIGTERM and exits 0 did not finish its work.
bool TaskFailed(const store::TaskRecord& t) {
  return t.state == TaskState::kLost || t.end_cause == model::TaskEndCause::kTimeLimit ||
         t.signal.has_value() || t.exit_code.value_or(0) != 0 ||
         (t.state == TaskState::kKilled && !t.exit_code.has_value());
}

// At most `max` bytes of `text`, cut before a UTF-8 continuation byte so no character is split.
std::string TruncateUtf8(const std::string& text, size_t max) {
  if (text.size() <= max) return text;
  size_t end = max;
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end);
}

// "task 1 exited with code 3", with the agent's note when it gave one ("time limit of 60 s
// reached").
std::string DescribeEnd(const store::TaskRecord& t, const std::string& note) {
  std::string what = "task " + std::to_string(t.task_index);
  if (t.state == TaskState::kLost) {
    what += " was lost";
  } else if (t.signal) {
    what += " was killed by signal " + std::to_string(*t.signal);
  } else if (t.exit_code) {
    what += " exited with code " + std::to_string(*t.exit_code);
  } else {
    what += " ended (" + Name(t.state) + ")";
  }
  return note.empty() ? what : what + ": " + note;
}

// What the scheduler gave a task, as the store keeps it (the task record names the node).
model::Allocation AllocationOf(const sched::Allocation& a) {
  model::Allocation out;
  out.gpus = a.gpus;
  out.cpu = a.cpu;
  out.memory = a.memory;
  return out;
}

// A stored task's allocation as the scheduler holds it on `node`.
sched::Allocation SchedAllocationOf(const model::Allocation& a, sched::NodeIndex node) {
  sched::Allocation out;
  out.node = node;
  out.gpus = a.gpus;
  out.cpu = a.cpu;
  out.memory = a.memory;
  return out;
}

// A task's allocation in the API's task view: its JSON form with the task's node, as clients
// (the CLI, the dashboard) have always read it.
nlohmann::json AllocationView(const store::TaskRecord& t) {
  nlohmann::json out = model::ToJson(t.allocation);
  out["node"] = t.node;
  return out;
}

// The launch's "environment" (docs/environments.md): what the agent's runtime sets up.
protocol::LaunchEnvironment LaunchEnvironmentOf(const EnvironmentVersion& env) {
  return {env.record.name, env.record.version, env.spec.PreferredRuntime(),
          env.spec.image,  env.spec.venv,      env.spec.conda};
}

// The scheduler's node from an agent inventory (see docs/control-plane.md); the codec checked
// the inventory's fields, model::Validate checks the node.
Result<model::Node> NodeFromInventory(const std::string& name, const protocol::NodeInventory& inv) {
  model::Node node;
  node.name = name;
  node.cpu = inv.cpu;
  node.memory = inv.memory;
  node.gpu_model = inv.gpu_model;
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    model::Gpu gpu;
    gpu.index = static_cast<int>(i);
    gpu.uuid = inv.gpus[i].uuid;
    gpu.memory = inv.gpus[i].memory;
    gpu.nvlink_domain = inv.gpus[i].nvlink_domain;
    node.gpus.push_back(gpu);
  }
  node.labels = inv.labels;
  for (const std::string& runtime : inv.runtimes) {
    // A newer agent may offer runtimes this server does not know: they place nothing.
    if (runtime == model::kProcessRuntime || runtime == model::kContainerRuntime) {
      node.runtimes.push_back(runtime);
    }
  }
  if (Status valid = model::Validate(node); !valid.ok()) {
    return InvalidArgument("inventory of node '" + name + "': " + valid.message());
  }
  return node;
}

}  // namespace

Result<std::unique_ptr<Controller>> Controller::Create(ControllerConfig config, store::Store& store,
                                                       Clock& clock) {
  // FGD scores against the workload's typical tasks: learn them from recent history.
  store::JobFilter recent;
  recent.order = store::JobOrder::kNewestFirst;
  recent.limit = kHistoryForProfile;
  auto history = store.ListJobs(recent);
  if (!history.ok()) return history.status();
  std::vector<model::TaskResources> tasks;
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
  sched::PolicyContext context{sched::ComputeTypicalTasks(tasks)};
  auto scheduler = sched::Scheduler::Create(sched::SchedulerConfig{config.policy}, context);
  if (!scheduler.ok()) return scheduler.status();
  std::unique_ptr<Controller> c(
      new Controller(std::move(config), store, clock, std::move(scheduler).value()));
  {
    std::lock_guard lock(c->mu_);
    // Oldest first, as they happened.
    for (auto it = runs.rbegin(); it != runs.rend(); ++it) {
      c->predictor_.Observe(predict::RuntimePredictor::FeaturesOf(it->first), it->second);
    }
    CORRAL_RETURN_IF_ERROR(c->LoadRulesLocked());
    if (!c->policy_error_.empty()) return InvalidArgument(c->policy_error_);
  }
  CORRAL_RETURN_IF_ERROR(c->Recover());
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
  config.estimate = [this](const model::Job& job) {
    return predictor_.Predict(predict::RuntimePredictor::FeaturesOf(job)).estimate;
  };
  return config;
}

sched::SchedulerConfig Controller::SchedulerRules() {
  std::lock_guard lock(mu_);
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
  wake_ = true;
}

Controller::Controller(ControllerConfig config, store::Store& store, Clock& clock,
                       std::unique_ptr<sched::Scheduler> scheduler)
    : config_(std::move(config)),
      store_(store),
      clock_(clock),
      batcher_(&store),
      environments_(store, clock),
      gpu_monitor_(config_.gpu_monitor),
      scheduler_(std::move(scheduler)) {}

Controller::~Controller() { Stop(); }

Status Controller::Recover() {
  std::lock_guard lock(mu_);
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
    // Agents get a full timeout to come back before their node is declared lost.
    live.last_heartbeat = clock_.Now();
    if (n.state != NodeState::kReady) (void)scheduler_->SetSchedulable(n.name, false);
  }
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
    job.record = record;
    job.spec = *spec;
    job.environment = std::move(environment).value();
    job.last_activity = clock_.Now();  // a session's idle time starts again with the server
    if (record.cancel_reason) {
      job.cancel_requested = true;
      job.failure = *record.cancel_reason;
    }
    if (record.restarts > 0 || record.state == JobState::kRunning) {
      auto events = store_.JobEvents(record.id);
      if (!events.ok()) return events.status();
      for (const auto& e : *events) {
        // Preemptions do not use up max_restarts: count them back from the job's history.
        job.preemptions += e.reason.rfind(sched::kPreemptedReasonPrefix, 0) == 0;
        // An idle event of this run, said before the server restarted, is not said again; one
        // before the run's start (a change of state) was another run's. Events are in order,
        // whereas start_time is in seconds: one second may hold a requeue and the next start.
        if (e.from_state != e.to_state) job.gpus_idle_noted = false;
        if (e.reason.rfind(kGpusIdleEvent, 0) == 0) job.gpus_idle_noted = true;
        if (e.reason == kGpusBusyAgainEvent) job.gpus_idle_noted = false;
      }
    }
    const model::Job model_job = ModelJobOf(job);
    if (record.state == JobState::kPending) {
      (void)scheduler_->Submit(model_job);
      continue;
    }
    auto tasks = store_.TasksOfJob(record.id);
    if (!tasks.ok()) return tasks.status();
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
    const Seconds started = record.start_time.value_or(record.submit_time);
    if (scheduler_->Adopt(model_job, allocations, started).ok()) EvaluateJobLocked(job);
  }
  return Status::Ok();
}

void Controller::Start() {
  std::lock_guard lock(mu_);
  if (loop_.joinable()) return;
  stopping_ = false;
  loop_ = std::thread([this] { LoopMain(); });
}

void Controller::Stop() {
  {
    std::lock_guard lock(mu_);
    stopping_ = true;
  }
  changed_.notify_all();
  if (loop_.joinable()) loop_.join();
  batcher_.Close();
}

void Controller::Wake() {
  {
    std::lock_guard lock(mu_);
    wake_ = true;
  }
  changed_.notify_all();
}

void Controller::LoopMain() {
  std::unique_lock lock(mu_);
  while (!stopping_) {
    changed_.wait_for(lock, config_.loop_tick, [&] { return wake_ || stopping_; });
    if (stopping_) break;
    wake_ = false;
    RoundLocked(lock);
  }
}

void Controller::Tick() {
  std::unique_lock lock(mu_);
  RoundLocked(lock);
}

void Controller::RoundLocked(std::unique_lock<std::mutex>& lock) {
  ReloadPolicyIfChangedLocked();
  RetryUnsettledLocked();
  CheckNodesLocked();
  CheckSessionsLocked(lock);
  CheckIdleGpusLocked();
  ScheduleLocked();
  RecordSummaryLocked();
}

void Controller::CheckIdleGpusLocked() {
  if (!config_.notify_idle_gpus) return;
  const Seconds now = clock_.Now();
  const int64_t idle_after_ms = gpu_monitor_.options().idle_after_ms;
  const std::map<JobId, GpuMonitor::JobBusy> last_busy =
      gpu_monitor_.LastBusyByJob(now.value() * 1000);
  for (auto& [id, job] : jobs_) {
    if (job.record.state != JobState::kRunning) continue;
    const auto found = last_busy.find(id);
    if (found == last_busy.end()) continue;  // no fresh readings: no news either way
    const GpuMonitor::JobBusy& busy = found->second;
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

// --- Submissions and jobs --------------------------------------------------------------------

Result<Principal> Controller::CheckAccess(const Principal& who, const std::string& project) const {
  if (!who.CanAccessProject(project)) {
    return PermissionDenied("user '" + who.name + "' is not a member of project '" + project + "'");
  }
  return who;
}

Result<Controller::Submission> Controller::ParseSubmission(const Principal& who,
                                                           const nlohmann::json& json) {
  auto spec = ParseJobSpec(json);
  if (!spec.ok()) return spec.status();
  if (spec->project.empty()) spec->project = config_.default_project;
  auto access = CheckAccess(who, spec->project);
  if (!access.ok()) return access.status();
  if (spec->session) {
    // The app's secret: generated here, stored with the spec, shown only to the session's owner.
    auto token = RandomHexId(kSecretBytes);
    if (!token.ok()) return token.status();
    spec->session->token = *token;
  }
  Submission submission{std::move(spec).value(), std::nullopt};
  if (!submission.spec.environment.empty()) {
    auto env = environments_.Resolve(who, submission.spec.environment, "environment");
    if (!env.ok()) return env.status();
    CORRAL_RETURN_IF_ERROR(ApplyEnvironment(env->spec, env->record.version, submission.spec));
    submission.environment = std::move(env).value();
  }
  // After the environment, which fills in the command and variables (never resources).
  submission.defaulted = ApplyResourceDefaults(config_.resource_defaults, submission.spec);
  return submission;
}

Result<std::optional<EnvironmentVersion>> Controller::PinnedEnvironment(const JobSpec& spec) {
  if (spec.environment.empty()) return std::optional<EnvironmentVersion>();
  auto ref = ParseEnvironmentRef(spec.environment, "environment");
  if (!ref.ok()) return ref.status();
  if (!ref->version) return InvalidArgument("field 'environment': a stored spec pins a version");
  auto env = environments_.Pinned(ref->name, *ref->version);
  if (!env.ok()) return env.status();
  return std::optional<EnvironmentVersion>(std::move(env).value());
}

void Controller::QueueLocked(const store::JobRecord& record, JobSpec spec,
                             std::optional<EnvironmentVersion> environment) {
  LiveJob& job = jobs_[record.id];
  job.record = record;
  job.spec = std::move(spec);
  job.environment = std::move(environment);
  (void)scheduler_->Submit(ModelJobOf(job));
  wake_ = true;
}

Result<store::JobRecord> Controller::Submit(const Principal& who, const nlohmann::json& json) {
  auto submission = ParseSubmission(who, json);
  if (!submission.ok()) return submission.status();
  if (submission->spec.array) {
    return InvalidArgument("field 'array': an array is submitted with SubmitArray");
  }
  store::JobRecord record =
      NewJobRecord(who, submission->spec, clock_.Now(), submission->defaulted);
  auto id = batcher_.Submit(record);  // commits (group commit) before returning
  if (!id.ok()) return id.status();
  record.id = *id;
  {
    std::lock_guard lock(mu_);
    QueueLocked(record, std::move(submission->spec), std::move(submission->environment));
  }
  changed_.notify_all();
  return record;
}

Result<std::vector<store::JobRecord>> Controller::SubmitArray(const Principal& who,
                                                              const nlohmann::json& json) {
  auto submission = ParseSubmission(who, json);
  if (!submission.ok()) return submission.status();
  const JobSpec& spec = submission->spec;
  if (!spec.array) return InvalidArgument("field 'array': is required to submit an array");
  const Seconds now = clock_.Now();
  std::vector<ArrayElement> elements = ArrayElements(spec);
  std::vector<store::JobRecord> records;
  records.reserve(elements.size());
  for (const ArrayElement& e : elements) {
    store::JobRecord record = NewJobRecord(who, e.spec, now, submission->defaulted);
    record.array_index = e.index;
    record.array_max_running = spec.array->max_running;
    records.push_back(std::move(record));
  }
  auto ids = store_.InsertArray(records);  // one transaction: all elements or none
  if (!ids.ok()) return ids.status();
  {
    std::lock_guard lock(mu_);
    for (size_t i = 0; i < records.size(); ++i) {
      records[i].id = (*ids)[i];
      records[i].array_id = ids->front();
      QueueLocked(records[i], std::move(elements[i].spec), submission->environment);
    }
  }
  changed_.notify_all();
  return records;
}

Status Controller::Cancel(const Principal& who, JobId id) {
  const std::string what = "job " + std::to_string(id.value());
  std::unique_lock lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end()) {
    auto record = store_.GetJob(id);
    if (!record.ok()) return record.status();
    if (!who.CanAccessProject(record->project)) return NotFound(what + " not found");
    return FailedPrecondition(what + " already ended (" + Name(record->state) + ")");
  }
  LiveJob& job = it->second;
  if (!who.CanAccessProject(job.record.project)) return NotFound(what + " not found");
  CORRAL_RETURN_IF_ERROR(MayCancel(who, job.record, what));
  const std::string reason = "cancelled by " + who.name;
  if (job.record.state == JobState::kPending) {
    // Committed first: a cancellation the store did not take is reported, not half done.
    return EndJobLocked(job, JobState::kCancelled, reason);
  }
  CORRAL_RETURN_IF_ERROR(RequestCancelLocked(job, reason));
  lock.unlock();
  changed_.notify_all();
  return Status::Ok();
}

Result<std::vector<JobId>> Controller::CancelArray(const Principal& who, JobId array) {
  const std::string what = "array " + std::to_string(array.value());
  // The array's id is its first element's: that job says whose the array is.
  auto first = store_.GetJob(array);
  if (!first.ok() && first.status().code() != StatusCode::kNotFound) return first.status();
  if (!first.ok() || first->array_id != array || !who.CanAccessProject(first->project)) {
    return NotFound(what + " not found");
  }
  CORRAL_RETURN_IF_ERROR(MayCancel(who, *first, what));  // every element has the same owner
  const std::string reason = "cancelled by " + who.name;
  std::unique_lock lock(mu_);
  std::vector<JobId> pending, started;  // in id order (jobs_ is ordered)
  for (const auto& [id, job] : jobs_) {
    if (job.record.array_id != array) continue;
    (job.record.state == JobState::kPending ? pending : started).push_back(id);
  }
  if (pending.empty() && started.empty()) {
    return FailedPrecondition(what + " already ended (every element ended)");
  }
  // Pending elements end in one commit: an array may have thousands.
  CORRAL_RETURN_IF_ERROR(store_.TransitionJobs(pending, JobState::kPending, JobState::kCancelled,
                                               reason, clock_.Now()));
  for (JobId id : pending) ForgetJobLocked(jobs_.at(id));
  for (JobId id : started) {
    LiveJob& job = jobs_.at(id);  // evaluating one element never ends another
    if (!job.cancel_requested) CORRAL_RETURN_IF_ERROR(RequestCancelLocked(job, reason));
  }
  lock.unlock();
  changed_.notify_all();
  std::vector<JobId> ids = pending;
  ids.insert(ids.end(), started.begin(), started.end());
  std::sort(ids.begin(), ids.end());
  return ids;
}

Status Controller::RequestCancelLocked(LiveJob& job, const std::string& reason) {
  // Durable before acknowledged: a restarted server goes on stopping the job.
  CORRAL_RETURN_IF_ERROR(store_.RequestCancel(job.record.id, reason, clock_.Now()));
  job.cancel_requested = true;
  job.failure = reason;
  EvaluateJobLocked(job);
  return Status::Ok();
}

Result<nlohmann::json> Controller::JobView(const Principal& who, JobId id) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  auto events = store_.JobEvents(id);
  auto tasks = store_.TasksOfJob(id);
  if (!events.ok()) return events.status();
  if (!tasks.ok()) return tasks.status();
  nlohmann::json out = {{"id", record->id.value()},
                        {"name", record->name},
                        {"user", record->user},
                        {"project", record->project},
                        {"state", Name(record->state)},
                        {"priority", record->priority},
                        {"restarts", record->restarts},
                        {"submit_time", record->submit_time.value()},
                        {"reason", record->reason},
                        {"spec", nlohmann::json::parse(record->spec_json, nullptr, false)}};
  auto spec = ParseJobSpec(out["spec"], SpecOrigin::kStored);
  out["spec"] = WithoutSecrets(out["spec"]);  // a session's token only through the session API
  AddArrayFields(*record, out);
  if (record->start_time) out["start_time"] = record->start_time->value();
  if (record->end_time) out["end_time"] = record->end_time->value();
  out["events"] = nlohmann::json::array();
  for (const auto& e : *events) {
    out["events"].push_back({{"time", e.time.value()},
                             {"from", e.from_state ? Name(*e.from_state) : ""},
                             {"to", Name(e.to_state)},
                             {"reason", e.reason}});
  }
  out["tasks"] = nlohmann::json::array();
  for (const auto& t : *tasks) {
    nlohmann::json task = {{"index", t.task_index},      {"allocation_id", t.allocation_id},
                           {"generation", t.generation}, {"node", t.node},
                           {"state", Name(t.state)},     {"allocation", AllocationView(t)}};
    if (t.exit_code) task["exit_code"] = *t.exit_code;
    if (t.signal) task["signal"] = *t.signal;
    if (t.end_cause) task["end_cause"] = Name(*t.end_cause);
    out["tasks"].push_back(task);
  }
  std::lock_guard lock(mu_);
  if (spec.ok() && !model::IsFinal(record->state)) {
    const predict::Prediction p =
        predictor_.Predict(predict::RuntimePredictor::FeaturesOf(ToModelJob(*spec, *record)));
    out["predicted_run_s"] = {
        {"estimate", p.estimate.value()}, {"confidence", p.confidence}, {"basis", p.basis}};
  }
  if (auto reason = scheduler_->PendingReasonOf(id)) {
    out["pending_reason"] = {{"code", reason->code}, {"message", reason->message}};
    const auto& starts = EstimatedStartsLocked();
    if (auto eta = starts.find(id); eta != starts.end() && eta->second) {
      out["estimated_start"] = eta->second->value();
    }
  }
  return out;
}

Result<Controller::JobPage> Controller::ListJobs(const Principal& who,
                                                 const std::vector<JobState>& states,
                                                 bool all_projects, int limit,
                                                 std::optional<JobId> before,
                                                 std::optional<JobId> array) {
  if (limit < 1) return InvalidArgument("field 'limit': must be at least 1");
  JobPage page{nlohmann::json::array(), std::nullopt};
  store::JobFilter filter;
  filter.states = states;
  filter.before = before;
  filter.array = array;
  filter.order = store::JobOrder::kNewestFirst;
  filter.limit = limit + 1;  // one more than asked tells whether another page follows
  if (!who.admin || !all_projects) {
    if (!who.admin) {
      filter.projects = who.projects;
      if (filter.projects.empty()) return page;
    }
    if (!all_projects) filter.users = {who.name};
  }
  auto jobs = store_.ListJobs(filter);
  if (!jobs.ok()) return jobs.status();
  if (jobs->size() > static_cast<size_t>(limit)) {
    jobs->resize(limit);
    page.next_before = jobs->back().id;
  }
  std::lock_guard lock(mu_);
  const auto& starts = EstimatedStartsLocked();
  for (const auto& j : *jobs) {
    nlohmann::json row = {{"id", j.id.value()},
                          {"name", j.name},
                          {"user", j.user},
                          {"project", j.project},
                          {"state", Name(j.state)},
                          {"priority", j.priority},
                          {"submit_time", j.submit_time.value()},
                          {"reason", j.reason}};
    AddArrayFields(j, row);
    if (auto reason = scheduler_->PendingReasonOf(j.id)) {
      row["pending_reason"] = {{"code", reason->code}, {"message", reason->message}};
    }
    if (auto eta = starts.find(j.id); eta != starts.end() && eta->second) {
      row["estimated_start"] = eta->second->value();
    }
    page.jobs.push_back(row);
  }
  return page;
}

const std::map<JobId, std::optional<Seconds>>& Controller::EstimatedStartsLocked() {
  // Computed at most once per scheduling pass: a shadow run is not free, and readers poll.
  if (estimates_pass_ != passes_) {
    estimates_.clear();
    for (const sched::QueueEntry& e : scheduler_->Queue(clock_.Now(), kEstimateHorizon)) {
      estimates_[e.job] = e.estimated_start;
    }
    estimates_pass_ = passes_;
  }
  return estimates_;
}

Result<nlohmann::json> Controller::QueueView(const Principal& who, int limit) {
  if (limit < 1) return InvalidArgument("field 'limit': must be at least 1");
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  int position = 0;
  for (const sched::QueueEntry& e : scheduler_->Queue(clock_.Now(), limit)) {
    ++position;
    auto it = jobs_.find(e.job);
    if (it == jobs_.end() || !who.CanAccessProject(it->second.record.project)) continue;
    const LiveJob& job = it->second;
    nlohmann::json row = {
        {"position", position},
        {"id", e.job.value()},
        {"name", job.record.name},
        {"user", job.record.user},
        {"project", job.record.project},
        {"priority", job.record.priority},
        {"gpus", job.spec.resources.TotalMilli().value() * job.spec.tasks / 1000.0},
        {"submit_time", job.record.submit_time.value()},
        {"pending_reason", {{"code", e.reason.code}, {"message", e.reason.message}}}};
    row["estimated_start"] =
        e.estimated_start ? nlohmann::json(e.estimated_start->value()) : nlohmann::json(nullptr);
    out.push_back(row);
  }
  return out;
}

Result<nlohmann::json> Controller::ProjectsView(const Principal& who) {
  auto projects = store_.ListProjects();
  if (!projects.ok()) return projects.status();
  std::lock_guard lock(mu_);
  const auto borrowed = scheduler_->BorrowedJobs();
  nlohmann::json out = nlohmann::json::array();
  for (const auto& p : *projects) {
    if (!who.CanAccessProject(p.name)) continue;
    auto sharing = sharing_.find(p.name);
    double borrowed_gpus = 0;
    for (JobId id : borrowed) {
      auto it = jobs_.find(id);
      if (it != jobs_.end() && it->second.record.project == p.name) {
        borrowed_gpus += it->second.spec.resources.TotalMilli().value() * it->second.spec.tasks;
      }
    }
    const sched::ProjectPolicy policy =
        sharing == sharing_.end() ? sched::ProjectPolicy{} : sharing->second;
    const nlohmann::json sharing_json = sched::ProjectSharingJson(policy);
    out.push_back({{"name", p.name},
                   {"description", p.description},
                   {"sharing", sharing_json},
                   {"quota_gpus", sharing_json["gpus"]},
                   {"weight", policy.weight},
                   {"limit_gpus", sharing_json.value("limit_gpus", nlohmann::json(nullptr))},
                   {"running_gpus", static_cast<double>(scheduler_->ProjectUsage(p.name)) / 1000},
                   {"borrowed_gpus", borrowed_gpus / 1000},
                   {"fair_share_usage", scheduler_->fair_share().EffectiveUsage(p.name)}});
  }
  return out;
}

Result<nlohmann::json> Controller::SetProjectSharing(const std::string& project,
                                                     const nlohmann::json& json) {
  auto sharing = sched::ParseProjectSharing(json);
  if (!sharing.ok()) return sharing.status();
  const nlohmann::json normal = sched::ProjectSharingJson(*sharing);
  std::lock_guard lock(mu_);
  CORRAL_RETURN_IF_ERROR(store_.SetProjectSharing(project, normal.dump()));
  sharing_[project] = *sharing;
  CORRAL_RETURN_IF_ERROR(scheduler_->Reconfigure(SchedulerConfigLocked()));
  wake_ = true;
  return normal;
}

nlohmann::json Controller::PolicyView() {
  std::lock_guard lock(mu_);
  nlohmann::json out = {{"policy", sched::SchedulingPolicyJson(policy_)},
                        {"placement", config_.policy},
                        {"file", config_.policy_file}};
  out["file_error"] =
      policy_error_.empty() ? nlohmann::json(nullptr) : nlohmann::json(policy_error_);
  return out;
}

Result<std::string> Controller::LogPath(const Principal& who, JobId id, int task,
                                        const std::string& stream,
                                        std::optional<int64_t> generation) {
  if (stream != "stdout" && stream != "stderr") {
    return InvalidArgument("field 'stream': must be stdout or stderr");
  }
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  const int64_t current = record->restarts + 1;
  if (generation && *generation > current) {
    return NotFound("field 'generation': job " + std::to_string(id.value()) + " is at run " +
                    std::to_string(current) + "; there is no run " + std::to_string(*generation));
  }
  return config_.logs_dir + "/" + std::to_string(id.value()) + "/" + std::to_string(task) + "-g" +
         std::to_string(generation.value_or(current)) + "." + stream;
}

// --- Sessions --------------------------------------------------------------------------------

namespace {

// Sessions are personal: only the owner and admins see them (others get NotFound).
bool MaySeeSession(const Principal& who, const store::JobRecord& record) {
  return who.admin || who.name == record.user;
}

// Only the owner may use the proxy: apps are served on the server's origin, so whoever's
// browser opens one runs its JavaScript with access to every session that browser may reach.
bool MayUseSession(const Principal& who, const store::JobRecord& record) {
  return who.name == record.user;
}

std::string SessionName(JobId id) { return "session " + std::to_string(id.value()); }

// The stored record and spec of session `id` when `may` lets `who` at it; NotFound naming the
// session otherwise (also for jobs that are not sessions), so that others learn nothing.
Result<std::pair<store::JobRecord, JobSpec>> StoredSession(store::Store& store,
                                                           const Principal& who, JobId id,
                                                           bool (*may)(const Principal&,
                                                                       const store::JobRecord&)) {
  auto record = store.GetJob(id);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound) {
      return NotFound(SessionName(id) + " not found");
    }
    return record.status();
  }
  auto spec =
      ParseJobSpec(nlohmann::json::parse(record->spec_json, nullptr, false), SpecOrigin::kStored);
  if (!spec.ok() || !spec->session || !may(who, *record)) {
    return NotFound(SessionName(id) + " not found");
  }
  return std::make_pair(std::move(record).value(), std::move(spec).value());
}

// Where a session's app listens: its task's allocation "session": {"address", "port"}.
struct AppAddress {
  std::string address;
  int port = 0;
};
std::optional<AppAddress> AppAddressOf(const store::TaskRecord& task) {
  const auto& session = task.allocation.session;
  if (!session) return std::nullopt;
  return AppAddress{session->address, session->port};
}

// Apps asked at once by AskIdleSessionAppsLocked (each a thread for up to the probe's timeout).
constexpr size_t kAppQuestionsAtOnce = 16;

}  // namespace

Result<store::JobRecord> Controller::SubmitSession(const Principal& who, nlohmann::json spec) {
  if (!spec.is_object()) return InvalidArgument("job spec: must be a JSON object");
  if (!spec.contains("session")) spec["session"] = nlohmann::json::object();
  return Submit(who, spec);
}

Seconds Controller::IdleTimeoutOf(const JobSpec& spec) const {
  if (spec.session && spec.session->idle_timeout_s) return Seconds(*spec.session->idle_timeout_s);
  return config_.session_idle_timeout;
}

nlohmann::json Controller::SessionJsonLocked(const Principal& who, const store::JobRecord& record,
                                             const JobSpec& spec,
                                             const std::vector<store::TaskRecord>& tasks,
                                             const LiveJob* live) const {
  const store::JobRecord& current = live ? live->record : record;
  const nlohmann::json null(nullptr);
  nlohmann::json out = {
      {"id", record.id.value()},
      {"name", record.name},
      {"user", record.user},
      {"project", record.project},
      {"state", Name(current.state)},
      {"reason", record.reason},
      {"environment", spec.environment.empty() ? null : nlohmann::json(spec.environment)},
      {"path", model::SessionUrlPrefix(record.id.value())},
      {"idle_timeout_s", IdleTimeoutOf(spec).value()},
      {"submit_time", record.submit_time.value()},
      {"node", null},
      {"address", null},
      {"port", null},
      {"last_activity", null},
      {"idle_notice", null}};
  if (current.start_time) out["start_time"] = current.start_time->value();
  if (live && live->cancel_requested) out["stopping"] = true;
  for (const auto& t : tasks) {
    if (model::IsEnded(t.state)) continue;
    out["node"] = t.node;
    if (const auto& session = t.allocation.session) {
      out["address"] = session->address;
      out["port"] = session->port;
    }
  }
  if (live && current.state == JobState::kRunning) {
    out["last_activity"] = LastUse(ActivityOf(*live, clock_.Now())).value();
    if (live->idle_notice_at) {
      out["idle_notice"] = {
          {"time", live->idle_notice_at->value()},
          {"stops_at", (*live->idle_notice_at + config_.session_idle_warning).value()}};
    }
  }
  if (auto reason = scheduler_->PendingReasonOf(record.id)) {
    out["pending_reason"] = {{"code", reason->code}, {"message", reason->message}};
  }
  // The secret lets whoever holds it into the app directly: its owner only, not even admins.
  if (who.name == record.user && spec.session) out["token"] = spec.session->token;
  return out;
}

Result<nlohmann::json> Controller::SessionView(const Principal& who, JobId id) {
  auto stored = StoredSession(store_, who, id, MaySeeSession);
  if (!stored.ok()) return stored.status();
  const auto& [record, spec] = *stored;
  auto tasks = store_.TasksOfJob(id);
  if (!tasks.ok()) return tasks.status();
  std::vector<store::TaskRecord> run;  // the current run's
  for (const auto& t : *tasks) {
    if (t.generation == record.restarts + 1) run.push_back(t);
  }
  std::lock_guard lock(mu_);
  auto live = jobs_.find(id);
  if (live != jobs_.end())
    return SessionJsonLocked(who, record, spec, live->second.tasks, &live->second);
  return SessionJsonLocked(who, record, spec, run, nullptr);
}

nlohmann::json Controller::ListSessions(const Principal& who) {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [id, job] : jobs_) {
    if (!job.spec.session || job.record.user != who.name) continue;
    out.push_back(SessionJsonLocked(who, job.record, job.spec, job.tasks, &job));
  }
  return out;
}

Status Controller::StopSession(const Principal& who, JobId id) {
  auto view = SessionView(who, id);  // NotFound for anyone but its owner and admins
  if (!view.ok()) return view.status();
  Status s = Cancel(who, id);
  if (s.code() == StatusCode::kFailedPrecondition) {
    return FailedPrecondition(SessionName(id) + " already ended (" +
                              (*view)["state"].get<std::string>() + ")");
  }
  return s;
}

Result<Controller::SessionEndpoint> Controller::ProxyTarget(const Principal& who, JobId id) {
  {
    std::lock_guard lock(mu_);
    auto it = jobs_.find(id);
    if (it != jobs_.end()) {
      LiveJob& job = it->second;
      if (!job.spec.session || !MayUseSession(who, job.record)) {
        return NotFound(SessionName(id) + " not found");
      }
      SessionEndpoint endpoint;
      endpoint.state = job.record.state;
      endpoint.stopping = job.Stopping();
      if (!endpoint.Serving() || job.tasks.empty()) return endpoint;
      const std::optional<AppAddress> app = AppAddressOf(job.tasks[0]);
      if (!app) return Status(StatusCode::kInternal, SessionName(id) + " has no port");
      endpoint.address = app->address;
      endpoint.port = app->port;
      endpoint.token = job.spec.session->token;
      job.last_activity = clock_.Now();
      return endpoint;
    }
  }
  // Not live: ended, or not a job at all.
  auto stored = StoredSession(store_, who, id, MayUseSession);
  if (!stored.ok()) return stored.status();
  SessionEndpoint endpoint;
  endpoint.state = stored->first.state;
  return endpoint;
}

void Controller::NoteSessionUse(JobId id) {
  std::lock_guard lock(mu_);
  auto it = jobs_.find(id);
  if (it == jobs_.end() || !it->second.spec.session || it->second.Stopping() ||
      it->second.record.state != JobState::kRunning) {
    return;
  }
  it->second.last_activity = clock_.Now();
}

SessionActivity Controller::ActivityOf(const LiveJob& job, Seconds now) const {
  SessionActivity activity{job.last_activity, job.app_last_activity, std::nullopt};
  if (auto busy = gpu_monitor_.JobLastBusyMs(job.record.id, now.value() * 1000)) {
    activity.gpus_last_busy = Seconds(*busy / 1000);
  }
  return activity;
}

namespace {

bool IsRunningSession(const store::JobRecord& record, const JobSpec& spec, bool stopping) {
  return spec.session && record.state == JobState::kRunning && !stopping;
}

}  // namespace

void Controller::AskIdleSessionAppsLocked(std::unique_lock<std::mutex>& lock, Seconds now) {
  SessionAppProbe* const probe = config_.session_app_probe;
  if (probe == nullptr) return;
  struct Question {
    JobId job;
    int64_t allocation_id = 0;  // the run asked about
    SessionApp app;
  };
  std::vector<Question> questions;
  for (const auto& [id, job] : jobs_) {
    if (!IsRunningSession(job.record, job.spec, job.Stopping()) || job.tasks.empty()) continue;
    const IdlePolicy policy{IdleTimeoutOf(job.spec), config_.session_idle_warning};
    if (!AsksTheApp(NextSessionStep(ActivityOf(job, now), job.idle_notice_at, policy, now)))
      continue;
    const std::optional<AppAddress> app = AppAddressOf(job.tasks[0]);
    if (!app) continue;
    questions.push_back(
        {id,
         job.tasks[0].allocation_id,
         {app->address, app->port, model::SessionUrlPrefix(id.value()), job.spec.session->token}});
  }
  if (questions.empty()) return;

  std::vector<std::optional<Seconds>> said(questions.size());
  lock.unlock();  // heartbeats and the API go on while apps answer
  for (size_t first = 0; first < questions.size(); first += kAppQuestionsAtOnce) {
    const size_t end = std::min(questions.size(), first + kAppQuestionsAtOnce);
    std::vector<std::future<std::optional<Seconds>>> answers;
    for (size_t i = first; i < end; ++i) {
      auto ask = [probe, &app = questions[i].app] { return probe->LastActivity(app); };
      try {
        answers.push_back(std::async(std::launch::async, ask));
      } catch (const std::system_error&) {  // no thread to spare: ask on this one
        answers.push_back(std::async(std::launch::deferred, ask));
      }
    }
    for (size_t i = first; i < end; ++i) said[i] = answers[i - first].get();
  }
  lock.lock();

  for (size_t i = 0; i < questions.size(); ++i) {
    if (!said[i]) continue;  // no answer: nothing changes
    auto it = jobs_.find(questions[i].job);
    // It may have ended, or started again elsewhere, while its app was asked.
    if (it == jobs_.end() || it->second.tasks.empty() ||
        it->second.tasks[0].allocation_id != questions[i].allocation_id) {
      continue;
    }
    // An app's clock ahead of this one counts as "in use now", never as later than now.
    const Seconds used = std::min(*said[i], now);
    std::optional<Seconds>& known = it->second.app_last_activity;
    if (!known || used > *known) known = used;
  }
}

void Controller::CheckSessionsLocked(std::unique_lock<std::mutex>& lock) {
  // One `now` for the questions and the steps: a session is noticed or stopped only after its
  // app was asked.
  const Seconds now = clock_.Now();
  AskIdleSessionAppsLocked(lock, now);
  std::vector<JobId> running;
  for (const auto& [id, job] : jobs_) {
    if (IsRunningSession(job.record, job.spec, job.Stopping())) running.push_back(id);
  }
  for (JobId id : running) {
    LiveJob& job = jobs_.at(id);  // stopping one session never erases another
    const SessionActivity activity = ActivityOf(job, now);
    const IdlePolicy policy{IdleTimeoutOf(job.spec), config_.session_idle_warning};
    const std::string idle =
        "session idle for " + std::to_string(IdleFor(activity, now).value()) + " s";
    switch (NextSessionStep(activity, job.idle_notice_at, policy, now)) {
      case SessionStep::kNothing:
        break;
      case SessionStep::kNotice:
        // Recorded first: a notice the store did not take is given again at the next check.
        if (store_
                .AddJobEvent(id,
                             idle + ": stopping in " +
                                 std::to_string(config_.session_idle_warning.value()) +
                                 " s unless used",
                             now)
                .ok()) {
          job.idle_notice_at = now;
        }
        break;
      case SessionStep::kInUseAgain:
        if (store_.AddJobEvent(id, "session in use again", now).ok()) job.idle_notice_at.reset();
        break;
      case SessionStep::kStop:
        // On a store error nothing changed: the next check tries again.
        (void)RequestCancelLocked(job, idle);  // may erase `job`
        break;
    }
  }
}

// --- Scheduling ------------------------------------------------------------------------------

void Controller::ScheduleLocked() {
  const Seconds now = clock_.Now();
  ++passes_;
  sched::Decisions decisions = scheduler_->Schedule(now);
  for (const sched::Preemption& p : decisions.preemptions) PreemptLocked(p);
  for (const sched::JobStart& start : decisions.starts) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    std::vector<store::TaskAssignment> gang;
    for (size_t i = 0; i < start.tasks.size(); ++i) {
      gang.push_back({static_cast<int>(i), scheduler_->state().node(start.tasks[i].node).name,
                      AllocationOf(start.tasks[i])});
    }
    Status ports = Status::Ok();
    if (IsDistributed(job.spec)) ports = AddRendezvousLocked(job, gang);
    if (ports.ok() && job.spec.session) ports = AddSessionPortLocked(job, gang);
    // Ids, rows and the job's move to starting in one commit, before any agent hears of it; on
    // failure nothing was written and the job goes back to the queue.
    Result<std::vector<store::TaskRecord>> tasks =
        ports.ok() ? store_.AssignGang(job.record.id, gang, now) : ports;
    if (!tasks.ok()) {
      ports_.Release(job.record.id);
      (void)scheduler_->Finish(job.record.id);
      (void)scheduler_->Submit(ModelJobOf(job));
      continue;
    }
    job.record.state = JobState::kStarting;
    job.tasks = std::move(tasks).value();
    IndexAllocationsLocked(job);
    NotifyNodesLocked(job);
  }
}

void Controller::RestoreRendezvousLocked(const LiveJob& job) {
  if (job.tasks.empty()) return;
  const model::Allocation& allocation = job.tasks[0].allocation;
  if (allocation.session) {
    // Stored by this server's predecessor; a failure only loses the protection.
    (void)ports_.Restore(job.record.id, {job.tasks[0].node}, allocation.session->port, 1);
    return;
  }
  if (!allocation.rendezvous) return;
  std::vector<std::string> nodes;
  for (const auto& t : job.tasks) nodes.push_back(t.node);
  // Stored by this server's predecessor, so valid; a failure only loses the protection.
  (void)ports_.Restore(job.record.id, nodes, allocation.rendezvous->port, PortsOf(job.spec));
}

std::string Controller::NodeAddressLocked(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() || it->second.inventory.address.empty() ? node
                                                                    : it->second.inventory.address;
}

Status Controller::AddSessionPortLocked(const LiveJob& job,
                                        std::vector<store::TaskAssignment>& tasks) {
  if (tasks.size() != 1) return InvalidArgument("a session has one task");
  store::TaskAssignment& t = tasks[0];
  // The same pool as rendezvous ports: two live jobs on one node never get the same port.
  auto port = ports_.Reserve(job.record.id, {t.node}, 1);
  if (!port.ok()) return port.status();
  t.allocation.session = model::SessionEndpoint{NodeAddressLocked(t.node), *port};
  return Status::Ok();
}

Status Controller::AddRendezvousLocked(const LiveJob& job,
                                       std::vector<store::TaskAssignment>& tasks) {
  std::vector<std::string> nodes;
  model::Rendezvous rendezvous;
  for (const auto& t : tasks) {
    nodes.push_back(t.node);
    rendezvous.hosts.push_back(NodeAddressLocked(t.node));
  }
  auto port = ports_.Reserve(job.record.id, nodes, PortsOf(job.spec));
  if (!port.ok()) return port.status();
  rendezvous.master_addr = rendezvous.hosts[0];
  rendezvous.port = *port;
  for (auto& t : tasks) t.allocation.rendezvous = rendezvous;
  return Status::Ok();
}

void Controller::PreemptLocked(const sched::Preemption& p) {
  auto victim_it = jobs_.find(p.job);
  auto for_it = jobs_.find(p.for_job);
  if (victim_it == jobs_.end()) return;
  LiveJob& victim = victim_it->second;
  const Seconds now = clock_.Now();
  // Its tasks that may run hold the GPUs the reclaiming job got: it waits for them.
  for (const auto& t : victim.tasks) {
    if (model::IsEnded(t.state)) continue;
    if (t.state == TaskState::kAssigned && !victim.launched.count(t.allocation_id)) continue;
    if (for_it != jobs_.end()) {
      for_it->second.waits_for.insert({t.node, t.allocation_id});
      waiting_on_node_[t.node].insert(p.for_job);
    }
  }
  if (victim.Stopping()) {
    // Already being cancelled or failed: that stop goes on (its tasks get kills, its end or
    // requeue follows their reports); the scheduler must not queue it a second time.
    (void)scheduler_->Cancel(victim.record.id);
    return;
  }
  // The scheduler queued it again already; the store follows. (On a store error the job is
  // pending here and running there: its next assignment is refused and retried.)
  (void)store_.TransitionJob(victim.record.id, victim.record.state, JobState::kPending, p.reason,
                             now);
  for (auto& t : victim.tasks) {
    if (model::IsEnded(t.state)) continue;
    t.state = TaskState::kKilled;  // being killed: its node's next heartbeat gets the kill
    t.end_time = now;
    (void)store_.UpdateTask(t);
  }
  NotifyNodesLocked(victim);  // their next heartbeats report the tasks, now stale: killed
  ForgetRunLocked(victim);
  ++victim.preemptions;  // preemptions do not use up max_restarts
}

void Controller::ForgetRunLocked(LiveJob& job) {
  ForgetAllocationsLocked(job);
  job.tasks.clear();
  job.launched.clear();
  job.end_notes.clear();
  job.record.state = JobState::kPending;
  ++job.record.restarts;        // the next run is a new generation
  job.gpus_idle_noted = false;  // its GPUs are another run's
}

void Controller::ReleaseWaitsLocked(const std::string& node,
                                    const std::function<bool(int64_t)>& stopped) {
  auto on = waiting_on_node_.find(node);
  if (on == waiting_on_node_.end()) return;
  for (JobId id : std::set<JobId>(on->second)) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      on->second.erase(id);
      continue;
    }
    LiveJob& job = it->second;
    bool still = false;
    for (auto w = job.waits_for.begin(); w != job.waits_for.end();) {
      if (w->first == node && stopped(w->second)) {
        w = job.waits_for.erase(w);
      } else {
        still |= w->first == node;
        ++w;
      }
    }
    if (!still) on->second.erase(id);
    if (job.waits_for.empty()) NotifyNodesLocked(job);  // its launches may go out now
  }
  if (on->second.empty()) waiting_on_node_.erase(on);
}

void Controller::NotifyNodesLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    auto n = nodes_.find(t.node);
    if (n != nodes_.end()) ++n->second.version;
  }
  changed_.notify_all();
}

model::Job Controller::ModelJobOf(const LiveJob& job) {
  model::Job out = ToModelJob(job.spec, job.record);
  // Every agent offers the process runtime: only environments that cannot use it constrain.
  if (job.environment) {
    std::vector<std::string> runtimes = job.environment->spec.Runtimes();
    if (std::find(runtimes.begin(), runtimes.end(), model::kProcessRuntime) == runtimes.end()) {
      out.resources.runtimes = std::move(runtimes);
    }
  }
  return out;
}

Status Controller::EndJobLocked(LiveJob& job, JobState state, const std::string& reason) {
  const JobId id = job.record.id;
  const Seconds now = clock_.Now();
  CORRAL_RETURN_IF_ERROR(store_.TransitionJob(id, job.record.state, state, reason, now));
  if (state == JobState::kSucceeded && job.record.start_time) {
    predictor_.Observe(predict::RuntimePredictor::FeaturesOf(ToModelJob(job.spec, job.record)),
                       Seconds(now.value() - job.record.start_time->value()));
    scheduler_->NoteEstimatesChanged();
  }
  ForgetJobLocked(job);
  return Status::Ok();
}

void Controller::ForgetJobLocked(LiveJob& job) {
  const JobId id = job.record.id;
  if (job.record.state == JobState::kPending) {
    (void)scheduler_->Cancel(id);
  } else {
    (void)scheduler_->Finish(id);  // releases the allocations of the started job
  }
  ForgetAllocationsLocked(job);
  unsettled_.erase(id);
  jobs_.erase(id);
  // Its GPUs, or its place in the queue, are free: the next scheduling round should not wait
  // for the loop's tick (the caller notifies changed_).
  wake_ = true;
}

void Controller::IndexAllocationsLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    job_of_allocation_[t.allocation_id] = job.record.id;
    jobs_on_node_[t.node].insert(job.record.id);
  }
}

void Controller::ForgetAllocationsLocked(const LiveJob& job) {
  constexpr size_t kRecentAllocations = 10000;
  ports_.Release(job.record.id);
  for (const auto& t : job.tasks) {
    job_of_allocation_.erase(t.allocation_id);
    if (auto on = jobs_on_node_.find(t.node); on != jobs_on_node_.end()) {
      on->second.erase(job.record.id);
      if (on->second.empty()) jobs_on_node_.erase(on);
    }
    ended_allocations_[t.allocation_id] = {job.record.id, t.task_index, t.generation, t.node};
  }
  while (ended_allocations_.size() > kRecentAllocations) {
    ended_allocations_.erase(ended_allocations_.begin());
  }
}

Status Controller::RequeueOrEndLocked(LiveJob& job, JobState end_state, const std::string& reason) {
  if (job.record.restarts - job.preemptions >= job.spec.max_restarts || job.cancel_requested) {
    return EndJobLocked(job, end_state, reason);
  }
  const JobId id = job.record.id;
  const std::string why = reason + "; requeued (restart " +
                          std::to_string(job.record.restarts + 1) + " of " +
                          std::to_string(job.spec.max_restarts) + ")";
  CORRAL_RETURN_IF_ERROR(
      store_.TransitionJob(id, job.record.state, JobState::kPending, why, clock_.Now()));
  (void)scheduler_->Finish(id);
  ForgetRunLocked(job);
  job.failing = false;
  job.primary_done = false;
  job.failure.clear();
  job.failed_state = JobState::kFailed;
  unsettled_.erase(id);
  (void)scheduler_->Submit(ModelJobOf(job));
  wake_ = true;
  return Status::Ok();
}

Status Controller::UpdateTaskLocked(LiveJob& job, const store::TaskRecord& updated) {
  CORRAL_RETURN_IF_ERROR(store_.UpdateTask(updated));
  for (auto& t : job.tasks) {
    if (t.allocation_id == updated.allocation_id) t = updated;
  }
  return Status::Ok();
}

void Controller::StopUnlaunchedTasksLocked(LiveJob& job) {
  for (const auto& t : job.tasks) {
    if (t.state != TaskState::kAssigned || job.launched.count(t.allocation_id)) continue;
    store::TaskRecord stopped = t;
    stopped.state = TaskState::kKilled;
    stopped.end_time = clock_.Now();
    // On a store error the task stays assigned (and is never launched: its job is stopping);
    // the next evaluation tries again.
    if (!UpdateTaskLocked(job, stopped).ok()) unsettled_.insert(job.record.id);
  }
}

void Controller::EvaluateJobLocked(LiveJob& job) {
  const JobId id = job.record.id;  // `job` may be erased below
  // With mpi, part 0 runs mpirun and the other parts only hold their nodes: part 0's good end is
  // the job's, however the holders end (decided first, so that a holder stopped afterwards, or
  // seen first after a server restart, does not count as a failure).
  if (!job.Stopping() && job.spec.launcher == model::Launcher::kMpi) {
    for (const auto& t : job.tasks) {
      if (t.task_index == 0 && model::IsEnded(t.state) && !TaskFailed(t)) job.primary_done = true;
    }
  }
  if (!job.Stopping()) {
    // The failed task that explains the gang's end: after a restart the parts the server had
    // stopped because of it look failed too (killed), so one it did not stop comes first.
    const store::TaskRecord* failed = nullptr;
    for (const auto& t : job.tasks) {
      if (!model::IsEnded(t.state) || !TaskFailed(t)) continue;
      if (!failed || (failed->end_cause == model::TaskEndCause::kStopped &&
                      t.end_cause != model::TaskEndCause::kStopped)) {
        failed = &t;
      }
    }
    if (failed) {
      job.failing = true;
      auto note = job.end_notes.find(failed->allocation_id);
      job.failure = DescribeEnd(*failed, note == job.end_notes.end() ? "" : note->second);
      // Its agent's typed cause, never the note: timeout, oom or failed.
      job.failed_state = model::FailedStateFor(failed->end_cause);
    }
  }
  if (job.Stopping() && job.record.state != JobState::kPending) {
    StopUnlaunchedTasksLocked(job);
    NotifyNodesLocked(job);  // the rest of the gang is stopped
  }
  bool all_ended = !job.tasks.empty();
  bool all_running = !job.tasks.empty();
  for (const auto& t : job.tasks) {
    all_ended &= model::IsEnded(t.state);
    all_running &= t.state == TaskState::kRunning;
  }
  Status settled = Status::Ok();
  if (all_running && job.record.state == JobState::kStarting) {
    settled = store_.TransitionJob(job.record.id, JobState::kStarting, JobState::kRunning,
                                   "all tasks running", clock_.Now());
    if (settled.ok()) {
      job.record.state = JobState::kRunning;
      job.record.start_time = clock_.Now();
      job.last_activity = clock_.Now();  // a session's start counts as use
      job.app_last_activity.reset();     // what the app of an earlier run said
      job.idle_notice_at.reset();
    }
  }
  if (all_ended) {
    if (job.cancel_requested) {
      settled = EndJobLocked(job, JobState::kCancelled, job.failure);
    } else if (job.failing) {
      settled = RequeueOrEndLocked(job, job.failed_state, job.failure);
    } else if (job.primary_done) {
      settled = EndJobLocked(job, JobState::kSucceeded, "task 0 (mpirun) exited with code 0");
    } else {
      settled = EndJobLocked(job, JobState::kSucceeded, "all tasks exited with code 0");
    }
  }
  if (!settled.ok()) unsettled_.insert(id);
}

// --- Nodes and agents ------------------------------------------------------------------------

namespace {

// True when two node inventories differ at most in the CPU and memory offered.
bool OnlyResourcesDiffer(protocol::NodeInventory a, protocol::NodeInventory b) {
  a.cpu = b.cpu;
  a.memory = b.memory;
  return a == b;
}

}  // namespace

Status Controller::AddNodeToSchedulerLocked(const std::string& name,
                                            const protocol::NodeInventory& inventory) {
  auto node = NodeFromInventory(name, inventory);
  if (!node.ok()) return node.status();
  auto added = scheduler_->AddNode(*node);
  return added.ok() ? Status::Ok() : added.status();
}

Result<protocol::RegisterAnswer> Controller::RegisterNode(
    const protocol::RegisterRequest& request) {
  const std::string& name = request.name;
  const protocol::NodeInventory& inventory = request.inventory;
  // Agents use the name as a path component on their host: refused here too, so that no agent
  // of another version can register one that today's agents could not use.
  if (Status valid = model::ValidateNodeName(name); !valid.ok()) {
    return InvalidArgument("field 'name': " + valid.message());
  }
  CORRAL_RETURN_IF_ERROR(NodeFromInventory(name, inventory).status());
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  const std::string id_hash = HashToken(request.node_id);
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  bool live = it != nodes_.end() && it->second.state != NodeState::kLost;
  if (live && !it->second.node_id_hash.empty() && !SecureEquals(it->second.node_id_hash, id_hash)) {
    return AlreadyExists("node name '" + name +
                         "' is held by another agent (a different node id); stop that agent, or "
                         "wait until its node is lost (" +
                         std::to_string(config_.node_timeout.value()) + " s without heartbeat)");
  }
  if (live && it->second.inventory != inventory &&
      OnlyResourcesDiffer(it->second.inventory, inventory)) {
    // Another --cpus or --memory-mib (or an upgrade that declares more CPU for fake GPUs): the
    // node keeps its tasks when they still fit.
    Result<model::Node> resized = NodeFromInventory(name, inventory);
    if (resized.ok() && scheduler_->ResizeNode(name, resized->cpu, resized->memory).ok()) {
      it->second.inventory = inventory;
    }
  }
  if (live && it->second.inventory != inventory) {
    LoseNodeLocked(name, it->second, "node " + name + " re-registered with another inventory");
    // (LoseNodeLocked forgets its GPU readings: the new inventory may have fewer GPUs.)
    live = false;
  }
  if (!live) CORRAL_RETURN_IF_ERROR(AddNodeToSchedulerLocked(name, inventory));
  LiveNode& node = nodes_[name];
  if (!live) {
    // A cordoned or drained node stays so across an inventory change.
    if (node.state != NodeState::kCordoned && node.state != NodeState::kDrained) {
      node.state = NodeState::kReady;
    }
    if (node.state != NodeState::kReady) (void)scheduler_->SetSchedulable(name, false);
    node.inventory = inventory;
  }
  node.node_id_hash = id_hash;
  node.token_hash = HashToken(*token);
  node.reports = {};  // a new agent process numbers its reports from 1 again
  node.last_heartbeat = clock_.Now();
  ++node.version;
  store::NodeRecord record{name, protocol::ToJson(node.inventory).dump(), node.state,
                           node.last_heartbeat, node.node_id_hash};
  CORRAL_RETURN_IF_ERROR(store_.UpsertNode(record));
  wake_ = true;
  lock.unlock();
  changed_.notify_all();
  protocol::RegisterAnswer answer;
  answer.node_token = *token;
  answer.cluster_id = store_.ClusterId();
  answer.heartbeat_interval_s = config_.heartbeat_interval_s;
  return answer;
}

bool Controller::AuthenticateNode(const std::string& name, const std::string& token) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  return it != nodes_.end() && !it->second.token_hash.empty() &&
         SecureEquals(it->second.token_hash, HashToken(token));
}

void Controller::CheckNodesLocked() {
  const Seconds now = clock_.Now();
  for (auto& [name, node] : nodes_) {
    if (node.state == NodeState::kLost || now - node.last_heartbeat <= config_.node_timeout) {
      continue;
    }
    LoseNodeLocked(name, node,
                   "node " + name + " lost (no heartbeat for " +
                       std::to_string(config_.node_timeout.value()) + " s)");
  }
}

void Controller::LoseNodeLocked(const std::string& name, LiveNode& node,
                                const std::string& reason) {
  const Seconds now = clock_.Now();
  node.state = NodeState::kLost;
  gpu_monitor_.ForgetNode(name);  // its GPUs' last readings would show jobs that are gone
  node.token_hash.clear();        // it must register again; its stale tasks are then killed
  (void)store_.UpsertNode({name, protocol::ToJson(node.inventory).dump(), NodeState::kLost,
                           node.last_heartbeat, node.node_id_hash});
  ReleaseWaitsLocked(name, [](int64_t) { return true; });  // its tasks are gone with it
  auto affected = scheduler_->RemoveNode(name);
  if (!affected.ok()) return;
  for (JobId id : *affected) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    for (auto& t : job.tasks) {
      if (model::IsEnded(t.state) || t.node != name) continue;
      // Memory first: the node and its GPUs are gone whatever the store says. A task left
      // running in the store is settled again after a restart (its node is lost then too).
      t.state = TaskState::kLost;
      t.end_time = now;
      (void)store_.UpdateTask(t);
    }
    // The gang's tasks on other nodes are stopped (their GPUs stay taken until their nodes say
    // they ended); then the job is requeued or ends lost.
    if (!job.Stopping()) {
      job.failing = true;
      job.failure = reason;
      job.failed_state = JobState::kLost;
    }
    EvaluateJobLocked(job);
  }
}

Status Controller::SetNodeState(const std::string& name, const std::string& action) {
  std::lock_guard lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end()) return NotFound("node '" + name + "' not found");
  if (action != "cordon" && action != "uncordon" && action != "drain") {
    return InvalidArgument("action must be cordon, uncordon or drain");
  }
  LiveNode& node = it->second;
  if (node.state == NodeState::kLost) return FailedPrecondition("node '" + name + "' is lost");
  const bool schedulable = action == "uncordon";
  CORRAL_RETURN_IF_ERROR(scheduler_->SetSchedulable(name, schedulable));
  node.state = action == "uncordon"
                   ? NodeState::kReady
                   : (action == "drain" ? NodeState::kDrained : NodeState::kCordoned);
  wake_ = true;
  return store_.UpsertNode({name, protocol::ToJson(node.inventory).dump(), node.state,
                            node.last_heartbeat, node.node_id_hash});
}

nlohmann::json Controller::Nodes() {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  const auto& state = scheduler_->state();
  // node -> GPU index -> the tasks on it, built once (not per node) from the live jobs.
  std::map<std::string, std::map<int, nlohmann::json>> on_gpu;
  for (const auto& [id, job] : jobs_) {
    if (job.record.state != JobState::kStarting && job.record.state != JobState::kRunning) {
      continue;
    }
    for (const auto& t : job.tasks) {
      for (const model::GpuShare& g : t.allocation.gpus) {
        nlohmann::json& list = on_gpu[t.node][g.index];
        list.push_back({{"job", id.value()},
                        {"task", t.task_index},
                        {"user", job.record.user},
                        {"project", job.record.project},
                        {"milli", g.milli.value()}});
      }
    }
  }
  for (const auto& [name, node] : nodes_) {
    nlohmann::json row = {{"name", name},
                          {"state", Name(node.state)},
                          {"last_heartbeat", node.last_heartbeat.value()},
                          {"gpu_model", node.inventory.gpu_model},
                          {"gpus", node.inventory.gpus.size()},
                          {"cpu_milli", node.inventory.cpu.value()},
                          {"memory_mib", node.inventory.memory.value()},
                          {"labels", node.inventory.labels},
                          {"runtimes", node.inventory.runtimes}};
    if (!node.inventory.container_engine.empty()) {
      row["container_engine"] = node.inventory.container_engine;
    }
    if (!node.gpu_metrics_error.empty()) row["gpu_metrics_error"] = node.gpu_metrics_error;
    const sched::NodeIndex n = state.FindNode(name);
    if (n >= 0) {
      row["gpu_free_milli"] = state.node(n).gpu_free;
      row["cpu_free_milli"] = state.node(n).cpu_free;
      row["memory_free_mib"] = state.node(n).memory_free;
    }
    nlohmann::json gpu_tasks = nlohmann::json::array();
    const auto tasks = on_gpu.find(name);
    for (size_t i = 0; i < row["gpus"].get<size_t>(); ++i) {
      nlohmann::json list = nlohmann::json::array();
      if (tasks != on_gpu.end()) {
        if (auto it = tasks->second.find(static_cast<int>(i)); it != tasks->second.end()) {
          list = it->second;
        }
      }
      gpu_tasks.push_back(std::move(list));
    }
    row["gpu_tasks"] = std::move(gpu_tasks);
    out.push_back(row);
  }
  return out;
}

nlohmann::json Controller::ClusterSummary() {
  std::lock_guard lock(mu_);
  return ClusterSummaryLocked();
}

void Controller::RecordSummaryLocked() {
  const Seconds now = clock_.Now();
  if (now < next_summary_at_) return;
  next_summary_at_ = now + Seconds(60);
  summary_history_.push_back(ClusterSummaryLocked());
  while (summary_history_.size() > static_cast<size_t>(kSummaryHistoryMinutes)) {
    summary_history_.pop_front();
  }
}

nlohmann::json Controller::SummaryHistory(Seconds since) {
  std::lock_guard lock(mu_);
  nlohmann::json out = nlohmann::json::array();
  for (const nlohmann::json& s : summary_history_) {
    if (s.value("time", int64_t{0}) >= since.value()) out.push_back(s);
  }
  return out;
}

nlohmann::json Controller::ClusterSummaryLocked() {
  const auto& state = scheduler_->state();
  int64_t nodes = 0, ready = 0, gpus = 0, free_milli = 0;
  for (const auto& [name, node] : nodes_) {
    // Capacity is what the cluster has now: a lost node's GPUs are not in it (as for capacity
    // planning, LiveNodes()).
    if (node.state == NodeState::kLost) continue;
    ++nodes;
    ready += node.state == NodeState::kReady;
    const size_t count = node.inventory.gpus.size();
    gpus += static_cast<int64_t>(count);
    const sched::NodeIndex n = state.FindNode(name);
    if (n < 0) {
      free_milli += static_cast<int64_t>(count) * 1000;
      continue;
    }
    for (int32_t f : state.node(n).gpu_free) free_milli += f;
  }
  int64_t pending = 0, starting = 0, running = 0;
  for (const auto& [id, job] : jobs_) {
    pending += job.record.state == JobState::kPending;
    starting += job.record.state == JobState::kStarting;
    running += job.record.state == JobState::kRunning;
  }
  return {{"time", clock_.Now().value()},
          {"nodes", nodes},
          {"nodes_ready", ready},
          {"gpus", gpus},
          {"gpus_allocated", static_cast<double>(gpus * 1000 - free_milli) / 1000},
          {"gpus_used", gpu_monitor_.UsedGpus()},
          {"jobs_pending", pending},
          {"jobs_starting", starting},
          {"jobs_running", running}};
}

protocol::TaskLaunch Controller::LaunchFor(const LiveJob& job, const store::TaskRecord& t) const {
  const model::Allocation& a = t.allocation;
  protocol::TaskLaunch launch;
  for (const model::GpuShare& g : a.gpus) {
    launch.gpus.push_back(g.index);
    launch.gpu_milli = g.milli;  // a task's GPUs are all whole, or it has one share
  }
  launch.job_id = job.record.id;
  launch.task_index = t.task_index;
  launch.tasks = job.spec.tasks;
  launch.key = {protocol::AllocationId(t.allocation_id), t.generation};
  launch.argv = job.spec.command;
  launch.shell = job.spec.shell;
  launch.workdir = job.spec.workdir;
  launch.env = job.spec.env;
  launch.cpu = a.cpu;
  launch.memory = a.memory;
  launch.time_limit = Seconds(job.spec.time_limit_s);
  launch.user = job.record.user;
  launch.project = job.record.project;
  launch.array_index = job.record.array_index;
  if (job.environment) launch.environment = LaunchEnvironmentOf(*job.environment);
  if (job.spec.session && a.session) {
    // The agent sets the session variables from this (protocol::LaunchSession).
    launch.session = protocol::LaunchSession{
        a.session->port, model::SessionUrlPrefix(job.record.id.value()), job.spec.session->token};
  }
  if (a.rendezvous) {
    launch.distributed = protocol::Distributed{
        job.spec.launcher,         job.spec.procs_per_node, t.task_index,        job.spec.tasks,
        a.rendezvous->master_addr, a.rendezvous->port,      a.rendezvous->hosts,
    };
  }
  return launch;
}

protocol::ReportAnswer Controller::ResponseForLocked(const std::string& name) {
  protocol::ReportAnswer answer;
  answer.heartbeat_interval_s = config_.heartbeat_interval_s;
  static const std::set<int64_t> kNoneStarting;
  auto node = nodes_.find(name);
  const std::set<int64_t>& starting =
      node == nodes_.end() ? kNoneStarting : node->second.reports.starting;
  // Only the jobs with tasks on this node: a heartbeat costs O(the node's tasks), not O(jobs).
  static const std::set<JobId> kNone;
  auto on = jobs_on_node_.find(name);
  for (JobId id : on == jobs_on_node_.end() ? kNone : on->second) {
    LiveJob& job = jobs_.at(id);
    const bool stopping = job.Stopping();
    const bool held = !job.waits_for.empty();  // preempted tasks still hold its GPUs
    for (const auto& t : job.tasks) {
      if (t.node != name) continue;
      // Not a launch the agent has accepted and is starting: it would only be sent back.
      if (!stopping && !held && t.state == TaskState::kAssigned &&
          !starting.count(t.allocation_id)) {
        answer.run.push_back(LaunchFor(job, t));
        job.launched.insert(t.allocation_id);
      }
      // A launch that went out may be running without a report yet: stop it too.
      if (stopping && !model::IsEnded(t.state)) {
        answer.kill.push_back({{protocol::AllocationId(t.allocation_id), t.generation},
                               config_.kill_grace,
                               job.failure});
      }
    }
  }
  return answer;
}

Status Controller::ApplyTaskReportLocked(const std::string& node, const protocol::TaskStatus& s,
                                         std::vector<protocol::StopOrder>& kills) {
  const int64_t alloc = s.key.allocation.value();
  const int64_t generation = s.key.generation;
  const bool running = s.state == protocol::TaskState::kRunning;
  auto stale = [&](const std::string& why) {
    if (running) kills.push_back({s.key, config_.kill_grace, why});
  };
  auto owner = job_of_allocation_.find(alloc);
  if (owner == job_of_allocation_.end()) {
    stale("stale task: not assigned here any more");
    return Status::Ok();
  }
  LiveJob& job = jobs_.at(owner->second);
  auto task = std::find_if(job.tasks.begin(), job.tasks.end(),
                           [&](const auto& t) { return t.allocation_id == alloc; });
  if (task == job.tasks.end() || task->generation != generation || task->node != node) {
    stale("stale generation");
    return Status::Ok();
  }
  if (model::IsEnded(task->state)) {
    if (running) stale("task already ended on the server");
    return Status::Ok();
  }
  store::TaskRecord updated = *task;
  if (running) {
    if (task->state != TaskState::kAssigned) return Status::Ok();
    updated.state = TaskState::kRunning;
    updated.start_time = s.started_at.value() > 0 ? s.started_at : clock_.Now();
  } else {
    // exited | killed | failed_to_start | lost
    updated.state =
        s.state == protocol::TaskState::kExited
            ? TaskState::kExited
            : (s.state == protocol::TaskState::kLost ? TaskState::kLost : TaskState::kKilled);
    // Why it ended, as its agent saw it (an older agent says none).
    updated.end_cause = s.end_cause;
    if (s.exit_code) updated.exit_code = s.exit_code;
    if (s.signal) updated.signal = s.signal;
    if (s.state == protocol::TaskState::kFailedToStart && !updated.exit_code) {
      updated.exit_code = 127;
    }
    updated.end_time = s.ended_at.value_or(clock_.Now());
    if (!s.message.empty()) {
      constexpr size_t kMaxNote = 500;
      job.end_notes[alloc] = TruncateUtf8(s.message, kMaxNote);
    }
  }
  CORRAL_RETURN_IF_ERROR(UpdateTaskLocked(job, updated));
  EvaluateJobLocked(job);
  return Status::Ok();
}

Status Controller::ReconcileUnreportedLocked(const std::string& node,
                                             const std::set<int64_t>& reported) {
  auto on = jobs_on_node_.find(node);
  if (on == jobs_on_node_.end()) return Status::Ok();
  const std::vector<JobId> ids(on->second.begin(), on->second.end());  // evaluation may erase
  for (JobId id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    bool changed = false;
    for (const store::TaskRecord& t : std::vector<store::TaskRecord>(job.tasks)) {
      if (t.node != node || reported.count(t.allocation_id)) continue;
      const bool launched = job.launched.count(t.allocation_id) > 0;
      if (t.state == TaskState::kAssigned && launched && !job.Stopping()) {
        // The answer was lost; this heartbeat's answer carries the launch again (and marks it
        // launched again). Only a stopping job's launch is settled here.
        continue;
      }
      if (t.state != TaskState::kRunning && !(t.state == TaskState::kAssigned && launched)) {
        continue;
      }
      store::TaskRecord ended = t;
      // A running task the agent no longer knows is lost; a launch that never started, of a
      // job being stopped, is stopped.
      ended.state = t.state == TaskState::kRunning ? TaskState::kLost : TaskState::kKilled;
      ended.end_time = clock_.Now();
      CORRAL_RETURN_IF_ERROR(UpdateTaskLocked(job, ended));
      changed = true;
    }
    if (changed) EvaluateJobLocked(job);
  }
  return Status::Ok();
}

void Controller::WriteLogLocked(const std::string& node, const protocol::LogChunk& chunk) {
  const int64_t alloc = chunk.key.allocation.value();
  const int64_t generation = chunk.key.generation;
  const std::string stream = protocol::LogStreamName(chunk.stream);
  if (config_.logs_dir.empty()) return;
  // The target comes from the server's own records, never from the chunk (no path from input).
  std::optional<LogTarget> target;
  if (auto owner = job_of_allocation_.find(alloc); owner != job_of_allocation_.end()) {
    const LiveJob& job = jobs_.at(owner->second);
    for (const auto& t : job.tasks) {
      if (t.allocation_id == alloc && t.node == node) {
        target = LogTarget{job.record.id, t.task_index, t.generation, t.node};
      }
    }
  } else if (auto ended = ended_allocations_.find(alloc);
             ended != ended_allocations_.end() && ended->second.node == node) {
    target = ended->second;
  }
  if (!target || target->generation != generation) return;
  const std::string& data = chunk.data;
  const int64_t offset = chunk.offset;  // >= 0 (the codec)
  const std::string dir = config_.logs_dir + "/" + std::to_string(target->job.value());
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  const std::string path = dir + "/" + std::to_string(target->task_index) + "-g" +
                           std::to_string(target->generation) + "." + stream;
  const int fd = ::open(path.c_str(), O_WRONLY | O_CREAT | O_CLOEXEC, 0640);
  if (fd < 0) return;
  // Chunks arrive in order from one agent: never leave a hole (no sparse files from bad input).
  if (offset > ::lseek(fd, 0, SEEK_END)) {
    ::close(fd);
    return;
  }
  // Written at the agent's offset: a chunk sent twice lands on the same bytes.
  (void)::pwrite(fd, data.data(), data.size(), offset);
  ::close(fd);
}

int Controller::WaitingHeartbeats() {
  std::lock_guard lock(mu_);
  return waiting_heartbeats_;
}

std::map<int64_t, GpuHolder> Controller::GpuHoldersLocked(const std::string& node,
                                                          const std::vector<ReportedGpu>& gpus) {
  std::map<int64_t, GpuHolder> holders;
  for (const ReportedGpu& g : gpus) {
    for (int64_t allocation : g.allocations) {
      auto job_id = job_of_allocation_.find(allocation);
      if (job_id == job_of_allocation_.end()) continue;
      auto job = jobs_.find(job_id->second);
      if (job == jobs_.end()) continue;
      const LiveJob& j = job->second;
      const bool here = std::any_of(j.tasks.begin(), j.tasks.end(), [&](const auto& t) {
        return t.allocation_id == allocation && t.node == node;
      });
      if (!here) continue;  // an agent may speak only for its own tasks
      const model::TaskResources& r = j.spec.resources;
      holders[allocation] = GpuHolder{j.record.id, j.record.user, j.record.project,
                                      r.gpu_milli.value() / 1000.0, j.spec.session.has_value()};
    }
  }
  return holders;
}

std::vector<model::Node> Controller::LiveNodes() {
  std::lock_guard lock(mu_);
  std::vector<model::Node> out;
  for (const auto& [name, node] : nodes_) {
    if (node.state == NodeState::kLost) continue;
    if (auto n = NodeFromInventory(name, node.inventory); n.ok()) out.push_back(std::move(*n));
  }
  return out;
}

int64_t Controller::RejectedGpuReports() { return rejected_gpu_reports_.load(); }

Result<protocol::ReportAnswer> Controller::Heartbeat(const std::string& name,
                                                     const protocol::Report& report) {
  // GPU metrics are an aside: a malformed report of them (refused by the codec) is counted and
  // dropped, and the task reports (which must be acknowledged) go on.
  if (!report.gpu_metrics_error.empty()) ++rejected_gpu_reports_;
  const int wait_ms = std::clamp(report.wait_ms, 0, protocol::kMaxWaitMs);
  std::set<int64_t> starting;
  for (const protocol::TaskKey& k : report.starting) starting.insert(k.allocation.value());
  std::unique_lock lock(mu_);
  auto it = nodes_.find(name);
  if (it == nodes_.end() || it->second.state == NodeState::kLost) {
    return NotFound("node '" + name + "' is not registered");
  }
  it->second.last_heartbeat = clock_.Now();
  if (!report.gpu_metrics_error.empty()) it->second.gpu_metrics_error = report.gpu_metrics_error;
  if (report.gpu_metrics) {
    const std::vector<ReportedGpu> gpus = ReportedGpus(*report.gpu_metrics);
    GpuMonitor::NodeGpus identity{it->second.inventory.gpu_model, {}};
    for (const protocol::InventoryGpu& g : it->second.inventory.gpus) {
      identity.gpus.push_back({g.uuid, g.memory.value()});
    }
    gpu_monitor_.Record(name, identity, gpus, GpuHoldersLocked(name, gpus),
                        it->second.last_heartbeat.value() * 1000);
  }
  // Output first: a task's last lines arrive in the same report as its end.
  for (const protocol::LogChunk& chunk : report.logs) WriteLogLocked(name, chunk);
  std::vector<protocol::StopOrder> kills;
  // Two reports of one agent may be in flight at once (a push overtaking a heartbeat): one older
  // than a report already taken from this registration says nothing the server may act on, and
  // taking it could undo what the newer one said (mark a task it started lost).
  const int64_t seq = report.seq;
  const bool stale = seq <= it->second.reports.last_seq;
  if (!stale) {
    it->second.reports.starting = std::move(starting);
    std::set<int64_t> reported = it->second.reports.starting;  // accepted: not lost, not resent
    std::set<int64_t> running, ended;
    for (const protocol::TaskStatus& s : report.tasks) {
      const int64_t alloc = s.key.allocation.value();
      reported.insert(alloc);
      (s.state == protocol::TaskState::kRunning ? running : ended).insert(alloc);
      CORRAL_RETURN_IF_ERROR(ApplyTaskReportLocked(name, s, kills));
    }
    if (report.partial) {
      // Only the tasks it lists: the others keep their states, and the waits on them.
      ReleaseWaitsLocked(name, [&](int64_t alloc) { return ended.count(alloc) > 0; });
    } else {
      CORRAL_RETURN_IF_ERROR(ReconcileUnreportedLocked(name, reported));
      ReleaseWaitsLocked(name, [&](int64_t alloc) { return running.count(alloc) == 0; });
    }
    nodes_[name].reports.last_seq = seq;
    // An end may have freed GPUs: schedule now, not at the loop's next tick, so that the next
    // job's launch goes out on the node's waiting heartbeat within milliseconds.
    if (wake_) changed_.notify_all();
  }
  // What every answer says about the report: whether it was stale, and the newest report taken.
  auto about_report = [&](protocol::ReportAnswer& answer) {
    answer.stale_report = stale;
    answer.taken_seq = nodes_[name].reports.last_seq;
  };
  protocol::ReportAnswer response = ResponseForLocked(name);
  auto quiet = [&] { return response.run.empty() && response.kill.empty() && kills.empty(); };
  if (quiet() && wait_ms > 0 && waiting_heartbeats_ >= kMaxWaitingHeartbeats) {
    // Every waiting heartbeat holds an HTTP thread: past the cap, answer now and let the agent
    // pause instead, so that API requests always find a thread.
    response.retry_after_ms = wait_ms;
    about_report(response);
    return response;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  ++waiting_heartbeats_;
  while (quiet() && !stopping_) {
    const uint64_t seen = nodes_[name].version;
    if (!changed_.wait_until(lock, deadline,
                             [&] { return stopping_ || nodes_[name].version != seen; })) {
      break;
    }
    response = ResponseForLocked(name);
  }
  --waiting_heartbeats_;
  for (auto& k : kills) response.kill.push_back(std::move(k));
  about_report(response);
  return response;
}

}  // namespace corral::server
