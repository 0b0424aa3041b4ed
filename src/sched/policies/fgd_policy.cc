// fgd (fragmentation gradient descent, Weng et al., ATC'23): place the task where it increases
// the node's expected fragmentation for the workload's typical tasks the least.
//   Δ = F(node before) - F(node after), in milli-GPU;  score = ⌊100 / (1 + e^(-Δ/1000))⌋.
// A share is tried on every GPU that fits (one try per distinct free amount: equal amounts give
// equal scores); the best GPU, lowest index on equal integer scores, is used. Whole-GPU tasks
// take the lowest-index fully free GPUs; CPU-only tasks change only the node's free CPU.
// Without a workload profile (no typical tasks) it scores as bestfit does.
// The integer score matters: choosing the exact best Δ leaves about a point more GPUs
// unallocated on the openb trace (fill-experiment.md).
#include <algorithm>
#include <cmath>

#include "sched/fragmentation_index.h"
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class FgdPolicy final : public PlacementPolicy {
 public:
  explicit FgdPolicy(std::vector<TypicalTask> typical)
      : meter_(std::move(typical)), index_(meter_) {}
  // index_ borrows meter_: a copy or move would leave it reading the source's.
  FgdPolicy(const FgdPolicy&) = delete;
  FgdPolicy& operator=(const FgdPolicy&) = delete;
  FgdPolicy(FgdPolicy&&) = delete;
  FgdPolicy& operator=(FgdPolicy&&) = delete;

  std::string_view name() const override { return "fgd"; }

  void OnModelsChanged(const ClusterState& state) override {
    meter_.Resolve(state);
    index_.Clear();
  }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    if (meter_.total_count() == 0) return BestFitScore(node, task);  // no workload profile
    const SortedFree free(*node.gpu_free);
    const int64_t before = Weighted(node, free);
    if (!task.IsShare()) return ScoreAfter(node, free, before, task, -1);
    int best = -1;
    int32_t last = -1;
    for (int32_t f : *node.gpu_free) {
      if (f < task.gpu_milli || f == last) continue;
      last = f;
      best = std::max(best, ScoreAfter(node, free, before, task, f));
    }
    return best;
  }

  std::vector<int> ChooseGpus(const NodeView& node, const TaskRequest& task,
                              Rng& /*rng*/) const override {
    if (!task.IsShare() || meter_.total_count() == 0) return TightestFitGpus(node, task);
    const SortedFree free(*node.gpu_free);
    const int64_t before = Weighted(node, free);
    const std::vector<int32_t>& by_index = *node.gpu_free;
    int best_gpu = -1, best_score = -1;
    for (int i = 0; i < node.gpu_count(); ++i) {
      int32_t f = by_index[i];
      if (f < task.gpu_milli) continue;
      // A GPU with the amount of a lower-indexed one scores the same, so it cannot win (only a
      // higher score replaces the best): each distinct amount is scored once.
      if (std::find(by_index.begin(), by_index.begin() + i, f) != by_index.begin() + i) continue;
      int s = ScoreAfter(node, free, before, task, f);
      if (s > best_score) {
        best_score = s;
        best_gpu = i;
      }
    }
    return best_gpu < 0 ? std::vector<int>{} : std::vector<int>{best_gpu};
  }

 private:
  int64_t Weighted(const NodeView& node, const SortedFree& free) const {
    return index_.Weighted(free, node.gpu_free_total, node.cpu_free, node.model);
  }

  // Scores the change from the node's state (`free`, fragmentation `before`) to its state
  // after placing. `share_from` is the free amount of the GPU a share is taken from (-1 for
  // whole-GPU and CPU-only tasks).
  int ScoreAfter(const NodeView& node, const SortedFree& free, int64_t before,
                 const TaskRequest& task, int32_t share_from) const {
    const bool share = share_from >= 0;
    const SortedFree after = share ? SortedFree::AfterShare(free, share_from, task.gpu_milli)
                                   : SortedFree::AfterWhole(free, task.gpus);
    const int64_t taken = share ? task.gpu_milli : static_cast<int64_t>(task.gpus) * 1000;
    const int64_t weighted_after =
        index_.Weighted(after, node.gpu_free_total - taken, node.cpu_free - task.cpu, node.model);
    const double delta =
        static_cast<double>(before - weighted_after) / static_cast<double>(meter_.total_count());
    return static_cast<int>(100.0 / (1.0 + std::exp(-delta / 1000.0)));
  }

  FragmentationMeter meter_;
  // F by GPU state, filled as states are met: a cache of meter_ (the same numbers), hence
  // mutable under the const Score (a policy serves one Placer, single-threaded).
  mutable FragmentationIndex index_;
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const PolicyContext& context) {
  return std::make_unique<FgdPolicy>(context.typical_tasks);
}

}  // namespace corral::sched
