// How tight the fill bound (fill_bound.h) is: on clusters small enough to solve exactly, the LP
// bound, the exact optimum and the online policies side by side at the same step of the same
// arrival sequence (docs/placement.md, "How tight the limit is").
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/job.h"
#include "model/node.h"
#include "sched/policies/best_policy.h"
#include "sim/fill_bound.h"

namespace corral::sim {

// `count` of `nodes`, drawn with SeededRng(seed) and keeping the GPU model mix: each model
// (nodes without GPUs are a model of their own) gets its share of `count` by largest remainder
// (ties to the model named first), its nodes are drawn uniformly without replacement, and the
// sample keeps the input order. The same (nodes, count, seed) always gives the same sample.
// Errors: count 0 or more than the nodes (naming --exact-nodes).
Result<std::vector<model::Node>> SampleFillNodes(const std::vector<model::Node>& nodes,
                                                 size_t count, uint64_t seed);

// The online policies the comparison runs.
inline const std::vector<std::string> kTightnessPolicies = {"bestfit", "fgd", "best"};

// One instance: unallocated GPU % at the step where the arrived load last is ≤ `load_pct`.
struct TightnessRow {
  uint64_t seed = 0;
  size_t nodes = 0;
  int64_t capacity_milli = 0;
  size_t tasks = 0;  // tasks presented up to the step
  double arrived_pct = 0;
  double lp_bound_pct = 0;      // the LP bound: no policy leaves less
  double config_bound_pct = 0;  // the configuration LP's bound (ConfigurationMilliBound), ≥ lp
  ExactOptimum exact;           // over the same tasks
  double exact_pct = 0;         // 100 − 100·exact.milli / capacity (≥ OPT's when timed out)
  double exact_low_pct = 0;  // 100 − 100·exact.upper_milli / capacity (= exact_pct if optimal)
  std::vector<double> policy_pct;  // per kTightnessPolicies
};

// Samples `node_count` nodes for `seed` (SampleFillNodes), runs the fill of each of
// kTightnessPolicies on the sample with `original` tuned to `tune` (the same RunFill call as
// `sim fill`, so the tasks are the seed's shuffle, scaled to the sample's capacity), and at the
// step whose arrived load last is ≤ `load_pct` (the first step when none is) the LP bounds and the
// exact optimum over the tasks presented so far, the solver started from the policies'
// placements at that step (the best of them). `time_limit_s` bounds the exact solve and, apart,
// the configuration LP's column generation (ConfigurationOptions::time_limit_s). Errors: RunFill's,
// SampleFillNodes', PlaceableMilliBound's, ConfigurationMilliBound's, ExactPlaceableMilli's.
Result<TightnessRow> RunFillTightness(const std::vector<model::Node>& nodes,
                                      const std::vector<model::TaskResources>& original,
                                      uint64_t seed, double tune, size_t node_count,
                                      double load_pct, double time_limit_s,
                                      const sched::BestParams& best = {});

}  // namespace corral::sim
