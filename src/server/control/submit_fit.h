// Whether a submitted job could ever run on the cluster's registered nodes, checked at submit
// (Controller::Admit, from the published read view: no lock) so that a request no node could
// ever satisfy (`--gpus 99` where the largest node has 8) is refused at once, naming the
// largest shape there is, instead of waiting forever as `never_fits` (docs/control-plane.md,
// "Requests no node could run").
//
// What counts is each registered node's size, whatever its state now: a cordoned, drained or
// lost node may come back. A cluster with no node yet refuses nothing (its nodes may not have
// joined), and neither does what a new kind of node would bring: a GPU model no node has (a
// lab queues work for the hardware it has on order; the job waits with `unknown_gpu_model`).
// An environment no registered node can run is refused: its nodes would need software installed
// first, and the refusal says what. A size no node of the models asked has is almost always a
// typo. Pure functions.
#pragma once

#include <vector>

#include "common/status.h"
#include "model/job.h"
#include "protocol/api_node.h"
#include "protocol/environment_spec.h"

namespace corral::server {

// How many copies of `task` node `node` could hold at once when idle (0: none fits).
int64_t TasksThatFitIdle(const model::TaskResources& task, const protocol::NodeView& node);

// OK when `tasks` copies of `task` (a gang when more than one) fit on `nodes` all idle, on nodes
// that can run its `environment` (none: any node; environment_runnable.h), or when `nodes` is
// empty. An environment no node can run: "field 'environment': needs a container engine ...;
// no registered node could ever run it". Else InvalidArgument naming the field that cannot be met
// and the largest shape the nodes offer: "field 'resources.gpus': needs 99 GPUs on one node; the
// largest node has 8 (n1); no registered node could ever run it". Only nodes of the GPU models
// asked count; with none of them registered, nothing is refused.
Status CheckFitsRegisteredNodes(const model::TaskResources& task, int tasks,
                                const protocol::EnvironmentSpec* environment,
                                const std::vector<const protocol::NodeView*>& nodes);

}  // namespace corral::server
