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

void Controller::NoteStoppingLocked(const LiveJob& job, Seconds grace, std::string reason) {
  for (const store::TaskRecord& t : job.tasks) {
    if (model::IsEnded(t.state)) continue;
    stopping_tasks_[t.allocation_id] = {t.node, grace, reason};
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
  std::erase_if(stopping_tasks_,
                [&](const auto& entry) { return entry.second.node == node && ended(entry.first); });
}

void Controller::RecordLostWorkLocked(LiveJob& job, Seconds now) {
  AddLostWorkLocked(job, scheduler_->LostWorkOf(job.record.id, now), now);
}

void Controller::AddLostWorkLocked(LiveJob& job, double gpu_s, Seconds now) {
  const auto gpu_ms = static_cast<int64_t>(std::llround(gpu_s * 1000));
  if (gpu_ms <= 0) return;
  if (store_.AddLostWork(job.record.id, gpu_ms, UtcDay(now.value())).ok())
    job.record.lost_gpu_ms += gpu_ms;
}

}  // namespace corral::server
