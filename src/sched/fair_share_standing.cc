#include "sched/fair_share_standing.h"

#include <algorithm>
#include <cmath>

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
  const FairShareUse* next = nullptr;
  size_t next_at = 0;
  for (size_t i = 0; i < uses.size(); ++i) {
    const FairShareUse& u = uses[i];
    if (total_past > 0 && total_weight > 0) {
      const double due = total_past * std::max(0.0, u.weight) / total_weight;
      const double from = (std::max(0.0, u.past) - due) * gpus / kSecondsPerHour;
      out[i].gpu_hours_from_share = from;
      out[i].standing = std::abs(from) < even ? ShareStanding::kAt
                        : from > 0            ? ShareStanding::kOver
                                              : ShareStanding::kUnder;
    }
    const bool earlier_name = next == nullptr || u.project < next->project;
    if (used && u.weight > 0) {
      const double key = std::max(0.0, u.effective) / u.weight;
      const double best = next ? std::max(0.0, next->effective) / next->weight : 0;
      if (next == nullptr || key < best || (key == best && earlier_name)) {
        next = &u;
        next_at = i;
      }
    }
  }
  if (next) out[next_at].next_in_line = true;
  return out;
}

}  // namespace corral::sched
