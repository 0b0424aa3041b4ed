// Prometheus text exposition (format 0.0.4) of the cluster at `GET /metrics`
// (docs/monitoring.md lists every metric). GPU metrics carry the names of NVIDIA's DCGM exporter
// where they mean the same (DCGM_FI_DEV_GPU_UTIL, DCGM_FI_DEV_FB_USED, ...) with its labels
// (gpu, UUID, modelName, Hostname) plus corral's job_id, user and project; everything else is
// corral_*.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "protocol/api_cluster.h"
#include "protocol/api_node.h"
#include "protocol/api_project.h"
#include "server/http/saturation_guard.h"
#include "server/monitoring/gpu_monitor.h"

namespace corral::server {

// What one exposition shows, gathered from the controller.
struct MetricsSnapshot {
  protocol::ClusterSummary summary;             // Controller::ClusterSummary()
  std::vector<protocol::NodeView> nodes;        // Controller::Nodes()
  std::vector<protocol::ProjectView> projects;  // Controller::ProjectsView(), every project
  std::vector<GpuStatus> gpus;                  // GpuMonitor::Gpus()
  int64_t idle_after_ms = 0;                    // GpuMonitor::Options::idle_after_ms
  int64_t now_ms = 0;
  int64_t rejected_gpu_reports = 0;
  int waiting_heartbeats = 0;
  int64_t store_commits = 0;      // Controller::StoreCommits()
  int64_t store_round_trips = 0;  // Controller::StoreRoundTrips()
  // The API server's back-pressure (HttpServer::saturation()); nullopt: not shown.
  std::optional<SaturationGuard::Counts> saturation;
};

// The exposition text. Label values are escaped (backslash, double quote, line feed), so that
// job and user names cannot break the format.
std::string RenderMetrics(const MetricsSnapshot& snapshot);

// A label value as the text format wants it.
std::string EscapeLabelValue(const std::string& value);

}  // namespace corral::server
