// The monitoring answers of the HTTP API (docs/monitoring.md), built from the controller's
// GpuMonitor and state: GET /metrics, /api/v1/gpus, /api/v1/gpus/idle and
// /api/v1/jobs/<id>/gpus. Who may ask is decided by the API before these are called; what the
// caller sees of other projects' jobs on the GPUs is decided here (Controller::SeesWorkOf).
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>

#include "common/units.h"
#include "server/control/controller.h"
#include "server/http/saturation_guard.h"
#include "server/monitoring/gpu_history.h"
#include "store/store.h"

namespace corral::server {

// The Prometheus exposition of the whole cluster (metrics_exposition.h), with the API server's
// back-pressure counts when given.
std::string MetricsText(Controller& controller, Seconds now,
                        std::optional<SaturationGuard::Counts> saturation = std::nullopt);

// {"idle_threshold_percent", "idle_after_s", "gpus": [GpuStatusJson...]}: every GPU that has
// reported, or (idle_only) only those flagged idle, their holders as `who` may see them.
nlohmann::json GpusView(Controller& controller, const Principal& who, Seconds now, bool idle_only);

// {"job", "gpus": [GpuStatusJson + "series": [GpuReadingJson...] since `since`]}: the GPUs the
// job holds now, with their recent readings (the in-memory window); the other holders of a
// shared GPU as `who` may see them.
nlohmann::json JobGpusView(Controller& controller, const Principal& who, JobId job, Seconds now,
                           Seconds since);

// {"job", "intervals": [{"node", "gpu", "t" (Unix s), "resolution_s", "utilization_percent",
// "memory_used_mib", "power_w", "temperature_c"}]}: the job's GPU history in the store over
// [since, until) (GpuHistory::JobHistory picks 10 s or 5 min intervals).
Result<nlohmann::json> JobGpuHistoryView(GpuHistory& history, JobId job, Seconds since,
                                         Seconds until);

// GET /api/v1/capacity/forecast (capacity.h, ForecastView): the demand of the jobs live in the
// last `history_days`, and the forecast of the next `horizon_days`.
Result<nlohmann::json> CapacityForecastView(Controller& controller, Seconds now, int history_days,
                                            int horizon_days);

// The forecasts given in the last `ttl`, by (history_days, horizon_days), so that asking again
// (the dashboard, scripts, anyone: the route is open to every user) does not read a month of
// jobs from the store each time. Hourly demand changes little within a minute. At most
// kMaxEntries are kept, the oldest dropped first. Thread-safe; two concurrent misses of one
// key both compute.
class ForecastCache {
 public:
  static constexpr size_t kMaxEntries = 8;
  explicit ForecastCache(Seconds ttl) : ttl_(ttl) {}
  // The cached view of (history_days, horizon_days) when computed in (now - ttl, now] and in
  // now's hour (Unix time / 3600: the view's series move on with the hour), else compute()'s,
  // which is kept when it succeeds.
  Result<nlohmann::json> Get(int history_days, int horizon_days, Seconds now,
                             const std::function<Result<nlohmann::json>()>& compute);

 private:
  struct Entry {
    Seconds computed_at;
    nlohmann::json view;
  };
  const Seconds ttl_;
  std::mutex mu_;
  std::map<std::pair<int, int>, Entry> entries_;  // guarded by mu_
};

// POST /api/v1/capacity/what-if (capacity.h, ParseWhatIf and WhatIf): the jobs submitted since
// the body's "since" replayed on the live nodes plus each extra GPU count.
Result<nlohmann::json> WhatIfView(Controller& controller, Seconds now, const nlohmann::json& body);

}  // namespace corral::server
