// The cluster's scheduling rules as people write them: the admin policy file (order, passing,
// fair-share parameters, reclaim) and each project's sharing (quota, weight, limit), in JSON or
// YAML, validated with errors that name the field. docs/policies.md shows both.
//
// Policy file:                          Project sharing (PUT /api/v1/projects/NAME/sharing):
//   order: fairshare                      weight: 2          # fair-share weight, > 0
//   blocking: backfill                    gpus: 8            # guaranteed GPUs, any model
//   reclaim: true                         model_gpus: {A100-80GB: 4}
//   las_thresholds_gpu_s: [3600, 36000]
//   fair_share:                           limit_gpus: 16     # hard cap; absent = none
//     half_life_s: 604800
//     fair_share_weight: 1000
//     age_weight: 100
//     age_unit_s: 86400
#pragma once

#include <nlohmann/json.hpp>

#include "common/status.h"
#include "sched/scheduler.h"

namespace corral::server {

struct SchedulingPolicy {
  sched::QueueOrder order = sched::QueueOrder::kFairShare;
  sched::Blocking blocking = sched::Blocking::kBackfill;
  sched::FairShareConfig fair_share;
  bool reclaim = true;
  std::vector<int64_t> las_thresholds_gpu_s = {3600};  // order: las (2D-LAS queues)
};

// Unknown keys are errors (a typo must not silently fall back to a default).
Result<SchedulingPolicy> ParseSchedulingPolicy(const nlohmann::json& json);
nlohmann::json SchedulingPolicyJson(const SchedulingPolicy& policy);

Result<sched::ProjectPolicy> ParseProjectSharing(const nlohmann::json& json);
nlohmann::json ProjectSharingJson(const sched::ProjectPolicy& policy);

}  // namespace corral::server
