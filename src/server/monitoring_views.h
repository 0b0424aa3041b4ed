// The monitoring answers of the HTTP API (docs/monitoring.md), built from the controller's
// GpuMonitor and state: GET /metrics, /api/v1/gpus, /api/v1/gpus/idle and
// /api/v1/jobs/<id>/gpus. Who may ask is decided by the API before these are called.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/units.h"
#include "server/controller.h"

namespace corral::server {

// The Prometheus exposition of the whole cluster (metrics_exposition.h).
std::string MetricsText(Controller& controller, Seconds now);

// {"idle_threshold_percent", "idle_after_s", "gpus": [GpuStatusJson...]}: every GPU that has
// reported, or (idle_only) only those flagged idle.
nlohmann::json GpusView(Controller& controller, Seconds now, bool idle_only);

// {"job", "gpus": [GpuStatusJson + "series": [GpuReadingJson...] since `since`]}: the GPUs the
// job holds now, with their recent readings (the in-memory window).
nlohmann::json JobGpusView(Controller& controller, JobId job, Seconds now, Seconds since);

}  // namespace corral::server
