// A lower bound on the unallocated GPU % of the fill experiment (fill.h) that no placement policy
// can beat on the same arrival sequence (docs/placement.md, "The limit").
//
// Whatever a policy does, after t tasks its placed tasks are a subset of the first t tasks that
// fits on the cluster, so its allocated milli-GPU is at most OPT_t, the most milli-GPU any
// feasible assignment of such a subset holds. OPT_t is bounded from above by a linear relaxation
// over node classes × task shapes whose rows are dual feasible functions (Fekete and Schepers,
// 2001) of the per-GPU and per-node packings; the bound is then read off the LP's dual, so it
// stays sound whatever the solver's tolerances.
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <vector>

#include "common/status.h"
#include "model/job.h"
#include "model/node.h"
#include "sim/fill.h"

namespace corral::sim {

// An upper bound, in milli-GPU, on the GPU request of any subset of `tasks` that can be placed
// on `nodes` at once: GPU count, model pins (gpu_models), whole GPUs versus shares of one GPU,
// CPU and memory are honoured; runtimes and labels are ignored (dropping a constraint keeps the
// bound sound). At most the total request of `tasks`. Errors: more than kMaxBoundTasks tasks,
// kMaxBoundNodes nodes, kMaxBoundShapes task shapes (distinct requests) or kMaxBoundColumns
// (node class, task shape) pairs where the shape fits, or the LP solver fails.
Result<double> PlaceableMilliBound(const std::vector<model::Node>& nodes,
                                   const std::vector<model::TaskResources>& tasks);

inline constexpr size_t kMaxBoundTasks = 10'000'000;
inline constexpr size_t kMaxBoundNodes = 1'000'000;
inline constexpr size_t kMaxBoundShapes = 100'000;
inline constexpr size_t kMaxBoundColumns = 1'000'000;

// The most milli-GPU any subset of `tasks` placed on `nodes` at once holds, OPT itself rather
// than a bound on it, for instances small enough (docs/placement.md, "How tight the limit is"):
// an integer program over single nodes and GPUs with the constraints PlaceableMilliBound
// honours, solved by CBC's branch and cut within `time_limit_s` (one thread). kOptimal: `milli`
// is OPT. kTimeLimit: `milli` is the best placement found (≤ OPT; 0 when none), not proven
// optimal, and `upper_milli` the solver's bound on OPT (≥ OPT up to its tolerances: unlike
// PlaceableMilliBound's, not recomputed). Either way the placement behind `milli` is checked in
// integers against every constraint.
// Errors: more than kMaxExactNodes nodes or kMaxExactTasks tasks, a time limit outside
// (0, kMaxExactSeconds], the solver fails.
//
// `starts`: known placements of some of `tasks` (such as the online policies' in a fill,
// FillResult::placements), one entry per task, nodes indexed as in `nodes`. Each is checked in
// integers; the one holding the most is CBC's first incumbent, so `milli` is never below it.
// Errors also: a start that is not a placement of `tasks` on `nodes` (naming the task or node).
// kTimeLimit: not proven (the time limit, or CBC proved an optimum below the start it dropped);
// `milli` and `upper_milli` are then the range left open.
enum class ExactStatus { kOptimal, kTimeLimit };
struct ExactOptimum {
  ExactStatus status = ExactStatus::kOptimal;
  int64_t milli = 0;
  int64_t upper_milli = 0;  // = milli when kOptimal
  int64_t start_milli = 0;  // what the best start holds (0 without starts)
  double seconds = 0;       // wall time of the solve
};
using TaskPlacements = std::vector<std::optional<FillPlacement>>;
Result<ExactOptimum> ExactPlaceableMilli(const std::vector<model::Node>& nodes,
                                         const std::vector<model::TaskResources>& tasks,
                                         double time_limit_s,
                                         const std::vector<TaskPlacements>& starts = {});

inline constexpr size_t kMaxExactNodes = 200;
inline constexpr size_t kMaxExactTasks = 20'000;
inline constexpr double kMaxExactSeconds = 3600;

// The bound for one seed of the fill experiment: the task list RunFill(seed, tune) presents, and
// per step t a lower bound on its unallocated GPU %, 100 − 100 · min(arrived_t, UB_k) / capacity,
// where UB_k bounds (as PlaceableMilliBound does) what the first k tasks can hold, at the nearest
// checkpoint k ≥ t (OPT is monotone in t). Checkpoints: 8 steps spread over each band
// FillResult::At reads at kFillReportLoads, ending at its last step, and the last step; one LP,
// re-solved from its last basis. Returned as a FillResult of policy "bound" (fragmentation
// fields 0, no task placed), so At(x) reads the bound's curve as it reads a policy's.
// The nodes are loaded as RunFill loads them (LoadFillCluster); the LP's size is checked on the
// untuned workload's shapes before tuning. Errors: as RunFill's, and PlaceableMilliBound's.
// The steps of a fill's curve (`steps`, by arrived_pct) at which RunFillBound solves its LP:
// kCheckpointsPerBand (8) spread over each band FillResult::At reads at kFillReportLoads, ending at
// the band's last step, and the last step. Ascending; empty for no steps.
std::set<size_t> BoundCheckpoints(const std::vector<FillStep>& steps);

Result<FillResult> RunFillBound(const std::vector<model::Node>& nodes,
                                const std::vector<model::TaskResources>& original, uint64_t seed,
                                double tune);

}  // namespace corral::sim
