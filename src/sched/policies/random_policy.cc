// random: a uniformly drawn feasible node; a share goes to a uniformly drawn GPU that fits.
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

class RandomPolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "random"; }
  int Score(const NodeView&, const TaskRequest&) const override { return 0; }
  bool PicksUniformly() const override { return true; }

  std::vector<int> ChooseGpus(const NodeView& node, const TaskRequest& task,
                              Rng& rng) const override {
    if (!task.IsShare()) return TightestFitGpus(node, task);
    std::vector<int> fitting;
    for (int i = 0; i < node.gpu_count(); ++i) {
      if ((*node.gpu_free)[i] >= task.gpu_milli) fitting.push_back(i);
    }
    if (fitting.empty()) return {};
    return {fitting[rng.Uniform(fitting.size())]};
  }
};

}  // namespace

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyContext&) {
  return std::make_unique<RandomPolicy>();
}

}  // namespace corral::sched
