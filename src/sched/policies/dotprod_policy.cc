// dotprod: prefer the node whose free (CPU, GPU) vector is least aligned with the task's, so
// that a task lands where it uses the resource that node has spare least of (fill-experiment.md):
// score = ⌊100 (1 - dot / 2)⌋ with both vectors normalised by (128000 CPU milli, 8000 milli-GPU).
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class DotProductPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "dotprod"; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    // dot = num / den with den = 128000² × 8000²; exact in 128-bit integers.
    __extension__ typedef __int128 i128;  // NOLINT: GCC builtin, exact 128-bit math
    const i128 den = i128(kCpuScale) * kCpuScale * kGpuScale * kGpuScale;
    const i128 num = i128(node.cpu_free) * task.cpu * kGpuScale * kGpuScale +
                     i128(node.gpu_free_total) * task.TotalMilli() * kCpuScale * kCpuScale;
    // Not clamped: below 0 on nodes larger than the normalisation scales (see bestfit).
    return static_cast<int>(100 * (2 * den - num) / (2 * den));
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeDotProductPolicy(const PolicyContext&) {
  return std::make_unique<DotProductPolicy>();
}

}  // namespace corral::sched
