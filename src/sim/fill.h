// The fill experiment (../shared/docs/fill-experiment.md): tasks are presented one at a time
// to a placement policy on an initially empty cluster, placed once or failed, never released.
// It measures how much GPU capacity a policy leaves unusable as the arrived load grows.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "model/allocation.h"
#include "model/job.h"
#include "model/node.h"
#include "sched/cluster_state.h"
#include "sched/policies/best_policy.h"

namespace corral::sim {

struct FillConfig {
  std::string policy;
  uint64_t seed = 42;
  double tune = 1.3;       // workload is tuned to this multiple of the cluster's GPU capacity
  sched::BestParams best;  // tunables of the `best` policy (research: --best-params)
  // Whether FillResult::placements records where each task went (the exact solve starts from it,
  // fill_tightness.h); off, the fill keeps no per-task allocation.
  bool keep_placements = false;
};

// Where one placed task went: its node (an index into the nodes RunFill was given) and the GPUs
// it holds there (index on the node, milli).
struct FillPlacement {
  size_t node = 0;
  std::vector<model::GpuShare> gpus;
};

// The state after one presented task.
struct FillStep {
  double arrived_pct = 0;           // GPU request presented so far, % of capacity
  double unallocated_pct = 0;       // 100 − allocated %, of capacity
  double frag_pct_of_capacity = 0;  // fragmented free milli, % of capacity
  double frag_pct_of_idle = 0;      // fragmented free milli, % of free milli
  bool placed = false;
};

// The curve read at one arrived load x (fill-experiment.md, "Reading the curve").
struct FillPoint {
  double unallocated_pct = 0;
  double frag_pct_of_capacity = 0;
  double frag_pct_of_idle = 0;
};

struct FillResult {
  std::string policy;
  uint64_t seed = 0;
  int tasks_presented = 0;
  int tasks_placed = 0;
  double wall_ms = 0;
  std::vector<FillStep> steps;
  // Per step, where its task went (nullopt: not placed); empty unless FillConfig::keep_placements.
  std::vector<std::optional<FillPlacement>> placements;
  // Reads the curve at arrived load x (integer %): the mean over steps whose rounded load is
  // x, or over |x_t − x| ≤ 1 when none is, or the closest step when none is within 1.
  FillPoint At(int x) const;
};

// The arrived loads reported in tables and JSON.
inline const std::vector<int> kFillReportLoads = {90, 100, 110, 130};

// The task list one seed presents (fill-experiment.md, steps 1-2): `original` shuffled with `rng`,
// then tuned to `tune` × `capacity_milli` of GPU request. FillTasks draws it first from
// SeededRng(seed).
std::vector<model::TaskResources> TuneWorkload(const std::vector<model::TaskResources>& original,
                                               int64_t capacity_milli, double tune, Rng& rng);

// Adds `nodes` to `state` and returns its GPU capacity in milli-GPU: RunFill and the fill bound
// (fill_bound.h) load a cluster the same way. Errors: a node ClusterState::AddNode refuses, a
// cluster without GPUs.
Result<int64_t> LoadFillCluster(const std::vector<model::Node>& nodes, sched::ClusterState& state);

// What one seed of a fill presents: `nodes` loaded into `state` (LoadFillCluster), and `original`
// tuned to the cluster's capacity with SeededRng(seed) (TuneWorkload). RunFill, the fill bound
// (fill_bound.h) and the tightness check (fill_tightness.h) all take their tasks from here, so
// the policies, the bound and the exact optima see the same list. `rng` is the generator after
// the draw: RunFill's placer goes on with it. Errors: as LoadFillCluster's; no task to present.
struct FillTaskList {
  int64_t capacity_milli = 0;
  std::vector<model::TaskResources> tasks;  // non-empty
  SeededRng rng;
};
Result<FillTaskList> FillTasks(const std::vector<model::Node>& nodes,
                               const std::vector<model::TaskResources>& original, uint64_t seed,
                               double tune, sched::ClusterState& state);

// Runs one (policy, seed) fill. `tasks` is the original, untuned workload (typical tasks for
// fragmentation come from it). Errors: unknown policy, empty cluster, no GPU capacity.
Result<FillResult> RunFill(const std::vector<model::Node>& nodes,
                           const std::vector<model::TaskResources>& tasks,
                           const FillConfig& config);

// Runs every (policy, seed) pair on `threads` worker threads (0 = all cores). Results come back
// in (policy, seed) order whatever the thread count, so the output is deterministic.
Result<std::vector<FillResult>> RunFillMatrix(const std::vector<model::Node>& nodes,
                                              const std::vector<model::TaskResources>& tasks,
                                              const std::vector<std::string>& policies,
                                              const std::vector<uint64_t>& seeds, double tune,
                                              int threads, const sched::BestParams& best = {});

}  // namespace corral::sim
