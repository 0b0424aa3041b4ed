// Factories of the built-in placement policies, one per file; policy_registry.cc maps names to
// them. Shared constants of the paper's scoring formulas live here.
#pragma once

#include <memory>

#include "sched/placement_policy.h"

namespace corral::sched {

// Normalisation scales of the FGD paper's baselines: a node with 128 cores and 8 GPUs.
inline constexpr int64_t kCpuScale = 128000;  // CPU milli
inline constexpr int64_t kGpuScale = 8000;    // milli-GPU

// bestfit's score (bestfit_policy.cc). fgd and best score with it while they have no workload
// profile (no typical tasks): a fresh cluster then packs like bestfit instead of following the
// node order (docs/decisions.md, "Placing without a workload profile").
int BestFitScore(const NodeView& node, const TaskRequest& task);

std::unique_ptr<PlacementPolicy> MakeRandomPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeSpreadPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeBestFitPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeDotProductPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakePackingPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeClusteringPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeFgdPolicy(const PolicyContext& context);
std::unique_ptr<PlacementPolicy> MakeBestPolicy(const PolicyContext& context);  // corral's pick

}  // namespace corral::sched
