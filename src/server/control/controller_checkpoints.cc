// Controller, checkpoint-aware stops (docs/in-job.md, "Preemption and checkpoints"): the grace a
// preempted or resized job's tasks get to save a checkpoint, and the work a stop loses.

#include <algorithm>
#include <cmath>

#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/monitoring/gpu_monitor.h"

namespace corral::server {

Seconds Controller::StopGraceOf(const JobSpec& spec) const {
  if (!spec.checkpoint_grace) return config_.kill_grace;
  return std::min(*spec.checkpoint_grace, config_.max_checkpoint_grace);
}

void Controller::NoteStoppingLocked(const LiveJob& job, Seconds grace, std::string reason,
                                    double at_risk_gpu_s) {
  auto gpus_of = [&](const store::TaskRecord& t) {
    // A task not running (a new run's, waiting to launch) has nothing to lose.
    if (t.state != model::TaskState::kRunning) return 0.0;
    double milli = 0;
    for (const model::GpuShare& g : t.allocation.gpus)
      milli += static_cast<double>(g.milli.value());
    return milli / 1000;
  };
  double gpus = 0;
  for (const store::TaskRecord& t : job.tasks) gpus += gpus_of(t);
  const Seconds now = clock_.Now();
  // The checkpoint (or start) the scheduler counted from, in whole seconds.
  const Seconds since(gpus > 0 ? now.value() - std::llround(at_risk_gpu_s / gpus) : now.value());
  for (const store::TaskRecord& t : job.tasks) {
    if (model::IsEnded(t.state)) continue;
    stopping_tasks_[t.allocation_id] = {job.record.id, t.node, gpus_of(t), since, grace, reason};
  }
}

void Controller::NoteGraceCheckpointLocked(JobId job, Seconds at) {
  for (auto& [allocation, stopping] : stopping_tasks_) {
    if (stopping.job == job) stopping.since = std::max(stopping.since, at);
  }
}

void Controller::CancelStoppingLocked(JobId job, const std::string& reason) {
  for (auto& [allocation, stopping] : stopping_tasks_) {
    if (stopping.job != job) continue;
    stopping.grace = std::min(stopping.grace, config_.kill_grace);
    stopping.reason = reason;
  }
}

protocol::StopOrder Controller::StaleStopLocked(const protocol::TaskKey& key,
                                                std::string reason) const {
  auto it = stopping_tasks_.find(key.allocation.value());
  if (it == stopping_tasks_.end()) return {key, config_.kill_grace, std::move(reason)};
  return {key, it->second.grace, it->second.reason};
}

void Controller::ForgetStoppedLocked(const std::string& node,
                                     const std::function<bool(int64_t)>& ended) {
  const Seconds now = clock_.Now();
  std::map<JobId, double> lost;
  std::erase_if(stopping_tasks_, [&](const auto& entry) {
    const StoppingTask& t = entry.second;
    if (t.node != node || !ended(entry.first)) return false;
    lost[t.job] += t.gpus * static_cast<double>(std::max<int64_t>(0, (now - t.since).value()));
    return true;
  });
  for (const auto& [job, gpu_s] : lost) AddLostWorkLocked(job, gpu_s, now);
}

void Controller::AddLostWorkLocked(JobId id, double gpu_s, Seconds now) {
  const auto gpu_ms = static_cast<int64_t>(std::llround(gpu_s * 1000));
  if (gpu_ms <= 0) return;
  if (!store_.AddLostWork(id, gpu_ms, UtcDay(now.value())).ok()) return;
  if (auto job = jobs_.find(id); job != jobs_.end()) job->second.record.lost_gpu_ms += gpu_ms;
}

}  // namespace corral::server
