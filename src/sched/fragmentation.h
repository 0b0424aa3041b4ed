// GPU fragmentation as defined by the FGD paper (fill-experiment.md): free GPU capacity that
// the workload's typical tasks cannot use where it lies.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/job.h"

namespace corral::sched {

struct NodeView;
class ClusterState;

// One task shape of a workload and how often it occurs.
struct TypicalTask {
  int gpus = 0;
  int gpu_milli = 0;
  int64_t cpu = 0;
  std::vector<std::string> gpu_models;  // empty = any
  int64_t count = 0;
};

// Groups tasks by (cpu, gpu_milli, gpus, models) (memory ignored), sorts by count descending
// (ties: larger cpu, gpu_milli, gpus, then models first) and keeps the most common shapes until
// they cover at least `coverage` of all tasks.
std::vector<TypicalTask> ComputeTypicalTasks(const std::vector<model::TaskResources>& tasks,
                                             double coverage = 0.95);

// Measures F(node) = Σ_m p_m F(node, m) for a fixed set of typical tasks, exactly, as an
// integer weighted sum (count × milli); divide by total_count() for milli-GPU.
class FragmentationMeter {
 public:
  explicit FragmentationMeter(std::vector<TypicalTask> typical);

  // Resolves typical tasks' GPU model names against the cluster's model ids. Call again when
  // the cluster's model table grows.
  void Resolve(const ClusterState& state);

  // Σ_m count_m × F(node, m), in milli-GPU × count.
  int64_t Weighted(const NodeView& node) const;
  int64_t total_count() const { return total_count_; }
  int resolved_models() const { return resolved_models_; }
  const std::vector<TypicalTask>& typical() const { return typical_; }

 private:
  struct Shape {
    int gpus;
    int gpu_milli;
    int64_t cpu;
    int64_t count;
    bool any_model;
    std::vector<bool> accepts;  // by model id
  };
  std::vector<TypicalTask> typical_;
  std::vector<Shape> shapes_;
  int64_t total_count_ = 0;
  int resolved_models_ = -1;
};

}  // namespace corral::sched
