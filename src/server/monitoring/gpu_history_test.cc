#include "server/monitoring/gpu_history.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "server/test_store.h"

namespace corral::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kDay = 86400;
const int64_t kHistoryNow = 1'800'000'000;  // 2027-01-15 08:00:00 UTC
const GpuMonitor::NodeGpus kTwo = {"A100", {{"u0", 81920}, {"u1", 81920}}};

ReportedGpu HistoryGpu(int index, int util, std::vector<int64_t> allocations) {
  ReportedGpu g;
  g.index = index;
  g.reading.utilization_percent = util;
  g.allocations = std::move(allocations);
  return g;
}

class GpuHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override { ASSERT_NE(store_, nullptr); }

  TestStore test_store_{"gpu-history"};
  store::Store* store_ = test_store_.store();
  FakeClock clock_{Seconds(kHistoryNow)};
};

TEST_F(GpuHistoryTest, FlushStoresIntervalsAndUsageAndPruneKeepsTheRetention) {
  GpuMonitor monitor(GpuMonitor::Options{});
  GpuHistory history(monitor, *store_, clock_, GpuHistory::Options{});
  const std::map<int64_t, GpuHolder> holders = {{5, {JobId(9), "ann", "vision", 1.0, false}}};
  // Two minutes at 30 %, 2 days ago, then two minutes now; every 5 s.
  for (int64_t start : {kHistoryNow - 2 * kDay, kHistoryNow}) {
    for (int64_t s = 0; s <= 120; s += 5) {
      monitor.Record("n1", kTwo, {HistoryGpu(0, 30, {5}), HistoryGpu(1, 0, {})}, holders,
                     (start + s) * 1000);
    }
  }
  ASSERT_TRUE(history.Flush().ok());
  auto job = store_->GpuMetrics(10, 0, kHistoryNow + kDay, "", JobId(9));
  ASSERT_TRUE(job.ok());
  // 13 intervals of 10 s of GPU 0 in the first run (the second run's first reading closed the
  // last), 12 closed in the second.
  EXPECT_EQ(job->size(), 13u + 12u);
  EXPECT_EQ((*job)[0].utilization_permille, 300);
  auto usage = store_->GpuUsage("2000-01-01", "2100-01-01");
  ASSERT_EQ(usage->size(), 2u);  // one row per day
  EXPECT_EQ((*usage)[1].day, "2027-01-15");
  EXPECT_EQ((*usage)[1].user, "ann");
  // 24 intervals of 5 s after each run's first reading, plus the 30 s cap across the gap.
  EXPECT_EQ((*usage)[0].allocated_gpu_ms + (*usage)[1].allocated_gpu_ms, (240 + 30) * 1000);
  EXPECT_EQ((*usage)[1].used_gpu_ms, 120 * 300 + 30 * 300);

  // The 10 s intervals older than a day go; 5 min ones stay 90 days.
  ASSERT_TRUE(history.Prune().ok());
  EXPECT_EQ(store_->GpuMetrics(10, 0, kHistoryNow + kDay, "", JobId(9))->size(), 12u);
  EXPECT_EQ(store_->GpuMetrics(300, 0, kHistoryNow + kDay, "", JobId(9))->size(), 1u);
  // Reading a job's history picks the resolution that still covers `from`.
  EXPECT_EQ(
      history.JobHistory(JobId(9), Seconds(kHistoryNow - 60), Seconds(kHistoryNow + 600))->size(),
      12u);
  EXPECT_EQ(
      history.JobHistory(JobId(9), Seconds(kHistoryNow - 3 * kDay), Seconds(kHistoryNow))->size(),
      1u);
}

TEST_F(GpuHistoryTest, AStartedHistoryFlushesOnItsOwnAndOnStop) {
  GpuMonitor monitor(GpuMonitor::Options{});
  GpuHistory::Options options;
  options.flush_period = std::chrono::milliseconds(20);
  GpuHistory history(monitor, *store_, clock_, options);
  history.Start();
  const std::map<int64_t, GpuHolder> holders = {{5, {JobId(9), "ann", "vision", 1.0, false}}};
  for (int64_t s = 0; s <= 20; s += 5) {
    monitor.Record("n1", kTwo, {HistoryGpu(0, 50, {5})}, holders, (kHistoryNow + s) * 1000);
  }
  for (int i = 0; i < 500 && store_->GpuMetrics(10, 0, kHistoryNow + kDay, "", JobId(9))->empty();
       ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(store_->GpuMetrics(10, 0, kHistoryNow + kDay, "", JobId(9))->size(), 2u);
  monitor.Record("n1", kTwo, {HistoryGpu(0, 50, {5})}, holders, (kHistoryNow + 30) * 1000);
  // Stop stores the interval the last reading closed, and the one it opened (partial), and the
  // open 5-minute one.
  history.Stop();
  EXPECT_EQ(store_->GpuMetrics(10, 0, kHistoryNow + kDay, "", JobId(9))->size(), 4u);
  EXPECT_EQ(store_->GpuMetrics(300, 0, kHistoryNow + kDay, "", JobId(9))->size(), 1u);
}

TEST(UsageReportTest, GroupsSumsAndWritesCsv) {
  const std::vector<store::GpuUsageRow> rows = {
      {"2027-01-14", "ann", "vision", 3'600'000, 1'800'000},
      {"2027-01-15", "ann", "vision", 7'200'000, 7'200'000, 1'800'000},
      {"2027-01-15", "bob", "vision", 3'600'000, 0},
      {"2027-01-15", "bob", "nlp, \"big\"", 1'800, 900}};
  auto by_project = *ParseUsageGrouping("project");
  nlohmann::json report = UsageReport(rows, by_project);
  ASSERT_EQ(report.size(), 2u);
  EXPECT_EQ(report[0]["project"], "nlp, \"big\"");
  EXPECT_EQ(report[0]["allocated_gpu_hours"], 0.001);  // 1.8 s rounds to a thousandth
  EXPECT_EQ(report[1]["project"], "vision");
  EXPECT_EQ(report[1]["allocated_gpu_hours"], 4.0);
  EXPECT_EQ(report[1]["used_gpu_hours"], 2.5);
  EXPECT_EQ(report[1]["utilization_percent"], 62.5);
  EXPECT_EQ(report[1]["lost_gpu_hours"], 0.5);  // preemptions' and resizes'
  EXPECT_FALSE(report[1].contains("user"));
  EXPECT_EQ(UsageCsv(report, by_project),
            "project,allocated_gpu_hours,used_gpu_hours,utilization_percent,lost_gpu_hours\n"
            "\"nlp, \"\"big\"\"\",0.001,0.0,50.0,0.0\n"
            "vision,4.0,2.5,62.5,0.5\n");
  auto by_user_day = *ParseUsageGrouping("user, day");
  report = UsageReport(rows, by_user_day);
  ASSERT_EQ(report.size(), 3u);
  EXPECT_EQ(report[0], nlohmann::json({{"user", "ann"},
                                       {"day", "2027-01-14"},
                                       {"allocated_gpu_hours", 1.0},
                                       {"used_gpu_hours", 0.5},
                                       {"utilization_percent", 50.0},
                                       {"lost_gpu_hours", 0.0}}));
  EXPECT_THAT(ParseUsageGrouping("team").status().message(),
              HasSubstr("field 'by': 'team' is none of user, project, day"));
  EXPECT_FALSE(ParseUsageGrouping("").ok());
}

TEST(UsageReportTest, DayRanges) {
  using Range = std::pair<std::string, std::string>;
  const Seconds now(kHistoryNow);
  EXPECT_EQ(*ParseDayRange("30d", "", now), Range("2026-12-17", "2027-01-15"));
  EXPECT_EQ(*ParseDayRange("1d", "", now), Range("2027-01-15", "2027-01-15"));
  EXPECT_EQ(*ParseDayRange("2026-12-01", "2026-12-31", now), Range("2026-12-01", "2026-12-31"));
  for (const auto& [since, until, message] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"0d", "", "field 'since': from 1d"},
           {"month", "", "field 'since': 'month' is neither Nd"},
           {"2026-13-01", "", "field 'since'"},
           {"2026-12-01", "tomorrow", "field 'until': 'tomorrow' is not YYYY-MM-DD"},
           {"2026-12-10", "2026-12-01", "field 'until': before 'since'"}}) {
    auto range = ParseDayRange(since, until, now);
    ASSERT_FALSE(range.ok()) << since;
    EXPECT_THAT(range.status().message(), HasSubstr(message)) << since;
  }
}

}  // namespace
}  // namespace corral::server
