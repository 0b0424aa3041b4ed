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

  // A typical task as the meter sweeps it.
  struct Shape {
    int gpus;
    int gpu_milli;
    int64_t cpu;
    int64_t count;
    bool any_model;
    size_t typical;             // index in typical_
    std::vector<bool> accepts;  // by model id
  };
  // The shapes, by gpu_milli ascending (the order VisitFragments visits them).
  const std::vector<Shape>& shapes() const { return shapes_; }
  // Calls visit(shape, fragment) for every shape in shapes() order, where fragment is
  // F(node, shape) on a node of GPU model `model` with these free shares (summing to
  // `free_total`) that has the shape's CPU free; free_total when the shape never runs on the
  // model. Weighted is Σ count × (the node has the CPU ? fragment : free_total).
  template <typename Visit>
  void VisitFragments(const SortedFree& free, int64_t free_total, int model, Visit visit) const;

 private:
  std::vector<TypicalTask> typical_;
  std::vector<Shape> shapes_;  // by gpu_milli ascending: Weighted sweeps them with SortedFree
  int64_t total_count_ = 0;
  int resolved_models_ = -1;
};

template <typename Visit>
void FragmentationMeter::VisitFragments(const SortedFree& free, int64_t free_total, int model,
                                        Visit visit) const {
  const std::span<const int32_t> v = free.values();
  // Shapes come by gpu_milli ascending, so the GPUs too small for one shape are a prefix of the
  // sorted free amounts that only grows: `small` GPUs, `too_small` milli free on them.
  size_t small = 0;
  int64_t too_small = 0;
  for (const Shape& s : shapes_) {
    const bool runs =
        s.gpus > 0 && model >= 0 &&  // kNoModel (-1): a node without GPUs
        (s.any_model || (model < static_cast<int>(s.accepts.size()) && s.accepts[model]));
    int64_t fragment = free_total;
    if (runs) {
      for (; small < v.size() && v[small] < s.gpu_milli; ++small) too_small += v[small];
      const size_t fitting = v.size() - small;  // GPUs that can host one unit of this shape
      if (fitting >= static_cast<size_t>(s.gpus)) fragment = too_small;
    }
    visit(s, fragment);
  }
}

}  // namespace corral::sched
