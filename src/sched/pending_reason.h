// Why a job is not running: a stable machine-readable code and a sentence for people, e.g.
// {"no_free_block", "needs 8 free V100M32 GPUs on one node; the largest free block is 4 (node
// n17)"}. Computed from the ClusterState's per-model statistics, looking at node classes only to
// name the best candidate node. The sentence names the constraint that binds, and only it: a
// resource the job does not ask for is never named, and a job that fits the state now says so
// (kReasonFitsNow) instead of blaming a resource.
#pragma once

#include <string>

#include "sched/cluster_state.h"
#include "sched/task_request.h"

namespace corral::sched {

struct PendingReason {
  std::string code;
  std::string message;
  bool operator==(const PendingReason&) const = default;
};

// Stable codes (API and CLI contract).
inline constexpr char kReasonNoNodes[] = "no_nodes";
inline constexpr char kReasonUnknownModel[] = "unknown_gpu_model";
inline constexpr char kReasonNoRuntime[] = "no_runtime";
inline constexpr char kReasonRuntimeNodesFull[] = "runtime_nodes_full";
inline constexpr char kReasonNeverFits[] = "never_fits";
// Only nodes taking no new work (cordoned, drained, unreachable) could hold it.
inline constexpr char kReasonOutOfService[] = "out_of_service";
inline constexpr char kReasonNoFreeBlock[] = "no_free_block";
inline constexpr char kReasonFragmented[] = "fragmented";
inline constexpr char kReasonInsufficientGpus[] = "insufficient_gpus";
inline constexpr char kReasonNoGpuShare[] = "no_gpu_share";
inline constexpr char kReasonInsufficientCpuMemory[] = "insufficient_cpu_memory";
inline constexpr char kReasonGangPartial[] = "gang_partial";
inline constexpr char kReasonBlockedByHead[] = "blocked_by_head";
inline constexpr char kReasonNotYetConsidered[] = "not_yet_considered";
inline constexpr char kReasonProjectLimit[] = "project_limit";
inline constexpr char kReasonUserLimit[] = "user_limit";
inline constexpr char kReasonArrayLimit[] = "array_limit";
inline constexpr char kReasonReservation[] = "would_delay_reservation";
inline constexpr char kReasonFitsNow[] = "fits_now";
// Held by the server, unseen by the scheduler, until its dependencies are met
// (model/dependency.h): one waits ("waits for job 12 to end successfully (afterok)"), or one can
// never be met ("job 12 failed: afterok can never be met").
inline constexpr char kReasonDependency[] = "dependency";
inline constexpr char kReasonDependencyNeverSatisfied[] = "dependency_never_satisfied";

// The reason of a queued job no pass has tried yet.
inline PendingReason NotYetConsidered() {
  return {kReasonNotYetConsidered, "not tried yet: the next scheduling pass tries it"};
}

// Explains why a job of `tasks` (>= 1) identical copies of `task` (a gang when more than one,
// started all together) does not fit in `state` now; kReasonFitsNow when it does (capacity was
// freed after the attempt that failed).
PendingReason ExplainUnplaced(const ClusterState& state, const TaskRequest& task, int tasks);

}  // namespace corral::sched
