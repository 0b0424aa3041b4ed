// The name -> factory table of placement policies. Add a policy: one file in policies/, one line
// here.
#include <array>

#include "sched/placement_policy.h"
#include "sched/policies/policies.h"

namespace corral::sched {

namespace {

enum class Profile { kIgnored, kUsed };  // whether the policy reads PolicyContext::typical_tasks

struct Entry {
  const char* name;
  std::unique_ptr<PlacementPolicy> (*make)(const PolicyContext&);
  Profile profile;
};

constexpr std::array kPolicies = {
    Entry{"random", MakeRandomPolicy, Profile::kIgnored},
    Entry{"spread", MakeSpreadPolicy, Profile::kIgnored},
    Entry{"bestfit", MakeBestFitPolicy, Profile::kIgnored},
    Entry{"dotprod", MakeDotProductPolicy, Profile::kIgnored},
    Entry{"packing", MakePackingPolicy, Profile::kIgnored},
    Entry{"clustering", MakeClusteringPolicy, Profile::kIgnored},
    Entry{"fgd", MakeFgdPolicy, Profile::kUsed},
    Entry{"best", MakeBestPolicy, Profile::kUsed},
};

}  // namespace

Result<std::unique_ptr<PlacementPolicy>> CreatePolicy(std::string_view name,
                                                      const PolicyContext& context) {
  for (const Entry& e : kPolicies) {
    if (name == e.name) return e.make(context);
  }
  std::string known;
  for (const Entry& e : kPolicies) known += (known.empty() ? "" : ", ") + std::string(e.name);
  return InvalidArgument("unknown placement policy '" + std::string(name) + "' (known: " + known +
                         ")");
}

bool PolicyUsesWorkloadProfile(std::string_view name) {
  for (const Entry& e : kPolicies) {
    if (name == e.name) return e.profile == Profile::kUsed;
  }
  return false;
}

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const Entry& e : kPolicies) names.emplace_back(e.name);
  return names;
}

}  // namespace corral::sched
