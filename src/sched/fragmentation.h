// GPU fragmentation as defined by the FGD paper (fill-experiment.md): free GPU capacity that
// the workload's typical tasks cannot use where it lies.
#pragma once

#include <array>
#include <cstdint>
#include <span>
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
  int64_t memory = 0;  // MiB, the mean over the shape's tasks (not part of the shape)
};

// Groups tasks by (cpu, gpu_milli, gpus, models) (memory averaged, not a key), sorts by count
// descending (ties: larger cpu, gpu_milli, gpus, then models first) and keeps the most common
// shapes until they cover at least `coverage` of all tasks.
std::vector<TypicalTask> ComputeTypicalTasks(const std::vector<model::TaskResources>& tasks,
                                             double coverage = 0.95);

// A node's free milli-GPU per GPU, sorted ascending (what FragmentationMeter sweeps), and the
// same node after a placement, without a heap allocation for nodes of up to kInline GPUs.
class SortedFree {
 public:
  explicit SortedFree(const std::vector<int32_t>& free);
  // `before` after a share of `milli` is taken from one GPU with `from` free (one of its values).
  static SortedFree AfterShare(const SortedFree& before, int32_t from, int32_t milli);
  // `before` after up to `gpus` fully free GPUs (1000) are taken whole.
  static SortedFree AfterWhole(const SortedFree& before, int gpus);

  std::span<const int32_t> values() const { return {data(), size_}; }

 private:
  static constexpr size_t kInline = 16;
  SortedFree() = default;
  void Resize(size_t n);
  int32_t* data() { return size_ <= kInline ? inline_.data() : heap_.data(); }
  const int32_t* data() const { return size_ <= kInline ? inline_.data() : heap_.data(); }

  std::array<int32_t, kInline> inline_{};
  std::vector<int32_t> heap_;  // used when size_ > kInline
  size_t size_ = 0;
};

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
  // The same for a node of GPU model `model` with `cpu_free` millicores and these free GPU
  // amounts (their sum is `free_total`): one sweep over the shapes, O(shapes + GPUs).
  int64_t Weighted(const SortedFree& free, int64_t free_total, int64_t cpu_free, int model) const;
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
    size_t typical;             // index in typical_
    std::vector<bool> accepts;  // by model id
  };
  std::vector<TypicalTask> typical_;
  std::vector<Shape> shapes_;  // by gpu_milli ascending: Weighted sweeps them with SortedFree
  int64_t total_count_ = 0;
  int resolved_models_ = -1;
};

}  // namespace corral::sched
