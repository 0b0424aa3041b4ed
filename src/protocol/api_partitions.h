// The cluster's partitions and QoS (docs/batch.md, "Partitions and QoS"): what a job's
// `partition` and `qos` (Slurm's -p and -q) mean here. The server reads them from its
// --partitions-file (YAML or JSON, this format) and serves them at GET /api/v1/partitions;
// `corral partitions` prints them.
//
//   {"partitions": [{"name": "gpu", "gpu_models": ["A100-80GB"], "max_time_s": 86400,
//                    "default": true, "description": "..."}],
//    "qos": [{"name": "high", "priority": 100, "description": "..."}]}
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <string>
#include <vector>

#include "common/status.h"

namespace corral::protocol {

struct Partition {
  std::string name;                     // a project-style name (names.h)
  std::vector<std::string> gpu_models;  // the GPU models its jobs run on; empty: any
  int64_t max_time_s = 0;               // the longest time limit; 0: no bound
  bool is_default = false;              // for jobs that name no partition (at most one)
  std::string description;
  bool operator==(const Partition&) const = default;
};

struct Qos {
  std::string name;
  int priority = 0;  // the priority of its jobs that set none (-1000..1000)
  std::string description;
  bool operator==(const Qos&) const = default;
};

struct PartitionTable {
  std::vector<Partition> partitions;  // at most 256, unique names
  std::vector<Qos> qos;               // at most 256, unique names
  bool operator==(const PartitionTable&) const = default;
};

nlohmann::json ToJson(const PartitionTable& table);
// InvalidArgument naming the field: "partitions: field 'partitions[1].name': ...".
Result<PartitionTable> ParsePartitionTable(const nlohmann::json& json);

}  // namespace corral::protocol
