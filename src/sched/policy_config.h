// The scheduling rules as people write them, in JSON or YAML (read with common/config_file.h):
// the server's policy file and the simulator's --sharing file share this one format. Unknown
// fields are errors (a typo must not fall back to a default silently); messages name the field
// with its path ("field 'projects.vision.weight': must be a number > 0").
//
//   order: fairshare          # fifo | priority | fairshare | sjf | qssf | las (not srtf, srsf)
//   blocking: backfill        # skip | strict | backfill
//   reclaim: true             # preempt borrowed GPUs for a project under its quota
//   las_thresholds_gpu_s: [3600]
//   fair_share: {half_life_s: 604800, fair_share_weight: 1000, age_weight: 100, age_unit_s: 86400}
//   projects:                 # projects not named: weight 1, no quota, no limit
//     vision: {weight: 2, gpus: 64, model_gpus: {A100-80GB: 8}, limit_gpus: 96,
//              user_limit_gpus: 16}    # each user of the project at most 16 GPUs at once
//
// GPU counts may be fractional (0.5 = 500 milli-GPU); limit_gpus or user_limit_gpus null (or
// absent) means no limit.
#pragma once

#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "sched/scheduler.h"
#include "sched/sharing.h"

namespace corral::sched {

struct SchedulingPolicy {
  QueueOrder order = QueueOrder::kFairShare;
  Blocking blocking = Blocking::kBackfill;
  SharingConfig sharing;
  std::vector<int64_t> las_thresholds_gpu_s = {3600};
};

// The fields of the format above that a reader accepts (others are refused, naming them): the
// server takes project sharing from its store, so it leaves "projects" out.
inline const std::set<std::string> kAllPolicyFields = {
    "order", "blocking", "reclaim", "las_thresholds_gpu_s", "fair_share", "projects"};

Result<SchedulingPolicy> ParseSchedulingPolicy(
    const nlohmann::json& json, const std::set<std::string>& accepted = kAllPolicyFields);
// (The API shows the rules in force in this format: protocol/api_scheduling.h.)

// One project's sharing ({weight, gpus, model_gpus, limit_gpus, user_limit_gpus}); `field`
// prefixes the names in
// messages ("projects.vision").
Result<ProjectPolicy> ParseProjectSharing(const nlohmann::json& json,
                                          const std::string& field = "");
nlohmann::json ProjectSharingJson(const ProjectPolicy& policy);
// The scheduler's own bounds on one project's sharing (weights, sizes: sched::Validate), named
// with `field`'s path as ParseProjectSharing names them: for sharing read by another codec
// (the API's, protocol/api_project.h).
Status CheckProjectPolicy(const ProjectPolicy& policy, const std::string& field = "");

std::string_view BlockingName(Blocking blocking);

}  // namespace corral::sched
