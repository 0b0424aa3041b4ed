// The nodes of the API (GET /api/v1/nodes): one row per node the server knows, with its
// inventory, state, free capacity and, per GPU, the tasks holding it. The server builds the rows
// for one caller (Controller::Nodes), the HTTP API and the CLI encode and decode them with this
// codec. A task of a project the caller may not see (docs/security.md, "What others can see")
// is only its share, "in use": {"milli": 500}.
//
//   {"name": "gpu-01", "state": "ready", "last_heartbeat": 1700000000, "gpu_model": "A100",
//    "gpus": 2, "cpu_milli": 64000, "memory_mib": 524288, "labels": {"rack": "r1"},
//    "runtimes": ["process"], "container_engine": "podman 4.3.1", "gpu_metrics_error": "...",
//    "gpu_free_milli": [1000, 500], "cpu_free_milli": 60000, "memory_free_mib": 500000,
//    "gpu_tasks": [[], [{"job": 7, "task": 0, "user": "alice", "project": "vision",
//                        "milli": 500}, {"milli": 250}]]}
//
// "container_engine" and "gpu_metrics_error" are absent when empty; the three "..._free_..."
// fields are absent for a node the scheduler does not model (never registered since a restart).
#pragma once

#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/states.h"

namespace corral::protocol {

// Whose a task is.
struct TaskOwner {
  JobId job;
  int task = 0;  // the task's index in its job
  std::string user;
  std::string project;
  bool operator==(const TaskOwner&) const = default;
};

// A task of a starting or running job on one GPU, and the share of it the task holds.
struct GpuTask {
  // None: a task of a project the caller may not see, shown only as "in use".
  std::optional<TaskOwner> owner;
  MilliGpu milli{0};  // 1..1000
  bool operator==(const GpuTask&) const = default;
};

// What a node has free now, as the scheduler counts it.
struct NodeFree {
  std::vector<int64_t> gpu_milli;  // per GPU index, 0..1000
  CpuMilli cpu{0};
  MemoryMib memory{0};
  bool operator==(const NodeFree&) const = default;
};

struct NodeView {
  std::string name;
  model::NodeState state = model::NodeState::kReady;
  Seconds last_heartbeat{0};  // Unix seconds
  // Timed out and not heard since (not lost yet): it takes no new work, its requeue-able jobs
  // were requeued, the others keep running (docs/control-plane.md, "Fencing"). "unreachable",
  // only when true.
  bool unreachable = false;
  std::string gpu_model;
  int gpus = 0;  // GPUs in the inventory
  CpuMilli cpu{0};
  MemoryMib memory{0};
  std::map<std::string, std::string> labels;
  std::vector<std::string> runtimes;
  std::string container_engine;           // "" when the node has none
  std::vector<std::string> tools;         // known tools on its PATH (inventory "tools")
  std::vector<std::string> env_prefixes;  // folders under /opt/corral/envs (inventory)
  std::string gpu_metrics_error;          // why its last GPU report was refused; "" when none was
  std::optional<NodeFree> free;           // none: the scheduler does not model the node
  // Per GPU index (`gpus` entries), the tasks holding that GPU.
  std::vector<std::vector<GpuTask>> gpu_tasks;
  bool operator==(const NodeView&) const = default;
};

nlohmann::json ToJson(const NodeView& node);
nlohmann::json ToJson(const std::vector<NodeView>& nodes);
// Errors name the field: "node: field 'gpu_tasks[1][0].milli': must be in 1..1000, got 0";
// for a list, "nodes: field '[3].state': ...".
Result<NodeView> ParseNodeView(const nlohmann::json& json);
Result<std::vector<NodeView>> ParseNodeViews(const nlohmann::json& json);

}  // namespace corral::protocol
