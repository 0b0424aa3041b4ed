// The pricing problem of the configuration LP (fill_bound.h, ConfigurationMilliBound), solved
// exactly by a branch and bound over one node (docs/placement.md, "The limit (session 43)"): the
// configuration of one node with the most value, given a value per task of each shape. It models
// what the exact solve's integer program over one node models (fill_bound.cc, PlacementMip): a
// share (one GPU, less than 1000 milli) sits on one GPU with other shares, whose milli sum to at
// most 1000; any other task holds its count of GPUs whole; CPU and memory are summed per node.
//
// It replaces CBC in pricing: at full size (15 node classes, 126 task shapes) CBC took 68.8 s for
// one round of pricing problems, mostly in cut generation; this search exploits the small node
// (at most a few GPUs, a few dozen tasks).
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace corral::sim {

inline constexpr int64_t kGpuMilli = 1000;  // milli of one whole GPU

// The node: its GPU count, CPU (milli) and memory (MiB).
struct PricingNode {
  int64_t gpus = 0;
  int64_t cpu = 0;
  int64_t memory = 0;
};

// A task shape offered to the node. Shapes whose one task does not fit the node alone, or whose
// value is not positive, are never taken (a configuration without them holds no less).
struct PricingShape {
  int64_t gpus = 0;
  int64_t gpu_milli = 0;  // per GPU, at most 1000; below 1000 with one GPU: a share
  int64_t cpu = 0;
  int64_t memory = 0;
  int64_t count = 0;  // at most this many tasks of the shape
  double value = 0;   // per task
};

// The best configuration found and a bound on every configuration's value.
struct PricedConfiguration {
  std::vector<int64_t> tasks;  // per shape (in the caller's order): tasks in the configuration
  double value = 0;            // Σ tasks · value; 0 for the empty configuration
  // ≥ the value of every configuration, ≥ `value`; = `value` when `proven` (up to the rounding
  // of summing doubles, which the caller's tolerance covers).
  double upper = 0;
  bool proven = false;  // the search ended within its node budget
  size_t searched = 0;  // search nodes visited
};

// The exact search, at most `max_nodes` search nodes (then `upper` is the largest bound among the
// parts left unsearched, still ≥ every configuration's value). Deterministic.
PricedConfiguration BestConfiguration(const PricingNode& node,
                                      const std::vector<PricingShape>& shapes, size_t max_nodes);

}  // namespace corral::sim
