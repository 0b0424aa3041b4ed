// The name -> factory table of placement policies. Add a policy: one file in policies/, one line
// here.
#include <array>

#include "sched/placement_policy.h"
#include "sched/policies/policies.h"

namespace corral::sched {

namespace {

struct Entry {
  const char* name;
  std::unique_ptr<PlacementPolicy> (*make)(const PolicyContext&);
};

constexpr std::array kPolicies = {
    Entry{"random", MakeRandomPolicy},   Entry{"spread", MakeSpreadPolicy},
    Entry{"bestfit", MakeBestFitPolicy}, Entry{"dotprod", MakeDotProductPolicy},
    Entry{"packing", MakePackingPolicy}, Entry{"clustering", MakeClusteringPolicy},
    Entry{"fgd", MakeFgdPolicy},         Entry{"best", MakeBestPolicy},
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

std::vector<std::string> PolicyNames() {
  std::vector<std::string> names;
  for (const Entry& e : kPolicies) names.emplace_back(e.name);
  return names;
}

}  // namespace corral::sched
