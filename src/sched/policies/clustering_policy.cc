// clustering (GPU clustering, fill-experiment.md): keep tasks of one kind (shares of one GPU, or
// k whole GPUs) together, so that shares pack GPUs and whole-GPU nodes stay whole. Bands, as in the
// paper's simulator, each with a bonus of up to 25 for fuller nodes (25 × used / 8000 milli):
//   node runs only this kind: 75..100; runs this kind among others: 50..75;
//   idle node: 25..50; runs other kinds only: 0..25. CPU-only tasks score 0.
// Kinds >= 64 are not tracked in the class mask; such nodes count as running other kinds.
#include <algorithm>

#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class ClusteringPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "clustering"; }
  bool NeedsTaskKinds() const override { return true; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    if (task.gpus == 0) return 0;
    // Nodes with more than 8 free GPUs get no bonus (never a negative one).
    const int64_t bonus = 25 * std::max<int64_t>(0, kGpuScale - node.gpu_free_total) / kGpuScale;
    const bool has_kind =
        task.kind >= 0 && task.kind < 64 && (node.kinds_mask & (uint64_t{1} << task.kind)) != 0;
    int band;
    if (has_kind) {
      band = node.kinds_distinct == 1 ? 75 : 50;
    } else {
      band = node.kinds_distinct == 0 ? 25 : 0;
    }
    return static_cast<int>(band + bonus);
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeClusteringPolicy(const PolicyContext&) {
  return std::make_unique<ClusteringPolicy>();
}

}  // namespace corral::sched
