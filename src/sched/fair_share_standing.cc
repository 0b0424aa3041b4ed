#include "sched/fair_share_standing.h"

#include <algorithm>
#include <cmath>
#include <optional>

namespace corral::sched {
namespace {

constexpr double kEvenPart = 0.02;  // of all the past use: "at its share"
constexpr double kSecondsPerHour = 3600;

}  // namespace

std::vector<FairShareStanding> FairShareStandings(const std::vector<FairShareUse>& uses,
                                                  int64_t cluster_gpus) {
  double total_past = 0, total_weight = 0;
  bool used = false;
  for (const FairShareUse& u : uses) {
    total_past += std::max(0.0, u.past);
    total_weight += std::max(0.0, u.weight);
    used = used || u.effective > 0;
  }
  const double gpus = static_cast<double>(std::max<int64_t>(0, cluster_gpus));
  const double even =
      std::max(kEvenPart * total_past * gpus / kSecondsPerHour, 1 / kSecondsPerHour);
  std::vector<FairShareStanding> out(uses.size());
  for (size_t i = 0; i < uses.size() && total_past > 0 && total_weight > 0; ++i) {
    const double due = total_past * std::max(0.0, uses[i].weight) / total_weight;
    const double from = (std::max(0.0, uses[i].past) - due) * gpus / kSecondsPerHour;
    out[i].gpu_hours_from_share = from;
    out[i].standing = std::abs(from) < even ? ShareStanding::kAt
                      : from > 0            ? ShareStanding::kOver
                                            : ShareStanding::kUnder;
  }
  // Next in line: the lowest effective usage per weight, ties to the first name.
  std::optional<size_t> next;
  auto key = [&](size_t i) { return std::max(0.0, uses[i].effective) / uses[i].weight; };
  for (size_t i = 0; used && i < uses.size(); ++i) {
    if (uses[i].weight <= 0) continue;
    if (!next || key(i) < key(*next) ||
        (key(i) == key(*next) && uses[i].project < uses[*next].project)) {
      next = i;
    }
  }
  if (next) out[*next].next_in_line = true;
  return out;
}

}  // namespace corral::sched
