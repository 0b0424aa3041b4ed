// The monitoring answers of the HTTP API (docs/monitoring.md), built from the controller's
// GpuMonitor and state: GET /metrics, /api/v1/gpus, /api/v1/gpus/idle and
// /api/v1/jobs/<id>/gpus. Who may ask is decided by the API before these are called.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/units.h"
#include "server/controller.h"
#include "server/gpu_history.h"
#include "store/store.h"

namespace corral::server {

// The Prometheus exposition of the whole cluster (metrics_exposition.h).
std::string MetricsText(Controller& controller, Seconds now);

// {"idle_threshold_percent", "idle_after_s", "gpus": [GpuStatusJson...]}: every GPU that has
// reported, or (idle_only) only those flagged idle.
nlohmann::json GpusView(Controller& controller, Seconds now, bool idle_only);

// {"job", "gpus": [GpuStatusJson + "series": [GpuReadingJson...] since `since`]}: the GPUs the
// job holds now, with their recent readings (the in-memory window).
nlohmann::json JobGpusView(Controller& controller, JobId job, Seconds now, Seconds since);

// {"job", "intervals": [{"node", "gpu", "t" (Unix s), "resolution_s", "utilization_percent",
// "memory_used_mib", "power_w", "temperature_c"}]}: the job's GPU history in the store over
// [since, until) (GpuHistory::JobHistory picks 10 s or 5 min intervals).
Result<nlohmann::json> JobGpuHistoryView(GpuHistory& history, JobId job, Seconds since,
                                         Seconds until);

// GET /api/v1/capacity/forecast (capacity.h, ForecastView): the demand of the jobs live in the
// last `history_days`, and the forecast of the next `horizon_days`.
Result<nlohmann::json> CapacityForecastView(Controller& controller, store::Store& store,
                                            Seconds now, int history_days, int horizon_days);

// POST /api/v1/capacity/what-if (capacity.h, ParseWhatIf and WhatIf): the jobs submitted since
// the body's "since" replayed on the live nodes plus each extra GPU count.
Result<nlohmann::json> WhatIfView(Controller& controller, store::Store& store, Seconds now,
                                  const nlohmann::json& body);

}  // namespace corral::server
