// Controller, jobs: submissions (single jobs and arrays), cancellation, and the views of jobs,
// the queue, projects and the policy; where a task's log lives.

#include <algorithm>
#include <iostream>
#include <map>

#include "common/random_id.h"
#include "sched/fair_share_standing.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/control/partitions.h"
#include "server/control/submit_fit.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// A new pending job of `who` running `spec`, submitted at `now` (its id comes from the store).
// Its submission event says which of the server's defaults it got (`defaults`, when any).
store::JobRecord NewJobRecord(const Principal& who, const JobSpec& spec, Seconds now,
                              const std::vector<protocol::ResourceDefault>& defaults) {
  store::JobRecord record;
  // As the store records it ("submitted" when empty), so views agree before and after a restart.
  record.reason =
      defaults.empty() ? "submitted" : "submitted with defaults: " + protocol::ToString(defaults);
  record.name = spec.name;
  record.user = who.name;
  record.project = spec.project;
  record.spec_json = ToJson(spec).dump();
  record.total_gpu_milli = spec.resources.TotalMilli() * spec.tasks;
  record.state = JobState::kPending;
  record.priority = spec.priority;
  record.submit_time = now;
  return record;
}

// The resizes a job's events record: each says "resized from 8 to 4 GPUs: ..."
// (controller_elastic.cc; docs/elastic.md).
int ResizeEvents(const std::vector<store::JobEvent>& events) {
  return static_cast<int>(std::count_if(events.begin(), events.end(),
                                        [](const auto& e) { return IsResizeEvent(e.reason); }));
}

// PermissionDenied unless `who` owns `record` or is an admin; `what` names it ("job 7").
Status MayCancel(const Principal& who, const store::JobRecord& record, const std::string& what) {
  if (who.admin || who.name == record.user) return Status::Ok();
  return PermissionDenied(what + " belongs to " + record.user +
                          ": only its owner or an admin may cancel it");
}

// A listing's row as the store has it (no pending reason, no estimated start).
protocol::JobSummary ListingRowOf(const store::JobSummary& job) {
  protocol::JobSummary out{.id = job.id,
                           .name = job.name,
                           .user = job.user,
                           .project = job.project,
                           .state = job.state,
                           .priority = job.priority,
                           .submit_time = job.submit_time,
                           .start_time = job.start_time,
                           .end_time = job.end_time,
                           .total_gpu_milli = job.total_gpu_milli,
                           .reason = job.reason};
  if (job.array_id) out.array = {*job.array_id, job.array_index, job.array_max_running};
  return out;
}

// A running job since `start` that outlived `prediction` (its planned run) gets the bound the
// scheduler expects it to end by instead (sched::ExpectedEndOf): its time limit, else a
// doubling; never the time it has run, which would slide with the clock.
void OutlivedBound(Seconds start, std::optional<Seconds> time_limit, Seconds now,
                   protocol::RuntimePrediction& prediction) {
  const sched::ExpectedEnd end = sched::ExpectedEndOf(start, prediction.estimate, time_limit, now);
  if (end.basis == sched::EndBasis::kPlanned) return;
  prediction.estimate = Seconds(end.end.value() - start.value());
  prediction.confidence = 0;
  prediction.basis = end.basis == sched::EndBasis::kTimeLimit ? protocol::kOutlivedTimeLimitBasis
                                                              : protocol::kOutlivedDoublingBasis;
}

// `wanted` narrowed to `allowed`: `allowed` when nothing is wanted, else the wanted ones that
// are allowed (empty when none is: the listing then matches nothing).
std::vector<std::string> Narrowed(const std::vector<std::string>& wanted,
                                  const std::vector<std::string>& allowed) {
  if (wanted.empty()) return allowed;
  std::vector<std::string> out;
  for (const std::string& w : wanted) {
    if (std::find(allowed.begin(), allowed.end(), w) != allowed.end()) out.push_back(w);
  }
  return out;
}

// The answer to a submission of `records` (one job, or an array's elements by index).
protocol::SubmitAnswer AnswerOf(const std::vector<store::JobRecord>& records,
                                std::vector<protocol::ResourceDefault> defaults,
                                std::vector<std::string> warnings, bool array) {
  const store::JobRecord& first = records.front();
  protocol::SubmitAnswer answer{.id = first.id,
                                .state = first.state,
                                .project = first.project,
                                .user = first.user,
                                .reason = first.reason,
                                .defaults = std::move(defaults),
                                .warnings = std::move(warnings)};
  if (array) {
    for (const store::JobRecord& r : records) answer.array_ids.push_back(r.id);
  }
  return answer;
}

sched::ProjectPolicy PolicyOf(const protocol::ProjectSharing& s) {
  sched::ProjectPolicy p{.weight = s.weight, .quota_milli = s.quota.value()};
  for (const auto& [model, quota] : s.model_quota) p.model_quota_milli[model] = quota.value();
  if (s.limit) p.limit_milli = s.limit->value();
  if (s.user_limit) p.user_limit_milli = s.user_limit->value();
  return p;
}

// Each project's fair-share standing among all the cluster's projects, whoever asks: the
// store's projects (`listed`) and those with a policy or running work (`uses`), by name.
std::map<std::string, protocol::FairShareStandingView> StandingsOf(
    const std::vector<store::ProjectRecord>& listed, const std::vector<ProjectUseView>& uses,
    int64_t cluster_gpus) {
  std::map<std::string, sched::FairShareUse> by_name;
  for (const store::ProjectRecord& p : listed) {
    by_name[p.name] = {.project = p.name, .weight = sched::ProjectPolicy{}.weight};
  }
  for (const ProjectUseView& u : uses) {
    by_name[u.name] = {.project = u.name,
                       .weight = u.sharing.weight,
                       .past = u.fair_share_past,
                       .effective = u.fair_share_usage};
  }
  std::vector<sched::FairShareUse> all;
  all.reserve(by_name.size());
  for (auto& [name, use] : by_name) all.push_back(std::move(use));
  const std::vector<sched::FairShareStanding> standings =
      sched::FairShareStandings(all, cluster_gpus);
  std::map<std::string, protocol::FairShareStandingView> out;
  for (size_t i = 0; i < all.size(); ++i) {
    const sched::FairShareStanding& s = standings[i];
    out[all[i].project] = {
        .standing = s.standing == sched::ShareStanding::kOver    ? protocol::ShareStanding::kOver
                    : s.standing == sched::ShareStanding::kUnder ? protocol::ShareStanding::kUnder
                                                                 : protocol::ShareStanding::kAt,
        .gpu_hours_from_share = s.gpu_hours_from_share,
        .next_in_line = s.next_in_line};
  }
  return out;
}

}  // namespace

// --- Submissions and jobs --------------------------------------------------------------------

Result<Principal> Controller::CheckAccess(const Principal& who, const std::string& project) const {
  if (!who.CanAccessProject(project)) {
    return PermissionDenied("user '" + who.name + "' is not a member of project '" + project + "'");
  }
  return who;
}

Result<Controller::Submission> Controller::Admit(const Principal& who, JobSpec spec) {
  if (spec.project.empty()) spec.project = config_.default_project;
  auto access = CheckAccess(who, spec.project);
  if (!access.ok()) return access.status();
  if (spec.session) {
    // The app's secret is derived from this salt (SessionToken): only the salt is stored, and the
    // secret is shown only to the session's owner.
    auto salt = RandomHexId(kSecretBytes);
    if (!salt.ok()) return salt.status();
    spec.session->salt = *salt;
  }
  Submission submission{std::move(spec), std::nullopt};
  if (!submission.spec.environment.empty()) {
    auto env = environments_.Resolve(who, submission.spec.environment, "environment");
    if (!env.ok()) return env.status();
    CORRAL_RETURN_IF_ERROR(ApplyEnvironment(env->spec, env->record.version, submission.spec));
    submission.environment = std::move(env).value();
  }
  CORRAL_RETURN_IF_ERROR(CheckDependencyTargets(who, submission.spec));
  // What the cluster's partition and QoS say (GPU models, a time limit, a priority).
  auto warnings = ApplyPartitions(config_.partitions, submission.spec);
  if (!warnings.ok()) return warnings.status();
  submission.warnings = std::move(warnings).value();
  // After the environment, which fills in the command and variables (never resources).
  submission.defaults = ApplyResourceDefaults(config_.resource_defaults, submission.spec);
  // Against the nodes of the published view: a node that registered a moment ago may not be
  // there yet, and then the job is refused as the cluster was a moment ago.
  const std::shared_ptr<const ReadView> view = view_.Get();
  std::vector<const protocol::NodeView*> nodes;
  nodes.reserve(view->nodes.size());
  for (const NodeEntryView& n : view->nodes) nodes.push_back(&n.row);
  CORRAL_RETURN_IF_ERROR(CheckFitsRegisteredNodes(
      submission.spec.resources, submission.spec.tasks,
      submission.environment ? &submission.environment->spec : nullptr, nodes));
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
  if (spec.session) sessions_.insert(record.id);
  job.record = record;
  job.spec = std::move(spec);
  job.environment = std::move(environment);
  QueueOrHoldLocked(job);
}

void Controller::QueueInSchedulerLocked(const LiveJob& job) {
  if (Status queued = scheduler_->Submit(ModelJobOf(job)); !queued.ok()) {
    std::cerr << "corral server: job " << job.record.id.value()
              << " is pending but the scheduler refused it (" << queued.message()
              << "); it will not start: cancel it, and please report this" << std::endl;
  }
}

Result<std::vector<JobId>> Controller::CommitSubmission(const Principal& who,
                                                        std::vector<store::JobRecord>& records,
                                                        bool array) {
  // Taken before the commit: submissions the batcher commits together cannot each count on the
  // same free place.
  auto taken = submit_limits_.Take(who.name, records.front().project,
                                   static_cast<int64_t>(records.size()), clock_.Now());
  if (!taken.ok()) return taken.status();
  Result<std::vector<JobId>> ids = std::vector<JobId>();
  if (array) {
    ids = store_.InsertArray(records);  // one transaction: all elements or none
  } else {
    auto id = batcher_.Submit(records.front());  // commits (group commit) before returning
    ids = id.ok() ? Result<std::vector<JobId>>(std::vector<JobId>{*id}) : id.status();
  }
  if (!ids.ok()) submit_limits_.GiveBack(*taken);
  return ids;
}

Result<protocol::SubmitAnswer> Controller::Submit(const Principal& who, JobSpec spec) {
  auto submission = Admit(who, std::move(spec));
  if (!submission.ok()) return submission.status();
  if (submission->spec.array) {
    return InvalidArgument("field 'array': an array is submitted with SubmitArray");
  }
  std::vector<store::JobRecord> records = {
      NewJobRecord(who, submission->spec, clock_.Now(), submission->defaults)};
  auto ids = CommitSubmission(who, records, /*array=*/false);
  if (!ids.ok()) return ids.status();
  store::JobRecord& record = records.front();
  record.id = ids->front();
  std::vector<CommittedJob> committed;
  committed.push_back({record, std::move(submission->spec), std::move(submission->environment)});
  AddToInbox(std::move(committed));
  return AnswerOf(records, std::move(submission->defaults), std::move(submission->warnings),
                  /*array=*/false);
}

Result<protocol::SubmitAnswer> Controller::SubmitArray(const Principal& who, JobSpec array) {
  auto submission = Admit(who, std::move(array));
  if (!submission.ok()) return submission.status();
  const JobSpec& spec = submission->spec;
  if (!spec.array) return InvalidArgument("field 'array': is required to submit an array");
  const Seconds now = clock_.Now();
  std::vector<ArrayElement> elements = ArrayElements(spec);
  std::vector<store::JobRecord> records;
  records.reserve(elements.size());
  for (const ArrayElement& e : elements) {
    store::JobRecord record = NewJobRecord(who, e.spec, now, submission->defaults);
    record.array_index = e.index;
    record.array_max_running = spec.array->max_running;
    records.push_back(std::move(record));
  }
  auto ids = CommitSubmission(who, records, /*array=*/true);
  if (!ids.ok()) return ids.status();
  std::vector<CommittedJob> committed;
  committed.reserve(records.size());
  for (size_t i = 0; i < records.size(); ++i) {
    records[i].id = (*ids)[i];
    records[i].array_id = ids->front();
    committed.push_back({records[i], std::move(elements[i].spec), submission->environment});
  }
  AddToInbox(std::move(committed));
  return AnswerOf(records, std::move(submission->defaults), std::move(submission->warnings),
                  /*array=*/true);
}

Status Controller::Cancel(const Principal& who, JobId id) {
  const std::string what = "job " + std::to_string(id.value());
  auto lock = LockState();
  if (JobHasPendingWriteLocked(id)) SettleWritesLocked();  // decided against its last change
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
  const Seconds now = clock_.Now();
  // Committed first (through the write group, without the lock): a cancellation the store did
  // not take is reported, not half done.
  PendingWrite write;
  write.jobs = {id};
  store::WriteBatch batch;
  if (reconcile::DecideCancel(job.record.state) == reconcile::CancelVerdict::kEndNow) {
    batch.transitions.push_back({id, job.record.state, JobState::kCancelled, reason});
    write.apply = [this, id, now](const Status& committed) {
      if (!committed.ok()) return;
      if (auto live = jobs_.find(id); live != jobs_.end()) {
        EndedLocked(live->second, JobState::kCancelled, now);
      }
    };
  } else {
    auto plan = std::make_shared<RunPlan>(CancelPlanLocked(job, reason, now));
    batch = plan->writes;
    write.apply = [this, id, plan, now](const Status& committed) {
      if (!committed.ok()) return;
      if (auto live = jobs_.find(id); live != jobs_.end()) {
        ApplyPlanLocked(live->second, std::move(*plan), now);
      }
    };
  }
  const std::shared_future<Status> durable = WriteLocked(std::move(batch), now, std::move(write));
  AwaitWriteLocked(lock, durable);
  CORRAL_RETURN_IF_ERROR(durable.get());
  CancelStoppingLocked(id, reason);      // a run stopping with a checkpoint grace keeps kill_grace
  PublishLocked(PendingRebuild::kKeep);  // its GPUs (a pending job's place: at the next pass)
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
  auto lock = LockState();
  SettleWritesLocked();  // its elements' changes are written directly
  auto ids = CancelArrayLocked(array, what, reason);
  PublishLocked(PendingRebuild::kKeep);  // also after a failure: some elements may have ended
  lock.unlock();
  changed_.notify_all();
  return ids;
}

Result<std::vector<JobId>> Controller::CancelArrayLocked(JobId array, const std::string& what,
                                                         const std::string& reason) {
  std::vector<JobId> pending, started;  // in id order (jobs_ is ordered)
  for (const auto& [id, job] : jobs_) {
    if (job.record.array_id != array) continue;
    const bool end_now =
        reconcile::DecideCancel(job.record.state) == reconcile::CancelVerdict::kEndNow;
    (end_now ? pending : started).push_back(id);
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
    if (!job.end.cancel_requested) CORRAL_RETURN_IF_ERROR(RequestCancelLocked(job, reason));
  }
  std::vector<JobId> ids = pending;
  ids.insert(ids.end(), started.begin(), started.end());
  std::sort(ids.begin(), ids.end());
  for (JobId id : ids) CancelStoppingLocked(id, reason);
  return ids;
}

Controller::RunPlan Controller::CancelPlanLocked(const LiveJob& job, const std::string& reason,
                                                 Seconds now) const {
  RunPlan plan = PlanFor(job);
  plan.end = reconcile::CancelRequested(plan.end, reason);
  EvaluatePlanLocked(job, plan, now);
  // Durable with the stops: a restarted server goes on stopping the job.
  plan.writes.cancel_requests.push_back({job.record.id, reason});
  return plan;
}

Status Controller::RequestCancelLocked(LiveJob& job, const std::string& reason) {
  const Seconds now = clock_.Now();
  RunPlan plan = CancelPlanLocked(job, reason, now);
  CORRAL_RETURN_IF_ERROR(store_.Apply(plan.writes, now));
  ApplyPlanLocked(job, std::move(plan), now);
  return Status::Ok();
}

Result<protocol::JobView> Controller::JobView(const Principal& who, JobId id) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  auto events = store_.JobEvents(id);
  auto tasks = store_.TasksOfJob(id);
  if (!events.ok()) return events.status();
  if (!tasks.ok()) return tasks.status();
  auto spec =
      ParseJobSpec(nlohmann::json::parse(record->spec_json, nullptr, false), SpecOrigin::kStored);
  if (!spec.ok()) {
    return Status(StatusCode::kInternal,
                  "job " + std::to_string(id.value()) +
                      ": stored spec unreadable: " + spec.status().message());
  }
  protocol::JobView out{.summary = ListingRowOf(store::SummaryOf(*record)),
                        .restarts = record->restarts,
                        .spec = *spec};
  // A session's secret (or what it is derived from) only through the session API.
  if (out.spec.session) {
    out.spec.session->salt.clear();
    out.spec.session->stored_token.clear();
  }
  for (const auto& e : *events) out.events.push_back({e.time, e.from_state, e.to_state, e.reason});
  for (const auto& t : *tasks) {
    out.tasks.push_back({.index = t.task_index,
                         .allocation_id = t.allocation_id,
                         .generation = t.generation,
                         .node = t.node,
                         .state = t.state,
                         .allocation = t.allocation,
                         .exit_code = t.exit_code,
                         .signal = t.signal,
                         .end_cause = t.end_cause});
  }
  if (!model::IsFinal(record->state)) {
    std::lock_guard predictor(predictor_mu_);
    const model::Job job = ToModelJob(*spec, *record);
    const predict::Prediction p = predictor_.Predict(predict::RuntimePredictor::FeaturesOf(job));
    // As the scheduler plans it: never beyond the job's time limit (basis "time_limit").
    const Seconds planned = sched::PlannedRun(p.estimate, job.time_limit);
    out.predicted_run_s = protocol::RuntimePrediction{
        planned, p.confidence,
        planned < p.estimate ? std::string(protocol::kTimeLimitBasis) : p.basis};
    if (record->state == JobState::kRunning && record->start_time) {
      OutlivedBound(*record->start_time, job.time_limit, clock_.Now(), *out.predicted_run_s);
    }
  }
  auto progress = store_.JobProgress(id);
  if (!progress.ok()) return progress.status();
  out.progress = std::move(progress).value();
  out.checkpoint_dir = CheckpointDirOf(id);
  out.lost_work_gpu_s = static_cast<double>(record->lost_gpu_ms) / 1000;
  out.stop_grace = StopGraceOf(*spec);
  if (auto checks = CheckDependencies(spec->dependencies); checks.ok()) {
    for (const model::DependencyCheck& c : *checks) {
      out.dependencies.push_back({c.dependency, c.status});
    }
  }
  const std::shared_ptr<const ReadView> view = view_.Get();
  if (const std::string* unreachable = view->UnreachableReason(id)) {
    out.summary.reason = *unreachable;
  }
  if (spec->elastic) {
    // A started job's from memory; else (and before its first size is known) from the store.
    const ElasticRunView* live = view->Elastic(id);
    out.resizes = live ? live->resizes : ResizeEvents(*events);
    if (live && live->now > 0) {
      out.elastic_now = live->now;
    } else if (record->state != JobState::kPending) {
      if (!tasks->empty()) out.elastic_now = ElasticSizeIn(spec->elastic->unit, *tasks);
    }
  }
  AddPendingReason(*view->pending, out.summary);
  return out;
}

Result<Controller::JobPage> Controller::ListJobs(const Principal& who, store::JobFilter listing,
                                                 bool all_projects) {
  if (listing.limit < 1) return InvalidArgument("field 'limit': must be at least 1");
  JobPage page;
  if (!who.admin) {
    listing.projects = Narrowed(listing.projects, who.projects);
    if (listing.projects.empty()) return page;
  }
  if (!all_projects) {
    listing.users = Narrowed(listing.users, {who.name});
    if (listing.users.empty()) return page;
  }
  if (listing.limit < 1 || listing.limit > kMaxJobListLimit) {
    return InvalidArgument("field 'limit': must be from 1 to " + std::to_string(kMaxJobListLimit));
  }
  const int limit = listing.limit;
  listing.limit = limit + 1;  // one more than asked tells whether another page follows
  auto jobs = store_.ListJobSummaries(listing);
  if (!jobs.ok()) return jobs.status();
  if (jobs->size() > static_cast<size_t>(limit)) {
    jobs->resize(limit);
    page.next = store::PositionOf(jobs->back(), listing.sort);
  }
  const std::shared_ptr<const ReadView> view = view_.Get();
  page.jobs.reserve(jobs->size());
  for (const auto& j : *jobs) {
    protocol::JobSummary row = ListingRowOf(j);
    if (const std::string* unreachable = view->UnreachableReason(j.id)) row.reason = *unreachable;
    AddPendingReason(*view->pending, row);
    page.jobs.push_back(std::move(row));
  }
  return page;
}

Result<std::vector<protocol::ProjectView>> Controller::ProjectsView(const Principal& who) {
  auto projects = store_.ListProjects();
  if (!projects.ok()) return projects.status();
  const std::shared_ptr<const ReadView> view = view_.Get();
  const auto standings = StandingsOf(*projects, view->projects, view->summary.gpus);
  std::vector<protocol::ProjectView> out;
  for (const auto& p : *projects) {
    if (!who.CanAccessProject(p.name)) continue;
    auto use =
        std::lower_bound(view->projects.begin(), view->projects.end(), p.name,
                         [](const ProjectUseView& u, const std::string& n) { return u.name < n; });
    const ProjectUseView none{.name = p.name, .sharing = SharingOf(sched::ProjectPolicy{})};
    const ProjectUseView& now = use != view->projects.end() && use->name == p.name ? *use : none;
    out.push_back({.name = p.name,
                   .description = p.description,
                   .sharing = now.sharing,
                   .submit_limits = p.submit_limits,
                   .running = now.running,
                   .borrowed = now.borrowed,
                   .fair_share_usage = now.fair_share_usage,
                   .fair_share = standings.at(p.name)});
  }
  return out;
}

Result<protocol::ProjectSharing> Controller::SetProjectSharing(
    const std::string& project, const protocol::ProjectSharing& sharing) {
  const sched::ProjectPolicy policy = PolicyOf(sharing);
  CORRAL_RETURN_IF_ERROR(sched::CheckProjectPolicy(policy));
  auto lock = LockState();
  // The store keeps the policy file's form (sched/policy_config.h), as Recover reads it.
  CORRAL_RETURN_IF_ERROR(
      store_.SetProjectSharing(project, sched::ProjectSharingJson(policy).dump()));
  sharing_[project] = policy;
  CORRAL_RETURN_IF_ERROR(scheduler_->Reconfigure(SchedulerConfigLocked()));
  PublishLocked(PendingRebuild::kKeep);  // the projects' view shows it at once
  WakeLoop();
  return SharingOf(policy);
}

Status Controller::SetUserSubmitLimits(const std::string& user, const model::SubmitLimits& limits) {
  auto lock = LockState();  // the store and the limiter change in the same order
  CORRAL_RETURN_IF_ERROR(store_.SetUserSubmitLimits(user, limits));
  submit_limits_.SetUserLimits(user, limits);
  return Status::Ok();
}

Status Controller::SetProjectSubmitLimits(const std::string& project,
                                          const model::SubmitLimits& limits) {
  auto lock = LockState();
  CORRAL_RETURN_IF_ERROR(store_.SetProjectSubmitLimits(project, limits));
  submit_limits_.SetProjectLimits(project, limits);
  return Status::Ok();
}

protocol::PolicyView Controller::PolicyViewLocked() const {
  const sched::FairShareConfig& f = policy_.sharing.fair_share;
  const size_t typical_tasks = scheduler_->policy_context().typical_tasks.size();
  protocol::PolicyView out{.rules = {.order = std::string(sched::QueueOrderName(policy_.order)),
                                     .blocking = std::string(sched::BlockingName(policy_.blocking)),
                                     .reclaim = policy_.sharing.reclaim,
                                     .las_thresholds_gpu_s = policy_.las_thresholds_gpu_s,
                                     .half_life = f.half_life,
                                     .fair_share_weight = f.fair_share_weight,
                                     .age_weight = f.age_weight,
                                     .age_unit = f.age_unit},
                           .placement = config_.policy,
                           .profile_jobs = static_cast<int64_t>(profile_.profile_jobs()),
                           .typical_tasks = static_cast<int64_t>(typical_tasks),
                           .uses_profile = scheduler_->UsesWorkloadProfile(),
                           .profile_min_jobs = static_cast<int64_t>(profile_.min_jobs()),
                           .file = config_.policy_file};
  if (!policy_error_.empty()) out.file_error = policy_error_;
  return out;
}

Result<LogSink::Page> Controller::ReadLog(const Principal& who, JobId id, int task,
                                          const std::string& stream,
                                          std::optional<int64_t> generation, int64_t offset,
                                          int64_t max_bytes) {
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
  return logs_.Read(id, task, generation.value_or(current), stream, offset, max_bytes);
}

Result<std::vector<store::GpuUsageRow>> Controller::GpuUsage(const Principal& who,
                                                             const std::string& since,
                                                             const std::string& until) {
  auto rows = store_.GpuUsage(since, until);
  if (!rows.ok()) return rows.status();
  std::vector<store::GpuUsageRow> visible;
  for (const auto& r : *rows) {
    if (who.admin || r.user == who.name || who.CanAccessProject(r.project)) {
      visible.push_back(r);
    }
  }
  return visible;
}

Result<std::vector<store::JobRecord>> Controller::JobsLiveSince(Seconds since) {
  store::JobFilter filter;
  filter.live_since = since;
  filter.limit = 0;
  return store_.ListJobs(filter);
}

Result<std::vector<store::DemandHour>> Controller::PurgedDemand(Seconds from, Seconds to) {
  return store_.PurgedDemand(from, to);
}

}  // namespace corral::server
