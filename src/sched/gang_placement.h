// Where the tasks of a multi-task job (a gang) go: together, on the fewest nodes and under one
// switch or rack (topology domains) when the cluster has room there. Distributed training exchanges
// gradients between its tasks at every step, so each extra node and each hop between racks slows
// it.
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
//   - one node when one holds every task: the one with the least room to spare, then the
//     policy's higher score, then the tie order;
//   - else within one switch domain when a switch has room for all of them, else one rack
//     domain, else anywhere (domains come from node labels, cluster_state.h kTopologyLevels;
//     a narrower domain wins over fewer nodes in a wider one);
//   - among the domains with room at a level: the one that needs the fewest nodes, then the one
//     with the least room to spare (best fit: large domains stay free for large gangs), then
//     the first to have joined;
//   - within the chosen domain, the fewest nodes: node by node, the tightest node that still
//     lets the roomiest remaining ones complete the gang (ties to the policy's higher score,
//     then the tie order), so that roomy nodes stay free where that costs no extra node. E.g.
//     6 tasks on nodes with room for 4, 4 and 3 go 3 + 3.
//   The policy chooses each task's GPUs on its node. A policy that picks uniformly (random)
//   places each task as kEachTask does.
// Cost: O(fitting node classes) when one node holds the gang; else, without topology labels,
// O(fitting classes × count × nodes used), with them O(fitting nodes × nodes used).
std::optional<std::vector<Allocation>> PlaceGang(Placer& placer, const TaskRequest& task, int count,
                                                 GangPlacement placement);

}  // namespace corral::sched
