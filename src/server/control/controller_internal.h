// Helpers shared by the parts of the Controller (controller.cc, controller_*.cc); not for use
// outside src/server/control/. Each part brings them in with `using namespace
// controller_internal;`; helpers used by one part only stay in that part's unnamed namespace.
#pragma once

#include <algorithm>
#include <string>
#include <vector>

#include "common/units.h"
#include "model/allocation.h"
#include "model/dependency.h"
#include "model/states.h"
#include "protocol/api_job.h"
#include "protocol/api_project.h"
#include "sched/cluster_state.h"
#include "sched/pending_reason.h"
#include "sched/sharing.h"
#include "store/task_record.h"

namespace corral::server::controller_internal {

using model::JobState;
using model::NodeState;
using model::TaskState;

// A state's name, for JSON and messages.
std::string Name(auto state) { return std::string(model::ToString(state)); }

// The scheduler's reason in the API's form.
inline protocol::PendingReason ReasonOf(const sched::PendingReason& reason) {
  return {reason.code, reason.message};
}

// The reason of a job held for its dependencies (Controller::QueueOrHoldLocked).
inline protocol::PendingReason ReasonOf(const model::DependencyWait& wait) {
  return {wait.status == model::DependencyStatus::kNeverMet ? sched::kReasonDependencyNeverSatisfied
                                                            : sched::kReasonDependency,
          wait.message};
}

// A project's sharing as the API shows it, and as the scheduler keeps it: the same numbers.
inline protocol::ProjectSharing SharingOf(const sched::ProjectPolicy& p) {
  protocol::ProjectSharing s{.weight = p.weight, .quota = MilliGpu(p.quota_milli)};
  for (const auto& [model, milli] : p.model_quota_milli) s.model_quota[model] = MilliGpu(milli);
  if (p.limit_milli) s.limit = MilliGpu(*p.limit_milli);
  if (p.user_limit_milli) s.user_limit = MilliGpu(*p.user_limit_milli);
  return s;
}

// What the scheduler gave a task, as the store keeps it (the task record names the node).
inline model::Allocation AllocationOf(const sched::Allocation& a) {
  model::Allocation out;
  out.gpus = a.gpus;
  out.cpu = a.cpu;
  out.memory = a.memory;
  return out;
}

// Seconds a job with a time limit of `limit_s` (> 0) has left at `now` of its run started at
// `start`: a resized generation (the job running throughout) gets what is left of the run's
// limit, not a fresh one. Negative once the limit has passed.
inline int64_t TimeLeftS(int64_t limit_s, Seconds start, Seconds now) {
  return limit_s - (now.value() - start.value());
}

// An elastic job's size in `unit` in the newest generation of `tasks`: its number of tasks
// (kNodes) or its task's GPUs (kGpus); 0 without tasks.
inline int ElasticSizeIn(model::ElasticUnit unit, const std::vector<store::TaskRecord>& tasks) {
  int64_t newest = 0;
  for (const store::TaskRecord& t : tasks) newest = std::max(newest, t.generation);
  int size = 0;
  for (const store::TaskRecord& t : tasks) {
    if (t.generation != newest) continue;
    size = unit == model::ElasticUnit::kNodes
               ? size + 1
               : std::max(size, static_cast<int>(t.allocation.gpus.size()));
  }
  return size;
}

// Replaces each task of `tasks` that has the allocation of one of `updates` by that update.
inline void ReplaceTasks(std::vector<store::TaskRecord>& tasks,
                         const std::vector<store::TaskRecord>& updates) {
  for (const store::TaskRecord& updated : updates) {
    for (store::TaskRecord& t : tasks) {
      if (t.allocation_id == updated.allocation_id) t = updated;
    }
  }
}

}  // namespace corral::server::controller_internal
