#include "server/control/workload_profile.h"

#include <algorithm>

namespace corral::server {

namespace {
constexpr size_t kMaxCapacity = 1000000;
}  // namespace

WorkloadProfile::WorkloadProfile(WorkloadProfileOptions options) : options_(options) {
  options_.capacity = std::clamp<size_t>(options_.capacity, 1, kMaxCapacity);
  options_.min_jobs = std::min(options_.min_jobs, options_.capacity);
  options_.refresh_jobs = std::max<int64_t>(options_.refresh_jobs, 1);
}

void WorkloadProfile::Observe(const model::TaskResources& task) {
  if (ring_.size() < options_.capacity) {
    ring_.push_back(task);
  } else {
    ring_[next_] = task;
    next_ = (next_ + 1) % ring_.size();
  }
  ++new_since_refresh_;
}

bool WorkloadProfile::Due(Seconds now) const {
  if (new_since_refresh_ == 0 || ring_.size() < options_.min_jobs) return false;
  return profile_jobs_ == 0 || new_since_refresh_ >= options_.refresh_jobs ||
         now - last_refresh_ >= options_.refresh_interval;
}

std::vector<sched::TypicalTask> WorkloadProfile::Refresh(Seconds now) {
  new_since_refresh_ = 0;
  last_refresh_ = now;
  if (ring_.size() < options_.min_jobs) {
    profile_jobs_ = 0;
    return {};
  }
  profile_jobs_ = ring_.size();
  // The ring's order does not matter: shapes are counted, and ties ordered by shape.
  return sched::ComputeTypicalTasks(ring_);
}

}  // namespace corral::server
