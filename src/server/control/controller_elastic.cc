// Controller, elastic jobs (issue 20; docs/control-plane.md, "Elastic jobs"): a job with a size
// range is resized live. Before each pass, running elastic jobs give back GPUs above their MIN
// so that pending jobs can start (sched::PlanRoom); after it, the jobs the pass started take the
// size the idle GPUs allow, and the others grow into them under the hysteresis
// (sched::PlanAfterPass). A resize keeps the job running: the scheduler's allocation changes at
// once, the store records a new generation of its tasks with an event, the old tasks are stopped
// (with the job's stop grace) and the new ones launch once they have stopped.

#include <algorithm>
#include <limits>

#include "sched/elastic_plan.h"
#include "sched/pending_reason.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// "GPUs" or "nodes" for a size of `n` ("1 GPU").
std::string UnitWord(model::ElasticUnit unit, int n) {
  if (unit == model::ElasticUnit::kNodes) return n == 1 ? "node" : "nodes";
  return n == 1 ? "GPU" : "GPUs";
}

// The job event of a resize: "resized from 8 to 4 GPUs: a pending job needs them".
std::string ResizeEvent(const sched::Resize& z, model::ElasticUnit unit) {
  const std::string why =
      z.reason == sched::ResizeReason::kPendingJob ? "a pending job needs them" : "idle GPUs";
  return std::string(kResizedEventPrefix) + std::to_string(z.from) + " to " + std::to_string(z.to) +
         " " + UnitWord(unit, z.to) + ": " + why;
}

// Whether a pending job with this reason (sched/pending_reason.h) may wait for GPUs that a
// shrink could free: it did not fit, or no pass has tried it yet (a job whose group waits for a
// limit or a reservation says so instead, before any pass tries it).
bool IsCapacityReason(const std::string& code) {
  return code == sched::kReasonInsufficientGpus || code == sched::kReasonFragmented ||
         code == sched::kReasonNoFreeBlock || code == sched::kReasonGangPartial ||
         code == sched::kReasonNotYetConsidered;
}

}  // namespace

int Controller::ElasticSizeOf(const LiveJob& job) {
  return job.spec.elastic ? ElasticSizeIn(job.spec.elastic->unit, job.tasks) : 0;
}

sched::ResizeRules Controller::ResizeRulesLocked() const {
  sched::ResizeRules rules;
  rules.min_interval = config_.resize_interval;
  rules.restart_cost = config_.resize_cost;
  rules.budget = config_.resize_budget;
  return rules;
}

std::optional<sched::ElasticRun> Controller::ElasticRunLocked(const LiveJob& job,
                                                              Seconds now) const {
  const std::vector<sched::Allocation>* tasks = scheduler_->AllocationsOf(job.record.id);
  if (!job.spec.elastic || tasks == nullptr || tasks->empty()) return std::nullopt;
  auto range = sched::ElasticRange::Of(*job.spec.elastic);
  if (!range.ok()) return std::nullopt;  // validated at submission
  const model::ElasticUnit unit = job.spec.elastic->unit;
  const int task_gpus = static_cast<int>(tasks->front().gpus.size());
  std::vector<sched::NodeIndex> nodes;
  for (const sched::Allocation& a : *tasks) nodes.push_back(a.node);
  // Growth pays when the time it saves exceeds the restart: a job with a time limit has that
  // much left at most; one without is taken to run long enough for any growth to pay.
  double remaining = std::numeric_limits<double>::max();
  if (job.spec.time_limit_s > 0 && job.record.start_time) {
    remaining = static_cast<double>(TimeLeftS(job.spec.time_limit_s, *job.record.start_time, now));
  }
  return sched::ElasticRun{
      job.record.id,
      *range,
      unit,
      unit == model::ElasticUnit::kNodes ? static_cast<int>(tasks->size()) : task_gpus,
      std::move(nodes),
      task_gpus,
      job.elastic_since,
      job.resizes,
      remaining,
      tasks->front().cpu,
      tasks->front().memory};
}

std::vector<sched::ElasticRun> Controller::RunningElasticLocked(Seconds now) const {
  std::vector<sched::ElasticRun> runs;
  for (JobId id : elastic_started_) {
    const LiveJob& job = jobs_.at(id);
    if (job.Stopping()) continue;  // its run ends: nothing to resize
    if (auto run = ElasticRunLocked(job, now)) runs.push_back(std::move(*run));
  }
  return runs;
}

void Controller::MakeRoomLocked(Seconds now) {
  std::vector<sched::ElasticRun> runs = RunningElasticLocked(now);
  if (!sched::AnyBorrowed(runs)) return;
  // The pending jobs that wait for capacity alone (IsCapacityReason), in submit order (ids grow
  // with submission), as far as PlanRoom looks. A job held by its own limit, a reservation or
  // the queue's head would not start on what a shrink frees: the GPUs would idle until the job
  // grew back. Submit order, not the queue's: Scheduler::Queue orders by a shadow run of the
  // whole queue, too dear before every pass.
  std::vector<model::Job> pending;
  for (const auto& [id, job] : jobs_) {
    if (pending.size() >= static_cast<size_t>(sched::kShrinkLookahead)) break;
    if (job.record.state != JobState::kPending || job.held) continue;
    std::optional<sched::PendingReason> reason = scheduler_->PendingReasonOf(id);
    if (reason && IsCapacityReason(reason->code)) pending.push_back(ModelJobOf(job));
  }
  if (pending.empty()) return;
  for (const sched::Resize& z :
       sched::MergeResizes(sched::PlanRoom(scheduler_->state(), std::move(runs), pending))) {
    if (z.from != z.to) (void)ResizeLocked(jobs_.at(z.job), z, now);  // a failure keeps its size
  }
}

std::vector<sched::Resize> Controller::SizeStartsLocked(std::vector<sched::JobStart>& starts,
                                                        Seconds now) {
  std::vector<sched::ElasticRun> fresh;
  for (const sched::JobStart& start : starts) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end()) continue;
    if (auto run = ElasticRunLocked(it->second, now)) {
      run->last_resize = now;
      run->resizes = 0;
      fresh.push_back(std::move(*run));
    }
  }
  std::vector<sched::ElasticRun> others = RunningElasticLocked(now);
  if (fresh.empty() && others.empty()) return {};
  sched::GrowthPlan plan = sched::PlanAfterPass(
      scheduler_->state(), fresh, others, ResizeRulesLocked(), now, scheduler_->ReservedNodes());
  for (const sched::Resize& z : plan.at_start) {
    if (!scheduler_->Resize(z.job, z.to, now).ok()) continue;  // it starts at what it got
    for (sched::JobStart& start : starts) {
      if (start.job == z.job) start.tasks = *scheduler_->AllocationsOf(z.job);
    }
  }
  return plan.grown;
}

void Controller::GrowLocked(const std::vector<sched::Resize>& grown, Seconds now) {
  for (const sched::Resize& z : grown) {
    auto it = jobs_.find(z.job);
    // A job that did not start after all (its start was not stored) has no run to grow.
    if (it == jobs_.end() || it->second.tasks.empty()) continue;
    (void)ResizeLocked(it->second, z, now);  // a failure keeps its size
  }
}

Status Controller::ResizeLocked(LiveJob& job, const sched::Resize& z, Seconds now) {
  const JobId id = job.record.id;
  if (job.Stopping() || job.tasks.empty() || !job.spec.elastic) {
    return FailedPrecondition("job " + std::to_string(id.value()) + " has no run to resize");
  }
  // What the old run would lose (GPUs x the time since its last checkpoint), before the
  // scheduler restarts it; recorded as its running tasks end (a run not launched yet, waiting
  // for the previous one's stop, has none: NoteStoppingLocked).
  const double lost = scheduler_->LostWorkOf(id, now);
  // The scheduler takes the new allocations once the store has the new generation: until
  // then the old run holds its own (a failure below leaves it as it was).
  Result<std::vector<sched::Allocation>> planned = scheduler_->PlanResize(id, z.to);
  if (!planned.ok()) return planned.status();
  std::vector<store::TaskAssignment> tasks;
  const std::vector<sched::Allocation>& allocations = *planned;
  for (size_t i = 0; i < allocations.size(); ++i) {
    tasks.push_back({static_cast<int>(i), scheduler_->state().node(allocations[i].node).name,
                     AllocationOf(allocations[i])});
  }
  // The old run's allocations (and port block) go; the new run gets a rendezvous of its own,
  // so that torchrun hears the new --nnodes.
  ForgetAllocationsLocked(job);
  Status ports = IsDistributed(job.spec) ? AddRendezvousLocked(job, tasks) : Status::Ok();
  Result<std::vector<store::TaskRecord>> written =
      ports.ok() ? store_.ResizeGang(id, tasks, ResizeEvent(z, job.spec.elastic->unit), now)
                 : Result<std::vector<store::TaskRecord>>(ports);
  if (!written.ok()) {
    // Nothing changed in the store: the old run goes on as it was.
    ports_.Release(id);
    IndexAllocationsLocked(job);
    RestoreRendezvousLocked(job);
    return written.status();
  }
  // Nothing changed in the scheduler since the plan (the lock is held): the allocations fit.
  (void)scheduler_->ApplyResize(id, std::move(planned).value(), now);
  // The old run stops as a preempted one does: its launched tasks hold their GPUs until they
  // stopped (the new run's launches wait for them), its tasks are stored killed (their nodes'
  // next reports find them stale and are answered with stop orders). It is no preemption: the
  // count the decision returns is not taken.
  const reconcile::PreemptDecision stop =
      reconcile::Preempt(job.end, 0, {job.tasks, job.launched, job.notes}, now);
  // Its stale tasks get the job's stop grace (time for a checkpoint), with the reason.
  NoteStoppingLocked(job, StopGraceLocked(job), "resize", lost);
  for (const store::TaskRecord& killed : stop.killed) (void)store_.UpdateTask(killed);
  for (const reconcile::TaskOnNode& old : stop.waits)
    resize_stopping_[old.first].insert(old.second);
  NotifyNodesLocked(job);  // the old run's nodes: their next reports are answered with kills
  job.tasks = std::move(written).value();
  job.launched.clear();
  job.notes.clear();
  ++job.record.restarts;  // the store's numbering of runs: the new generation
  ++job.resizes;
  job.elastic_now = z.to;
  job.elastic_since = now;
  job.gpus_idle_noted = false;  // its GPUs are another run's
  IndexAllocationsLocked(job);
  WaitForResizeStopsLocked(job);
  NotifyNodesLocked(job);
  return Status::Ok();
}

void Controller::NoteElasticStartLocked(LiveJob& job) {
  // Any job's GPUs may be those of a resized job's old run, still stopping.
  WaitForResizeStopsLocked(job);
  if (!job.spec.elastic) return;
  const Seconds now = clock_.Now();
  job.elastic_now = ElasticSizeOf(job);
  job.elastic_since = now;
  // Said once; a failure to store it loses only the note.
  (void)store_.AddJobEvent(job.record.id,
                           kStartedAtEventPrefix + std::to_string(job.elastic_now) + " " +
                               UnitWord(job.spec.elastic->unit, job.elastic_now),
                           now);
}

void Controller::WaitForResizeStopsLocked(LiveJob& job) {
  for (const store::TaskRecord& t : job.tasks) {
    auto stopping = resize_stopping_.find(t.node);
    if (stopping == resize_stopping_.end()) continue;
    for (int64_t allocation : stopping->second) job.waits_for.insert({t.node, allocation});
    waiting_on_node_[t.node].insert(job.record.id);
  }
}

void Controller::ForgetResizeStopsLocked(const std::string& node,
                                         const std::function<bool(int64_t)>& stopped) {
  auto on = resize_stopping_.find(node);
  if (on == resize_stopping_.end()) return;
  std::erase_if(on->second, stopped);
  if (on->second.empty()) resize_stopping_.erase(on);
}

}  // namespace corral::server
