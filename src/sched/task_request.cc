#include "sched/task_request.h"

#include "sched/cluster_state.h"

namespace corral::sched {

std::vector<int> AcceptedModels(const ClusterState& state, const TaskRequest& t) {
  std::vector<int> out;
  AcceptedModelsInto(state, t, out);
  return out;
}

void AcceptedModelsInto(const ClusterState& state, const TaskRequest& t, std::vector<int>& out) {
  out.clear();
  if (t.gpus == 0 && t.any_model) out.push_back(kNoModel);
  if (t.any_model) {
    for (int m = 0; m < state.ModelCount(); ++m) out.push_back(m);
  } else {
    out.assign(t.models.begin(), t.models.end());
  }
}

bool Fits(const NodeClass& c, const TaskRequest& t) { return Fits(CapacityOf(c), t); }

}  // namespace corral::sched
