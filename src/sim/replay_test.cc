#include "sim/replay.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "common/rng.h"
#include "sched/policy_config.h"
#include "sim/generator.h"
#include "sim/report.h"

namespace corral::sim {
namespace {

TraceJob MakeTraceJob(int64_t id, int gpus, int64_t submit, int64_t duration, int tasks = 1,
                      std::string project = "p", std::string name = "") {
  TraceJob t;
  t.job.id = JobId(id);
  t.job.project = std::move(project);
  t.job.user = "u";
  t.job.name = std::move(name);
  t.job.submit_time = Seconds(submit);
  t.job.tasks = tasks;
  t.job.resources = model::MakeResources(gpus, 1000, 0, 0);
  t.duration = Seconds(duration);
  t.job.expected_duration = t.duration;
  return t;
}

std::vector<model::Node> Nodes(int count, int gpus) {
  std::vector<model::Node> nodes;
  for (int i = 0; i < count; ++i) {
    nodes.push_back(model::MakeNode("n" + std::to_string(i), "V100", gpus, CpuMilli(128000),
                                    MemoryMib(1 << 20)));
  }
  return nodes;
}

const ReplayJob& Outcome(const ReplayResult& r, int64_t id) {
  for (const ReplayJob& o : r.job_outcomes) {
    if (o.id == JobId(id)) return o;
  }
  ADD_FAILURE() << "no job " << id;
  return r.job_outcomes.front();
}

// Quotas of 2 GPUs for projects a and b, reclaim on.
sched::SharingConfig TwoQuotas() {
  sched::SharingConfig sharing;
  sharing.projects["a"].quota_milli = 2000;
  sharing.projects["b"].quota_milli = 2000;
  return sharing;
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
  // 100% for 100 s, then 50% for 50 s; 100% while jobs arrive (0..10).
  EXPECT_NEAR(r->gpu_alloc_pct_mean, (100.0 * 100 + 50.0 * 50) / 150, 1e-9);
  EXPECT_DOUBLE_EQ(r->gpu_alloc_pct_arrivals, 100);
}

// Job ids index the replay's jobs by an array when they are dense and a hash map when not:
// both give the same outcomes, and an id given twice is an error naming it either way.
TEST(Replay, SparseJobIdsReplayAsDenseOnesAndDuplicatesAreErrors) {
  Trace dense, sparse;
  SeededRng draw(5);
  for (int64_t i = 0; i < 60; ++i) {
    TraceJob job =
        MakeTraceJob(i, 1 + static_cast<int>(draw.Uniform(4)), i * 7,
                     50 + static_cast<int64_t>(draw.Uniform(200)), draw.Uniform(5) == 0 ? 2 : 1);
    dense.jobs.push_back(job);
    job.job.id = JobId(i * 1'000'003 + 17);  // far beyond twice the job count
    sparse.jobs.push_back(job);
  }
  auto a = RunReplay(Nodes(3, 4), dense, ReplayConfig{"fgd"});
  auto b = RunReplay(Nodes(3, 4), sparse, ReplayConfig{"fgd"});
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_EQ(a->completed, 60);
  ASSERT_EQ(b->job_outcomes.size(), a->job_outcomes.size());
  for (size_t i = 0; i < a->job_outcomes.size(); ++i) {
    EXPECT_EQ(b->job_outcomes[i].start_s, a->job_outcomes[i].start_s) << i;
    EXPECT_EQ(b->job_outcomes[i].end_s, a->job_outcomes[i].end_s) << i;
  }
  for (Trace* trace : {&dense, &sparse}) {
    const JobId repeated = trace->jobs[3].job.id;
    trace->jobs[40].job.id = repeated;
    auto twice = RunReplay(Nodes(3, 4), *trace, ReplayConfig{"fgd"});
    ASSERT_FALSE(twice.ok());
    EXPECT_THAT(
        std::string(twice.status().message()),
        testing::HasSubstr("job id " + std::to_string(repeated.value()) + " appears twice"));
  }
}

TEST(Replay, EstimatedStartsAreMeasuredAgainstActualStarts) {
  Trace trace;
  // Jobs 0 and 1 run at once; job 2 (4 GPUs) waits for both: estimated 100, starts 100. Job 3
  // waits behind job 2 in the shadow queue (estimated 150), but skip lets it start at 50 when
  // job 1 ends: 100 s early. Job 4 never fits: it waits, without an estimate.
  trace.jobs = {MakeTraceJob(0, 2, 0, 100), MakeTraceJob(1, 2, 0, 50), MakeTraceJob(2, 4, 10, 50),
                MakeTraceJob(3, 2, 20, 10), MakeTraceJob(4, 8, 30, 10)};
  ReplayConfig config{"bestfit"};
  auto without = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(without.ok());
  EXPECT_FALSE(without->eta);
  config.eta_queue_rows = 10;
  auto r = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_TRUE(r->eta);
  EXPECT_EQ(r->eta->waited, 3);
  EXPECT_EQ(r->eta->estimated, 2);
  EXPECT_EQ(r->eta->scored, 2);
  EXPECT_EQ(Outcome(*r, 2).estimated_start_s, 100);
  EXPECT_EQ(Outcome(*r, 2).first_start_s, 100);
  EXPECT_EQ(Outcome(*r, 3).estimated_start_s, 150);
  EXPECT_EQ(Outcome(*r, 3).first_start_s, 50);
  EXPECT_DOUBLE_EQ(r->eta->abs_error_s.mean, (0 + 100) / 2.0);
  EXPECT_DOUBLE_EQ(r->eta->started_early_pct, 50);
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
    auto j = ReplayJson(c, {*r});
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

// Project a borrows the node (no quota); b, whose quota is the whole node, takes it back at
// t=10. a's first run (0..10) is lost, its completion planned for t=100 is ignored, and it runs
// again from scratch 60..160; with resume it runs only the 90 s left, 60..150.
TEST(Replay, PreemptionCancelsTheLostRunsCompletion) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 4, 0, 100, 1, "a"), MakeTraceJob(2, 4, 10, 50, 1, "b")};
  ReplayConfig config{"bestfit"};
  config.sharing.projects["b"].quota_milli = 4000;
  auto r = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->completed, 2);
  EXPECT_EQ(r->preemptions, 1);
  const ReplayJob& a = Outcome(*r, 1);
  EXPECT_EQ(a.first_start_s, 0);
  EXPECT_EQ(a.start_s, 60);
  EXPECT_EQ(a.end_s, 160);
  EXPECT_EQ(a.preemptions, 1);
  EXPECT_EQ(Outcome(*r, 2).end_s, 60);
  EXPECT_DOUBLE_EQ(r->lost_gpu_s, 10 * 4);
  EXPECT_DOUBLE_EQ(r->gpu_s, 4 * 10 + 4 * 50 + 4 * 100);
  EXPECT_EQ(r->makespan_s, 160);
  EXPECT_EQ(r->projects[0].project, "a");
  EXPECT_EQ(r->projects[0].preemptions, 1);
  EXPECT_DOUBLE_EQ(r->projects[0].lost_gpu_s, 40);
  EXPECT_DOUBLE_EQ(r->queue_s.mean, 0);  // both first started on arrival

  config.resume = true;
  auto resumed = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(resumed.ok());
  EXPECT_EQ(Outcome(*resumed, 1).end_s, 150);
  EXPECT_DOUBLE_EQ(resumed->lost_gpu_s, 0);
  EXPECT_DOUBLE_EQ(resumed->gpu_s, 4 * 10 + 4 * 50 + 4 * 90);
}

// FIFO with quotas of 2 of the 4 GPUs for a and b (hand-computed): a floods the node; b takes
// its quota back at t=10 (a4 and a3, the most recently started borrowed jobs, lose 10 s each)
// and holds it until its jobs end at 110.
TEST(Replay, QuotasAndReclaimGiveEachProjectItsEntitlement) {
  Trace trace;
  for (int i = 1; i <= 8; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 0, 100, 1, "a"));
  for (int i = 11; i <= 12; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 10, 100, 1, "b"));
  ReplayConfig config{"bestfit"};
  config.sharing = TwoQuotas();
  auto r = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_EQ(r->projects.size(), 2u);
  const ProjectResult& a = r->projects[0];
  const ProjectResult& b = r->projects[1];
  EXPECT_EQ(r->preemptions, 2);
  EXPECT_EQ(a.preemptions, 2);
  EXPECT_EQ(Outcome(*r, 3).start_s, 100);  // again when a1, a2 end
  EXPECT_EQ(Outcome(*r, 4).start_s, 100);
  EXPECT_DOUBLE_EQ(a.lost_gpu_s, 20);
  EXPECT_DOUBLE_EQ(a.gpu_s, 8 * 100 + 20);
  EXPECT_DOUBLE_EQ(b.gpu_s, 2 * 100);
  EXPECT_DOUBLE_EQ(b.jct_s.mean, 100);
  // a1, a2 end at 100; a3, a4 at 200; a5, a6 (started when b ended) at 210; a7, a8 at 300.
  EXPECT_DOUBLE_EQ(a.jct_s.mean, (2 * 100 + 2 * 200 + 2 * 210 + 2 * 300) / 8.0);
  EXPECT_EQ(r->makespan_s, 300);
  // Both wanted more than half from 10 until b's jobs ended at 110, each holding exactly its
  // entitlement.
  EXPECT_EQ(b.entitlement_90_s, 0);
  EXPECT_EQ(a.entitlement_90_s, 0);
  EXPECT_EQ(r->fairness.contended_s, 100);
  EXPECT_DOUBLE_EQ(r->fairness.jain_mean, 1.0);
  EXPECT_DOUBLE_EQ(r->fairness.gpu_alloc_pct_mean, 100.0);
  EXPECT_DOUBLE_EQ(a.share_of_entitlement_mean, 1.0);
  EXPECT_DOUBLE_EQ(b.share_of_entitlement_mean, 1.0);
  // The timeline has each project's share and entitlement.
  ASSERT_FALSE(r->timeline.empty());
  bool seen = false;
  for (const ReplaySample& sample : r->timeline) {
    ASSERT_EQ(sample.project_alloc_pct.size(), 2u);
    ASSERT_EQ(sample.project_entitled_pct.size(), 2u);
    if (sample.time_s != 10) continue;
    seen = true;
    EXPECT_DOUBLE_EQ(sample.project_alloc_pct[1], 50);
    EXPECT_DOUBLE_EQ(sample.project_entitled_pct[1], 50);
  }
  EXPECT_TRUE(seen);
}

// b's third and fourth jobs: when b's first two end at 110, the freed GPUs go to b (within its
// quota) before a's older jobs, which would only borrow them; no pass interval is needed and
// nothing is started to be preempted a pass later. The only preemptions are b's reclaim of a's
// two borrowed jobs at t=10.
TEST(Replay, FreedGpusGoToTheQuotaOwnerAtOnce) {
  Trace trace;
  for (int i = 1; i <= 8; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 0, 100, 1, "a"));
  for (int i = 11; i <= 14; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 10, 100, 1, "b"));
  ReplayConfig config{"bestfit"};
  config.sharing = TwoQuotas();
  auto events = RunReplay(OneNode(4), trace, config);
  config.pass_interval_s = 1;
  auto ticks = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(events.ok() && ticks.ok());
  for (const ReplayResult* r : {&*events, &*ticks}) {
    EXPECT_EQ(Outcome(*r, 13).start_s, 110);
    EXPECT_EQ(Outcome(*r, 14).start_s, 110);
    EXPECT_EQ(r->preemptions, 2);
    EXPECT_DOUBLE_EQ(r->lost_gpu_s, 2 * 10);
    EXPECT_EQ(r->projects[1].entitlement_90_s, 0);
  }
}

// The same flood without quotas under FIFO: b waits behind all of a's jobs.
TEST(Replay, FifoLetsAFloodStarveALaterProject) {
  Trace trace;
  for (int i = 1; i <= 8; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 0, 100, 1, "a"));
  for (int i = 11; i <= 14; ++i) trace.jobs.push_back(MakeTraceJob(i, 1, 10, 100, 1, "b"));
  auto r = RunReplay(OneNode(4), trace, ReplayConfig{"bestfit"});
  ASSERT_TRUE(r.ok());
  const ProjectResult& b = r->projects[1];
  EXPECT_EQ(b.entitlement_90_s, 200 - 10);  // a5..a8 run 100..200 first
  EXPECT_DOUBLE_EQ(b.share_of_entitlement_mean, 0);
  EXPECT_EQ(r->fairness.contended_s, 190);  // 10..200: b holds nothing, a everything
  EXPECT_DOUBLE_EQ(r->fairness.jain_mean, 0.5);
}

// 2D-LAS with one threshold at 3600 GPU-s: job 2 waits in queue 0 behind job 1 until job 1's
// service crosses the threshold; a pass then lets job 2 preempt it. Passes every 60 s from the
// arrival at 100 find that at 3640; with passes only at arrivals and ends, job 2 waits until job
// 1 ends. Job 1 resumes with what it had left.
TEST(Replay, LasPreemptsAtThePassAfterTheThreshold) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 1, 0, 10000), MakeTraceJob(2, 1, 100, 50)};
  ReplayConfig config{"bestfit"};
  config.order = sched::QueueOrder::kLas;
  config.las_thresholds_gpu_s = {3600};
  config.resume = true;
  auto events = RunReplay(OneNode(1), trace, config);
  config.pass_interval_s = 60;
  auto ticks = RunReplay(OneNode(1), trace, config);
  ASSERT_TRUE(events.ok() && ticks.ok());
  EXPECT_EQ(Outcome(*events, 2).start_s, 10000);
  EXPECT_EQ(events->preemptions, 0);
  EXPECT_EQ(Outcome(*ticks, 2).start_s, 3640);
  EXPECT_EQ(Outcome(*ticks, 1).start_s, 3690);
  EXPECT_EQ(Outcome(*ticks, 1).end_s, 3690 + 10000 - 3640);
  EXPECT_EQ(ticks->preemptions, 1);
  EXPECT_DOUBLE_EQ(ticks->lost_gpu_s, 0);
}

// `jobs` replayed on one GPU with oracle SRTF, preempted jobs resuming.
Result<ReplayResult> SrtfOnOneGpu(std::vector<TraceJob> jobs) {
  Trace trace;
  trace.jobs = std::move(jobs);
  ReplayConfig config{"bestfit"};
  config.order = sched::QueueOrder::kSrtf;
  config.resume = true;
  return RunReplay(OneNode(1), trace, config);
}

// Oracle SRTF with resume: job 2 (100 s) arrives at 10 and preempts job 1 (990 s left), which
// resumes at 110 with what it had left: its run time stays 1,000 s (10 + 990), nothing is lost.
// Mean run time 550 s, mean JCT (1,100 + 100) / 2 = 600 s: the mean delay is 50 s (job 1's
// 100 s of waiting over two jobs).
TEST(ReplaySrtf, AShorterArrivalPreemptsAndTheVictimResumesWithoutPenalty) {
  auto r = SrtfOnOneGpu({MakeTraceJob(1, 1, 0, 1000), MakeTraceJob(2, 1, 10, 100)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Outcome(*r, 2).start_s, 10);
  EXPECT_EQ(Outcome(*r, 2).end_s, 110);
  EXPECT_EQ(Outcome(*r, 1).first_start_s, 0);
  EXPECT_EQ(Outcome(*r, 1).start_s, 110);
  EXPECT_EQ(Outcome(*r, 1).end_s, 1100);
  EXPECT_EQ(Outcome(*r, 1).preemptions, 1);
  EXPECT_DOUBLE_EQ(r->lost_gpu_s, 0);
  EXPECT_DOUBLE_EQ(r->gpu_s, 1000 + 100);
  EXPECT_DOUBLE_EQ(r->run_s_mean, 550);
  EXPECT_DOUBLE_EQ(r->jct_s.mean, 600);
  EXPECT_DOUBLE_EQ(r->delay_s_mean, 50);
}

// Oracle SRTF and SRSF resume preempted jobs (issue 21): without resume the replay refuses,
// naming both flags, rather than run a mode the issue excludes.
TEST(ReplaySrtf, RefusesToRunWithoutResume) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 1, 0, 1000)};
  for (auto order : {sched::QueueOrder::kSrtf, sched::QueueOrder::kSrsf}) {
    ReplayConfig config{"bestfit"};
    config.order = order;
    auto r = RunReplay(OneNode(1), trace, config);
    ASSERT_FALSE(r.ok());
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find("--order " + std::string(sched::QueueOrderName(order)) +
                                        " needs --resume"),
              std::string::npos)
        << r.status().message();
  }
}

// Re-packing moves a running job as a free preemption: it needs resume, like SRTF.
TEST(ReplayRepack, RefusesToRunWithoutResume) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 1, 0, 1000)};
  ReplayConfig config{"bestfit"};
  config.repack = true;
  auto r = RunReplay(OneNode(1), trace, config);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("--repack needs --resume"), std::string::npos)
      << r.status().message();
}

// Two 4-GPU nodes: bestfit puts jobs 1 and 2 (2 GPUs) on the first, job 3 on the second. When
// job 2 ends at 100, job 4 (4 GPUs) finds 2 GPUs free on each node. With re-packing job 1 moves
// to the second node and job 4 starts at once; job 1 loses nothing (it still ends at 1,000).
// Without, job 4 waits for jobs 1 and 3 to end.
TEST(ReplayRepack, AMovedJobKeepsItsProgressAndTheWaitingJobStarts) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 2, 0, 1000), MakeTraceJob(2, 2, 0, 100),
                MakeTraceJob(3, 2, 0, 1000), MakeTraceJob(4, 4, 100, 500)};
  for (bool repack : {false, true}) {
    ReplayConfig config{"bestfit"};
    config.resume = true;
    config.repack = repack;
    auto r = RunReplay(Nodes(2, 4), trace, config);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(Outcome(*r, 4).start_s, repack ? 100 : 1000) << repack;
    EXPECT_EQ(Outcome(*r, 1).end_s, 1000);
    EXPECT_EQ(Outcome(*r, 3).end_s, 1000);
    EXPECT_EQ(r->preemptions, repack ? 1 : 0);
    EXPECT_DOUBLE_EQ(r->lost_gpu_s, 0);
  }
}

// The queue is ordered by what is left, not the total: job 1 (1,000 s) is preempted at 10 by
// job 2 (950 s); job 3 (995 s) arrives at 20 and does not preempt job 2 (940 s left). When job 2
// ends, job 1's 990 s left go before job 3's 995 s.
TEST(ReplaySrtf, TheQueueIsOrderedByRemainingTime) {
  auto r = SrtfOnOneGpu(
      {MakeTraceJob(1, 1, 0, 1000), MakeTraceJob(2, 1, 10, 950), MakeTraceJob(3, 1, 20, 995)});
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(Outcome(*r, 2).end_s, 960);
  EXPECT_EQ(Outcome(*r, 1).start_s, 960);
  EXPECT_EQ(Outcome(*r, 1).end_s, 1950);
  EXPECT_EQ(Outcome(*r, 3).start_s, 1950);
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_DOUBLE_EQ(r->delay_s_mean, ((1950 - 1000) + 0 + (2945 - 20 - 995)) / 3.0);
}

// SRTF on estimates that can be wrong (none: one hour each). Job 1 (10,000 s) has outlived its
// hour when job 2 arrives at 7,300: its expected end doubled to 14,400, 7,100 s left, more than
// job 2's hour, so job 2 preempts it. Queued again, job 1 is expected to need its hour doubled
// past the 7,300 s it has done (7,100 s left), not 1 s: it does not take the GPU back a pass
// later, and resumes when job 2 ends.
TEST(ReplaySrtf, AJobThatOutlivedItsEstimateDoesNotPreemptBackAtOnce) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 1, 0, 10000), MakeTraceJob(2, 1, 7300, 100)};
  ReplayConfig config{"bestfit"};
  config.order = sched::QueueOrder::kSrtf;
  config.estimate = EstimateSource::kNone;
  config.resume = true;
  config.pass_interval_s = 10;
  auto r = RunReplay(OneNode(1), trace, config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->preemptions, 1);
  EXPECT_EQ(Outcome(*r, 2).end_s, 7400);
  EXPECT_EQ(Outcome(*r, 1).end_s, 7400 + 10000 - 7300);
}

// Each phase: a blocker holds the only GPU while a long and then a short job arrive. QSSF with
// predicted durations has no history in phase 0 (both get the default estimate: submit order),
// only a generic answer in phase 1 (this user's 1-GPU jobs, the same for both) and each name's
// own runs in phase 2, where the short job goes first, as it does with the oracle in every phase.
TEST(Replay, PredictedEstimatesImproveWithHistory) {
  Trace trace;
  for (int k = 0; k < 3; ++k) {
    const int64_t t0 = k * 10000;
    trace.jobs.push_back(MakeTraceJob(3 * k, 1, t0, 100, 1, "p", "blocker"));
    trace.jobs.push_back(MakeTraceJob(3 * k + 1, 1, t0 + 1, 1000, 1, "p", "long"));
    trace.jobs.push_back(MakeTraceJob(3 * k + 2, 1, t0 + 2, 10, 1, "p", "short"));
  }
  ReplayConfig config{"bestfit"};
  config.order = sched::QueueOrder::kQssf;
  config.estimate = EstimateSource::kPredicted;
  auto predicted = RunReplay(OneNode(1), trace, config);
  config.estimate = EstimateSource::kOracle;
  auto oracle = RunReplay(OneNode(1), trace, config);
  ASSERT_TRUE(predicted.ok() && oracle.ok());
  auto short_first = [](const ReplayResult& r, int k) {
    return Outcome(r, 3 * k + 2).start_s < Outcome(r, 3 * k + 1).start_s;
  };
  EXPECT_FALSE(short_first(*predicted, 0));
  EXPECT_FALSE(short_first(*predicted, 1));
  EXPECT_TRUE(short_first(*predicted, 2));
  for (int k = 0; k < 3; ++k) EXPECT_TRUE(short_first(*oracle, k)) << "phase " << k;
  EXPECT_GT(predicted->jct_s.mean, oracle->jct_s.mean);
}

// Without a time limit, "none" estimates every job at the one-hour default: QSSF degenerates to
// fewest GPUs first, then submit order.
TEST(Replay, NoEstimateHidesTheRecordedDuration) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 1, 0, 100), MakeTraceJob(1, 1, 1, 1000), MakeTraceJob(2, 1, 2, 10)};
  ReplayConfig config{"bestfit"};
  config.order = sched::QueueOrder::kQssf;
  config.estimate = EstimateSource::kNone;
  auto r = RunReplay(OneNode(1), trace, config);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Outcome(*r, 1).start_s, 100);
  EXPECT_EQ(Outcome(*r, 2).start_s, 1100);
  trace.jobs[2].job.time_limit = Seconds(20);  // a declared limit is known
  r = RunReplay(OneNode(1), trace, config);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(Outcome(*r, 2).start_s, 100);
}

// Per-project results add up to the totals, and allocated GPU-seconds are exactly the completed
// runs plus the runs preemption threw away (or, with resume, the completed work alone).
TEST(Replay, PerProjectAccountingSumsToTotals) {
  GeneratorConfig gen;
  gen.jobs = 400;
  gen.seed = 7;
  gen.users = 6;
  gen.projects = 3;
  gen.mean_interarrival_s = 20;
  const Trace trace = GenerateWorkload(gen);
  const auto nodes = Nodes(4, 8);
  for (bool resume : {false, true}) {
    ReplayConfig config{"fgd"};
    config.order = sched::QueueOrder::kFairShare;
    config.resume = resume;
    config.sharing.projects["p0"].quota_milli = 16000;
    config.sharing.projects["p1"].quota_milli = 8000;
    config.sharing.projects["p2"].quota_milli = 8000;
    config.sharing.projects["p2"].weight = 2;
    auto r = RunReplay(nodes, trace, config);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->unfinished, 0);
    EXPECT_GT(r->preemptions, 0) << "the workload should exercise reclaim";
    ASSERT_EQ(r->projects.size(), 3u);
    EXPECT_EQ(r->projects[2].weight, 2);
    int64_t jobs = 0, completed = 0, preemptions = 0, job_preemptions = 0;
    double gpu_s = 0, lost = 0, work = 0;
    for (const ProjectResult& p : r->projects) {
      jobs += p.jobs;
      completed += p.completed;
      preemptions += p.preemptions;
      gpu_s += p.gpu_s;
      lost += p.lost_gpu_s;
    }
    for (size_t i = 0; i < trace.jobs.size(); ++i) {
      const TraceJob& t = trace.jobs[i];
      work += static_cast<double>(t.duration.value() * t.job.TotalMilli().value()) / 1000.0;
      job_preemptions += r->job_outcomes[i].preemptions;
      EXPECT_EQ(r->job_outcomes[i].id, t.job.id);
    }
    EXPECT_EQ(jobs, r->jobs);
    EXPECT_EQ(completed, r->completed);
    EXPECT_EQ(preemptions, r->preemptions);
    EXPECT_EQ(job_preemptions, r->preemptions);
    EXPECT_NEAR(gpu_s, r->gpu_s, 1e-6 * r->gpu_s);
    EXPECT_NEAR(lost, r->lost_gpu_s, 1e-6 * r->gpu_s);
    EXPECT_NEAR(r->gpu_s, work + r->lost_gpu_s, 1e-6 * r->gpu_s);
    if (resume) {
      EXPECT_EQ(r->lost_gpu_s, 0);
    }
    const double capacity_gpus = 4 * 8;
    EXPECT_NEAR(r->gpu_s,
                r->gpu_alloc_pct_mean / 100 * capacity_gpus * static_cast<double>(r->makespan_s),
                1e-6 * r->gpu_s);
  }
}

// EASY backfill with exact (oracle) estimates on a small synthetic workload: no job starts later
// than the earliest start a reservation promised it, and the cluster is used at least as well as
// with strict order.
TEST(Replay, BackfillNeverDelaysAReservedJob) {
  for (uint64_t seed = 1; seed <= 5; ++seed) {
    GeneratorConfig gen;
    gen.jobs = 300;
    gen.seed = seed;
    gen.mean_interarrival_s = 120;
    const Trace trace = GenerateWorkload(gen);
    ReplayConfig config{"fgd"};
    config.blocking = sched::Blocking::kBackfill;
    auto backfill = RunReplay(Nodes(4, 8), trace, config);
    config.blocking = sched::Blocking::kStrict;
    auto strict = RunReplay(Nodes(4, 8), trace, config);
    ASSERT_TRUE(backfill.ok() && strict.ok());
    ASSERT_EQ(backfill->unfinished, 0);
    int reserved = 0;
    for (const ReplayJob& o : backfill->job_outcomes) {
      if (!o.reserved_start_s) continue;
      ++reserved;
      EXPECT_LE(o.start_s, *o.reserved_start_s) << "seed " << seed << ": job " << o.id.value();
    }
    EXPECT_GT(reserved, 0) << "seed " << seed << ": nothing was ever reserved";
    EXPECT_GE(backfill->gpu_alloc_pct_mean, strict->gpu_alloc_pct_mean) << "seed " << seed;
    EXPECT_LE(backfill->jct_s.mean, strict->jct_s.mean) << "seed " << seed;
  }
}

TEST(Replay, ReportsTheSharingInJson) {
  Trace trace;
  trace.jobs = {MakeTraceJob(1, 4, 0, 100, 1, "a"), MakeTraceJob(2, 4, 10, 50, 1, "b")};
  ReplayConfig config{"bestfit"};
  config.blocking = sched::Blocking::kBackfill;
  config.estimate = EstimateSource::kPredicted;
  config.sharing.projects["b"].quota_milli = 4000;
  auto r = RunReplay(OneNode(4), trace, config);
  ASSERT_TRUE(r.ok());
  const auto j = ReplayJson(config, {*r});
  EXPECT_EQ(j["config"]["blocking"], "backfill");
  EXPECT_EQ(j["config"]["estimate"], "predicted");
  EXPECT_EQ(j["config"]["resume"], false);
  const auto& result = j["results"][0];
  EXPECT_EQ(result["preemptions"], 1);
  EXPECT_EQ(result["lost_gpu_s"], 40);
  ASSERT_EQ(result["projects"].size(), 2u);
  EXPECT_EQ(result["projects"][0]["project"], "a");
  EXPECT_EQ(result["projects"][1]["entitlement_90_s"], 0);
  EXPECT_THAT(ReplayTable({*r}), ::testing::HasSubstr("bestfit per project"));
}

TEST(Replay, EstimateSourceNames) {
  for (auto source : {EstimateSource::kOracle, EstimateSource::kPredicted, EstimateSource::kNone}) {
    EXPECT_EQ(*ParseEstimateSource(EstimateSourceName(source)), source);
  }
  auto bad = ParseEstimateSource("magic");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("oracle, predicted, none"), std::string::npos);
  for (auto b : {sched::Blocking::kSkip, sched::Blocking::kStrict, sched::Blocking::kBackfill}) {
    EXPECT_EQ(*sched::ParseBlocking(sched::BlockingName(b)), b);
  }
}

TEST(Summarize, NearestRankPercentiles) {
  std::vector<double> v;
  for (int i = 1; i <= 100; ++i) v.push_back(i);
  Distribution d = Summarize(v);
  EXPECT_DOUBLE_EQ(d.mean, 50.5);
  EXPECT_DOUBLE_EQ(d.p50, 50);
  EXPECT_DOUBLE_EQ(d.p90, 90);
  EXPECT_DOUBLE_EQ(d.p95, 95);
  EXPECT_DOUBLE_EQ(d.p99, 99);
  EXPECT_DOUBLE_EQ(Summarize({}).mean, 0);
}

// Elastic jobs (issue 20): an elastic job alone takes the idle GPUs at its start.
TEST(ReplayElastic, AJobAloneStartsAtWhatIsIdleAndRunsFaster) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 4, 0, 1000)};
  ReplayConfig config{"bestfit"};
  config.elastic_share = 1;
  config.resize.alpha = 1;
  auto r = RunReplay(OneNode(8), trace, config);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->elastic_jobs, 1);
  // MIN 2, MAX 8: sized to 8 at its start (not a resize), twice the requested speed.
  EXPECT_EQ(r->grows, 0);
  EXPECT_DOUBLE_EQ(r->jct_s.mean, 500);
  EXPECT_NEAR(r->gpu_alloc_pct_mean, 100, 1e-9);
}

// Two elastic jobs asking 4 GPUs for 1,000 s on 8 GPUs, the second arriving at 100; linear
// speed-up, 10 s per resize, growth no sooner than `interval` after a resize.
Result<ReplayResult> TwoElasticJobs(int64_t interval) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 4, 0, 1000), MakeTraceJob(1, 4, 100, 1000)};
  ReplayConfig config{"bestfit"};
  config.elastic_share = 1;
  config.resize.alpha = 1;
  config.resize.restart_cost = Seconds(10);
  config.resize.min_interval = Seconds(interval);
  return RunReplay(OneNode(8), trace, config);
}

TEST(ReplayElastic, ShrinksForAnArrivalAndGrowsBackWhenGpusFree) {
  auto r = TwoElasticJobs(300);
  ASSERT_TRUE(r.ok()) << r.status().message();
  // Job 0: 8 GPUs (rate 2) until 100: 200 s of work. Shrunk to 4 for job 1 at 100, restarts
  // at 110 at rate 1: ends at 910. Job 1 starts at 100 at 4 (its MIN 2 plus what is idle) and
  // grows to 8 at 910 (810 s done, 190 left: 95 s saved > 10 s cost), restarts at 920 at
  // rate 2: ends at 1015.
  EXPECT_EQ(r->shrinks, 1);
  EXPECT_EQ(r->grows, 1);
  EXPECT_EQ(r->preemptions, 0);
  EXPECT_EQ(Outcome(*r, 0).end_s, 910);
  EXPECT_EQ(Outcome(*r, 1).first_start_s, 100);
  EXPECT_EQ(Outcome(*r, 1).end_s, 1015);
}

TEST(ReplayElastic, GrowthWaitsForTheResizeInterval) {
  auto r = TwoElasticJobs(5000);
  ASSERT_TRUE(r.ok()) << r.status().message();
  EXPECT_EQ(r->shrinks, 1);  // shrinks are never held back
  EXPECT_EQ(r->grows, 0);
  EXPECT_EQ(Outcome(*r, 1).end_s, 1100);
}

// Lost work: a borrower preempted at 250 that checkpoints every 100 s loses 50 s × 2 GPUs and
// resumes from 200; with a grace to checkpoint it loses only the grace and resumes from 250.
TEST(ReplayCheckpoints, PreemptionLosesTheWorkSinceTheLastCheckpoint) {
  Trace trace;
  trace.jobs = {MakeTraceJob(0, 2, 0, 1000, 1, "b"), MakeTraceJob(1, 2, 250, 1000, 1, "a")};
  ReplayConfig config{"bestfit"};
  config.sharing.projects["a"].quota_milli = 2000;
  struct Case {
    int64_t interval, grace;
    double lost_gpu_s;
    int64_t end;
  };
  for (const Case& c : {Case{0, 0, 500, 2250}, Case{100, 0, 100, 2050}, Case{100, 30, 60, 2000}}) {
    config.checkpoint_interval_s = c.interval;
    config.checkpoint_grace_s = c.grace;
    auto r = RunReplay(OneNode(2), trace, config);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->preemptions, 1);
    EXPECT_DOUBLE_EQ(r->lost_gpu_s, c.lost_gpu_s) << c.interval << " " << c.grace;
    EXPECT_EQ(Outcome(*r, 0).end_s, c.end) << c.interval << " " << c.grace;
  }
}

TEST(ReplayCheckpoints, LeastLostWorkPicksTheVictimThatCheckpointedLast) {
  Trace trace;
  // Borrowers 0 (from 0) and 1 (from 50) checkpoint every 100 s; at 120 job 0 has 20 s unsaved
  // and job 1 has 70 s. Today's rule takes the most recent (1), least lost work takes 0.
  trace.jobs = {MakeTraceJob(0, 1, 0, 1000, 1, "b"), MakeTraceJob(1, 1, 50, 1000, 1, "b"),
                MakeTraceJob(2, 1, 120, 1000, 1, "a")};
  ReplayConfig config{"bestfit"};
  config.sharing.projects["a"].quota_milli = 1000;
  config.checkpoint_interval_s = 100;
  for (auto [victims, lost] : {std::pair{sched::VictimOrder::kPriority, 70.0},
                               {sched::VictimOrder::kLeastLostWork, 20.0}}) {
    config.victims = victims;
    auto r = RunReplay(OneNode(2), trace, config);
    ASSERT_TRUE(r.ok()) << r.status().message();
    EXPECT_EQ(r->preemptions, 1);
    EXPECT_DOUBLE_EQ(r->lost_gpu_s, lost) << sched::VictimOrderName(victims);
  }
}

}  // namespace
}  // namespace corral::sim
