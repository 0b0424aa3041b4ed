// Reports of simulator runs: JSON (the `corral sim` contract that scripts rely on), plain-text
// comparison tables, per-step CSVs and SVG plots.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/status.h"
#include "sim/fill.h"
#include "sim/fill_tightness.h"
#include "sim/predict_eval.h"
#include "sim/replay.h"

namespace corral::sim {

// Median of a sample (mean of the two middle values for an even count); 0 when empty.
double Median(std::vector<double> values);

// {"mode":"fill","results":[{"policy","seed","unallocated_gpu_pct":{"90":..},
//  "frag_pct_of_capacity":{..},"wall_ms"}],"summary":[{"policy","unallocated_gpu_pct_median":{..}}]}
nlohmann::json FillJson(const std::vector<FillResult>& results);
// One row per policy: median unallocated GPU % at each reported load, mean ± sd at 100%,
// median fragmentation at 100%, and the time per seed; then a line saying what the columns mean.
std::string FillTable(const std::vector<FillResult>& results);
// What FillBoundTable's time column shows: each bound's own time ("ms"), the time of the LP and
// the configuration LP computed together (RunFillBounds: "ms (both)"), or no column (the other
// table of the same run already shows that time).
enum class BoundTimeColumn { kOwn, kBothBounds, kNone };
// The fill bound (fill_bound.h), one row per seed and a mean row: the lower bound on unallocated
// GPU % at each reported load (the mean over the band's steps, as FillTable reads policies) and
// the time per seed as `time` says.
std::string FillBoundTable(const std::vector<FillResult>& bounds,
                           BoundTimeColumn time = BoundTimeColumn::kOwn);
// One line per solve of the configuration LP (RunFillBounds): the load it was solved for, its
// step (1-based, as in BoundJson: the number of tasks arrived, ConfigurationSolve::step + 1) and
// arrived load, its own bound there and whether it converged (else why it stopped; the
// bound is sound either way) after how many master solves.
std::string ConfigurationSolveLines(const FillBounds& bounds);
// {"mode":"bound","results":[{"seed","unallocated_gpu_pct":{"90":..} (the tightest bound per
//  step; null without the configuration LP),"lp_unallocated_gpu_pct":{..},"solves":[{"load"
//  (null: every checkpoint),"step" (1-based: the tasks arrived),"arrived_pct",
//  "unallocated_gpu_pct","status" (converged, iteration cap, time limit, pricing cut off),
//  "converged","iterations"}],"wall_ms"}],
//  "mean":{"unallocated_gpu_pct":{..},"lp_unallocated_gpu_pct":{..}},"solves","converged"}: per
//  seed as FillBoundTable's rows, the mean as its mean row. `configuration`: whether the
//  configuration LP ran (RunFillBounds) or only the LP (RunFillBound, in `lp`).
nlohmann::json BoundJson(const std::vector<FillBounds>& bounds, bool configuration);
// The bound's tightness (fill_tightness.h): one row per instance and a mean row over those solved
// to optimality: the LP bound, the exact optimum (the solver's range "low-high" when the time limit
// stopped it), each policy, the LP gap (exact − LP) and the online gap (best − exact), in points
// of unallocated GPU %, and the solve time.
std::string FillTightnessTable(const std::vector<TightnessRow>& rows);

// Writes fill_<policy>_<seed>.csv (one row per presented task) and fill_unallocated.svg (median
// unallocated GPU % against arrived load, one line per policy) into `dir` (created if needed).
Status WriteFillOutputs(const std::vector<FillResult>& results, const std::string& dir);

// {"mode":"replay","config":{"order","blocking","estimate","resume","pass_interval_s",
//  "las_thresholds_gpu_s","gang_placement","reclaim","victims","min_run_before_preemption_s",
//  "checkpoint_interval_s","checkpoint_grace_s","resize_cost_s","resize_interval_s",
//  "resize_budget"},"results":[{"policy","jobs","completed",
//  "unfinished","jct_s":{"mean","p50","p95","p99"},"queue_s":{..},"makespan_s",
//  "gpu_alloc_pct_mean","gpu_alloc_pct_arrivals","frag_pct_mean" (null: not tracked),
//  "gpu_s","preemptions",
//  "lost_gpu_s","gangs":{"starts","nodes_mean","one_rack"},"fairness":{"contended_s",
//  "jain_mean","gpu_alloc_pct_mean"},"elastic":{"share","alpha","jobs","grows","shrinks"},
//  "projects":[{"project","weight","jobs","completed","jct_s",
//  "queue_s","gpu_s","preemptions","lost_gpu_s","entitlement_90_s" (null: never),
//  "share_of_entitlement_mean"}],"wall_ms"}]}: the fields of ReplayResult (sim/replay.h).
nlohmann::json ReplayJson(const ReplayConfig& config, const std::vector<ReplayResult>& results);
// One row per policy; then, for a run with several projects or with preemptions, one row per
// project and the fairness under contention; with elastic jobs, one row per run with its
// share, alpha, resizes, JCT, allocation and lost GPU-hours.
std::string ReplayTable(const std::vector<ReplayResult>& results);
// Writes into `dir`: replay_<policy>.csv (the timeline), replay_<policy>_projects.csv (time_s,
// project, gpu_alloc_pct, entitled_pct: one row per sample and project),
// replay_<policy>_projects.svg (each project's allocation over time) and replay_alloc.svg (GPU
// allocation % over time, one line per policy); for an elastic sweep (several shares), also
// elastic_jct.svg and elastic_alloc.svg (mean JCT and allocation against the share, one line
// per alpha).
Status WriteReplayOutputs(const std::vector<ReplayResult>& results, const std::string& dir);

// {"mode":"predict","config":{"window","min_samples","default_estimate_s"},"jobs","scored",
//  "mdape_pct","within_2x_pct","mean_confidence","by_basis":[{"basis","jobs","scored",
//  "mdape_pct","within_2x_pct","mean_confidence"}],"by_confidence":[{"confidence","jobs",..}]}
// (by_basis in predict::BasisNames() order, by_confidence lowest band first).
nlohmann::json PredictJson(const PredictionEvaluation& eval,
                           const predict::PredictorConfig& config);
// One row per basis that answered, the total, then one row per confidence band ("conf [0.5,
// 0.75)"); MdAPE and within-2x are "-" for a row without a scored job.
std::string PredictTable(const PredictionEvaluation& eval);

}  // namespace corral::sim
