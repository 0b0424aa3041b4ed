// A node: one server of the cluster with its GPUs, CPU, memory, labels and topology.
#pragma once

#include <cstddef>
#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral::model {

// One GPU device of a node.
struct Gpu {
  int index = 0;          // position on the node, 0..n-1 (CUDA_VISIBLE_DEVICES numbering)
  std::string uuid;       // NVML UUID; may be empty for simulated nodes
  MemoryMib memory{0};    // device memory
  int nvlink_domain = 0;  // GPUs with the same value talk over NVLink/NVSwitch
};

// Label keys that carry topology across nodes (multi-node jobs prefer one rack/switch).
inline constexpr char kRackLabel[] = "rack";
inline constexpr char kSwitchLabel[] = "switch";

// A node's capacity. Every GPU of one node has the same model (what servers ship with and what
// every trace here records); a node without GPUs has an empty model.
struct Node {
  std::string name;
  std::string gpu_model;  // e.g. "A100-80GB", "V100M32"
  std::vector<Gpu> gpus;  // gpus[i].index == i
  CpuMilli cpu{0};
  MemoryMib memory{0};
  std::map<std::string, std::string> labels;
  // How its agent can start tasks (docs/environments.md): "process" and/or "container", and what
  // its process runtime finds there ("tool:python3", "prefix:/opt/corral/envs/x"; below), all
  // names that placement tests alike: a task asks for any one of them. Empty: "process" only,
  // as every agent has (simulated nodes).
  std::vector<std::string> runtimes;
};

// Agent runtimes (docs/environments.md): "process" every agent offers; "container" those with a
// container engine.
inline constexpr char kProcessRuntime[] = "process";
inline constexpr char kContainerRuntime[] = "container";
// What a node's process runtime offers besides the plain host (docs/environments.md, "Runs
// here"), named as runtimes are: "tool:" a known tool on the agent's PATH, "prefix:" a folder
// under kEnvsRoot.
inline constexpr char kToolPrefix[] = "tool:";
inline constexpr char kEnvPrefixPrefix[] = "prefix:";
// The tools agents look for, and the folder whose entries they report.
inline constexpr const char* kHostTools[] = {"python3", "jupyter-lab", "jupyter-notebook"};
inline constexpr char kEnvsRoot[] = "/opt/corral/envs";

// Builds a node with `gpu_count` GPUs of one model, indexed 0..n-1 in one NVLink domain.
Node MakeNode(std::string name, std::string gpu_model, int gpu_count, CpuMilli cpu,
              MemoryMib memory);

// Checks names, counts, units and labels; the error names the offending field ("node 'n1':
// field 'cpu_milli': must be > 0").
Status Validate(const Node& node);

// A cluster's id: kClusterIdLength lowercase hex characters, random, fixed when the cluster's
// store is created (store::Store::ClusterId) and shared by every server on that store. Agents
// learn it at registration and namespace what they create on a host with it.
inline constexpr size_t kClusterIdLength = 16;
Status ValidateClusterId(const std::string& id);

// A node's address as other nodes dial it (a host name, IPv4 or IPv6 address): 1..253 letters,
// digits, '.', '-', ':' and '_'; it lands in environment variables and hostfiles.
Status ValidateNodeAddress(const std::string& address);

// The most CPU a node may offer, in milli-CPUs (2,147 CPUs): the scheduler keeps free CPU in 32
// bits in its free-capacity index (sched/cluster_state.h, FreeCapacityEntry).
inline constexpr int64_t kMaxNodeCpuMilli = 2'147'483'647;

// A label key and value: each 1..kMaxLabelLength letters, digits, '-', '_', '.' or '/'.
inline constexpr size_t kMaxLabelLength = 63;
Status ValidateLabel(const std::string& key, const std::string& value);

}  // namespace corral::model
