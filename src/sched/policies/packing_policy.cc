// packing (GPU packing, fill-experiment.md): fill partially used GPUs first, then fully free GPUs
// on nodes already in use, and only then empty nodes. Bands, as in the paper's simulator:
//   shares of used GPUs only:   100 - (Σ free % of the GPUs used) / 10, at least 50
//   needs fully free GPUs on a used node: 50 - (fully free GPUs taken), at least 33
//   empty node:                 max(33 - GPUs on the node, GPUs on the node)
// CPU-only tasks score 0 everywhere.
#include <algorithm>

#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class PackingPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "packing"; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    if (task.gpus == 0) return 0;
    const int gpu_count = node.gpu_count();
    if (node.full_free == gpu_count) return std::max(33 - gpu_count, gpu_count);

    // Take GPUs in increasing order of free milli (tightest first), as TightestFitGpus does.
    std::vector<int32_t> free = *node.gpu_free;
    std::sort(free.begin(), free.end());
    int needed = task.gpus, full_taken = 0, free_pct_sum = 0;
    for (int32_t f : free) {
      if (needed == 0) break;
      if (f < task.gpu_milli) continue;
      --needed;
      if (f == 1000) ++full_taken;
      free_pct_sum += f * 100 / 1000;
    }
    if (full_taken > 0) return std::max(50 - full_taken, 33);
    return std::max(100 - free_pct_sum / 10, 50);
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakePackingPolicy(const PolicyContext&) {
  return std::make_unique<PackingPolicy>();
}

}  // namespace corral::sched
