// The tunable parameters of the `best` placement policy (best_policy.cc) and their parser, shared
// by the policy and the simulator's research flags (`corral sim fill --best-params k=v,...`).
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace corral::sched {

struct TypicalTask;  // sched/fragmentation.h
class ClusterState;  // sched/cluster_state.h

// Compiled-in defaults are the set tuned on all five openb workloads (docs/placement.md).
struct BestParams {
  // Weight of a typical task in the fragmentation measure: count × (GPU demand in GPUs)^demand_exp.
  // 0 weighs shapes by frequency alone (FGD); 1 by the GPUs they would ask (expected demand).
  double demand_exp = 0.0;
  // Δ (milli-GPU) is mapped to a score by levels × sigmoid(Δ / scale), floored.
  double scale = 1500.0;
  int levels = 100;
  // Score points added on a node already in use (some GPU or CPU taken): keeps empty nodes whole.
  int used_bonus = 0;
  // Weight of CPU stranding in Δ: free GPU milli that the node's free CPU cannot back at the
  // typical tasks' CPU per GPU milli counts as stranded; Δ −= cpu_weight × (its increase).
  double cpu_weight = 2.0;
  // The same for memory: free GPU milli that the node's free memory cannot back at the typical
  // tasks' memory per GPU milli.
  double memory_weight = 5.0;
  // Weight of the unusable-capacity term: per typical shape m, the free GPU milli of the node
  // that m cannot use, free − min(free, units_m × m's GPU milli), units_m = how many m the node
  // can host at once by GPUs, CPU and memory (0 when m does not run on the model); weighted by
  // count like F; Δ −= usable_weight × (its increase).
  double usable_weight = 0.04;
  // The stranding rule: a GPU left with f free milli (0 < f < 1000) is stranded on its model when
  // the typical single-GPU shares that fit in f are less than `strand_share` of the typical GPU
  // tasks that run there (by count). Each free GPU has an expected waste (strand_expect, below);
  // the score loses strand_levels points per 1000 milli of expected waste the task adds (gains
  // them for waste it removes), after the sigmoid: a share that would add waste w goes to a node
  // up to strand_levels × w/1000 points worse that does not. 0 turns it off (session 43,
  // docs/placement.md).
  double strand_levels = 150;
  double strand_share = 0.02;
  // The blend that gives a GPU with f free its expected waste, in [0, 1]:
  // (1 − strand_expect) × (f when stranded, else 0) + strand_expect × the waste f is expected to
  // end with when typical tasks (by count, among those that fit) fill it one after another until
  // a stranded remainder is left (a whole GPU free counts too). 0 is session 43's rule (the
  // stranded milli); 1 the lookahead alone (session 44, docs/placement.md).
  double strand_expect = 0.5;

  bool operator==(const BestParams&) const = default;
};

// Parses "k=v,k=v" (keys as in BestParams; unset keys keep their defaults). Errors name the key
// and its bounds: demand_exp in [0, 3], scale in [10, 100000], levels in [2, 1000000],
// used_bonus in [0, 1000000], cpu_weight in [0, 100], memory_weight in [0, 100],
// usable_weight in [0, 100], strand_levels in [0, 1000], strand_share in [0, 1],
// strand_expect in [0, 1].
Result<BestParams> ParseBestParams(std::string_view text);
// The "k=v,..." form of all parameters (round-trips through ParseBestParams).
std::string FormatBestParams(const BestParams& params);

// Read-only view of the stranding rule's table, for tests: element f (0..1000) is the expected
// waste (BestParams::strand_expect) that the best policy built from `typical` and `params` counts
// for a GPU with f free milli of model id `model` of `state` (all 0 when strand_levels is 0 or no
// typical GPU task runs on the model). `model` must be below state.ModelCount().
std::vector<double> ExpectedWasteTable(const std::vector<TypicalTask>& typical,
                                       const BestParams& params, const ClusterState& state,
                                       int model);

}  // namespace corral::sched
