#include "sim/replay.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "sim/report.h"

namespace corral::sim {
namespace {

TraceJob MakeTraceJob(int64_t id, int gpus, int64_t submit, int64_t duration, int tasks = 1) {
  TraceJob t;
  t.job.id = JobId(id);
  t.job.submit_time = Seconds(submit);
  t.job.tasks = tasks;
  t.job.resources = model::MakeResources(gpus, 1000, 0, 0);
  t.duration = Seconds(duration);
  return t;
}

std::vector<model::Node> OneNode(int gpus) {
  return {model::MakeNode("n1", "V100", gpus, CpuMilli(32000), MemoryMib(65536))};
}

TEST(Replay, HandComputedQueueingAndAllocation) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 4, 0, 100), MakeTraceJob(1, 2, 10, 50)};
  auto r = RunReplay(OneNode(4), trace, ReplayConfig{"bestfit"});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->unfinished, 0);
  // Job 1 waits for job 0: starts at 100, ends at 150.
  EXPECT_DOUBLE_EQ(r->queue_s.mean, (0 + 90) / 2.0);
  EXPECT_DOUBLE_EQ(r->jct_s.mean, (100 + 140) / 2.0);
  EXPECT_DOUBLE_EQ(r->jct_s.p99, 140);
  EXPECT_EQ(r->makespan_s, 150);
  // 100% for 100 s, then 50% for 50 s.
  EXPECT_NEAR(r->gpu_alloc_pct_mean, (100.0 * 100 + 50.0 * 50) / 150, 1e-9);
}

TEST(Replay, SkippingLetsSmallJobsPassStrictDoesNot) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 2, 0, 100), MakeTraceJob(1, 4, 1, 10), MakeTraceJob(2, 1, 2, 10)};
  auto skip = RunReplay(OneNode(4), trace, ReplayConfig{"bestfit"});
  ReplayConfig strict_config{"bestfit"};
  strict_config.blocking = sched::Blocking::kStrict;
  auto strict = RunReplay(OneNode(4), trace, strict_config);
  ASSERT_TRUE(skip.ok() && strict.ok());
  // Skip: job 2 runs at 2 (queue 0); strict: job 2 waits until job 1 ran (100..110).
  EXPECT_DOUBLE_EQ(skip->queue_s.mean, (0 + 99 + 0) / 3.0);
  EXPECT_DOUBLE_EQ(strict->queue_s.mean, (0 + 99 + 108) / 3.0);
}

TEST(Replay, JobsThatNeverFitAreReportedNotLooped) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 8, 0, 10), MakeTraceJob(1, 1, 5, 10)};
  auto r = RunReplay(OneNode(4), trace, ReplayConfig{"fgd"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->completed, 1);
  EXPECT_EQ(r->unfinished, 1);
}

TEST(Replay, GangsSpanNodes) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 4, 0, 30, /*tasks=*/2)};
  std::vector<model::Node> nodes = {model::MakeNode("a", "V100", 4, CpuMilli(1000), MemoryMib(1)),
                                    model::MakeNode("b", "V100", 4, CpuMilli(1000), MemoryMib(1))};
  auto r = RunReplay(nodes, trace, ReplayConfig{"spread"});
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->completed, 1);
  EXPECT_NEAR(r->gpu_alloc_pct_mean, 100.0, 1e-9);
}

TEST(Replay, DuplicateIdsAreAnError) {
  Trace trace;
  trace.jobs = {MakeTraceJob(3, 1, 0, 1), MakeTraceJob(3, 1, 0, 1)};
  auto r = RunReplay(OneNode(4), trace, ReplayConfig{"fgd"});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("job id 3"), std::string::npos);
}

TEST(Replay, SameInputsSameJson) {
  Trace trace;
  for (int i = 0; i < 200; ++i) {
    trace.jobs.push_back(MakeTraceJob(i, 1 + i % 4, i * 7, 50 + (i * 37) % 200));
  }
  std::vector<model::Node> nodes;
  for (int i = 0; i < 5; ++i) {
    nodes.push_back(
        model::MakeNode("n" + std::to_string(i), "V100", 4, CpuMilli(1000), MemoryMib(1)));
  }
  auto run = [&](uint64_t seed) {
    ReplayConfig c{"random"};
    c.seed = seed;
    auto r = RunReplay(nodes, trace, c);
    EXPECT_TRUE(r.ok());
    auto j = ReplayJson({*r});
    j["results"][0].erase("wall_ms");
    return j.dump();
  };
  EXPECT_EQ(run(1), run(1));
}

TEST(Replay, ScaleNodes) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 10; ++i) {
    nodes.push_back(
        model::MakeNode("n" + std::to_string(i), "V100", 4, CpuMilli(1000), MemoryMib(1)));
  }
  auto half = ScaleNodes(nodes, 0.5, 1);
  ASSERT_TRUE(half.ok());
  EXPECT_EQ(half->size(), 5u);
  auto twice = ScaleNodes(nodes, 2.0, 1);
  ASSERT_TRUE(twice.ok());
  EXPECT_EQ(twice->size(), 20u);
  EXPECT_EQ(twice->back().name, "n9-c1");
  EXPECT_FALSE(ScaleNodes(nodes, 0, 1).ok());
  EXPECT_FALSE(ScaleNodes(nodes, std::numeric_limits<double>::infinity(), 1).ok());
  EXPECT_FALSE(ScaleNodes(nodes, std::nan(""), 1).ok());
  EXPECT_FALSE(ScaleNodes(nodes, 1e12, 1).ok());
}

TEST(Summarize, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  Distribution d = Summarize(v);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.p50, 50);
  EXPECT_DOUBLE_EQ(d.p95, 95);
  EXPECT_DOUBLE_EQ(d.p99, 99);
  EXPECT_DOUBLE_EQ(Summarize({}).mean, 0);
}

}  // namespace
}  // namespace corral::sim
