// Capacity planning (docs/monitoring.md, "Capacity planning"): the cluster's GPU demand from the
// recorded jobs, its forecast (predict/demand_forecast.h), and "how many more GPUs would have
// kept the p90 wait under X": the recorded jobs replayed in the simulator (sim/replay.h) on the
// current nodes plus more GPUs.
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/node.h"
#include "predict/demand_forecast.h"
#include "sched/scheduler.h"
#include "sim/trace.h"
#include "store/store.h"

namespace corral::server {

// Each job's demand: the GPUs it asked (tasks × GPUs × share) from its submission to its end,
// or to `now` when it has not ended. Records whose spec cannot be read are skipped.
std::vector<predict::DemandInterval> DemandOf(const std::vector<store::JobRecord>& jobs,
                                              Seconds now);

// GET /api/v1/capacity/forecast: {"capacity_gpus", "step_s": 3600, "demand_now_gpus" (the GPUs
// of the jobs submitted and not ended at `now`), "history": [{"t", "demand_gpus"}] (the
// `history_days` whole hours before now: the current hour is not in it), "forecast": [{"t",
// "demand_gpus", "low", "high"}] (`horizon_days` from the current hour), "residual_stddev"}.
// t: Unix seconds of the hour's start. The history is the demand of `jobs` (DemandOf) plus
// `purged`, the demand per hour of the jobs purged past the retention (store::DemandHour), so that
// a purge changes nothing here.
nlohmann::json ForecastView(const std::vector<store::JobRecord>& jobs, int capacity_gpus,
                            Seconds now, int history_days, int horizon_days,
                            const std::vector<store::DemandHour>& purged = {});

// The recorded jobs submitted in [since, now) as a replay trace: each runs for its last run's
// length (to now for a running job); jobs that never started are replayed with their time limit,
// else one hour (what they would have asked is unknown). Jobs cancelled before they started are
// left out: they asked for nothing that ran.
sim::Trace TraceOf(const std::vector<store::JobRecord>& jobs, Seconds since, Seconds now);

// `nodes` plus `extra_gpus` GPUs on copies of the most common node shape ("whatif-<k>"), the
// last copy holding what is left.
std::vector<model::Node> WithExtraGpus(const std::vector<model::Node>& nodes, int extra_gpus);

// POST /api/v1/capacity/what-if body, validated: {"since": "30d" | "YYYY-MM-DD" (default 30d),
// "extra_gpus": [ints 0..100000, at most 8] (default [0, 8, 16, 32, 64]),
// "target_p90_wait_s": int >= 0 (default 3600)}.
struct WhatIfRequest {
  std::string since = "30d";
  std::vector<int> extra_gpus = {0, 8, 16, 32, 64};
  int64_t target_p90_wait_s = 3600;
};
Result<WhatIfRequest> ParseWhatIf(const nlohmann::json& body);

// Replays `trace` on `nodes` plus each extra count with the live scheduler's rules
// (`scheduling`: placement policy, queue order, blocking, quotas, limits, fair share, reclaim,
// 2D-LAS thresholds, gang placement; run times estimated by a predictor that learns from the
// replayed jobs, as the server's learns from history): {"jobs" (replayed), "too_big" (set
// aside: their tasks ask more GPUs than any node has, real or added), "results":
// [{"extra_gpus", "gpus", "p90_wait_s" (null when over 10 % of the jobs never start),
// "mean_wait_s" (of those that started), "max_wait_s", "unfinished" (never started)}],
// "smallest_meeting_target": the least extra count whose p90 wait is at most the target (null:
// none)}. A wait is first start − submission; a job that never starts counts as an infinite
// one. The replay passes at every arrival and end and, under 2D-LAS or with reclaim on and a
// project with a quota, also every 60 s while jobs wait (the server passes every second), so
// preemptions decided between arrivals and ends happen, up to a minute late. Errors: the
// replay's (e.g. an unknown policy).
Result<nlohmann::json> WhatIf(const std::vector<model::Node>& nodes, const sim::Trace& trace,
                              const WhatIfRequest& request,
                              const sched::SchedulerConfig& scheduling);

}  // namespace corral::server
