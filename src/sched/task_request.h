// A task's needs in the scheduler's terms: GPU models resolved to ids, and interned ids for
// the task's shape (what scores depend on) and kind (what clustering groups by).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corral::sched {

struct TaskRequest {
  int gpus = 0;        // whole GPUs, or 1 with gpu_milli < 1000 for a share
  int gpu_milli = 0;   // per GPU, 1..1000 (0 when gpus == 0)
  int64_t cpu = 0;     // CPU milli
  int64_t memory = 0;  // MiB
  bool any_model = true;
  std::vector<int> models;               // acceptable model ids (those some node has)
  std::vector<std::string> model_names;  // as asked, for pending reasons
  // Acceptable agent runtimes as a mask of ClusterState::RuntimeBit()s: a node must offer one.
  // any_runtime: no constraint; a runtime no node has ever offered adds no bit.
  bool any_runtime = true;
  uint64_t runtimes = 0;
  std::vector<std::string> runtime_names;  // as asked, for pending reasons
  int shape = -1;  // interned (gpus, gpu_milli, cpu, memory): equal ids score equally
  int kind = -1;   // interned: a share, or k whole GPUs (ClusterState::TaskKindId)

  bool IsShare() const { return gpus == 1 && gpu_milli < 1000; }
  bool AcceptsModel(int model) const;
  int64_t TotalMilli() const { return static_cast<int64_t>(gpus) * gpu_milli; }
};

class ClusterState;
struct NodeClass;

// Model ids a task may use: the acceptable ones, or every model; kNoModel (nodes without GPUs)
// too for a CPU-only task that names no model.
std::vector<int> AcceptedModels(const ClusterState& state, const TaskRequest& task);
// The same written into `out` (replacing its contents): the Placer reuses one buffer per task
// placed instead of allocating.
void AcceptedModelsInto(const ClusterState& state, const TaskRequest& task, std::vector<int>& out);
// True when a node in class `c` offers one of the task's runtimes and has the free CPU, memory
// and GPUs the task needs.
bool Fits(const NodeClass& c, const TaskRequest& task);

inline bool TaskRequest::AcceptsModel(int model) const {
  if (any_model) return true;
  for (int m : models) {
    if (m == model) return true;
  }
  return false;
}

}  // namespace corral::sched
