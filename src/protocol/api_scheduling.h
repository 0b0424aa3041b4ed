// What the API says about scheduling, with its JSON codecs: the queue (GET /api/v1/queue: the
// pending jobs in the order they will be served) and the rules in force (GET /api/v1/policy).
// The server builds them (Controller::QueueView, PolicyView, from sched's types), the HTTP API
// and the CLI encode and decode them with these codecs.
//
//   queue row: {"position": 1, "id": 7, "name": "train", "user": "alice", "project": "vision",
//               "priority": 0, "gpus": 2.0, "submit_time": 1700000000,
//               "pending_reason": {"code", "message"},
//               "estimated_start": 1700000600 (null when not estimated)}
//   policy:    {"policy": {"order": "fairshare", "blocking": "backfill", "reclaim": true,
//                          "las_thresholds_gpu_s": [3600],
//                          "fair_share": {"half_life_s", "fair_share_weight", "age_weight",
//                                         "age_unit_s"}},
//               "placement": "fgd", "profile_jobs": 10000, "typical_tasks": 12,
//               "file": "/etc/corral/policy.yaml" ("" for none),
//               "file_error": "..." (null when the file's last edit was taken)}
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "protocol/api_job.h"

namespace corral::protocol {

struct QueueRow {
  int position = 1;  // in the whole queue (1 is served first), the rows of other projects too
  JobId id;
  std::string name;
  std::string user;
  std::string project;
  int priority = 0;
  MilliGpu gpus{0};  // of all its tasks
  Seconds submit_time{0};
  PendingReason pending_reason;
  std::optional<Seconds> estimated_start;
  bool operator==(const QueueRow&) const = default;
};

// The scheduler's rules in force (sched/policy_config.h's format, without the projects).
struct SchedulingRules {
  std::string order;     // sched::QueueOrderName: "fifo", "priority", "fairshare", ...
  std::string blocking;  // sched::BlockingName: "skip", "strict", "backfill"
  bool reclaim = true;
  std::vector<int64_t> las_thresholds_gpu_s;
  Seconds half_life{0};  // fair_share.half_life_s
  double fair_share_weight = 0;
  double age_weight = 0;
  Seconds age_unit{0};  // fair_share.age_unit_s
  bool operator==(const SchedulingRules&) const = default;
};

struct PolicyView {
  SchedulingRules rules;  // "policy"
  std::string placement;  // the placement policy's name
  // Jobs the placement's workload profile was learnt from; 0: none (fgd and best place as
  // bestfit until it has min_jobs jobs; other policies place without a profile and never
  // compute one).
  int64_t profile_jobs = 0;
  // The typical tasks (task shapes) the scheduler's placement scores against now: 0 when it
  // has no profile.
  int64_t typical_tasks = 0;
  // True when the placement policy scores against a workload profile (fgd, best); then, until
  // `profile_min_jobs` jobs have been submitted, it places as bestfit does.
  bool uses_profile = false;
  int64_t profile_min_jobs = 0;
  std::string file;                       // the policy file; "" for none
  std::optional<std::string> file_error;  // why its last edit was refused
  bool operator==(const PolicyView&) const = default;
};

nlohmann::json ToJson(const std::vector<QueueRow>& queue);
nlohmann::json ToJson(const PolicyView& policy);
// Errors name the field: "queue: field '[0].pending_reason.code': is required", "policy: field
// 'policy.fair_share.age_weight': must be >= 0, got -1".
Result<std::vector<QueueRow>> ParseQueue(const nlohmann::json& json);
Result<PolicyView> ParsePolicyView(const nlohmann::json& json);

}  // namespace corral::protocol
