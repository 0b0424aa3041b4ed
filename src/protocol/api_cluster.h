// The cluster's live counts in the API, with their JSON codecs: the summary of GET
// /api/v1/summary (and of the dashboard's event stream) and the history of GET
// /api/v1/summary/history. The server builds them (Controller::ClusterSummary,
// SummaryHistory), the HTTP API encodes them, and /metrics reads the same struct.
//
//   summary: {"time": 1700000000, "nodes": 4, "nodes_ready": 3, "gpus": 32,
//             "gpus_allocated": 12.5, "gpus_used": 9.75, "jobs_pending": 7,
//             "jobs_starting": 1, "jobs_running": 5}
//   history: {"step_s": 60, "summaries": [summary, ...]}   (oldest first)
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral::protocol {

struct ClusterSummary {
  Seconds time{0};          // when it was taken (Unix seconds)
  int64_t nodes = 0;        // nodes not lost
  int64_t nodes_ready = 0;  // of those, ready (neither cordoned nor draining)
  int64_t gpus = 0;         // their GPUs
  MilliGpu allocated{0};    // of those, allocated (shares count as fractions)
  double gpus_used = 0;     // the sum of their GPUs' last utilisation, in GPUs
  int64_t jobs_pending = 0;
  int64_t jobs_starting = 0;
  int64_t jobs_running = 0;
  bool operator==(const ClusterSummary&) const = default;
};

struct SummaryHistory {
  Seconds step{60};                       // between two summaries
  std::vector<ClusterSummary> summaries;  // oldest first
  bool operator==(const SummaryHistory&) const = default;
};

nlohmann::json ToJson(const ClusterSummary& summary);
nlohmann::json ToJson(const SummaryHistory& history);
// Errors name the field: "summary: field 'gpus_used': must be >= 0, got -1", "summary history:
// field 'summaries[2].time': is required".
Result<ClusterSummary> ParseClusterSummary(const nlohmann::json& json);
Result<SummaryHistory> ParseSummaryHistory(const nlohmann::json& json);

}  // namespace corral::protocol
