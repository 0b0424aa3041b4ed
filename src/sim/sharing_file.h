// The sharing file of `corral sim replay --sharing FILE`: how projects share the simulated
// cluster, in JSON or YAML — the "projects", "reclaim" and "fair_share" fields of the policy
// format (sched/policy_config.h).
#pragma once

#include <string>

#include "common/status.h"
#include "sched/sharing.h"

namespace corral::sim {

// Reads and parses `path`; errors are prefixed with the path and name the field.
Result<sched::SharingConfig> ReadSharingFile(const std::string& path);

}  // namespace corral::sim
