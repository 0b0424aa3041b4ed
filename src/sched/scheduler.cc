#include "sched/scheduler.h"

#include <algorithm>
#include <queue>

namespace corral::sched {

Result<QueueOrder> ParseQueueOrder(std::string_view name) {
  if (name == "fifo") return QueueOrder::kFifo;
  if (name == "priority") return QueueOrder::kPriority;
  return InvalidArgument("unknown queue order '" + std::string(name) + "' (known: fifo, priority)");
}

Result<std::unique_ptr<Scheduler>> Scheduler::Create(const SchedulerConfig& config,
                                                     const PolicyContext& context) {
  auto policy = CreatePolicy(config.policy, context);
  if (!policy.ok()) return policy.status();
  return std::unique_ptr<Scheduler>(new Scheduler(config, std::move(policy).value()));
}

Scheduler::Scheduler(const SchedulerConfig& config, std::unique_ptr<PlacementPolicy> policy)
    : config_(config),
      policy_(std::move(policy)),
      state_(ClusterStateOptions{config.seed, policy_->NeedsTaskKinds()}),
      rng_(config.seed),
      placer_(state_, *policy_, rng_) {}

Result<NodeIndex> Scheduler::AddNode(const model::Node& node) {
  auto added = state_.AddNode(node);
  if (added.ok()) {
    ++generation_;
    ++state_version_;
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
  for (JobId id : affected) {
    ReleaseAll(running_[id].tasks);
    running_.erase(id);
  }
  CORRAL_RETURN_IF_ERROR(state_.RemoveNode(n));
  ++generation_;
  ++state_version_;
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

Scheduler::OrderKey Scheduler::KeyOf(const model::Job& job) const {
  int64_t priority = config_.order == QueueOrder::kPriority ? -int64_t{job.priority} : 0;
  return {priority, job.submit_time.value(), job.id.value()};
}

int Scheduler::ShapeOf(const model::Job& job) {
  const model::TaskResources& r = job.resources;
  std::string models;
  for (const auto& m : r.gpu_models) models += m + "|";
  auto key = std::make_tuple(r.cpu.value(), static_cast<int>(r.gpus.value()), r.gpu_milli.value(),
                             r.memory.value(), job.tasks, models);
  auto [it, inserted] = shape_ids_.emplace(key, static_cast<int>(shapes_.size()));
  if (inserted) {
    Shape s;
    s.resources = r;
    s.tasks = job.tasks;
    shapes_.push_back(std::move(s));
  }
  return it->second;
}

const TaskRequest& Scheduler::RequestOf(Shape& shape) {
  // Model ids are resolved against the models present; re-resolve when new ones join.
  if (shape.request_models != state_.ModelCount()) {
    shape.request = placer_.Resolve(shape.resources);
    shape.request_models = state_.ModelCount();
  }
  return shape.request;
}

Status Scheduler::Submit(const model::Job& job) {
  CORRAL_RETURN_IF_ERROR(model::Validate(job));
  if (pending_.count(job.id) || running_.count(job.id)) {
    return AlreadyExists("job " + std::to_string(job.id.value()) + " is already known");
  }
  int shape = ShapeOf(job);
  OrderKey key = KeyOf(job);
  shapes_[shape].queue.insert(key);
  pending_.emplace(job.id, PendingJob{shape, key});
  ++pending_count_;
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

Status Scheduler::Cancel(JobId job) {
  if (auto it = pending_.find(job); it != pending_.end()) {
    shapes_[it->second.shape].queue.erase(it->second.key);
    pending_.erase(it);
    --pending_count_;
    return Status::Ok();
  }
  return Finish(job);
}

Status Scheduler::Finish(JobId job) {
  auto it = running_.find(job);
  if (it == running_.end()) {
    return NotFound("job " + std::to_string(job.value()) + " is not running");
  }
  ReleaseAll(it->second.tasks);
  running_.erase(it);
  return Status::Ok();
}

Status Scheduler::Adopt(const model::Job& job, const std::vector<Allocation>& tasks) {
  CORRAL_RETURN_IF_ERROR(model::Validate(job));
  if (pending_.count(job.id) || running_.count(job.id)) {
    return AlreadyExists("job " + std::to_string(job.id.value()) + " is already known");
  }
  std::vector<Allocation> applied;
  for (const Allocation& a : tasks) {
    Status s = state_.Allocate(a);
    if (!s.ok()) {
      for (const Allocation& undo : applied) (void)state_.Release(undo);
      return FailedPrecondition("job " + std::to_string(job.id.value()) +
                                ": an allocation does not fit: " + s.message());
    }
    applied.push_back(a);
  }
  running_[job.id].tasks = tasks;
  ++state_version_;
  return Status::Ok();
}

std::optional<std::vector<Allocation>> Scheduler::PlaceGang(Shape& shape) {
  const TaskRequest& request = RequestOf(shape);
  std::vector<Allocation> placed;
  for (int i = 0; i < shape.tasks; ++i) {
    std::optional<Allocation> a = placer_.Place(request);
    if (!a) {
      shape.placed_at_failure = static_cast<int>(placed.size());
      for (const Allocation& p : placed) (void)state_.Release(p);
      return std::nullopt;
    }
    placed.push_back(std::move(*a));
  }
  return placed;
}

std::vector<JobStart> Scheduler::Schedule() {
  std::vector<JobStart> started;
  blocked_head_.reset();
  // K-way merge over the shapes' queues, in queue order. A shape that fails leaves the merge
  // for the rest of the pass (the state only fills up within a pass).
  using Head = std::pair<OrderKey, int>;
  std::priority_queue<Head, std::vector<Head>, std::greater<>> heads;
  for (int s = 0; s < static_cast<int>(shapes_.size()); ++s) {
    const Shape& shape = shapes_[s];
    if (shape.queue.empty()) continue;
    if (shape.failed_generation == generation_ && config_.blocking == Blocking::kSkip) continue;
    heads.emplace(*shape.queue.begin(), s);
  }
  while (!heads.empty()) {
    auto [key, s] = heads.top();
    heads.pop();
    Shape& shape = shapes_[s];
    JobId job(std::get<2>(key));
    std::optional<std::vector<Allocation>> placed = PlaceGang(shape);
    if (!placed) {
      shape.failed_generation = generation_;
      if (config_.blocking == Blocking::kStrict) {
        blocked_head_ = job;
        break;
      }
      continue;
    }
    shape.queue.erase(shape.queue.begin());
    pending_.erase(job);
    --pending_count_;
    running_[job].tasks = *placed;
    started.push_back(JobStart{job, std::move(*placed)});
    if (!shape.queue.empty()) heads.emplace(*shape.queue.begin(), s);
  }
  ++state_version_;
  return started;
}

std::optional<PendingReason> Scheduler::PendingReasonOf(JobId job) const {
  auto it = pending_.find(job);
  if (it == pending_.end()) return std::nullopt;
  if (blocked_head_ && *blocked_head_ != job) {
    auto head = pending_.find(*blocked_head_);
    if (head != pending_.end() && head->second.key < it->second.key) {
      return PendingReason{kReasonBlockedByHead,
                           "waits behind job " + std::to_string(blocked_head_->value()) +
                               " (strict queue order: nothing passes the head)"};
    }
  }
  const Shape& shape = shapes_[it->second.shape];
  if (shape.failed_generation < 0) {
    return PendingReason{kReasonNotYetConsidered, "submitted after the last scheduling pass"};
  }
  if (shape.reason_version != state_version_) {
    shape.reason = ExplainUnplaced(state_, shape.request, shape.tasks, shape.placed_at_failure);
    shape.reason_version = state_version_;
  }
  return shape.reason;
}

std::vector<JobId> Scheduler::PendingInOrder() const {
  std::vector<std::pair<OrderKey, JobId>> all;
  all.reserve(pending_.size());
  for (const auto& [id, p] : pending_) all.emplace_back(p.key, id);
  std::sort(all.begin(), all.end());
  std::vector<JobId> out;
  out.reserve(all.size());
  for (const auto& [key, id] : all) out.push_back(id);
  return out;
}

const std::vector<Allocation>* Scheduler::AllocationsOf(JobId job) const {
  auto it = running_.find(job);
  return it == running_.end() ? nullptr : &it->second.tasks;
}

}  // namespace corral::sched
