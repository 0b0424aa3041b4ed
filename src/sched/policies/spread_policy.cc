// spread: least allocated first, like Kubernetes' default NodeResourcesLeastAllocated. The score
// is the mean free fraction, after placing, over the resources the node has (CPU, memory and,
// on GPU nodes, GPU milli). Spreading keeps nodes evenly loaded and is the usual baseline for
// how fragmenting a placement can be.
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class SpreadPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "spread"; }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    double sum = 0;
    int parts = 0;
    auto add = [&](int64_t free, int64_t total) {
      if (total <= 0) return;
      sum += static_cast<double>(free) / static_cast<double>(total);
      ++parts;
    };
    add(node.cpu_free - task.cpu, node.cpu_total);
    add(node.memory_free - task.memory, node.memory_total);
    add(node.gpu_free_total - task.TotalMilli(), static_cast<int64_t>(node.gpu_count()) * 1000);
    if (parts == 0) return 0;
    return static_cast<int>(100.0 * sum / parts);
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeSpreadPolicy(const PolicyContext&) {
  return std::make_unique<SpreadPolicy>();
}

}  // namespace corral::sched
