// The projects of the API, with their JSON codecs: the request that makes one (POST
// /api/v1/projects), a project's sharing (what PUT /api/v1/projects/NAME/sharing takes and
// answers) and the rows of GET /api/v1/projects. The server builds them (Controller::ProjectsView,
// converting from and to the scheduler's sched::ProjectPolicy), the HTTP API and the CLI encode
// and decode them with these codecs.
//
//   request: {"name": "vision", "description": "..."}: "description" is optional; unknown fields
//            are refused.
//   sharing: {"weight": 2.0, "gpus": 64.0, "model_gpus": {"A100": 8.0},
//             "limit_gpus": 96.0, "user_limit_gpus": 16.0}
//            GPU counts may be fractional (0.5 = 500 milli-GPU); "limit_gpus" and
//            "user_limit_gpus" are absent (null or absent when taken) for no limit. Taken, every
//            field is optional (weight 1, no quota, no limit) and an unknown one is refused.
//   project: {"name": "vision", "description": "...", "sharing": {...},
//             "submit_limits": {...} (protocol/api_account.h),
//             "quota_gpus": 64.0, "weight": 2.0, "limit_gpus": 96.0 (null for none),
//             "running_gpus": 3.5, "borrowed_gpus": 1.0, "fair_share_usage": 0.25,
//             "fair_share": {"standing": "over", "gpu_hours_from_share": 3.2,
//                            "next_in_line": false}}
//            "quota_gpus", "weight" and "limit_gpus" repeat the sharing's, for the dashboard's
//            table: written, not read back. "fair_share": the project's standing among all the
//            cluster's projects (sched/fair_share_standing.h), absent from an older server's
//            answer (read as "at", 0, false).
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/submit_limits.h"

namespace corral::protocol {

// A request to make a project.
struct ProjectRequest {
  std::string name;  // a project name (names.h)
  std::string description;
  bool operator==(const ProjectRequest&) const = default;
};

// How a project shares the cluster (docs/control-plane.md, "Sharing"). The codec checks types
// and that numbers are sane (weight > 0, GPUs >= 0, at most 1e12); the scheduler's own bounds
// are the server's to check (sched::CheckProjectPolicy).
struct ProjectSharing {
  double weight = 1.0;                          // fair-share weight
  MilliGpu quota{0};                            // guaranteed GPUs of any model
  std::map<std::string, MilliGpu> model_quota;  // guaranteed GPUs of one model, by model
  std::optional<MilliGpu> limit;                // cap on GPUs running at once; none: no cap
  std::optional<MilliGpu> user_limit;           // the same cap for each user of the project
  bool operator==(const ProjectSharing&) const = default;
};

// Where a project stands against its fair share (sched/fair_share_standing.h).
enum class ShareStanding { kUnder, kAt, kOver };
struct FairShareStandingView {
  ShareStanding standing = ShareStanding::kAt;
  double gpu_hours_from_share = 0;  // past use beyond its due part (< 0: short of it)
  bool next_in_line = false;        // the project the fair-share order serves first
  bool operator==(const FairShareStandingView&) const = default;
};

struct ProjectView {
  std::string name;
  std::string description;
  ProjectSharing sharing;
  model::SubmitLimits submit_limits;
  MilliGpu running{0};          // GPUs its running jobs hold
  MilliGpu borrowed{0};         // of those, GPUs beyond its quota (reclaimable)
  double fair_share_usage = 0;  // its decayed usage as the fair-share order counts it
  FairShareStandingView fair_share;
  bool operator==(const ProjectView&) const = default;
};

nlohmann::json ToJson(const ProjectSharing& sharing);
nlohmann::json ToJson(const ProjectView& project);
nlohmann::json ToJson(const std::vector<ProjectView>& projects);
// Errors name the field: "field 'name': a project name must be 1 to 63 ..." (the name is
// checked against its rule where it is made, in the request; the views' names are read as the
// server has them), "project sharing: field 'quota': unknown field", "projects: field
// '[0].sharing.weight': must be a number > 0".
Result<ProjectRequest> ParseProjectRequest(const nlohmann::json& json);
Result<ProjectSharing> ParseProjectSharing(const nlohmann::json& json);
Result<std::vector<ProjectView>> ParseProjectViews(const nlohmann::json& json);

}  // namespace corral::protocol
