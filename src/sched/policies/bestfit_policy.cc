// bestfit: the node left with the least free CPU and GPU after placing (fill-experiment.md):
// r = 0.5 (cpu_free - cpu_req) / 128000 + 0.5 (gpu_free - gpu_req) / 8000, score = ⌊100 (1 - r)⌋.
// Computed in integers so that equal states give equal scores on every machine. The paper's
// min-max normalisation over feasible nodes is strictly increasing when the raw range is at most
// 100, so it never changes which node wins and is left out.
#include <algorithm>

#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class BestFitPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "bestfit"; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    // r = num / den with den = 2 × 128000 × 8000.
    const int64_t den = 2 * kCpuScale * kGpuScale;
    const int64_t num = (node.cpu_free - task.cpu) * kGpuScale +
                        (node.gpu_free_total - task.TotalMilli()) * kCpuScale;
    int64_t score = 100 * (den - num) / den;
    return static_cast<int>(std::clamp<int64_t>(score, 0, 100));
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyContext&) {
  return std::make_unique<BestFitPolicy>();
}

}  // namespace corral::sched
