// Controller, the read view (read_view.h): what the reads answer from without the lock, built
// under it and published whole (docs/control-plane.md, "What takes the controller's lock, and
// what does not").

#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/control/environment_runnable.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

void Controller::PublishLocked(PendingRebuild pending) {
  std::shared_ptr<const ReadView> last = view_.Get();
  auto view = std::make_shared<ReadView>();
  const auto now = std::chrono::steady_clock::now();
  // Never more than a fifth of the loop's time on it, however long the queue: the next build
  // starts at least four times this build's cost after this one ended.
  const auto interval = std::max<std::chrono::steady_clock::duration>(config_.pending_view_interval,
                                                                      4 * pending_build_cost_);
  const bool due = pending_built_pass_ != passes_ && now - pending_built_at_ >= interval;
  if (!last || pending == PendingRebuild::kNow || (pending == PendingRebuild::kIfDue && due)) {
    view->pending = BuildPendingPartLocked();
    pending_built_at_ = std::chrono::steady_clock::now();
    pending_build_cost_ = pending_built_at_ - now;
    pending_built_pass_ = passes_;
  } else {
    view->pending = last->pending;
  }
  last.reset();  // a replaced view is freed here, not by the slot under the controller's lock
  const std::vector<const LiveJob*> started = StartedJobsLocked();
  view->nodes = NodeEntriesLocked(started);
  view->unreachable = UnreachableJobsLocked();
  for (const LiveJob* job : started) {  // by id
    if (job->spec.elastic)
      view->elastic.push_back({job->record.id, job->elastic_now, job->resizes});
  }
  view->summary = ClusterSummaryLocked(started);
  view->drained = drained_;
  view->history = summary_history_;
  view->policy = PolicyViewLocked();
  view->projects = ProjectUsesLocked();
  const int64_t counted = view->pending->drained;
  std::lock_guard inbox(inbox_mu_);
  // Readers take inbox_mu_ before the view: one holding it reads the list as it was for the
  // view it got (this one, or an older one that counts less).
  LeftQueue left = LeftQueueLocked(*view->pending);
  view->left_queue = std::move(left.ids);
  view->left_part_rows = left.part_rows;
  view_.Set(std::move(view));
  while (!unviewed_.empty() && unviewed_.front().number <= counted) unviewed_.pop_front();
}

Controller::LeftQueue Controller::LeftQueueLocked(const PendingPart& part) const {
  LeftQueue left;
  auto gone = [&](JobId id) {
    auto it = jobs_.find(id);
    return it == jobs_.end() || it->second.record.state != JobState::kPending;
  };
  for (const protocol::QueueRow& row : part.queue) {
    if (gone(row.id)) left.ids.push_back(row.id);
  }
  left.part_rows = static_cast<int64_t>(left.ids.size());
  for (const UnviewedJob& job : unviewed_) {  // those in memory: the rest are still pending
    if (job.number > part.drained && job.number <= drained_ && gone(job.row.id)) {
      left.ids.push_back(job.row.id);
    }
  }
  std::sort(left.ids.begin(), left.ids.end());
  return left;
}

std::vector<std::pair<JobId, std::string>> Controller::UnreachableJobsLocked() const {
  std::vector<std::pair<JobId, std::string>> out;
  for (const auto& [name, node] : nodes_) {
    if (!node.unreachable) continue;
    auto on = jobs_on_node_.find(name);
    if (on == jobs_on_node_.end()) continue;
    for (JobId id : on->second) {
      if (auto reason = UnreachableReasonLocked(id)) out.emplace_back(id, *reason);
    }
  }
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

std::vector<ProjectUseView> Controller::ProjectUsesLocked() const {
  std::set<std::string> names = scheduler_->fair_share().Projects();
  for (const auto& [name, policy] : sharing_) names.insert(name);
  std::map<std::string, int64_t> borrowed;
  for (JobId id : scheduler_->BorrowedJobs()) {
    if (auto it = jobs_.find(id); it != jobs_.end()) {
      borrowed[it->second.record.project] +=
          it->second.spec.resources.TotalMilli().value() * it->second.spec.tasks;
    }
  }
  std::vector<ProjectUseView> out;
  out.reserve(names.size());
  for (const std::string& name : names) {  // by name
    auto sharing = sharing_.find(name);
    auto lent = borrowed.find(name);
    out.push_back(
        {.name = name,
         .sharing = SharingOf(sharing == sharing_.end() ? sched::ProjectPolicy{} : sharing->second),
         .running = MilliGpu(scheduler_->ProjectUsage(name)),
         .borrowed = MilliGpu(lent == borrowed.end() ? 0 : lent->second),
         .fair_share_usage = scheduler_->fair_share().EffectiveUsage(name),
         .fair_share_past = scheduler_->fair_share().DecayedUsage(name)});
  }
  return out;
}

protocol::QueueRow Controller::QueueRowOf(const store::JobRecord& record, const JobSpec& spec) {
  return {.id = record.id,
          .name = record.name,
          .user = record.user,
          .project = record.project,
          .priority = record.priority,
          .gpus = MilliGpu(spec.resources.TotalMilli().value() * spec.tasks),
          .submit_time = record.submit_time};
}

std::shared_ptr<const PendingPart> Controller::BuildPendingPartLocked() {
  auto part = std::make_shared<PendingPart>();
  part->built_at = clock_.Now();
  part->drained = drained_;
  part->queue_length = static_cast<int64_t>(scheduler_->pending_count());
  part->jobs.reserve(scheduler_->pending_count());
  for (const auto& [id, job] : jobs_) {  // by id
    if (job.record.state != JobState::kPending) continue;
    if (job.held) {
      part->jobs.push_back({id, ReasonOf(*job.held), std::nullopt});
    } else if (auto reason = scheduler_->PendingReasonOf(id)) {
      part->jobs.push_back({id, ReasonOf(*reason), std::nullopt});
    }
  }
  int position = 0;
  for (const sched::QueueEntry& e : scheduler_->Queue(part->built_at, PendingPart::kQueueRows)) {
    ++position;
    auto it = jobs_.find(e.job);
    if (it == jobs_.end()) continue;
    protocol::QueueRow& row =
        part->queue.emplace_back(QueueRowOf(it->second.record, it->second.spec));
    row.position = position;
    row.pending_reason = ReasonOf(e.reason);
    row.estimated_start = e.estimated_start;
    // The estimate in the same entry as its reason: both from this pass.
    if (PendingJobView* entry = part->Find(e.job)) entry->estimated_start = e.estimated_start;
  }
  return part;
}

std::vector<const Controller::LiveJob*> Controller::StartedJobsLocked() const {
  std::set<JobId> ids;  // a gang's job is on several nodes
  for (const auto& [name, on_node] : jobs_on_node_) ids.insert(on_node.begin(), on_node.end());
  std::vector<const LiveJob*> started;
  started.reserve(ids.size());
  for (JobId id : ids) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) continue;
    const JobState state = it->second.record.state;
    if (state == JobState::kStarting || state == JobState::kRunning) started.push_back(&it->second);
  }
  return started;
}

std::vector<NodeEntryView> Controller::NodeEntriesLocked(
    const std::vector<const LiveJob*>& started) const {
  const auto& state = scheduler_->state();
  // node -> GPU index -> the tasks on it.
  std::map<std::string, std::map<int, std::vector<GpuTaskView>>> on_gpu;
  for (const LiveJob* started_job : started) {
    const LiveJob& job = *started_job;
    const JobId id = job.record.id;
    for (const auto& t : job.tasks) {
      const protocol::TaskOwner owner{id, t.task_index, job.record.user, job.record.project};
      for (const model::GpuShare& g : t.allocation.gpus) {
        on_gpu[t.node][g.index].push_back({owner, g.milli});
      }
    }
  }
  std::vector<NodeEntryView> out;
  out.reserve(nodes_.size());
  for (const auto& [name, node] : nodes_) {
    NodeEntryView entry;
    entry.inventory = node.inventory;
    protocol::NodeView& row = entry.row;
    row = {.name = name,
           .state = node.state,
           .last_heartbeat = node.last_heartbeat,
           .unreachable = node.unreachable,
           .gpu_model = node.inventory.gpu_model,
           .gpus = static_cast<int>(node.inventory.gpus.size()),
           .cpu = node.inventory.cpu,
           .memory = node.inventory.memory,
           .labels = node.inventory.labels,
           .runtimes = node.inventory.runtimes,
           .container_engine = node.inventory.container_engine,
           .tools = node.inventory.tools,
           .env_prefixes = node.inventory.env_prefixes,
           .gpu_metrics_error = node.gpu_metrics_error};
    if (const sched::NodeIndex n = state.FindNode(name); n >= 0) {
      const auto& free = state.node(n);
      row.free = protocol::NodeFree{{free.gpu_free.begin(), free.gpu_free.end()},
                                    CpuMilli(free.cpu_free),
                                    MemoryMib(free.memory_free)};
    }
    entry.gpu_tasks.resize(row.gpus);
    if (auto tasks = on_gpu.find(name); tasks != on_gpu.end()) {
      for (auto& [index, list] : tasks->second) {
        if (index >= 0 && index < row.gpus) entry.gpu_tasks[index] = std::move(list);
      }
    }
    out.push_back(std::move(entry));
  }
  return out;
}

void Controller::AddPendingReason(const PendingPart& pending, protocol::JobSummary& row) {
  if (row.state != JobState::kPending) return;  // the store's state: newer than any view
  if (const PendingJobView* entry = pending.Find(row.id)) {
    row.pending_reason = entry->reason;
    row.estimated_start = entry->estimated_start;
    return;
  }
  row.pending_reason = ReasonOf(sched::NotYetConsidered());
}

void Controller::Publish(bool with_pending) {
  auto lock = LockState();
  PublishLocked(with_pending ? PendingRebuild::kNow : PendingRebuild::kKeep);
}

// --- The reads -------------------------------------------------------------------------------

protocol::EnvironmentRunsHere Controller::RunsHere(const protocol::EnvironmentSpec& spec) const {
  const std::shared_ptr<const ReadView> view = view_.Get();
  std::vector<const protocol::NodeView*> nodes;
  nodes.reserve(view->nodes.size());
  for (const NodeEntryView& n : view->nodes) nodes.push_back(&n.row);
  return RunsOn(spec, nodes);
}

std::vector<protocol::NodeView> Controller::Nodes(const Principal& who) {
  const std::shared_ptr<const ReadView> view = view_.Get();
  std::vector<protocol::NodeView> out;
  out.reserve(view->nodes.size());
  for (const NodeEntryView& entry : view->nodes) {
    protocol::NodeView row = entry.row;
    row.gpu_tasks.resize(entry.gpu_tasks.size());
    for (size_t i = 0; i < entry.gpu_tasks.size(); ++i) {
      for (const GpuTaskView& t : entry.gpu_tasks[i]) {
        std::optional<protocol::TaskOwner> owner;
        if (SeesWorkOf(who, t.owner.project)) owner = t.owner;
        row.gpu_tasks[i].push_back({std::move(owner), t.milli});
      }
    }
    out.push_back(std::move(row));
  }
  return out;
}

protocol::ClusterSummary Controller::ClusterSummary() {
  std::shared_ptr<const ReadView> view;
  int64_t submitted = 0;
  {
    std::lock_guard inbox(inbox_mu_);
    view = view_.Get();
    submitted = submitted_;
  }
  protocol::ClusterSummary summary = view->summary;
  summary.jobs_pending += submitted - view->drained;  // committed since it was built
  return summary;
}

std::vector<protocol::ClusterSummary> Controller::SummaryHistory(Seconds since) {
  const std::shared_ptr<const ReadView> view = view_.Get();
  std::vector<protocol::ClusterSummary> out;
  for (const protocol::ClusterSummary& s : *view->history) {
    if (s.time >= since) out.push_back(s);
  }
  return out;
}

protocol::PolicyView Controller::PolicyView() { return view_.Get()->policy; }

int Controller::WaitingHeartbeats() { return waiting_heartbeats_.load(); }

Result<std::vector<protocol::QueueRow>> Controller::QueueView(const Principal& who, int limit) {
  if (limit < 1) return InvalidArgument("field 'limit': must be at least 1");
  // Positions count the rows still queued: a job that left moves the rows behind it up at once,
  // not at the next pass.
  std::shared_ptr<const ReadView> view;
  std::vector<protocol::QueueRow> unviewed;  // after the part's queue, in submit order
  {
    std::lock_guard inbox(inbox_mu_);
    view = view_.Get();
    const PendingPart& pending = *view->pending;
    int64_t left_ahead = view->left_part_rows;
    for (const UnviewedJob& job : unviewed_) {
      if (job.number <= pending.drained) continue;  // in the part (or no longer pending)
      if (view->LeftQueue(job.row.id)) {
        ++left_ahead;
        continue;
      }
      const int64_t position = pending.queue_length + (job.number - pending.drained) - left_ahead;
      if (position > limit) break;
      if (!who.CanAccessProject(job.row.project)) continue;
      protocol::QueueRow& row = unviewed.emplace_back(job.row);
      row.position = static_cast<int>(position);
      row.pending_reason = ReasonOf(sched::NotYetConsidered());
    }
  }
  std::vector<protocol::QueueRow> out;
  int64_t left_ahead = 0;
  for (const protocol::QueueRow& row : view->pending->queue) {
    if (view->LeftQueue(row.id)) {
      ++left_ahead;
      continue;
    }
    const int64_t position = row.position - left_ahead;
    if (position > limit) break;
    if (!who.CanAccessProject(row.project)) continue;
    out.push_back(row);
    out.back().position = static_cast<int>(position);
  }
  out.insert(out.end(), std::make_move_iterator(unviewed.begin()),
             std::make_move_iterator(unviewed.end()));
  return out;
}

}  // namespace corral::server
