// GPU demand forecasting for capacity planning (docs/monitoring.md, "Capacity planning"). The
// cluster's demand at an instant is the GPUs asked by every job then submitted and not yet ended
// (running or pending); the forecast works on its hourly means.
//
// Model: an additive decomposition with a daily and a weekly season,
//     demand(t) = level + daily[hour of day(t)] + weekly[day of week(t)] + residual
// fitted on the history: level is the mean of the last `level_hours`; daily[h] the mean of
// (x − mean) over the history's hours h; weekly[d] the mean of what is left over its days d
// (0 when the history holds less than two weeks, too little to tell a weekday from noise). The
// forecast is the fitted seasons on top of the level; the band is ± z × the standard deviation
// of the residuals (z = 1.28: an 80 % band if they were normal), clamped at 0. UTC hours.
#pragma once

#include <cstdint>
#include <vector>

namespace corral::predict {

// GPUs asked over [from_s, to_s): one job's demand while it was pending or running.
struct DemandInterval {
  int64_t from_s = 0;
  int64_t to_s = 0;
  double gpus = 0;
};

// The hourly mean demand over `hours` hours from `start_s` (which should be on the hour):
// entry i covers [start_s + 3600 i, start_s + 3600 (i + 1)).
std::vector<double> HourlyDemand(const std::vector<DemandInterval>& intervals, int64_t start_s,
                                 int hours);

struct ForecastOptions {
  int level_hours = 7 * 24;  // the level is the mean of this many most recent hours
  double band_z = 1.2816;
};

struct DemandForecast {
  std::vector<double> mean, low, high;  // `horizon_hours` entries each, from the history's end
  double residual_stddev = 0;
};

// Forecasts the `horizon_hours` after `history` (hourly means from `start_s`). An empty history
// forecasts 0.
DemandForecast ForecastDemand(const std::vector<double>& history, int64_t start_s,
                              int horizon_hours, const ForecastOptions& options = {});

// Mean absolute errors of a rolling-origin backtest over `series`: from every `horizon_hours`
// step after the first `train_hours`, forecast the next `horizon_hours` from the `train_hours`
// before them, and compare with what came. Besides this model: the flat mean of the training
// window, and the seasonal naive forecast (the same hour one week earlier).
struct ForecastAccuracy {
  int windows = 0;
  double mae = 0;
  double mae_flat_mean = 0;
  double mae_seasonal_naive = 0;
  double mean_demand = 0;  // over the forecast windows, for scale
};
ForecastAccuracy Backtest(const std::vector<double>& series, int64_t start_s, int train_hours,
                          int horizon_hours, const ForecastOptions& options = {});

}  // namespace corral::predict
