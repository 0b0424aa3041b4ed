#include "predict/demand_forecast.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

namespace corral::predict {
namespace {

constexpr int64_t kMonday = 1'798'416'000;  // 2026-12-28 00:00 UTC, a Monday

TEST(HourlyDemandTest, SpreadsIntervalsOverTheHoursTheyCover) {
  // 2 GPUs from 00:30 to 02:15; 1 GPU from before the window to 01:00; one outside.
  const std::vector<DemandInterval> intervals = {{kMonday + 1800, kMonday + 8100, 2},
                                                 {kMonday - 7200, kMonday + 3600, 1},
                                                 {kMonday + 20000, kMonday + 30000, 5}};
  const std::vector<double> hourly = HourlyDemand(intervals, kMonday, 3);
  ASSERT_EQ(hourly.size(), 3u);
  EXPECT_DOUBLE_EQ(hourly[0], 1 + 2 * 0.5);
  EXPECT_DOUBLE_EQ(hourly[1], 2);
  EXPECT_DOUBLE_EQ(hourly[2], 2 * 0.25);
}

// Demand with a working-hours bump on weekdays, a quiet weekend and noise.
std::vector<double> OfficeDemand(int weeks, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> noise(0, 2);
  std::vector<double> x;
  for (int h = 0; h < weeks * 168; ++h) {
    const int hour = h % 24, day = h / 24 % 7;  // day 0 = Monday
    double v = 40 + (hour >= 9 && hour < 18 ? 30 : 0);
    if (day >= 5) v -= 25;
    x.push_back(std::max(0.0, v + noise(rng)));
  }
  return x;
}

TEST(DemandForecastTest, LearnsTheDailyAndWeeklySeasons) {
  const std::vector<double> history = OfficeDemand(4, 1);
  const DemandForecast f = ForecastDemand(history, kMonday, 7 * 24);
  ASSERT_EQ(f.mean.size(), 168u);
  // The week after: Monday 12:00 busy, Monday 03:00 quiet, Saturday 12:00 lower than Monday's.
  EXPECT_NEAR(f.mean[12], 70, 4);
  EXPECT_NEAR(f.mean[3], 40, 4);
  EXPECT_LT(f.mean[5 * 24 + 12], f.mean[12] - 15);
  EXPECT_GT(f.residual_stddev, 0);
  EXPECT_LT(f.residual_stddev, 6);
  for (size_t k = 0; k < f.mean.size(); ++k) {
    EXPECT_LE(f.low[k], f.mean[k]);
    EXPECT_GE(f.high[k], f.mean[k]);
    EXPECT_GE(f.low[k], 0);
  }
}

TEST(DemandForecastTest, BeatsTheFlatMeanInABacktest) {
  const std::vector<double> series = OfficeDemand(10, 2);
  const ForecastAccuracy a = Backtest(series, kMonday, 4 * 168, 168);
  EXPECT_EQ(a.windows, 6);
  EXPECT_LT(a.mae, 0.25 * a.mae_flat_mean);
  EXPECT_LE(a.mae, a.mae_seasonal_naive);  // the naive forecast carries last week's noise
  EXPECT_NEAR(a.mean_demand, 45, 8);
}

TEST(DemandForecastTest, ShortOrEmptyHistories) {
  EXPECT_EQ(ForecastDemand({}, kMonday, 5).mean, std::vector<double>(5, 0.0));
  // Two days: a daily season, no weekly one; the level follows the recent mean.
  std::vector<double> two_days;
  for (int h = 0; h < 48; ++h) two_days.push_back(h % 24 < 12 ? 10 : 30);
  const DemandForecast f = ForecastDemand(two_days, kMonday, 24);
  EXPECT_NEAR(f.mean[0], 10, 1e-9);
  EXPECT_NEAR(f.mean[18], 30, 1e-9);
  EXPECT_EQ(Backtest(two_days, kMonday, 0, 24).windows, 0);
}

}  // namespace
}  // namespace corral::predict
