// The workload profile that fgd and best place against (sched::TypicalTask, docs/placement.md):
// the task shapes of the last `capacity` submitted jobs, held in a bounded ring, and when to
// compute the typical tasks from them again. The controller seeds it from the store's recent
// jobs at start, feeds it each job it accepts, and hands each fresh profile to the scheduler
// (Scheduler::SetTypicalTasks) when its policy uses one; no store scan after the start
// (docs/control-plane.md, "The workload profile").
//
// A profile is computed from at least `min_jobs` jobs; with fewer there is none, and fgd and best
// place as bestfit does. Once one exists it is recomputed when `refresh_jobs` jobs have arrived
// since the last, or when `refresh_interval` has passed since the last and a job has arrived.
// The first profile is computed as soon as `min_jobs` jobs are known.
//
// Not thread-safe: the controller calls it under its lock. Pure: no clock, no store.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/units.h"
#include "model/job.h"
#include "sched/fragmentation.h"

namespace corral::server {

struct WorkloadProfileOptions {
  size_t capacity = 10000;  // jobs remembered: the profile's window (kHistoryForProfile)
  size_t min_jobs = 100;    // fewer remembered jobs: no profile
  int64_t refresh_jobs = 1000;
  Seconds refresh_interval{600};
};

class WorkloadProfile {
 public:
  // Bounds: capacity in [1, 1,000,000] and min_jobs <= capacity (clamped, never refused).
  explicit WorkloadProfile(WorkloadProfileOptions options);

  // Remembers one job's task shape; beyond `capacity` the oldest is forgotten.
  void Observe(const model::TaskResources& task);
  // True when the typical tasks should be computed again at `now` (rules in the file comment).
  bool Due(Seconds now) const;
  // The typical tasks of the remembered jobs (empty with fewer than min_jobs), computed in
  // O(remembered jobs × log shapes); counts the profile as fresh from `now`.
  std::vector<sched::TypicalTask> Refresh(Seconds now);

  size_t remembered() const { return ring_.size(); }
  // Jobs needed before there is a profile (the clamped option).
  size_t min_jobs() const { return options_.min_jobs; }
  // Jobs the last profile was computed from; 0 when there is none.
  size_t profile_jobs() const { return profile_jobs_; }

 private:
  WorkloadProfileOptions options_;
  std::vector<model::TaskResources> ring_;  // up to capacity; next_ is the oldest once full
  size_t next_ = 0;
  int64_t new_since_refresh_ = 0;
  Seconds last_refresh_{0};
  size_t profile_jobs_ = 0;
};

}  // namespace corral::server
