#include "server/monitoring/gpu_monitor.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace corral::server {
namespace {

using ::testing::HasSubstr;

ReportedGpu Gpu(int index, std::optional<int> util, std::vector<int64_t> allocations = {}) {
  ReportedGpu g;
  g.index = index;
  g.reading.utilization_percent = util;
  g.reading.memory_used_mib = 1000 * index;
  g.reading.power_mw = 100000;
  g.reading.temperature_c = 40 + index;
  g.allocations = std::move(allocations);
  return g;
}

GpuMonitor::NodeGpus Identity(int gpus) {
  GpuMonitor::NodeGpus identity{"A100-80GB", {}};
  for (int i = 0; i < gpus; ++i) identity.gpus.push_back({"u" + std::to_string(i), 81920});
  return identity;
}
const GpuMonitor::NodeGpus kEight = Identity(8);

GpuHolder Holder(int64_t job, const std::string& user, double share = 1.0) {
  return GpuHolder{JobId(job), user, "proj-" + user, share, false};
}

TEST(GpuReportTest, ParsesWhatTheAgentSends) {
  auto metrics = protocol::ParseGpuMetrics(nlohmann::json::parse(R"({"sampled_at_ms": 5, "gpus": [
      {"index": 0, "tasks": ["12-1"], "utilization_percent": 93, "memory_used_mib": 4000,
       "power_mw": 250000, "temperature_c": 61, "memory_utilization_percent": 40,
       "processes": [{"pid": 5, "task": "12-1"}, {"pid": 6}]},
      {"index": 1, "tasks": [], "processes": []}]})"));
  ASSERT_TRUE(metrics.ok()) << metrics.status().ToString();
  const std::vector<ReportedGpu> report = ReportedGpus(*metrics);
  ASSERT_EQ(report.size(), 2u);
  const ReportedGpu& g = report[0];
  EXPECT_EQ(g.allocations, std::vector<int64_t>{12});
  EXPECT_EQ(g.reading.utilization_percent, 93);
  EXPECT_EQ(g.reading.memory_used_mib, 4000);
  EXPECT_EQ(g.processes, 2);
  EXPECT_EQ(g.foreign_processes, 1);
  EXPECT_FALSE(report[1].reading.utilization_percent.has_value());
}

TEST(GpuMonitorTest, HeldGpusUnderTheThresholdAreFlaggedIdleAfterTheConfiguredTime) {
  GpuMonitor::Options options;
  options.idle_threshold_percent = 10;
  options.idle_after_ms = 60'000;
  GpuMonitor monitor(options);
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}, {8, Holder(2, "bob")}};
  // GPU 0: job 1 at 3 % (idle); GPU 1: job 2 at 95 %; GPU 2: free at 0 % (not idle: not held).
  for (int64_t t = 0; t <= 60'000; t += 5'000) {
    monitor.Record("n1", kEight, {Gpu(0, 3, {7}), Gpu(1, 95, {8}), Gpu(2, 0)}, holders,
                   1'000'000 + t);
  }
  auto idle = monitor.IdleGpus(1'060'000);
  ASSERT_EQ(idle.size(), 1u);
  EXPECT_EQ(idle[0].node, "n1");
  EXPECT_EQ(idle[0].index, 0);
  EXPECT_EQ(idle[0].model, "A100-80GB");
  EXPECT_EQ(idle[0].uuid, "u0");
  EXPECT_EQ(idle[0].holders[0].user, "ann");
  EXPECT_EQ(idle[0].idle_since_ms, 1'000'000);
  EXPECT_TRUE(monitor.IdleGpus(1'059'999).empty());
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(1), 1'060'000), 1'000'000);      // idle for 60 s
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(2), 1'060'000), 1'060'000);      // busy now
  EXPECT_FALSE(monitor.JobLastBusyMs(JobId(3), 1'060'000).has_value());  // holds no GPU

  // One busy reading ends the idle span; so does losing the holder.
  monitor.Record("n1", kEight, {Gpu(0, 50, {7})}, holders, 1'065'000);
  EXPECT_TRUE(monitor.IdleGpus(2'000'000).empty());
  monitor.Record("n1", kEight, {Gpu(0, 1, {7})}, holders, 1'070'000);
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(1), 1'080'000), 1'070'000);
  // An allocation id the controller did not resolve (ended, or on another node) holds nothing.
  monitor.Record("n1", kEight, {Gpu(0, 1, {99})}, holders, 1'075'000);
  EXPECT_FALSE(monitor.JobLastBusyMs(JobId(1), 1'080'000).has_value());
}

TEST(GpuMonitorTest, AGpuWhoseReadingsStoppedIsNeitherIdleNorBusy) {
  GpuMonitor::Options options;
  options.idle_after_ms = 10'000;
  options.stale_after_ms = 60'000;
  GpuMonitor monitor(options);
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}, {8, Holder(2, "bob")}};
  monitor.Record("n1", kEight, {Gpu(0, 2, {7}), Gpu(1, 90, {8})}, holders, 0);
  monitor.Record("n1", kEight, {Gpu(0, 2, {7}), Gpu(1, 90, {8})}, holders, 20'000);
  EXPECT_EQ(monitor.IdleGpus(80'000).size(), 1u);
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(2), 80'000), 80'000);
  // No reading for over a minute: the last ones say nothing any more.
  EXPECT_TRUE(monitor.IdleGpus(80'001).empty());
  EXPECT_FALSE(monitor.JobLastBusyMs(JobId(2), 80'001).has_value());
  EXPECT_FALSE(monitor.JobLastBusyMs(JobId(1), 80'001).has_value());
}

TEST(GpuMonitorTest, AJobIsBusyWhileAnyOfItsGpusIs) {
  GpuMonitor monitor(GpuMonitor::Options{});
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}};
  monitor.Record("n1", kEight, {Gpu(0, 2, {7}), Gpu(1, 2, {7})}, holders, 10'000);
  monitor.Record("n1", kEight, {Gpu(0, 2, {7}), Gpu(1, 70, {7})}, holders, 20'000);
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(1), 25'000), 25'000);
  monitor.Record("n1", kEight, {Gpu(0, 2, {7}), Gpu(1, 3, {7})}, holders, 30'000);
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(1), 35'000), 30'000);
  // All jobs in one pass say the same; and the GPUs in use sum their utilisation.
  using JobBusy = GpuMonitor::JobBusy;
  EXPECT_EQ(monitor.LastBusyByJob(35'000),
            (std::map<JobId, JobBusy>{{JobId(1), JobBusy{30'000, false}}}));
  // An idle span that starts at this very reading still says the job is not busy now.
  EXPECT_EQ(monitor.LastBusyByJob(30'000),
            (std::map<JobId, JobBusy>{{JobId(1), JobBusy{30'000, false}}}));
  EXPECT_DOUBLE_EQ(monitor.UsedGpus(), 0.05);
  // No utilisation reported: not known to be idle, nor to be busy.
  monitor.Record("n1", kEight, {Gpu(0, std::nullopt, {7}), Gpu(1, 3, {7})}, holders, 40'000);
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(1), 45'000), 45'000);
  EXPECT_EQ(monitor.LastBusyByJob(45'000),
            (std::map<JobId, JobBusy>{{JobId(1), JobBusy{45'000, false}}}));
  // A utilisation at the threshold is busy.
  monitor.Record("n1", kEight, {Gpu(0, 10, {7}), Gpu(1, 3, {7})}, holders, 50'000);
  EXPECT_EQ(monitor.LastBusyByJob(55'000),
            (std::map<JobId, JobBusy>{{JobId(1), JobBusy{55'000, true}}}));
}

TEST(GpuMonitorTest, AJobThatFollowsAnotherStartsItsOwnIdleSpanAndIsNotChargedTheHandOver) {
  GpuMonitor::Options options;
  options.idle_after_ms = 60'000;
  GpuMonitor monitor(options);
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}, {8, Holder(2, "bob")}};
  for (int64_t t = 0; t <= 600'000; t += 5'000) {
    monitor.Record("n1", kEight, {Gpu(0, 2, {7})}, holders, 1'000'000 + t);
  }
  (void)monitor.TakeUsage();
  // Between two samples job 1 ends and job 2 starts on the GPU, also idle.
  monitor.Record("n1", kEight, {Gpu(0, 2, {8})}, holders, 1'605'000);
  EXPECT_TRUE(monitor.IdleGpus(1'605'000).empty());
  EXPECT_EQ(monitor.JobLastBusyMs(JobId(2), 1'605'000), 1'605'000);
  EXPECT_TRUE(monitor.TakeUsage().empty());  // the hand-over interval is nobody's
  monitor.Record("n1", kEight, {Gpu(0, 2, {8})}, holders, 1'610'000);
  auto usage = monitor.TakeUsage();
  ASSERT_EQ(usage.size(), 1u);
  EXPECT_EQ(usage[0].user, "bob");
  EXPECT_EQ(usage[0].allocated_gpu_ms, 5'000);
  EXPECT_EQ(monitor.IdleGpus(1'665'000).size(), 1u);  // its own 60 s
}

TEST(GpuMonitorTest, ReadingsCloseTenSecondAndFiveMinuteBuckets) {
  GpuMonitor monitor(GpuMonitor::Options{});
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}};
  // 300 s of readings every 5 s, 20 % then 60 %, starting on a 5-minute boundary.
  const int64_t t0 = 1'800'000'000'000;  // ms, a multiple of 300 s
  for (int64_t s = 0; s < 300; s += 5) {
    monitor.Record("n1", kEight, {Gpu(0, s < 150 ? 20 : 60, {7})}, holders, t0 + s * 1000);
  }
  auto closed = monitor.TakeClosedIntervals();
  ASSERT_EQ(closed.size(), 29u);  // 30 ten-second buckets, the last still open
  EXPECT_EQ(closed[0].resolution_s, 10);
  EXPECT_EQ(closed[0].start_s, t0 / 1000);
  EXPECT_EQ(closed[0].node, "n1");
  EXPECT_EQ(closed[0].gpu, 0);
  EXPECT_EQ(closed[0].samples, 2);
  EXPECT_EQ(closed[0].utilization_permille, 200);
  EXPECT_EQ(closed[0].job, JobId(1));
  EXPECT_EQ(closed[28].utilization_permille, 600);
  // The next reading closes the last 10 s bucket and the 5-minute one.
  monitor.Record("n1", kEight, {Gpu(0, 0)}, holders, t0 + 300'000);
  closed = monitor.TakeClosedIntervals();
  ASSERT_EQ(closed.size(), 2u);
  EXPECT_EQ(closed[1].resolution_s, 300);
  EXPECT_EQ(closed[1].utilization_permille, 400);
  EXPECT_EQ(closed[1].samples, 60);
  EXPECT_EQ(closed[1].memory_used_mib, 0);
  EXPECT_EQ(closed[1].temperature_c, 40);
  EXPECT_EQ(closed[1].power_mw, 100000);
  EXPECT_TRUE(monitor.TakeClosedIntervals().empty());
  // Forgetting the node closes its open buckets.
  monitor.ForgetNode("n1");
  EXPECT_EQ(monitor.TakeClosedIntervals().size(), 2u);
  EXPECT_TRUE(monitor.Gpus().empty());
}

TEST(GpuMonitorTest, AnIntervalBelongsToTheJobThatHeldTheGpuForMostOfIt) {
  GpuMonitor monitor(GpuMonitor::Options{});
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}, {8, Holder(2, "bob")}};
  const int64_t t0 = 1'800'000'000'000;  // ms, a multiple of 300 s
  // Job 1 holds the GPU for the first 4 s of the first 10 s; the GPU is free after it ended.
  for (int64_t s = 0; s < 10; ++s) {
    monitor.Record("n1", kEight,
                   {Gpu(0, 90, s < 4 ? std::vector<int64_t>{7} : std::vector<int64_t>{})}, holders,
                   t0 + s * 1000);
  }
  // Job 1 for 3 s, then job 2 for 7 s.
  for (int64_t s = 10; s < 20; ++s) {
    monitor.Record("n1", kEight, {Gpu(0, 90, {s < 13 ? 7 : 8})}, holders, t0 + s * 1000);
  }
  // No job at all.
  monitor.Record("n1", kEight, {Gpu(0, 0)}, holders, t0 + 20'000);
  monitor.CloseOpenIntervals();
  auto closed = monitor.TakeClosedIntervals();
  ASSERT_EQ(closed.size(), 4u);  // three 10 s intervals and the 5 min one
  EXPECT_EQ(closed[0].job, JobId(1));
  EXPECT_EQ(closed[1].job, JobId(2));
  EXPECT_EQ(closed[2].job, std::nullopt);
  EXPECT_EQ(closed[3].resolution_s, 300);
  EXPECT_EQ(closed[3].job, JobId(1));  // 7 samples each: the first job keeps it
}

TEST(GpuMonitorTest, UsageCountsAllocatedAndUtilisationWeightedGpuSeconds) {
  GpuMonitor::Options options;
  options.max_interval_ms = 30'000;
  GpuMonitor monitor(options);
  // Two half-GPU tasks share GPU 0 at 50 %; ann also holds GPU 1 at 100 %.
  const std::map<int64_t, GpuHolder> holders = {
      {7, Holder(1, "ann", 0.5)}, {8, Holder(2, "bob", 0.5)}, {9, Holder(3, "ann")}};
  const int64_t t0 = 1'800'000'000'000;
  for (int64_t s = 0; s <= 100; s += 10) {
    monitor.Record("n1", kEight, {Gpu(0, 50, {7, 8}), Gpu(1, 100, {9})}, holders, t0 + s * 1000);
  }
  // A 10-minute gap (agent restart) counts only max_interval.
  monitor.Record("n1", kEight, {Gpu(1, 100, {9})}, holders, t0 + 700'000);
  auto usage = monitor.TakeUsage();
  ASSERT_EQ(usage.size(), 2u);
  EXPECT_EQ(usage[0].day, UtcDay(t0 / 1000));
  EXPECT_EQ(usage[0].user, "ann");
  EXPECT_EQ(usage[0].project, "proj-ann");
  EXPECT_EQ(usage[0].allocated_gpu_ms, (100 * 0.5 + 100 + 30) * 1000);
  EXPECT_EQ(usage[0].used_gpu_ms, (100 * 0.5 * 0.5 + 100 + 30) * 1000);
  EXPECT_EQ(usage[1].user, "bob");
  EXPECT_EQ(usage[1].allocated_gpu_ms, 50'000);
  EXPECT_EQ(usage[1].used_gpu_ms, 25'000);
  EXPECT_TRUE(monitor.TakeUsage().empty());
}

TEST(GpuMonitorTest, AJobsRecentSeriesKeepTheConfiguredWindow) {
  GpuMonitor::Options options;
  options.recent_ms = 20'000;
  GpuMonitor monitor(options);
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann")}};
  for (int64_t t = 0; t <= 60'000; t += 5'000) {
    monitor.Record("n1", kEight, {Gpu(0, 1, {7})}, holders, t);
  }
  auto gpus = monitor.JobGpus(JobId(1), 0);
  ASSERT_EQ(gpus.size(), 1u);
  ASSERT_EQ(gpus[0].second.size(), 5u);  // 40 s .. 60 s
  EXPECT_EQ(gpus[0].second.front().at_ms, 40'000);
  EXPECT_EQ(monitor.JobGpus(JobId(1), 55'000)[0].second.size(), 2u);
  EXPECT_TRUE(monitor.JobGpus(JobId(2), 0).empty());
  // An index the node's inventory does not list is not recorded.
  monitor.Record("n1", {"T4", {{"only", 15360}}}, {Gpu(3, 50)}, {}, 65'000);
  EXPECT_EQ(monitor.Gpus().size(), 1u);
}

TEST(GpuMonitorTest, StatusJsonSaysWhoHoldsTheGpuAndWhetherItIsFlaggedIdle) {
  GpuMonitor::Options options;
  options.idle_after_ms = 60'000;
  GpuMonitor monitor(options);
  const std::map<int64_t, GpuHolder> holders = {{7, Holder(1, "ann", 0.5)}};
  ReportedGpu g = Gpu(2, 4, {7});
  g.reading.memory_utilization_percent.reset();
  g.processes = 2;
  g.foreign_processes = 1;
  monitor.Record("n1", kEight, {g}, holders, 100'000);
  const GpuStatus status = monitor.Gpus()[0];
  const auto everyone = [](const std::string&) { return true; };
  nlohmann::json j =
      GpuStatusJson(status, HoldersSeen(status, everyone), 130'000, options.idle_after_ms);
  EXPECT_EQ(j["node"], "n1");
  EXPECT_EQ(j["uuid"], "u2");
  EXPECT_EQ(j["memory_total_mib"], 81920);
  EXPECT_EQ(j["utilization_percent"], 4);
  EXPECT_EQ(j["power_w"], 100.0);
  EXPECT_FALSE(j.contains("memory_utilization_percent"));
  EXPECT_EQ(j["holders"][0]["user"], "ann");
  EXPECT_EQ(j["holders"][0]["share"], 0.5);
  EXPECT_EQ(j["foreign_processes"], 1);
  EXPECT_EQ(j["idle_for_s"], 30);
  EXPECT_EQ(j["idle"], false);
  EXPECT_EQ(
      GpuStatusJson(status, HoldersSeen(status, everyone), 160'000, options.idle_after_ms)["idle"],
      true);
  EXPECT_EQ(GpuReadingJson(status.latest)["t"], 100'000);
}

// Seen by someone outside the holder's project: the share only, "in use"; the GPU's reading
// stays.
TEST(GpuMonitorTest, AHolderTheCallerMayNotSeeIsOnlyItsShare) {
  GpuMonitor monitor(GpuMonitor::Options{});
  monitor.Record("n1", kEight, {Gpu(2, 40, {7, 8})},
                 {{7, Holder(1, "ann", 0.5)}, {8, Holder(2, "bo", 0.25)}}, 100'000);
  const GpuStatus status = monitor.Gpus()[0];
  const nlohmann::json j = GpuStatusJson(
      status, HoldersSeen(status, [](const std::string& project) { return project == "proj-ann"; }),
      100'000, 60'000);
  EXPECT_EQ(j["holders"], nlohmann::json::parse(R"([{"job": 1, "user": "ann",
      "project": "proj-ann", "share": 0.5, "session": false}, {"share": 0.25}])"));
  EXPECT_EQ(j["utilization_percent"], 40);
}

TEST(UtcDayTest, FormatsUtcDates) {
  EXPECT_EQ(UtcDay(0), "1970-01-01");
  EXPECT_EQ(UtcDay(1'800'000'000), "2027-01-15");
}

}  // namespace
}  // namespace corral::server
