#include "sim/sharing_file.h"

#include "common/config_file.h"
#include "sched/policy_config.h"

namespace corral::sim {

Result<sched::SharingConfig> ReadSharingFile(const std::string& path) {
  auto json = ReadJsonOrYamlFile(path);
  if (!json.ok()) return json.status();
  auto policy = sched::ParseSchedulingPolicy(*json, {"projects", "reclaim", "fair_share"});
  if (!policy.ok()) return InvalidArgument(path + ": " + policy.status().message());
  return policy->sharing;
}

}  // namespace corral::sim
