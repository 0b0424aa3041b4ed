// Where the tasks of a multi-task job (a gang) go: together, on the fewest nodes and under one
// switch or rack when the cluster has room there. Distributed training exchanges gradients
// between its tasks at every step, so each extra node and each hop between racks slows it.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "sched/cluster_state.h"
#include "sched/placer.h"
#include "sched/task_request.h"

namespace corral::sched {

// How many copies of `task` a node in class `c` could hold at once (0 when none fits).
int TasksThatFit(const NodeClass& c, const TaskRequest& task);

// How the tasks of a gang are placed: together (below), or each where the placement policy
// would put a lone task (the behaviour before topology-aware gangs; kept to measure against).
enum class GangPlacement { kTogether, kEachTask };

// "together" | "each-task"
Result<GangPlacement> ParseGangPlacement(std::string_view name);
std::string_view GangPlacementName(GangPlacement placement);

// Places `count` (≥ 1) copies of `task`, all or none, and applies them.
//
// kEachTask: one after the other, each where the policy puts it.
// kTogether:
// One task goes where the placement policy puts it (Placer::Place). More tasks go to the
// schedulable nodes that fit them:
//   - within one switch group when some switch has room for all of them, else one rack group,
//     else anywhere (groups come from node labels, cluster_state.h kTopologyLevels);
//   - among the groups with room at a level: the one that needs the fewest nodes, then the one
//     with the least room to spare (best fit: large groups stay free for large gangs), then
//     the first group to have joined;
//   - within the chosen nodes, while r tasks remain: the node that holds all r with the least
//     room to spare, else the node that holds the most; ties to the policy's higher score, then
//     the tie order. This uses the fewest nodes possible. The policy chooses each task's GPUs.
// On failure `fitted` (when given) receives how many tasks fitted at once (for pending
// reasons). Cost: O(fitting nodes × nodes used) for count > 1.
std::optional<std::vector<Allocation>> PlaceGang(Placer& placer, const TaskRequest& task, int count,
                                                 GangPlacement placement, int* fitted = nullptr);

}  // namespace corral::sched
