// fgd (fragmentation gradient descent, Weng et al., ATC'23): place the task where it increases
// the node's expected fragmentation for the workload's typical tasks the least.
//   Δ = F(node before) - F(node after), in milli-GPU;  score = ⌊100 / (1 + e^(-Δ/1000))⌋.
// A share is tried on every GPU that fits (one try per distinct free amount: equal amounts give
// equal scores); the best GPU, lowest index on equal integer scores, is used. Whole-GPU tasks
// take the lowest-index fully free GPUs; CPU-only tasks change only the node's free CPU.
// The integer score matters: choosing the exact best Δ leaves about a point more GPUs
// unallocated on the openb trace (fill-experiment.md).
#include <cmath>

#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class FgdPolicy final : public PlacementPolicy {
 public:
  explicit FgdPolicy(std::vector<TypicalTask> typical) : meter_(std::move(typical)) {}

  std::string_view name() const override { return "fgd"; }

  void OnModelsChanged(const ClusterState& state) override { meter_.Resolve(state); }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    if (meter_.total_count() == 0) return 50;  // no workload profile: no preference
    const int64_t before = meter_.Weighted(node);
    if (!task.IsShare()) return ScoreAfter(node, before, task, -1);
    int best = -1;
    int32_t last = -1;
    for (int32_t f : *node.gpu_free) {
      if (f < task.gpu_milli || f == last) continue;
      last = f;
      best = std::max(best, ScoreAfter(node, before, task, f));
    }
    return best;
  }

  std::vector<int> ChooseGpus(const NodeView& node, const TaskRequest& task,
                              Rng& /*rng*/) const override {
    if (!task.IsShare() || meter_.total_count() == 0) return TightestFitGpus(node, task);
    const int64_t before = meter_.Weighted(node);
    int best_gpu = -1, best_score = -1;
    for (int i = 0; i < node.gpu_count(); ++i) {
      int32_t f = (*node.gpu_free)[i];
      if (f < task.gpu_milli) continue;
      int s = ScoreAfter(node, before, task, f);
      if (s > best_score) {
        best_score = s;
        best_gpu = i;
      }
    }
    return best_gpu < 0 ? std::vector<int>{} : std::vector<int>{best_gpu};
  }

 private:
  // Builds the node's state after placing and scores the change. `share_from` is the free
  // amount of the GPU a share is taken from (-1 for whole-GPU and CPU-only tasks).
  int ScoreAfter(const NodeView& node, int64_t before, const TaskRequest& task,
                 int32_t share_from) const {
    std::vector<int32_t>& after = after_scratch_;
    after.assign(node.gpu_free->begin(), node.gpu_free->end());
    int64_t taken = 0;
    if (share_from >= 0) {
      for (int32_t& f : after) {
        if (f == share_from) {
          f -= task.gpu_milli;
          break;
        }
      }
      taken = task.gpu_milli;
    } else {
      int needed = task.gpus;
      for (int32_t& f : after) {
        if (needed == 0) break;
        if (f == 1000) {
          f = 0;
          --needed;
        }
      }
      taken = static_cast<int64_t>(task.gpus) * 1000;
    }
    NodeView next = node;
    next.gpu_free = &after;
    next.gpu_free_total = node.gpu_free_total - taken;
    next.cpu_free = node.cpu_free - task.cpu;
    const double delta = static_cast<double>(before - meter_.Weighted(next)) /
                         static_cast<double>(meter_.total_count());
    return static_cast<int>(100.0 / (1.0 + std::exp(-delta / 1000.0)));
  }

  FragmentationMeter meter_;
  // ScoreAfter's node state, reused: it runs per GPU tried (the scheduler is single-threaded).
  mutable std::vector<int32_t> after_scratch_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const PolicyContext& context) {
  return std::make_unique<FgdPolicy>(context.typical_tasks);
}

}  // namespace corral::sched
