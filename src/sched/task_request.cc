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

bool Fits(const NodeClass& c, const TaskRequest& t) {
  if (c.cpu_free < t.cpu || c.memory_free < t.memory) return false;
  if (!t.any_runtime && (c.runtimes & t.runtimes) == 0) return false;
  if (t.gpus == 0) return true;
  if (t.IsShare()) return c.max_free >= t.gpu_milli;
  return c.full_free >= t.gpus;
}

}  // namespace corral::sched
