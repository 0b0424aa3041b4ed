#include "sched/scheduler.h"

#include <algorithm>
#include <queue>

namespace corral::sched {

namespace {

constexpr Seconds kDefaultEstimate{3600};

int64_t MilliOf(const model::Job& job) { return job.TotalMilli().value(); }

// SRSF's measure of `seconds` of a job's run: GPU-seconds, a share counting for its share and a
// CPU-only job for one thousandth, floored. The queue key and RemainingOf both use it, so a
// waiting job and a running one compare on the same scale.
int64_t ServiceOf(int64_t seconds, const model::Job& job) {
  return seconds * std::max<int64_t>(1, MilliOf(job)) / 1000;
}

// An elastic job at its MIN (how it waits: a pending elastic job asks for MIN); others as they
// are.
model::Job AtMin(model::Job job) {
  const int min = job.elastic ? job.elastic->min : 0;
  return model::WithElasticSize(std::move(job), min);
}

// The use of a running job that counts against its project's quota: all of it, or an elastic
// job's MIN (its GPUs above MIN are borrowed: never inside the quota, taken back by shrinking).
int64_t QuotaMilliOf(const model::Job& job) {
  if (!job.elastic) return MilliOf(job);
  const int64_t per_unit = job.elastic->unit == model::ElasticUnit::kGpus
                               ? kWholeGpu.value()
                               : job.resources.TotalMilli().value();
  return per_unit * job.elastic->min;
}

std::string Id(JobId job) { return std::to_string(job.value()); }

template <typename Use>
void AddUse(Use& use, const std::string& a, const std::string& b, int64_t delta) {
  auto it = use.find(std::tie(a, b));
  if (it == use.end()) it = use.emplace(std::make_tuple(a, b), 0).first;
  it->second += delta;
}

template <typename Use>
int64_t UseOf(const Use& use, const std::string& a, const std::string& b) {
  auto it = use.find(std::tie(a, b));
  return it == use.end() ? 0 : it->second;
}

}  // namespace

Result<QueueOrder> ParseQueueOrder(std::string_view name) {
  if (name == "fifo") return QueueOrder::kFifo;
  if (name == "priority") return QueueOrder::kPriority;
  if (name == "fairshare") return QueueOrder::kFairShare;
  if (name == "sjf") return QueueOrder::kSjf;
  if (name == "qssf") return QueueOrder::kQssf;
  if (name == "las") return QueueOrder::kLas;
  if (name == "srtf") return QueueOrder::kSrtf;
  if (name == "srsf") return QueueOrder::kSrsf;
  return InvalidArgument("unknown queue order '" + std::string(name) +
                         "' (known: fifo, priority, fairshare, sjf, qssf, las, srtf, srsf)");
}

std::string_view QueueOrderName(QueueOrder order) {
  switch (order) {
    case QueueOrder::kFifo:
      return "fifo";
    case QueueOrder::kPriority:
      return "priority";
    case QueueOrder::kFairShare:
      return "fairshare";
    case QueueOrder::kSjf:
      return "sjf";
    case QueueOrder::kQssf:
      return "qssf";
    case QueueOrder::kLas:
      return "las";
    case QueueOrder::kSrtf:
      return "srtf";
    case QueueOrder::kSrsf:
      return "srsf";
  }
  return "fifo";
}

bool PreemptsByRemaining(QueueOrder order) {
  return order == QueueOrder::kSrtf || order == QueueOrder::kSrsf;
}

Result<Blocking> ParseBlocking(std::string_view name) {
  if (name == "skip") return Blocking::kSkip;
  if (name == "strict") return Blocking::kStrict;
  if (name == "backfill") return Blocking::kBackfill;
  return InvalidArgument("unknown blocking mode '" + std::string(name) +
                         "' (known: skip, strict, backfill)");
}

Result<VictimOrder> ParseVictimOrder(std::string_view name) {
  if (name == "priority") return VictimOrder::kPriority;
  if (name == "least-lost-work") return VictimOrder::kLeastLostWork;
  return InvalidArgument("unknown victim order '" + std::string(name) +
                         "' (known: priority, least-lost-work)");
}

std::string_view VictimOrderName(VictimOrder order) {
  return order == VictimOrder::kPriority ? "priority" : "least-lost-work";
}

Seconds DefaultEstimate(const model::Job& job) {
  if (job.time_limit && job.time_limit->value() > 0) return *job.time_limit;
  if (job.expected_duration && job.expected_duration->value() > 0) return *job.expected_duration;
  return kDefaultEstimate;
}

namespace {

Status ValidateConfig(const SchedulerConfig& config) {
  CORRAL_RETURN_IF_ERROR(Validate(config.sharing));
  const auto& t = config.las_thresholds_gpu_s;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] <= 0 || (i > 0 && t[i] <= t[i - 1])) {
      return InvalidArgument("field 'las_thresholds_gpu_s': must be positive and ascending");
    }
  }
  return Status::Ok();
}

}  // namespace

Result<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config,
                                                     const PolicyContext& context) {
  CORRAL_RETURN_IF_ERROR(ValidateConfig(config));
  auto policy = CreatePolicy(config.policy, context);
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<Scheduler>(new Scheduler(config, context, std::move(policy).value()));
}

Scheduler::Scheduler(const SchedulerConfig& config, PolicyContext context,
                     std::unique_ptr<PlacementPolicy> policy)
    : config_(config),
      context_(std::move(context)),
      policy_(std::move(policy)),
      state_(ClusterStateOptions{config.seed, policy_->NeedsTaskKinds(),
                                 policy_->ScoreFallsWithFreeCapacity()}),
      rng_(config.seed),
      placer_(state_, *policy_, rng_),
      fair_share_(config.sharing.fair_share),
      persistent_heads_(UsesPersistentHeads()) {}

Status Scheduler::SetTypicalTasks(std::vector<TypicalTask> typical_tasks) {
  PolicyContext context = context_;
  context.typical_tasks = std::move(typical_tasks);
  auto policy = CreatePolicy(config_.policy, context);
  if (!policy.ok()) return policy.status();
  if ((*policy)->NeedsTaskKinds() != policy_->NeedsTaskKinds() ||
      (*policy)->ScoreFallsWithFreeCapacity() != policy_->ScoreFallsWithFreeCapacity()) {
    return Status(StatusCode::kInternal,
                  "placement policy '" + config_.policy +
                      "': NeedsTaskKinds or ScoreFallsWithFreeCapacity changed with its typical "
                      "tasks; the cluster state was built for the old ones");
  }
  placer_.SetPolicy(**policy);
  policy_ = std::move(policy).value();
  context_ = std::move(context);
  return Status::Ok();
}

bool Scheduler::UsesWorkloadProfile() const { return PolicyUsesWorkloadProfile(config_.policy); }

Status Scheduler::Reconfigure(const SchedulerConfig& config) {
  CORRAL_RETURN_IF_ERROR(ValidateConfig(config));
  if (config.policy != config_.policy) {
    return InvalidArgument("placement policy '" + config.policy + "' differs from '" +
                           config_.policy + "': it is fixed for the scheduler's life");
  }
  const uint64_t seed = config_.seed;
  config_ = config;
  config_.seed = seed;
  fair_share_.SetConfig(config_.sharing.fair_share);
  policies_.clear();  // they pointed into the old config_.sharing
  CoverProjects();
  std::vector<model::Job> pending;
  pending.reserve(pending_.size());
  for (auto& [id, p] : pending_) pending.push_back(std::move(*p.job));
  std::sort(pending.begin(), pending.end(),
            [](const model::Job& a, const model::Job& b) { return a.id < b.id; });
  pending_.clear();
  pending_count_ = 0;
  for (Group& g : groups_) {
    g.queue.clear();
    g.queued_at = -1;
    g.waits.reset();
  }
  queued_groups_.clear();
  head_order_.clear();
  persistent_heads_ = UsesPersistentHeads();
  for (model::Job& job : pending) Enqueue(std::move(job));
  for (auto& buckets : bucket_usage_) buckets.clear();
  for (auto& [id, run] : running_) {
    run.bucket = QuotaBucket(PolicyOf(run.project), run.job->resources.gpu_models);
    run.estimated_end = Seconds(run.start.value() + EstimateOf(*run.job).value());
    bucket_usage_[run.project.value()][run.bucket] += QuotaMilliOf(*run.job);
  }
  ++generation_;  // waiting jobs are worth another try under the new rules
  ++state_version_;
  return Status::Ok();
}

// --- Nodes -----------------------------------------------------------------------------------

namespace {

void UpdateCapacity(const ClusterState& state, FairShareLedger& ledger) {
  int64_t cpu = 0, memory = 0;
  for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    if (!state.node(n).present) continue;
    cpu += state.node(n).cpu_total;
    memory += state.node(n).memory_total;
  }
  ledger.SetCapacity(state.TotalGpuMilli(), cpu, memory);
}

}  // namespace

Result<NodeIndex> Scheduler::AddNode(const model::Node& node) {
  auto added = state_.AddNode(node);
  if (added.ok()) {
    ++generation_;
    ++state_version_;
    UpdateCapacity(state_, fair_share_);
  }
  return added;
}

Result<std::vector<JobId>> Scheduler::RemoveNode(std::string_view name) {
  NodeIndex n = state_.FindNode(name);
  if (n < 0) return NotFound("node '" + std::string(name) + "' is not in the cluster");
  std::vector<JobId> affected;
  for (const auto& [id, run] : running_) {
    for (const Allocation& a : run.tasks) {
      if (a.node == n) {
        affected.push_back(id);
        break;
      }
    }
  }
  std::sort(affected.begin(), affected.end());
  CORRAL_RETURN_IF_ERROR(state_.RemoveNode(n));
  ++generation_;
  ++state_version_;
  UpdateCapacity(state_, fair_share_);
  return affected;
}

Status Scheduler::SetSchedulable(std::string_view name, bool schedulable) {
  NodeIndex n = state_.FindNode(name);
  if (n < 0) return NotFound("node '" + std::string(name) + "' is not in the cluster");
  CORRAL_RETURN_IF_ERROR(state_.SetSchedulable(n, schedulable));
  if (schedulable) ++generation_;
  ++state_version_;
  return Status::Ok();
}

Status Scheduler::ResizeNode(std::string_view name, CpuMilli cpu, MemoryMib memory) {
  NodeIndex n = state_.FindNode(name);
  if (n < 0) return NotFound("node '" + std::string(name) + "' is not in the cluster");
  CORRAL_RETURN_IF_ERROR(state_.ResizeNode(n, cpu, memory));
  ++generation_;  // more may fit now
  ++state_version_;
  UpdateCapacity(state_, fair_share_);
  return Status::Ok();
}

// --- Jobs ------------------------------------------------------------------------------------

const ProjectPolicy& Scheduler::PolicyOf(const std::string& project) const {
  static const ProjectPolicy kDefault;
  auto it = config_.sharing.projects.find(project);
  return it == config_.sharing.projects.end() ? kDefault : it->second;
}

ProjectId Scheduler::InternProject(const std::string& project) {
  const ProjectId id = fair_share_.Intern(project);
  CoverProjects();
  return id;
}

void Scheduler::CoverProjects() {
  while (policies_.size() < fair_share_.ProjectCount()) {
    policies_.push_back(&PolicyOf(fair_share_.NameOf(ProjectId(policies_.size()))));
  }
  bucket_usage_.resize(policies_.size());
}

Seconds PlannedRun(Seconds predicted, std::optional<Seconds> time_limit) {
  Seconds planned = predicted.value() <= 0 ? Seconds(1) : predicted;
  if (time_limit && time_limit->value() > 0) planned = std::min(planned, *time_limit);
  return planned;
}

ExpectedEnd ExpectedEndOf(Seconds start, Seconds planned, std::optional<Seconds> time_limit,
                          Seconds now) {
  const int64_t s = start.value(), t = now.value();
  if (s + planned.value() > t) return {Seconds(s + planned.value()), EndBasis::kPlanned};
  // It outlived its plan. "As much again as it has run from now" would be after now too, but it
  // moves with the clock: every estimate resting on it would slide. Its time limit is a bound
  // the server enforces; without one (or in the grace after it), the run so far doubled from
  // the last bound crossed, which moves only when crossed and then to twice that run, as the
  // old rule did at that instant.
  int64_t bound = std::max<int64_t>(1, planned.value());
  if (time_limit && time_limit->value() > bound) {
    if (s + time_limit->value() > t)
      return {Seconds(s + time_limit->value()), EndBasis::kTimeLimit};
    bound = time_limit->value();
  }
  while (s + bound <= t) bound *= 2;
  return {Seconds(s + bound), EndBasis::kDoubling};
}

Seconds Scheduler::EstimateOf(const model::Job& job) const {
  return PlannedRun(config_.estimate ? config_.estimate(job) : DefaultEstimate(job),
                    job.time_limit);
}

Scheduler::OrderKey Scheduler::KeyOf(const model::Job& job) const {
  int64_t primary = 0;
  switch (config_.order) {
    case QueueOrder::kFifo:
      break;
    case QueueOrder::kPriority:
    case QueueOrder::kFairShare:
      primary = -int64_t{job.priority};
      break;
    case QueueOrder::kSjf:
      primary = job.expected_duration ? job.expected_duration->value() : kDefaultEstimate.value();
      break;
    case QueueOrder::kLas: {
      // The job's queue by the GPU service it attained in earlier runs; FIFO within a queue.
      auto it = attained_.find(job.id);
      primary = LasQueueOf(it == attained_.end() ? 0 : it->second);
      break;
    }
    case QueueOrder::kQssf: {
      // GPU-seconds; a CPU-only job counts as one GPU's worth of time (it still holds a slot).
      const int64_t gpus = std::max<int64_t>(1, (MilliOf(job) + 999) / 1000);
      primary = EstimateOf(job).value() * gpus;
      break;
    }
    case QueueOrder::kSrtf:
      // The estimator answers what is left for a job queued again after a preemption.
      primary = EstimateOf(job).value();
      break;
    case QueueOrder::kSrsf:
      primary = ServiceOf(EstimateOf(job).value(), job);
      break;
  }
  return {primary, job.submit_time.value(), job.id.value()};
}

double Scheduler::TotalWeight() const {
  // Only fair-share keys use it (PassKeyOf): the other orders skip a walk over every group.
  if (config_.order != QueueOrder::kFairShare) return 0;
  // The projects that compete now: those with pending or running work.
  double total = 0;
  std::set<std::string> seen;
  for (int g : queued_groups_) {
    const ProjectId project = groups_[g].project;
    if (seen.insert(fair_share_.NameOf(project)).second) total += PolicyOf(project).weight;
  }
  for (const auto& [project, used] : use_.project) {
    if (used > 0 && seen.insert(project).second) total += PolicyOf(project).weight;
  }
  return total;
}

Scheduler::PassKey Scheduler::PassKeyOf(ProjectId project, const OrderKey& key, Seconds now,
                                        double total_weight) const {
  if (config_.order != QueueOrder::kFairShare) return {std::get<0>(key), 0.0, key};
  const FairShareConfig& f = config_.sharing.fair_share;
  const ProjectPolicy& policy = PolicyOf(project);
  const double factor = fair_share_.Factor(project, policy.weight, total_weight);
  const double waited = static_cast<double>(std::max<int64_t>(0, now.value() - std::get<1>(key)));
  const double score = f.fair_share_weight * factor +
                       f.age_weight * waited / static_cast<double>(f.age_unit.value());
  return {std::get<0>(key), -score, key};
}

int Scheduler::GroupOf(const model::Job& job) {
  const model::TaskResources& r = job.resources;
  // Found by a key of references (no copy of the model and runtime names); copied only when
  // the shape is new.
  auto shape_it =
      shape_ids_.find(ShapeKeyView(r.cpu.value(), r.gpus.value(), r.gpu_milli.value(),
                                   r.memory.value(), job.tasks, r.gpu_models, r.runtimes));
  if (shape_it == shape_ids_.end()) {
    shape_it = shape_ids_
                   .emplace(ShapeKey{r.cpu.value(), r.gpus.value(), r.gpu_milli.value(),
                                     r.memory.value(), job.tasks, r.gpu_models, r.runtimes},
                            static_cast<int>(shapes_.size()))
                   .first;
    Shape s;
    s.resources = r;
    s.tasks = job.tasks;
    shapes_.push_back(std::move(s));
  }
  const int64_t array = job.array_max_running ? job.array_id->value() : -1;
  const ProjectId project = InternProject(job.project);
  auto [group_it, new_group] = group_ids_.emplace(
      std::make_tuple(project.value(), shape_it->second, array), static_cast<int>(groups_.size()));
  if (new_group) groups_.push_back(Group{project, shape_it->second, {}, std::nullopt});
  return group_it->second;
}

const TaskRequest& Scheduler::RequestOf(Shape& shape) {
  // Model ids and runtime bits are resolved against those present; re-resolve when new ones
  // join.
  const int known = state_.ModelCount() + state_.RuntimeCount();
  if (shape.request_models != known) {
    shape.request = placer_.Resolve(shape.resources);
    shape.request_models = known;
  }
  return shape.request;
}

void Scheduler::Enqueue(model::Job&& job) {
  const int group = GroupOf(job);
  const OrderKey key = KeyOf(job);
  QueueInsert(group, key);
  const JobId id = job.id;
  pending_.emplace(id,
                   PendingJob{group, key, std::make_unique<model::Job>(std::move(job)), passes_});
  ++pending_count_;
}

void Scheduler::QueueInsert(int g, const OrderKey& key) {
  Group& group = groups_[g];
  if (persistent_heads_ && (group.queue.empty() || key < *group.queue.begin())) {
    if (!group.queue.empty()) head_order_.erase({*group.queue.begin(), g});
    head_order_.emplace(key, g);
  }
  // Keys mostly arrive in order (FIFO: submit time, then id): hinted at the end, such an insert
  // is constant time (a key that is not last is searched for as without the hint).
  group.queue.insert(group.queue.end(), key);
  if (group.queued_at >= 0) return;
  group.queued_at = static_cast<int>(queued_groups_.size());
  queued_groups_.push_back(g);
}

void Scheduler::QueueErase(int g, const OrderKey& key) {
  Group& group = groups_[g];
  // A started job is nearly always the group's first: erased by iterator, without a search.
  if (*group.queue.begin() == key) {
    group.queue.erase(group.queue.begin());
    if (persistent_heads_) {
      head_order_.erase({key, g});
      if (!group.queue.empty()) head_order_.emplace(*group.queue.begin(), g);
    }
  } else {
    group.queue.erase(key);
  }
  if (!group.queue.empty() || group.queued_at < 0) return;
  const int last = queued_groups_.back();
  queued_groups_[group.queued_at] = last;
  groups_[last].queued_at = group.queued_at;
  queued_groups_.pop_back();
  group.queued_at = -1;
}

void Scheduler::RekeyPending() {
  estimate_changes_ = 0;
  if (config_.order != QueueOrder::kQssf && !PreemptsByRemaining(config_.order)) return;
  for (auto& [id, p] : pending_) {
    const OrderKey key = KeyOf(*p.job);
    if (key == p.key) continue;
    std::set<OrderKey>& queue = groups_[p.group].queue;
    queue.erase(p.key);
    queue.insert(key);
    p.key = key;
  }
  if (!persistent_heads_) return;
  head_order_.clear();
  for (int g : queued_groups_) head_order_.emplace(*groups_[g].queue.begin(), g);
}

bool Scheduler::UsesPersistentHeads() const {
  return config_.blocking == Blocking::kStrict && config_.order != QueueOrder::kFairShare &&
         config_.order != QueueOrder::kLas && !PreemptsByRemaining(config_.order) &&
         !(config_.sharing.reclaim && AnyQuota());
}

Status Scheduler::Submit(model::Job job) {
  CORRAL_RETURN_IF_ERROR(model::Validate(job));
  if (pending_.count(job.id) || running_.count(job.id)) {
    return AlreadyExists("job " + Id(job.id) + " is already known");
  }
  Enqueue(std::move(job));
  return Status::Ok();
}

void Scheduler::ReleaseAll(const std::vector<Allocation>& tasks) {
  for (const Allocation& a : tasks) {
    // Allocations were applied by this scheduler, so releasing them cannot fail; a node that
    // was removed has already forgotten them.
    if (state_.node(a.node).present) (void)state_.Release(a);
  }
  ++generation_;
  ++state_version_;
}

void Scheduler::StartRunning(std::unique_ptr<model::Job> owned, ProjectId project,
                             std::vector<Allocation> tasks, Seconds now) {
  const model::Job& job = *owned;
  Running& run = running_.try_emplace(job.id).first->second;
  run.tasks = std::move(tasks);
  run.start = now;
  run.estimated_end = Seconds(now.value() + EstimateOf(job).value());
  run.start_seq = start_seq_++;
  run.project = project;
  run.bucket = QuotaBucket(PolicyOf(run.project), job.resources.gpu_models);
  use_.Add(job);
  bucket_usage_[run.project.value()][run.bucket] += QuotaMilliOf(job);
  fair_share_.Charge(run.project, MilliOf(job), job.resources.cpu.value() * job.tasks,
                     job.resources.memory.value() * job.tasks, +1);
  run.job = std::move(owned);
}

Scheduler::Running Scheduler::StopRunning(JobId job, bool release) {
  auto it = running_.find(job);
  Running run = std::move(it->second);
  running_.erase(it);
  if (release) {
    ReleaseAll(run.tasks);
  } else {
    ++generation_;
    ++state_version_;
  }
  const model::Job& j = *run.job;
  use_.Remove(j);
  bucket_usage_[run.project.value()][run.bucket] -= QuotaMilliOf(j);
  fair_share_.Charge(run.project, MilliOf(j), j.resources.cpu.value() * j.tasks,
                     j.resources.memory.value() * j.tasks, -1);
  return run;
}

Status Scheduler::Cancel(JobId job) {
  if (auto it = pending_.find(job); it != pending_.end()) {
    QueueErase(it->second.group, it->second.key);
    pending_.erase(it);
    --pending_count_;
    attained_.erase(job);
    return Status::Ok();
  }
  return Finish(job);
}

Status Scheduler::Finish(JobId job) {
  if (!running_.count(job)) return NotFound("job " + Id(job) + " is not running");
  StopRunning(job);
  attained_.erase(job);
  return Status::Ok();
}

Status Scheduler::NoteCheckpoint(JobId job, Seconds at) {
  auto it = running_.find(job);
  if (it == running_.end()) return NotFound("job " + Id(job) + " is not running");
  it->second.checkpoint = at;
  return Status::Ok();
}

double Scheduler::LostWorkOf(JobId job, Seconds now) const {
  auto it = running_.find(job);
  if (it == running_.end()) return 0;
  const Running& run = it->second;
  const int64_t since = std::max(run.start.value(), run.checkpoint.value_or(run.start).value());
  return static_cast<double>(MilliOf(*run.job)) * static_cast<double>(now.value() - since) / 1000.0;
}

Status Scheduler::Resize(JobId job, int to, Seconds now) {
  Result<std::vector<Allocation>> tasks = PlanResize(job, to);
  if (!tasks.ok()) return tasks.status();
  return ApplyResize(job, std::move(tasks).value(), now);
}

Result<std::vector<Allocation>> Scheduler::PlanResize(JobId job, int to) {
  auto it = running_.find(job);
  if (it == running_.end()) return NotFound("job " + Id(job) + " is not running");
  const Running& run = it->second;
  if (!run.job->elastic) return InvalidArgument("job " + Id(job) + ": not elastic");
  const model::ElasticBounds& bounds = *run.job->elastic;
  const std::string unit(model::ElasticUnitName(bounds.unit));
  if (to < bounds.min || to > bounds.max) {
    return InvalidArgument("job " + Id(job) + ": size " + std::to_string(to) + " " + unit +
                           " is outside its elastic range " + std::to_string(bounds.min) + "-" +
                           std::to_string(bounds.max));
  }
  auto tasks =
      bounds.unit == model::ElasticUnit::kGpus ? ResizedGpus(run, to) : ResizedNodes(run, to);
  if (!tasks) {
    return Status(StatusCode::kResourceExhausted,
                  "job " + Id(job) + ": no room to grow to " + std::to_string(to) + " " + unit);
  }
  return std::move(*tasks);
}

Status Scheduler::ApplyResize(JobId job, std::vector<Allocation> tasks, Seconds now) {
  auto it = running_.find(job);
  if (it == running_.end()) return NotFound("job " + Id(job) + " is not running");
  const Running& run = it->second;
  if (!run.job->elastic || tasks.empty()) {
    return InvalidArgument("job " + Id(job) + ": not elastic, or no tasks to resize to");
  }
  // PlanResize gave a kGpus job one task of `to` GPUs, a kNodes job `to` tasks.
  model::Job job_then = model::WithElasticSize(
      *run.job, static_cast<int>(run.job->elastic->unit == model::ElasticUnit::kGpus
                                     ? tasks.front().gpus.size()
                                     : tasks.size()));
  const int64_t start_seq = run.start_seq;
  Running old = StopRunning(job);  // releases the old allocations and uncharges their use
  attained_[job] += AttainedIn(old, now);
  // The new allocations are the kept part of the old ones and room that was free besides
  // them (ResizedGpus / ResizedNodes): they fit now that the old ones are released.
  for (const Allocation& a : tasks) (void)state_.Allocate(a);
  StartRunning(std::make_unique<model::Job>(std::move(job_then)), old.project, std::move(tasks),
               now);
  running_.at(job).start_seq = start_seq;
  return Status::Ok();
}

std::optional<std::vector<Allocation>> Scheduler::ResizedGpus(const Running& run, int gpus) const {
  const Allocation& old = run.tasks.front();
  Allocation resized = old;
  resized.gpus.clear();
  const int keep = std::min<int>(gpus, static_cast<int>(old.gpus.size()));
  resized.gpus.assign(old.gpus.begin(), old.gpus.begin() + keep);
  const NodeState& node = state_.node(old.node);
  for (int g = 0;
       g < static_cast<int>(node.gpu_free.size()) && static_cast<int>(resized.gpus.size()) < gpus;
       ++g) {
    if (node.gpu_free[g] == kWholeGpu.value()) resized.gpus.push_back(GpuShare{g, kWholeGpu});
  }
  if (static_cast<int>(resized.gpus.size()) < gpus) return std::nullopt;
  return std::vector<Allocation>{std::move(resized)};
}

std::optional<std::vector<Allocation>> Scheduler::ResizedNodes(const Running& run, int tasks) {
  const size_t keep = std::min<size_t>(static_cast<size_t>(tasks), run.tasks.size());
  std::vector<Allocation> out(run.tasks.begin(), run.tasks.begin() + keep);
  if (out.size() == static_cast<size_t>(tasks)) return out;
  // Each new task on a node holding no task of the job: the job's nodes, and each node a new
  // task takes, are cordoned while the policy places the next one, then restored.
  std::vector<NodeIndex> cordoned;
  for (const Allocation& a : out) {
    if (state_.node(a.node).schedulable) {
      (void)state_.SetSchedulable(a.node, false);
      cordoned.push_back(a.node);
    }
  }
  Shape shape{run.job->resources, 1};
  const TaskRequest& request = RequestOf(shape);
  std::vector<Allocation> added;
  while (out.size() + added.size() < static_cast<size_t>(tasks)) {
    std::optional<Allocation> placed = placer_.Place(request);
    if (!placed) break;
    (void)state_.SetSchedulable(placed->node, false);
    cordoned.push_back(placed->node);
    added.push_back(std::move(*placed));
  }
  for (NodeIndex n : cordoned) (void)state_.SetSchedulable(n, true);
  // Resize allocates the result again once the old allocations are released.
  for (const Allocation& a : added) (void)state_.Release(a);
  if (out.size() + added.size() < static_cast<size_t>(tasks)) return std::nullopt;
  out.insert(out.end(), added.begin(), added.end());
  return out;
}

Status Scheduler::Adopt(const model::Job& job, const std::vector<Allocation>& tasks,
                        Seconds started) {
  CORRAL_RETURN_IF_ERROR(model::Validate(job));
  if (pending_.count(job.id) || running_.count(job.id)) {
    return AlreadyExists("job " + Id(job.id) + " is already known");
  }
  std::vector<Allocation> applied;
  for (const Allocation& a : tasks) {
    Status s = state_.Allocate(a);
    if (!s.ok()) {
      for (const Allocation& undo : applied) (void)state_.Release(undo);
      return FailedPrecondition("job " + Id(job.id) +
                                ": an allocation does not fit: " + s.message());
    }
    applied.push_back(a);
  }
  StartRunning(std::make_unique<model::Job>(job), InternProject(job.project), tasks, started);
  ++state_version_;
  return Status::Ok();
}

int64_t Scheduler::ProjectUsage(const std::string& project) const {
  auto it = use_.project.find(project);
  return it == use_.project.end() ? 0 : it->second;
}

void Scheduler::LimitUse::Add(const model::Job& job) {
  project[job.project] += MilliOf(job);
  AddUse(user, job.project, job.user, MilliOf(job));
  if (job.array_id) ++array[*job.array_id];
}

void Scheduler::LimitUse::Remove(const model::Job& job) {
  project[job.project] -= MilliOf(job);
  AddUse(user, job.project, job.user, -MilliOf(job));
  if (job.array_id && --array[*job.array_id] == 0) array.erase(*job.array_id);
}

std::optional<PendingReason> Scheduler::LimitReason(const model::Job& job, ProjectId project,
                                                    const LimitUse& use) const {
  const ProjectPolicy& policy = PolicyOf(project);
  if (policy.limit_milli) {
    auto it = use.project.find(job.project);
    const int64_t used = it == use.project.end() ? 0 : it->second;
    if (used + MilliOf(job) > *policy.limit_milli) {
      return PendingReason{kReasonProjectLimit,
                           "project '" + job.project + "' runs " + std::to_string(used / 1000) +
                               " GPUs; its limit is " + std::to_string(*policy.limit_milli / 1000)};
    }
  }
  if (policy.user_limit_milli) {
    const int64_t used = UseOf(use.user, job.project, job.user);
    if (used + MilliOf(job) > *policy.user_limit_milli) {
      return PendingReason{kReasonUserLimit,
                           "user '" + job.user + "' runs " + std::to_string(used / 1000) +
                               " GPUs in project '" + job.project + "'; the limit per user is " +
                               std::to_string(*policy.user_limit_milli / 1000)};
    }
  }
  if (job.array_max_running) {
    auto it = use.array.find(*job.array_id);
    const int running = it == use.array.end() ? 0 : it->second;
    if (running >= *job.array_max_running) {
      return PendingReason{kReasonArrayLimit, "array " + Id(*job.array_id) + " has max_running " +
                                                  std::to_string(*job.array_max_running) +
                                                  " running"};
    }
  }
  return std::nullopt;
}

namespace {

int64_t QuotaOf(const ProjectPolicy& policy, const std::string& bucket) {
  if (bucket.empty()) return policy.quota_milli;
  auto it = policy.model_quota_milli.find(bucket);
  return it == policy.model_quota_milli.end() ? 0 : it->second;
}

}  // namespace

std::vector<JobId> Scheduler::BorrowedJobs() const {
  // Per project and bucket, the earliest-started use is inside the quota; the rest is borrowed.
  std::vector<const Running*> runs;
  runs.reserve(running_.size());
  for (const auto& [id, run] : running_) runs.push_back(&run);
  std::sort(runs.begin(), runs.end(),
            [](const Running* a, const Running* b) { return a->start_seq < b->start_seq; });
  std::map<std::pair<std::string, std::string>, int64_t> used;
  std::vector<JobId> borrowed;
  for (const Running* run : runs) {
    int64_t& u = used[{run->job->project, run->bucket}];
    u += QuotaMilliOf(*run->job);
    if (u > QuotaOf(PolicyOf(run->job->project), run->bucket)) borrowed.push_back(run->job->id);
  }
  std::sort(borrowed.begin(), borrowed.end());
  return borrowed;
}

bool Scheduler::WouldBorrow(const model::Job& job, ProjectId project) const {
  const ProjectPolicy& policy = PolicyOf(project);
  const std::string& bucket = QuotaBucket(policy, job.resources.gpu_models);
  const auto& buckets = bucket_usage_[project.value()];
  auto used = buckets.find(bucket);
  return (used == buckets.end() ? 0 : used->second) + QuotaMilliOf(job) > QuotaOf(policy, bucket);
}

bool Scheduler::AnyQuota() const {
  for (const auto& [name, p] : config_.sharing.projects) {
    if (p.quota_milli > 0 || !p.model_quota_milli.empty()) return true;
  }
  return false;
}

bool Scheduler::QuotaHasRoom(const model::Job& job, ProjectId project) const {
  const ProjectPolicy& policy = PolicyOf(project);
  return QuotaOf(policy, QuotaBucket(policy, job.resources.gpu_models)) > 0 &&
         !WouldBorrow(job, project);
}

// --- Placement -------------------------------------------------------------------------------

std::optional<std::vector<Allocation>> Scheduler::PlaceGang(Shape& shape) {
  return sched::PlaceGang(placer_, RequestOf(shape), shape.tasks, config_.gang_placement);
}

std::optional<std::vector<Allocation>> Scheduler::Reclaim(Shape& shape, const model::Job& job,
                                                          Seconds now,
                                                          std::vector<Preemption>& preemptions) {
  const TaskRequest& request = RequestOf(shape);
  // Candidates: borrowed jobs of other projects holding GPUs the job could use, that have run
  // at least min_run_before_preemption, cheapest loss first (config_.victims).
  // The borrowed set at the start of this pass, less what stopped since; jobs started in this
  // pass are not candidates (they were placed ahead of this job by the pass's own order).
  if (!borrowed_) borrowed_ = BorrowedJobs();
  bool skipped_recent = false;
  std::vector<JobId> candidates;
  int64_t freeable = 0;
  for (JobId id : *borrowed_) {
    auto it = running_.find(id);
    if (it == running_.end()) continue;
    if (PlacedInPass(id, it->second)) {
      skipped_recent = true;  // a candidate next pass: the failure is not final
      continue;
    }
    const Running& run = it->second;
    if (run.job->project == job.project) continue;
    if (now.value() - run.start.value() < config_.min_run_before_preemption.value()) {
      skipped_recent = true;  // a candidate once it has run long enough
      continue;
    }
    int64_t useful = 0;
    for (const Allocation& a : run.tasks) {
      const NodeState& node = state_.node(a.node);
      if (!node.present || !request.AcceptsModel(node.model)) continue;
      for (const GpuShare& g : a.gpus) useful += g.milli.value();
    }
    if (useful > 0) {
      candidates.push_back(id);
      freeable += useful;
    }
  }
  // Not enough borrowed GPUs of the right models, even counting the free ones: give up early.
  int64_t free_usable = 0;
  for (NodeIndex n = 0; n < state_.NodeSlots(); ++n) {
    const NodeState& node = state_.node(n);
    if (!node.present || !node.schedulable || !request.AcceptsModel(node.model)) continue;
    for (int32_t f : node.gpu_free) free_usable += f;
  }
  reclaim_final_ = !skipped_recent;
  if (freeable + free_usable < MilliOf(job)) return std::nullopt;
  auto over_quota = [&](const Running& run) {
    const ProjectPolicy& p = PolicyOf(run.job->project);
    const int64_t quota = std::max<int64_t>(1, QuotaOf(p, run.bucket));
    return static_cast<double>(ProjectUsage(run.job->project)) / static_cast<double>(quota);
  };
  // Least lost work keeps today's first rule (priority) and replaces "most over quota" by the
  // work the victim would lose per GPU it frees (the time since its last checkpoint): victims
  // are taken until the job fits, so the cheapest GPUs, not the cheapest jobs, go first.
  auto second_key = [&](JobId id, const Running& run) {
    if (config_.victims == VictimOrder::kPriority) return -over_quota(run);
    return LostWorkOf(id, now) / static_cast<double>(std::max<int64_t>(1, MilliOf(*run.job)));
  };
  std::sort(candidates.begin(), candidates.end(), [&](JobId a, JobId b) {
    const Running& ra = running_.at(a);
    const Running& rb = running_.at(b);
    return std::make_tuple(ra.job->priority, second_key(a, ra), -ra.start_seq) <
           std::make_tuple(rb.job->priority, second_key(b, rb), -rb.start_seq);
  });
  return PreemptFor(
      shape, job, candidates,
      "of project '" + job.project + "', which is within its quota: borrowed GPUs returned", now,
      preemptions);
}

std::optional<Scheduler::Released> Scheduler::ReleaseToPlace(Shape& shape,
                                                             const std::vector<JobId>& candidates) {
  const TaskRequest& request = RequestOf(shape);
  // Release candidates one by one until the job fits; then give back those it did not need.
  std::vector<JobId> released;
  std::optional<std::vector<Allocation>> placed;
  for (JobId id : candidates) {
    for (const Allocation& a : running_.at(id).tasks) (void)state_.Release(a);
    released.push_back(id);
    if (!placer_.GpusCouldFit(request)) continue;
    placed = PlaceGang(shape);
    if (placed) break;
  }
  if (!placed) {
    for (JobId id : released) {
      for (const Allocation& a : running_.at(id).tasks) (void)state_.Allocate(a);
    }
    return std::nullopt;
  }
  std::vector<JobId> needed;
  for (auto it = released.rbegin(); it != released.rend(); ++it) {
    // Spared when all its tasks fit back; tasks are re-allocated one by one (two tasks on one
    // node may each fit alone but not together) and rolled back on the first that does not.
    const std::vector<Allocation>& tasks = running_.at(*it).tasks;
    size_t back = 0;
    while (back < tasks.size() && state_.Allocate(tasks[back]).ok()) ++back;
    if (back == tasks.size()) continue;
    for (size_t i = 0; i < back; ++i) (void)state_.Release(tasks[i]);
    needed.push_back(*it);
  }
  std::sort(needed.begin(), needed.end());
  return Released{std::move(*placed), std::move(needed)};
}

std::optional<std::vector<Allocation>> Scheduler::PreemptFor(Shape& shape, const model::Job& job,
                                                             const std::vector<JobId>& candidates,
                                                             const std::string& why, Seconds now,
                                                             std::vector<Preemption>& preemptions) {
  std::optional<Released> freed = ReleaseToPlace(shape, candidates);
  if (!freed) return std::nullopt;
  for (JobId id : freed->jobs) {
    const double lost = LostWorkOf(id, now);
    Running run = StopRunning(id, /*release=*/false);  // released by ReleaseToPlace
    attained_[id] += AttainedIn(run, now);
    Enqueue(AtMin(std::move(*run.job)));
    preemptions.push_back({id, job.id, kPreemptedReasonPrefix + Id(job.id) + " " + why, lost});
  }
  return std::move(freed->placed);
}

bool Scheduler::PlacedInPass(JobId id, const Running& run) const {
  return run.start_seq >= pass_first_seq_ || moved_in_pass_.count(id) > 0;
}

const std::unordered_map<NodeIndex, Scheduler::RepackNode>& Scheduler::RepackNodes() {
  // Valid while no job starts, stops or moves: each bumps start_seq_ or generation_.
  const std::tuple<int64_t, int64_t, int64_t> key{passes_, generation_, start_seq_};
  if (repack_nodes_key_ == key) return repack_nodes_;
  repack_nodes_key_ = key;
  repack_nodes_.clear();
  for (const auto& [id, run] : running_) {
    const bool movable = run.tasks.size() == 1 && !PlacedInPass(id, run);
    for (const Allocation& a : run.tasks) {
      RepackNode& node = repack_nodes_[a.node];
      for (const GpuShare& g : a.gpus) node.milli += g.milli.value();
      node.movable = node.movable && movable;
      node.jobs.push_back(id);
    }
  }
  for (auto& [n, node] : repack_nodes_) std::sort(node.jobs.begin(), node.jobs.end());
  return repack_nodes_;
}

std::optional<std::vector<Allocation>> Scheduler::Repack(Shape& shape, const model::Job& job,
                                                         Seconds now, Decisions& out) {
  const TaskRequest& request = RequestOf(shape);
  // The nodes to clear: those whose jobs may all move and that could hold a task of the job
  // once idle (taking work, of a model and runtime it accepts, large enough), the least held
  // first, at most the job's task count + kRepackSpareNodes of them.
  std::vector<std::pair<int64_t, NodeIndex>> nodes;
  const auto& held = RepackNodes();
  for (const auto& [n, h] : held) {
    const NodeState& node = state_.node(n);
    if (!h.movable || h.milli == 0 || !node.present || !node.schedulable ||
        !request.AcceptsModel(node.model) ||
        (!request.any_runtime && (node.runtimes & request.runtimes) == 0) ||
        static_cast<int64_t>(node.gpu_free.size()) < request.gpus || node.cpu_total < request.cpu ||
        node.memory_total < request.memory) {
      continue;
    }
    nodes.push_back({h.milli, n});
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.resize(std::min(nodes.size(), static_cast<size_t>(job.tasks) + kRepackSpareNodes));
  std::vector<JobId> candidates;
  for (const auto& [milli, n] : nodes) {
    const std::vector<JobId>& jobs = held.at(n).jobs;
    candidates.insert(candidates.end(), jobs.begin(), jobs.end());
  }
  // Clear them job by job until the job fits; the jobs it did not need stay where they are.
  std::optional<Released> freed = ReleaseToPlace(shape, candidates);
  if (!freed) return std::nullopt;
  // Then every job it needed elsewhere, the largest first. Under backfill neither the job nor
  // a moved one may hold a reserved node past the reserved start.
  std::vector<JobId>& moved = freed->jobs;
  std::sort(moved.begin(), moved.end(), [&](JobId a, JobId b) {
    const int64_t ma = MilliOf(*running_.at(a).job), mb = MilliOf(*running_.at(b).job);
    return ma != mb ? ma > mb : a < b;
  });
  bool fits = !reservation_ || !DelaysReservation(freed->placed, now, EstimateOf(job));
  std::vector<std::vector<Allocation>> to;
  for (size_t i = 0; fits && i < moved.size(); ++i) {
    const Running& run = running_.at(moved[i]);
    auto tasks = PlaceGang(shapes_[groups_[GroupOf(*run.job)].shape]);
    fits = tasks.has_value();
    if (!fits) break;
    to.push_back(std::move(*tasks));
    fits =
        !reservation_ ||
        !DelaysReservation(to.back(), now, Seconds(ExpectedEndAt(run, now).value() - now.value()));
  }
  if (!fits) {
    // Back as it was, with Release/Allocate only: the state ends identical, so the shapes'
    // "failed" marks (generation_) stay valid.
    for (const std::vector<Allocation>& tasks : to) {
      for (const Allocation& a : tasks) (void)state_.Release(a);
    }
    for (const Allocation& a : freed->placed) (void)state_.Release(a);
    for (JobId id : moved) {
      for (const Allocation& a : running_.at(id).tasks) (void)state_.Allocate(a);
    }
    return std::nullopt;
  }
  // A move goes on with the same run: its start, start_seq (its place inside its quota),
  // expected end and checkpoint stay; only its allocations change.
  if (AnyQuota() && !borrowed_) borrowed_ = BorrowedJobs();
  for (size_t i = 0; i < moved.size(); ++i) {
    const JobId id = moved[i];
    out.preemptions.push_back(
        {id, job.id,
         kPreemptedReasonPrefix + Id(job.id) + " (moved to another node to make room: re-packing)",
         LostWorkOf(id, now)});
    running_.at(id).tasks = to[i];
    moved_in_pass_.insert(id);
    const bool borrowed = borrowed_ && std::binary_search(borrowed_->begin(), borrowed_->end(), id);
    out.starts.push_back(JobStart{id, std::move(to[i]), borrowed});
  }
  ++generation_;
  ++state_version_;
  return std::move(freed->placed);
}

Seconds Scheduler::ExpectedEndAt(const Running& run, Seconds now) const {
  return ExpectedEndOf(run.start, Seconds(run.estimated_end.value() - run.start.value()),
                       run.job->time_limit, now)
      .end;
}

int64_t Scheduler::AttainedIn(const Running& run, Seconds now) const {
  const int64_t gpus = std::max<int64_t>(1, (MilliOf(*run.job) + 999) / 1000);
  return std::max<int64_t>(0, now.value() - run.start.value()) * gpus;
}

int Scheduler::LasQueueOf(int64_t attained) const {
  const auto& t = config_.las_thresholds_gpu_s;
  return static_cast<int>(std::upper_bound(t.begin(), t.end(), attained) - t.begin());
}

std::vector<JobId> Scheduler::LasCandidates(const model::Job& job, Seconds now) const {
  // Running jobs in a lower-priority queue (more attained GPU service) than the waiting job,
  // started before this pass: the most served first, then the most recently started.
  auto attained = [&](JobId id) {
    auto it = attained_.find(id);
    return it == attained_.end() ? 0 : it->second;
  };
  const int mine = LasQueueOf(attained(job.id));
  std::vector<std::pair<std::tuple<int64_t, int64_t>, JobId>> ranked;
  for (const auto& [id, run] : running_) {
    if (PlacedInPass(id, run)) continue;
    const int64_t served = attained(id) + AttainedIn(run, now);
    if (LasQueueOf(served) <= mine) continue;
    ranked.push_back({{-served, -run.start_seq}, id});
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<JobId> out;
  for (const auto& [key, id] : ranked) out.push_back(id);
  return out;
}

int64_t Scheduler::RemainingOf(const Running& run, Seconds now) const {
  // ExpectedEndAt is always after now: a job that outlived its estimate still has some left
  // (for SRSF a small share's may floor to 0, as its queue key would: it is then not a victim).
  const int64_t seconds = ExpectedEndAt(run, now).value() - now.value();
  if (config_.order == QueueOrder::kSrtf) return seconds;
  return ServiceOf(seconds, *run.job);
}

std::vector<JobId> Scheduler::RemainingCandidates(const OrderKey& key, Seconds now) const {
  std::vector<std::pair<std::tuple<int64_t, int64_t>, JobId>> ranked;
  for (const auto& [id, run] : running_) {
    if (PlacedInPass(id, run)) continue;
    const int64_t remaining = RemainingOf(run, now);
    if (remaining <= std::get<0>(key)) continue;
    ranked.push_back({{-remaining, -run.start_seq}, id});
  }
  std::sort(ranked.begin(), ranked.end());
  std::vector<JobId> out;
  for (const auto& [rank, id] : ranked) out.push_back(id);
  return out;
}

std::vector<std::optional<Seconds>> Scheduler::ShadowStarts(const std::vector<JobId>& jobs,
                                                            Seconds now,
                                                            std::set<NodeIndex>* first_nodes) {
  // Events: running jobs ending at their expected ends; shadow starts join them.
  struct End {
    int64_t time;
    int64_t order;  // ties: running jobs by id, then shadow jobs in start order
    int shadow;     // index into `shadow`, or -1 for a running job
    std::vector<Allocation> tasks;
    const model::Job* job;  // counted in `use` while it runs in shadow time
    bool operator>(const End& o) const { return std::tie(time, order) > std::tie(o.time, o.order); }
  };
  // Hard limits and arrays' running limits hold in shadow time too (an element of a `%1` array
  // starts after the one before it ends): shadow starts and ends move a copy of the use.
  LimitUse use = use_;
  std::priority_queue<End, std::vector<End>, std::greater<>> ends;
  std::vector<JobId> ids;
  for (const auto& [id, run] : running_) ids.push_back(id);
  std::sort(ids.begin(), ids.end());
  int64_t order = 0;
  for (JobId id : ids) {
    const Running& run = running_.at(id);
    ends.push({ExpectedEndAt(run, now).value(), order++, -1, run.tasks, run.job.get()});
  }
  std::vector<Allocation> released;             // real allocations to give back at the end
  std::vector<std::vector<Allocation>> shadow;  // shadow starts
  std::vector<bool> shadow_live;                // ... not yet ended in shadow time
  std::set<int> never;                          // shapes that fit not even an idle cluster
  std::vector<std::optional<Seconds>> starts;
  int64_t t = now.value();
  for (size_t i = 0; i < jobs.size(); ++i) {
    const PendingJob& p = pending_.at(jobs[i]);
    const int shape_id = groups_[p.group].shape;
    Shape& shape = shapes_[shape_id];
    std::optional<Seconds> start;
    const int64_t t0 = t;
    const size_t released0 = released.size();
    std::vector<End> popped;
    while (!never.count(shape_id)) {
      const bool limited = LimitReason(*p.job, groups_[p.group].project, use).has_value();
      std::optional<std::vector<Allocation>> gang;
      if (!limited) gang = PlaceGang(shape);
      if (gang) {
        start = Seconds(t);
        if (i == 0 && first_nodes) {
          for (const Allocation& a : *gang) first_nodes->insert(a.node);
        }
        use.Add(*p.job);
        ends.push({t + EstimateOf(*p.job).value(), order++, static_cast<int>(shadow.size()), *gang,
                   p.job.get()});
        shadow.push_back(std::move(*gang));
        shadow_live.push_back(true);
        break;
      }
      if (ends.empty()) {
        // It fits not even with everything ended (or its limits hold it even then): undo its
        // wait, so the jobs after it are estimated as if it were not there. Only capacity
        // condemns the shape: a limit is its project's or array's.
        if (!limited) never.insert(shape_id);
        for (auto e = popped.rbegin(); e != popped.rend(); ++e) {
          for (const Allocation& a : e->tasks) {
            if (state_.node(a.node).present) (void)state_.Allocate(a);
          }
          if (e->shadow >= 0) shadow_live[e->shadow] = true;
          use.Add(*e->job);
          ends.push(*e);
        }
        released.resize(released0);
        t = t0;
        break;
      }
      End e = ends.top();
      ends.pop();
      t = std::max(t, e.time);
      for (const Allocation& a : e.tasks) {
        if (state_.node(a.node).present) (void)state_.Release(a);
      }
      if (e.shadow < 0) {
        released.insert(released.end(), e.tasks.begin(), e.tasks.end());
      } else {
        shadow_live[e.shadow] = false;
      }
      use.Remove(*e.job);
      popped.push_back(std::move(e));
    }
    starts.push_back(start);
  }
  for (size_t k = 0; k < shadow.size(); ++k) {
    if (!shadow_live[k]) continue;
    for (const Allocation& a : shadow[k]) (void)state_.Release(a);
  }
  for (const Allocation& a : released) {
    if (state_.node(a.node).present) (void)state_.Allocate(a);
  }
  ++state_version_;
  return starts;
}

// --- The pass --------------------------------------------------------------------------------

Decisions Scheduler::Schedule(Seconds now) {
  Decisions out;
  ++passes_;
  blocked_head_.reset();
  reservation_.reset();
  fair_share_.AdvanceTo(now);
  if (estimate_changes_ > 0 && estimate_changes_ * kRekeyShare >= pending_count_) RekeyPending();
  pass_first_seq_ = start_seq_;  // jobs started from here on started in this pass
  moved_in_pass_.clear();
  borrowed_.reset();
  // Without quotas no job has quota room (QuotaHasRoom), so nothing can reclaim: a pass then
  // asks no group whether it could.
  const bool any_quota = AnyQuota();
  const bool reclaim = config_.sharing.reclaim && any_quota;
  const double total_weight = TotalWeight();
  // Groups in pass order. Within a project the order of group heads is static (their fair
  // share factor is the project's); across projects it moves as jobs start (any start changes
  // every project's share of the usage). So: one heap of groups per project under fair share
  // (one heap in all under the other orders), and at each step the best project head.
  // A shape that fails leaves the pass (the state only fills up within a pass), except for
  // reclaim.
  const bool by_project = config_.order == QueueOrder::kFairShare;
  // Heaps (std::greater: the least head on top) in pass_heads_, reused from pass to pass.
  auto push_head = [](std::vector<Head>& heap, const Head& head) {
    heap.push_back(head);
    std::push_heap(heap.begin(), heap.end(), std::greater<>());
  };
  auto pop_head = [](std::vector<Head>& heap) {
    const int g = heap.front().second;
    std::pop_heap(heap.begin(), heap.end(), std::greater<>());
    heap.pop_back();
    return g;
  };
  // Buckets by project (one bucket, ProjectId(), under the other orders).
  auto bucket_of = [&](const Group& group) { return by_project ? group.project : ProjectId(); };
  // The heads to try, gathered per bucket and then heaped at once (a strict pass may pop only
  // a few of them).
  for (auto& [bucket, heap] : pass_heads_) heap.clear();
  std::vector<Head>* one_bucket = by_project ? nullptr : &pass_heads_[ProjectId()];
  // Persistent heads: the pass's one heap is, without a copy, every head in head_order_ after
  // `cursor` (the last one taken from there), plus the heads pushed back in `pushed` (those at
  // or before the cursor, only: so each group is in it at most once). A group's head only moves
  // later as its jobs start, and nothing is queued during such a pass (it preempts nothing), so
  // this pops what the heap would.
  const bool persistent = persistent_heads_;
  std::optional<Head> cursor;
  for (int g : queued_groups_) {
    if (persistent) break;
    Group& group = groups_[g];
    const Shape& shape = shapes_[group.shape];
    const bool failed = shape.failed_generation == generation_;
    // Preemptive orders may make room without capacity being freed: 2D-LAS as service accrues,
    // reclaim as borrowed work appears.
    const bool retry =
        !failed || config_.blocking != Blocking::kSkip || config_.order == QueueOrder::kLas ||
        PreemptsByRemaining(config_.order) || group.waits.has_value() ||
        (reclaim && shape.reclaim_failed_at != ReclaimVersion() &&
         QuotaHasRoom(*pending_.at(JobId(std::get<2>(*group.queue.begin()))).job, group.project));
    if (!retry) continue;
    (one_bucket ? *one_bucket : pass_heads_[group.project]).emplace_back(*group.queue.begin(), g);
  }
  // Under fair share, only the projects with a head this pass keep a bucket: pop_best walks the
  // buckets, and a long-lived server has seen many projects that have nothing queued now.
  if (by_project) {
    std::erase_if(pass_heads_, [](const auto& entry) { return entry.second.empty(); });
  }
  std::map<ProjectId, std::vector<Head>>& heads = pass_heads_;
  for (auto& [bucket, heap] : heads) std::make_heap(heap.begin(), heap.end(), std::greater<>());
  std::set<int> las_tried;     // shapes that tried 2D-LAS preemption in this pass
  std::set<int> repack_tried;  // shapes that tried re-packing in this pass
  // With quotas, two phases: first only jobs within their quota, then the borrowers.
  bool lending = !any_quota;
  std::vector<int> deferred;  // groups whose head would borrow, for the lending phase
  // The next group to try: the best head over the buckets, or under persistent heads the
  // earlier of head_order_'s next one and the best pushed back; -1 when none is left.
  std::vector<Head>* pushed = persistent ? &heads[ProjectId()] : nullptr;
  auto pop_best = [&]() -> int {
    if (persistent) {
      auto next = cursor ? head_order_.upper_bound(*cursor) : head_order_.begin();
      if (next != head_order_.end() && (pushed->empty() || *next < pushed->front())) {
        cursor = *next;
        return next->second;
      }
    }
    if (one_bucket) return one_bucket->empty() ? -1 : pop_head(*one_bucket);  // no keys to compare
    std::vector<Head>* best = nullptr;
    PassKey best_key;
    for (auto& [bucket, heap] : heads) {
      if (heap.empty()) continue;
      const auto& [key, g] = heap.front();
      PassKey k = PassKeyOf(groups_[g].project, key, now, total_weight);
      if (!best || k < best_key) {
        best = &heap;
        best_key = k;
      }
    }
    return best ? pop_head(*best) : -1;
  };
  while (true) {
    const int g = pop_best();
    if (g < 0 && !lending) {
      lending = true;
      for (int d : deferred) {
        push_head(heads[bucket_of(groups_[d])], Head(*groups_[d].queue.begin(), d));
      }
      deferred.clear();
      continue;
    }
    if (g < 0) break;
    Group& group = groups_[g];
    if (group.queue.empty()) continue;
    auto push_back_group = [&] {
      if (group.queue.empty()) return;
      const Head next(*group.queue.begin(), g);
      // Under persistent heads a head after the cursor is still to come from head_order_:
      // pushed too, the group would be tried twice (a borrower deferred twice, and the stale
      // entry would later pop the group's next head before other groups' earlier ones).
      if (persistent && (!cursor || *cursor < next)) return;
      push_head(heads[bucket_of(group)], next);
    };
    OrderKey head = *group.queue.begin();
    Shape& shape = shapes_[group.shape];
    // References into pending_ stay valid until the chosen job leaves it (no copies per pop).
    const model::Job& first = *pending_.at(JobId(std::get<2>(head))).job;
    if (!lending && WouldBorrow(first, group.project)) {
      deferred.push_back(g);
      continue;
    }
    group.waits.reset();
    if (auto limited = LimitReason(first, group.project, use_)) {
      // A user at their limit must not hold back the group's other users: the first job (of at
      // most kLimitScan) that its limits allow goes instead.
      constexpr int kLimitScan = 64;
      std::optional<OrderKey> other;
      int scanned = 0;
      for (const OrderKey& key : group.queue) {
        if (++scanned > kLimitScan) break;
        if (!LimitReason(*pending_.at(JobId(std::get<2>(key))).job, group.project, use_)) {
          other = key;
          break;
        }
      }
      if (!other) {
        group.waits = *limited;
        continue;
      }
      head = *other;
    }
    const JobId id(std::get<2>(head));
    const model::Job& job = *pending_.at(id).job;
    std::optional<std::vector<Allocation>> placed;
    const bool shape_failed = shape.failed_generation == generation_ && shape.tried_pass == passes_;
    if (!shape_failed) {
      shape.tried_pass = passes_;
      placed = PlaceGang(shape);
    }
    bool preempted = false;
    if (!placed && config_.repack && repack_tried.insert(group.shape).second) {
      placed = Repack(shape, job, now, out);
      preempted = placed.has_value();
    }
    if (!placed && reclaim && shape.reclaim_failed_at != ReclaimVersion() &&
        QuotaHasRoom(job, group.project)) {
      placed = Reclaim(shape, job, now, out.preemptions);
      preempted = placed.has_value();
      if (!preempted && reclaim_final_) shape.reclaim_failed_at = ReclaimVersion();
    }
    if (!placed && config_.order == QueueOrder::kLas && !las_tried.count(group.shape)) {
      // 2D-LAS is preemptive: a job in a higher-priority queue takes GPUs from jobs that have
      // had more service (once per shape and pass: the candidates change with time only).
      las_tried.insert(group.shape);
      std::vector<JobId> candidates = LasCandidates(job, now);
      if (!candidates.empty()) {
        placed = PreemptFor(shape, job, candidates, "(least attained service first: 2D-LAS)", now,
                            out.preemptions);
        preempted = placed.has_value();
      }
    }
    if (!placed && PreemptsByRemaining(config_.order)) {
      // SRTF / SRSF: the job takes GPUs from running jobs expected to need more than it does.
      // Not cached per shape like 2D-LAS: the threshold is this job's own key.
      std::vector<JobId> candidates = RemainingCandidates(head, now);
      if (!candidates.empty()) {
        placed =
            PreemptFor(shape, job, candidates, "(shortest remaining first)", now, out.preemptions);
        preempted = placed.has_value();
      }
    }
    OrderKey chosen = head;
    if (placed && reservation_ && !preempted && DelaysReservation(*placed, now, EstimateOf(job))) {
      // Backfill: a later job of the group (same shape, so the same placement) that ends before
      // the reservation may go instead.
      // At most kBackfillScan jobs of the group are looked at (a pass stays linear).
      constexpr int kBackfillScan = 64;
      std::optional<OrderKey> shorter;
      int scanned = 0;
      for (const OrderKey& key : group.queue) {
        if (++scanned > kBackfillScan) break;
        if (!DelaysReservation(*placed, now,
                               EstimateOf(*pending_.at(JobId(std::get<2>(key))).job))) {
          shorter = key;
          break;
        }
      }
      if (!shorter) {
        for (const Allocation& a : *placed) (void)state_.Release(a);
        group.waits = PendingReason{
            kReasonReservation,
            "would delay job " + Id(reservation_->job) + ", which is reserved to start in " +
                std::to_string(reservation_->start.value() - now.value()) +
                " s (backfill: a job may pass it only if it ends by then or uses other nodes)"};
        continue;
      }
      chosen = *shorter;
    }
    if (!placed) {
      if (!shape_failed) shape.failed_generation = generation_;
      if (config_.blocking == Blocking::kStrict) {
        blocked_head_ = id;
        break;
      }
      if (config_.blocking == Blocking::kBackfill && !reservation_ &&
          shape.never_fits_generation != generation_) {
        std::set<NodeIndex> nodes;
        auto start = ShadowStarts({id}, now, &nodes);
        if (start[0]) {
          reservation_ = Reservation{id, *start[0], std::move(nodes)};
        } else {
          shape.never_fits_generation = generation_;  // not even on an idle cluster
        }
      }
      continue;
    }
    const JobId started(std::get<2>(chosen));
    const auto pending = pending_.find(started);
    const bool borrowed = WouldBorrow(*pending->second.job, group.project);
    if (borrowed) ++borrowed_starts_;
    QueueErase(g, chosen);
    StartRunning(std::move(pending->second.job), group.project, *placed, now);
    pending_.erase(pending);
    --pending_count_;
    out.starts.push_back(JobStart{started, std::move(*placed), borrowed});
    push_back_group();
  }
  ++state_version_;
  return out;
}

// --- Explaining ------------------------------------------------------------------------------

std::optional<PendingReason> Scheduler::PendingReasonOf(JobId job) const {
  auto it = pending_.find(job);
  if (it == pending_.end()) return std::nullopt;
  const Group& group = groups_[it->second.group];
  if (group.waits) return group.waits;
  // A strict pass stopped at its head: the jobs it had not reached are behind it, in the pass's
  // order (under fair share a project's standing moves, so keys alone cannot say who is).
  if (blocked_head_ && *blocked_head_ != job && pending_.count(*blocked_head_) &&
      it->second.queued_before_pass < passes_) {
    return PendingReason{kReasonBlockedByHead,
                         "waits behind job " + Id(*blocked_head_) +
                             " (strict queue order: nothing passes the head)"};
  }
  const Shape& shape = shapes_[group.shape];
  if (shape.failed_generation < 0) {
    return NotYetConsidered();
  }
  if (shape.reason_version != state_version_) {
    shape.reason = ExplainUnplaced(state_, shape.request, shape.tasks);
    shape.reason_version = state_version_;
  }
  return shape.reason;
}

std::vector<QueueEntry> Scheduler::Queue(Seconds now, size_t limit) {
  // Queue order at `now`: by each job's pass key as if it were its group's head.
  std::vector<std::pair<PassKey, JobId>> order;
  order.reserve(pending_.size());
  const double total_weight = TotalWeight();
  for (const auto& [id, p] : pending_) {
    order.emplace_back(PassKeyOf(groups_[p.group].project, p.key, now, total_weight), id);
  }
  std::sort(order.begin(), order.end());
  if (order.size() > limit) order.resize(limit);
  std::vector<JobId> ids;
  for (const auto& [key, id] : order) ids.push_back(id);
  std::vector<std::optional<Seconds>> starts = ShadowStarts(ids, now, nullptr);
  std::vector<QueueEntry> out;
  for (size_t i = 0; i < ids.size(); ++i) {
    out.push_back(QueueEntry{ids[i], *PendingReasonOf(ids[i]), starts[i]});
  }
  return out;
}

bool Scheduler::DelaysReservation(const std::vector<Allocation>& placed, Seconds now,
                                  Seconds estimate) const {
  if (now.value() + estimate.value() <= reservation_->start.value()) return false;
  for (const Allocation& a : placed) {
    if (reservation_->nodes.count(a.node)) return true;
  }
  return false;
}

std::optional<std::pair<JobId, Seconds>> Scheduler::ReservedStart() const {
  if (!reservation_) return std::nullopt;
  return std::make_pair(reservation_->job, reservation_->start);
}

std::vector<bool> Scheduler::ReservedNodes() const {
  std::vector<bool> reserved(static_cast<size_t>(state_.NodeSlots()), false);
  if (!reservation_) return reserved;
  for (NodeIndex n : reservation_->nodes) {
    if (n < state_.NodeSlots()) reserved[n] = true;
  }
  return reserved;
}

const std::vector<Allocation>* Scheduler::AllocationsOf(JobId job) const {
  auto it = running_.find(job);
  return it == running_.end() ? nullptr : &it->second.tasks;
}

}  // namespace corral::sched
