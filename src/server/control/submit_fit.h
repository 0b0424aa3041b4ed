// Whether a submitted job could ever run on the cluster's registered nodes, checked at submit
// (Controller::Admit, from the published read view: no lock) so that a request no node could
// ever satisfy (`--gpus 99` where the largest node has 8) is refused at once, naming the
// largest shape there is, instead of waiting forever as `never_fits` (docs/control-plane.md,
// "Requests no node could run").
//
// What counts is each registered node's size, whatever its state now: a cordoned, drained or
// lost node may come back. A cluster with no node yet refuses nothing (its nodes may not have
// joined), and neither does what a new kind of node would bring: a GPU model no node has (a
// lab queues work for the hardware it has on order; the job waits with `unknown_gpu_model`) or
// a runtime no node offers (an agent with a container engine may join; `no_runtime`). A size no
// node of the models asked has is almost always a typo. Pure functions.
#pragma once

#include <vector>

#include "common/status.h"
#include "model/job.h"
#include "protocol/api_node.h"

namespace corral::server {

// How many copies of `task` node `node` could hold at once when idle (0: none fits).
int64_t TasksThatFitIdle(const model::TaskResources& task, const protocol::NodeView& node);

// OK when `tasks` copies of `task` (a gang when more than one) fit on `nodes` all idle, or when
// `nodes` is empty. Else InvalidArgument naming the field that cannot be met and the largest
// shape the nodes offer: "field 'resources.gpus': needs 99 GPUs on one node; the largest node
// has 8 (n1); no registered node could ever run it". Only nodes of the GPU models asked count;
// with none of them registered, nothing is refused.
Status CheckFitsRegisteredNodes(const model::TaskResources& task, int tasks,
                                const std::vector<const protocol::NodeView*>& nodes);

}  // namespace corral::server
