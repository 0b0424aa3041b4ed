#include "predict/demand_forecast.h"

#include <algorithm>
#include <cmath>

namespace corral::predict {

namespace {

constexpr int64_t kHour = 3600;
constexpr int kHoursPerWeek = 7 * 24;

int HourOfDay(int64_t t) { return static_cast<int>(((t % 86400) + 86400) % 86400 / kHour); }
// 0 = Thursday (1970-01-01); any fixed numbering serves.
int DayOfWeek(int64_t t) { return static_cast<int>(((t / 86400) % 7 + 7) % 7); }

}  // namespace

std::vector<double> HourlyDemand(const std::vector<DemandInterval>& intervals, int64_t start_s,
                                 int hours) {
  std::vector<double> gpu_seconds(std::max(hours, 0), 0.0);
  const int64_t end_s = start_s + kHour * static_cast<int64_t>(gpu_seconds.size());
  for (const DemandInterval& d : intervals) {
    const int64_t from = std::max(d.from_s, start_s), to = std::min(d.to_s, end_s);
    if (to <= from || d.gpus <= 0) continue;
    for (int64_t h = (from - start_s) / kHour; start_s + h * kHour < to; ++h) {
      const int64_t lo = std::max(from, start_s + h * kHour);
      const int64_t hi = std::min(to, start_s + (h + 1) * kHour);
      gpu_seconds[h] += d.gpus * static_cast<double>(hi - lo);
    }
  }
  for (double& v : gpu_seconds) v /= kHour;
  return gpu_seconds;
}

DemandForecast ForecastDemand(const std::vector<double>& history, int64_t start_s,
                              int horizon_hours, const ForecastOptions& options) {
  DemandForecast f;
  const size_t n = history.size();
  const int horizon = std::max(horizon_hours, 0);
  f.mean.assign(horizon, 0.0);
  f.low.assign(horizon, 0.0);
  f.high.assign(horizon, 0.0);
  if (n == 0) return f;

  double mean = 0;
  for (double x : history) mean += x;
  mean /= static_cast<double>(n);
  const size_t level_n = std::min<size_t>(n, std::max(options.level_hours, 1));
  double level = 0;
  for (size_t i = n - level_n; i < n; ++i) level += history[i];
  level /= static_cast<double>(level_n);

  auto time_of = [&](size_t i) { return start_s + kHour * static_cast<int64_t>(i); };
  double daily[24] = {}, weekly[7] = {};
  int daily_n[24] = {}, weekly_n[7] = {};
  for (size_t i = 0; i < n; ++i) {
    daily[HourOfDay(time_of(i))] += history[i] - mean;
    ++daily_n[HourOfDay(time_of(i))];
  }
  for (int h = 0; h < 24; ++h) daily[h] = daily_n[h] ? daily[h] / daily_n[h] : 0;
  if (n >= 2 * static_cast<size_t>(kHoursPerWeek)) {
    for (size_t i = 0; i < n; ++i) {
      weekly[DayOfWeek(time_of(i))] += history[i] - mean - daily[HourOfDay(time_of(i))];
      ++weekly_n[DayOfWeek(time_of(i))];
    }
    for (int d = 0; d < 7; ++d) weekly[d] = weekly_n[d] ? weekly[d] / weekly_n[d] : 0;
  }
  auto season = [&](int64_t t) { return daily[HourOfDay(t)] + weekly[DayOfWeek(t)]; };

  double squares = 0;
  for (size_t i = 0; i < n; ++i) {
    const double r = history[i] - (mean + season(time_of(i)));
    squares += r * r;
  }
  f.residual_stddev = std::sqrt(squares / static_cast<double>(n));
  const double band = options.band_z * f.residual_stddev;
  for (int k = 0; k < horizon; ++k) {
    const double m = std::max(0.0, level + season(time_of(n + k)));
    f.mean[k] = m;
    f.low[k] = std::max(0.0, m - band);
    f.high[k] = m + band;
  }
  return f;
}

ForecastAccuracy Backtest(const std::vector<double>& series, int64_t start_s, int train_hours,
                          int horizon_hours, const ForecastOptions& options) {
  ForecastAccuracy a;
  if (train_hours <= 0 || horizon_hours <= 0) return a;
  double errors = 0, errors_flat = 0, errors_naive = 0, actual = 0;
  int64_t points = 0;
  for (size_t origin = train_hours; origin + horizon_hours <= series.size();
       origin += horizon_hours) {
    const std::vector<double> train(series.begin() + (origin - train_hours),
                                    series.begin() + origin);
    const int64_t train_start = start_s + kHour * static_cast<int64_t>(origin - train_hours);
    const DemandForecast f = ForecastDemand(train, train_start, horizon_hours, options);
    double flat = 0;
    for (double x : train) flat += x;
    flat /= static_cast<double>(train.size());
    for (int k = 0; k < horizon_hours; ++k) {
      const size_t i = origin + k;
      const double naive =
          i >= static_cast<size_t>(kHoursPerWeek) ? series[i - kHoursPerWeek] : flat;
      errors += std::fabs(f.mean[k] - series[i]);
      errors_flat += std::fabs(flat - series[i]);
      errors_naive += std::fabs(naive - series[i]);
      actual += series[i];
      ++points;
    }
    ++a.windows;
  }
  if (points == 0) return a;
  a.mae = errors / points;
  a.mae_flat_mean = errors_flat / points;
  a.mae_seasonal_naive = errors_naive / points;
  a.mean_demand = actual / points;
  return a;
}

}  // namespace corral::predict
