// bestfit: the node left with the least free CPU and GPU after placing (fill-experiment.md):
// r = 0.5 (cpu_free - cpu_req) / 128000 + 0.5 (gpu_free - gpu_req) / 8000, score = ⌊100 (1 - r)⌋.
// Computed in integers so that equal states give equal scores on every machine. The score is
// not clamped: on nodes larger than the paper's (128 cores, 8 GPUs) it goes below 0 and still
// orders nodes by fit. The paper's min-max normalisation over feasible nodes is left out: it is
// strictly increasing when the raw range is at most 100 (always, on the paper's nodes), and on
// wider ranges it would only merge distinct scores into ties.
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class BestFitPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "bestfit"; }
  // num grows with K; 100 × (den - num) / den truncates towards zero, which keeps the order.
  bool ScoreFallsWithFreeCapacity() const override { return true; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    return BestFitScore(node, task);
  }
};

}  // namespace

int BestFitScore(const NodeView& node, const TaskRequest& task) {
  // r = num / den with den = 2 × 128000 × 8000.
  const int64_t den = 2 * kCpuScale * kGpuScale;
  const int64_t num = (node.cpu_free - task.cpu) * kGpuScale +
                      (node.gpu_free_total - task.TotalMilli()) * kCpuScale;
  return static_cast<int>(100 * (den - num) / den);
}

std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyContext&) {
  return std::make_unique<BestFitPolicy>();
}

}  // namespace corral::sched
