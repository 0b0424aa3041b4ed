// A task's allocation: what one task of a job holds on its node while it runs. The scheduler
// chooses the GPU shares, CPU and memory; the server adds the ports it reserved there (an
// interactive session's, a distributed job's rendezvous block). Written once, when the job's gang
// is assigned (store::Store::AssignGang), and never changed; read back to adopt running jobs after
// a restart, to build the launch order an agent gets, and for the API's view of a task.
//
// The node is not part of it: the task record names the node (store::TaskRecord::node).
#pragma once

#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral::model {

// One GPU's part of an allocation.
struct GpuShare {
  int index = 0;      // the GPU's index on its node (Gpu::index), >= 0
  MilliGpu milli{0};  // 1..1000; 1000 is the whole GPU
  bool operator==(const GpuShare&) const = default;
};

// Where an interactive session's app listens (docs/sessions.md): a port reserved for it on its
// node, dialled by the server's session gateway.
struct SessionEndpoint {
  std::string address;  // the node's address as other hosts dial it (ValidateNodeAddress)
  int port = 0;         // 1..65535
  bool operator==(const SessionEndpoint&) const = default;
};

// How the parts of a distributed job meet (docs/distributed.md); the same in every task of the
// job.
struct Rendezvous {
  std::string master_addr;         // the address of part 0's node
  int port = 0;                    // base of the block of ports reserved on every node of the job
  std::vector<std::string> hosts;  // each part's node address, by task index (>= 1 entries)
  bool operator==(const Rendezvous&) const = default;
};

struct Allocation {
  std::vector<GpuShare> gpus;              // distinct GPU indices; empty for a CPU-only task
  CpuMilli cpu{0};                         // >= 0; 0: no CPU request
  MemoryMib memory{0};                     // >= 0; 0: no memory request
  std::optional<SessionEndpoint> session;  // an interactive session's task only
  std::optional<Rendezvous> rendezvous;    // a distributed job's tasks only
  bool operator==(const Allocation&) const = default;
};

// At most this many GPUs in one allocation (a bound on what a stored row may claim).
inline constexpr size_t kMaxGpusPerAllocation = 1024;

// Checks ranges and that GPU indices are distinct; the error names the field under
// `field_prefix` ("field 'tasks[1].allocation.gpus[1].milli': must be in 1..1000, got 0" for the
// prefix "tasks[1].allocation.").
Status Validate(const Allocation& allocation, std::string_view field_prefix = "");

// The allocation's one JSON form, stored in the tasks table (store/sql_store.cc) and shown in the
// API's task view:
//   {"gpus": [{"index": 0, "milli": 1000}], "cpu_milli": 4000, "memory_mib": 16384,
//    "session": {"address": "n1", "port": 29500},                     (sessions only)
//    "rendezvous": {"master_addr": "n1", "port": 29500, "hosts": [...]}}  (distributed only)
nlohmann::json ToJson(const Allocation& allocation);

// Reads ToJson's form: gpus, cpu_milli and memory_mib are required, session and rendezvous
// optional; checks types and Validate()'s ranges, naming the bad field ("allocation: field
// 'gpus[0].index': must be an integer"). Other members are ignored, so that rows written before
// schema version 10 (which repeated the task's node as "node") read as they are.
Result<Allocation> AllocationFromJson(const nlohmann::json& json);

}  // namespace corral::model
