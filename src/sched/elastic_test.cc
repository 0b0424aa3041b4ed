// Elastic jobs: the range's ladder, the hysteresis, growth into idle GPUs, shrinks for a
// pending job, and Scheduler::Resize applying them.
#include "sched/elastic.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

#include "sched/scheduler.h"

namespace corral::sched {
namespace {

using ::testing::HasSubstr;

ElasticRange Range(int min, int max, int step = 0) {
  auto r = ElasticRange::Create(min, max, step);
  EXPECT_TRUE(r.ok()) << r.status().ToString();
  return *r;
}

ElasticRun Elastic(int64_t id, int min, int max, int gpus, NodeIndex node,
                   double remaining_s = 36000, int64_t last_resize = 0, int resizes = 0) {
  ElasticRun run{JobId(id), Range(min, max)};
  run.size = gpus;
  run.nodes = {node};
  run.last_resize = Seconds(last_resize);
  run.resizes = resizes;
  run.remaining_s = remaining_s;
  return run;
}

TEST(ElasticRange, LaddersArePowersOfTwoBetweenMinAndMaxUnlessAStepIsGiven) {
  EXPECT_EQ(Range(2, 8).Sizes(), (std::vector<int>{2, 4, 8}));
  EXPECT_EQ(Range(3, 12).Sizes(), (std::vector<int>{3, 4, 8, 12}));
  EXPECT_EQ(Range(1, 1).Sizes(), (std::vector<int>{1}));
  EXPECT_EQ(Range(2, 8, 3).Sizes(), (std::vector<int>{2, 5, 8}));
  EXPECT_EQ(Range(3, 12).AtMost(7), 4);
  EXPECT_EQ(Range(3, 12).AtMost(2), 3);  // never below MIN
  EXPECT_EQ(Range(3, 12).AtMost(100), 12);
}

TEST(ElasticRange, ErrorsNameTheField) {
  EXPECT_THAT(ElasticRange::Create(0, 4).status().message(), HasSubstr("min_gpus"));
  EXPECT_THAT(ElasticRange::Create(4, 2).status().message(), HasSubstr("max_gpus"));
  EXPECT_THAT(ElasticRange::Create(1, 5000).status().message(), HasSubstr("max_gpus"));
  EXPECT_THAT(ElasticRange::Create(1, 4, -1).status().message(), HasSubstr("gpu_step"));
  ResizeRules rules;
  rules.alpha = 1.5;
  EXPECT_THAT(Validate(rules).message(), HasSubstr("alpha"));
  EXPECT_TRUE(Validate(ResizeRules{}).ok());
}

TEST(ElasticHysteresis, GrowthWaitsForTheIntervalAndStopsAtTheBudget) {
  ResizeRules rules;
  rules.min_interval = Seconds(300);
  rules.budget = 2;
  const ElasticRun run = Elastic(1, 2, 8, 2, 0, 36000, /*last_resize=*/1000);
  EXPECT_FALSE(GrowthAllowed(run, 4, rules, Seconds(1299)));
  EXPECT_TRUE(GrowthAllowed(run, 4, rules, Seconds(1300)));
  EXPECT_FALSE(GrowthAllowed(run, 2, rules, Seconds(5000)));  // not a growth
  ElasticRun spent = run;
  spent.resizes = 2;
  EXPECT_FALSE(GrowthAllowed(spent, 4, rules, Seconds(5000)));
}

TEST(ElasticHysteresis, GrowthOnlyWhenTheTimeSavedExceedsTheRestartCost) {
  ResizeRules rules;
  rules.alpha = 1.0;
  rules.min_interval = Seconds(0);
  rules.restart_cost = Seconds(60);
  // Doubling at alpha 1 halves what is left: 100 s left saves 50 s (< 60), 200 s saves 100 s.
  EXPECT_FALSE(GrowthAllowed(Elastic(1, 1, 2, 1, 0, 100), 2, rules, Seconds(10)));
  EXPECT_TRUE(GrowthAllowed(Elastic(1, 1, 2, 1, 0, 200), 2, rules, Seconds(10)));
  EXPECT_NEAR(Speedup(2, 8, 0.5), 2.0, 1e-12);
}

TEST(ElasticGrowth, SmallestJobsFirstEachToTheLargestSizeItsNodeAllows) {
  ResizeRules rules;
  rules.min_interval = Seconds(0);
  // Node 0 has 3 idle GPUs, node 1 has 4. Job 2 (2 GPUs) goes before job 1 (4 GPUs) on node 0.
  std::vector<ElasticRun> runs = {Elastic(1, 2, 8, 4, 0), Elastic(2, 1, 8, 2, 0),
                                  Elastic(3, 1, 8, 4, 1)};
  std::vector<Resize> grown = PlanGrowth(runs, {3, 4}, rules, Seconds(100));
  ASSERT_EQ(grown.size(), 2u);
  EXPECT_EQ(grown[0].job, JobId(2));
  EXPECT_EQ(grown[0].to, 4);  // 2 + 3 = 5 is not on the ladder: 4
  EXPECT_EQ(grown[0].reason, ResizeReason::kIdleGpus);
  EXPECT_EQ(grown[1].job, JobId(3));
  EXPECT_EQ(grown[1].to, 8);
  // Job 1 got nothing: one GPU was left on node 0 and 5 is not on its ladder.
  EXPECT_TRUE(PlanGrowth(runs, {0, 0}, rules, Seconds(100)).empty());
}

TEST(ElasticShrink, TakesBackBorrowedGpusOnTheCheapestNodeNeverBelowMin) {
  // Node 0: 1 free, job 1 at 8 of 2..8 (6 borrowed). Node 1: 2 free, job 2 at 4 of 2..8.
  std::vector<ElasticRun> runs = {Elastic(1, 2, 8, 8, 0), Elastic(2, 2, 8, 4, 1)};
  // 4 GPUs: node 1 needs 2 back (job 2 to MIN), node 0 needs 3: node 1 wins.
  auto plan = PlanShrink(runs, {1, 2}, {true, true}, 4);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, std::vector<NodeIndex>{1});
  ASSERT_EQ(plan->resizes.size(), 1u);
  EXPECT_EQ(plan->resizes[0].job, JobId(2));
  EXPECT_EQ(plan->resizes[0].to, 2);
  EXPECT_EQ(plan->resizes[0].reason, ResizeReason::kPendingJob);
  // Not allowed on node 1: node 0, job 1 down to 4 (frees 4 >= the 3 still short).
  plan = PlanShrink(runs, {1, 2}, {true, false}, 4);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, std::vector<NodeIndex>{0});
  ASSERT_EQ(plan->resizes.size(), 1u);
  EXPECT_EQ(plan->resizes[0].to, 4);
  // 8 GPUs would need job 1 below its MIN: no plan, the caller may preempt.
  EXPECT_FALSE(PlanShrink(runs, {1, 2}, {true, true}, 8));
  // Room already: nothing to shrink.
  plan = PlanShrink(runs, {1, 2}, {true, true}, 2);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, std::vector<NodeIndex>{1});
  EXPECT_TRUE(plan->resizes.empty());
}

TEST(ElasticShrink, AGangShrinksJobsOnAsManyNodesAsItHasTasks) {
  // Two tasks of 4: node 0 frees 4 from job 1 (8 -> 4), node 1 frees 4 from job 2 (8 -> 4).
  std::vector<ElasticRun> runs = {Elastic(1, 4, 8, 8, 0), Elastic(2, 2, 8, 8, 1)};
  auto plan = PlanShrink(runs, {0, 0}, {true, true}, 4, 2);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, (std::vector<NodeIndex>{0, 1}));
  ASSERT_EQ(plan->resizes.size(), 2u);
  EXPECT_EQ(plan->resizes[0].to, 4);
  EXPECT_EQ(plan->resizes[1].to, 4);
  // Three tasks: job 1 cannot go below its MIN of 4, job 2 gives 6 (to its MIN 2) on node 1 but
  // only one task fits there after the first: no plan.
  EXPECT_FALSE(PlanShrink(runs, {0, 0}, {true, true}, 4, 3));
  // One job shrunk for two tasks on its node is one resize, to the last size.
  auto twice = PlanShrink({Elastic(3, 1, 8, 8, 0)}, {0}, {true}, 2, 2);
  ASSERT_TRUE(twice);
  ASSERT_EQ(twice->resizes.size(), 1u);
  EXPECT_EQ(twice->resizes[0].from, 8);
  EXPECT_EQ(twice->resizes[0].to, 4);
}

TEST(ElasticShrink, MostBorrowedJobFirstOnANode) {
  std::vector<ElasticRun> runs = {Elastic(1, 1, 4, 2, 0), Elastic(2, 1, 4, 4, 0)};
  auto plan = PlanShrink(runs, {0}, {true}, 2);
  ASSERT_TRUE(plan);
  ASSERT_EQ(plan->resizes.size(), 1u);
  EXPECT_EQ(plan->resizes[0].job, JobId(2));
  EXPECT_EQ(plan->resizes[0].to, 2);
}

// A kNodes run of MIN..MAX tasks of `task_gpus` GPUs on `nodes` (task order).
ElasticRun Gang(int64_t id, int min, int max, int task_gpus, std::vector<NodeIndex> nodes) {
  ElasticRun run{JobId(id), Range(min, max), model::ElasticUnit::kNodes};
  run.size = static_cast<int>(nodes.size());
  run.nodes = std::move(nodes);
  run.task_gpus = task_gpus;
  run.remaining_s = 36000;
  return run;
}

TEST(ElasticShrink, AGangGivesBackItsLastTasksAboveMin) {
  using Gpus = std::vector<std::pair<NodeIndex, int>>;
  EXPECT_EQ(Freed(Gang(1, 1, 4, 8, {0, 1, 2, 3}), 2), (Gpus{{2, 8}, {3, 8}}));
  EXPECT_EQ(Freed(Elastic(2, 2, 8, 8, 5), 4), (Gpus{{5, 4}}));
  // Every node full; job 1 runs 4 tasks of 8 GPUs (1..4). A pending 8-GPU task can have node 3
  // by shrinking to 2 (freeing nodes 2 and 3) or node 1 by shrinking to 1 (nodes 1..3): the
  // node that frees the fewest elsewhere wins, lowest index among those.
  const std::vector<ElasticRun> runs = {Gang(1, 1, 4, 8, {0, 1, 2, 3})};
  auto plan = PlanShrink(runs, {0, 0, 0, 0}, {true, true, true, true}, 8);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, std::vector<NodeIndex>{2});
  ASSERT_EQ(plan->resizes.size(), 1u);
  EXPECT_EQ(plan->resizes[0].from, 4);
  EXPECT_EQ(plan->resizes[0].to, 2);
  // Task 0 is its MIN: node 0 is never taken.
  EXPECT_FALSE(PlanShrink(runs, {0, 0, 0, 0}, {true, false, false, false}, 8));
  // Two tasks: the second uses the node the first shrink freed besides (3), no second resize.
  plan = PlanShrink(runs, {0, 0, 0, 0}, {true, true, true, true}, 8, 2);
  ASSERT_TRUE(plan);
  EXPECT_EQ(plan->nodes, (std::vector<NodeIndex>{2, 3}));
  ASSERT_EQ(plan->resizes.size(), 1u);
  EXPECT_EQ(plan->resizes[0].to, 2);
}

model::Job WholeGpuJob(int64_t id, int gpus, std::string project = "p") {
  model::Job j;
  j.id = JobId(id);
  j.user = "u";
  j.project = std::move(project);
  j.resources = model::MakeResources(gpus, 1000, 1000, 1024);
  return j;
}

// An elastic job of MIN..MAX GPUs, submitted at MIN.
model::Job ElasticGpus(int64_t id, int min, int max, std::string project = "p") {
  model::Job j = WholeGpuJob(id, min, std::move(project));
  j.elastic = model::ElasticBounds{model::ElasticUnit::kGpus, min, max, 0};
  return j;
}

// An elastic gang of MIN..MAX tasks of `task_gpus` GPUs each, submitted at MIN.
model::Job ElasticNodes(int64_t id, int min, int max, int task_gpus) {
  model::Job j = WholeGpuJob(id, task_gpus);
  j.tasks = min;
  j.elastic = model::ElasticBounds{model::ElasticUnit::kNodes, min, max, 0};
  return j;
}

std::unique_ptr<Scheduler> Cluster(int nodes, SharingConfig sharing = {}) {
  SchedulerConfig config{"bestfit"};
  config.sharing = std::move(sharing);
  auto created = Scheduler::Create(config, {});
  EXPECT_TRUE(created.ok());
  for (int n = 0; n < nodes; ++n) {
    EXPECT_TRUE((*created)
                    ->AddNode(model::MakeNode("n" + std::to_string(n), "A100", 8, CpuMilli(64000),
                                              MemoryMib(262144)))
                    .ok());
  }
  return std::move(*created);
}

std::set<NodeIndex> NodesOf(const Scheduler& s, JobId job) {
  std::set<NodeIndex> out;
  for (const Allocation& a : *s.AllocationsOf(job)) out.insert(a.node);
  return out;
}

TEST(SchedulerResize, GrowsIntoFreeGpusAndShrinksKeepingItsNode) {
  auto cluster = Cluster(1);
  Scheduler& s = *cluster;
  ASSERT_TRUE(s.Submit(ElasticGpus(1, 2, 8)).ok());
  ASSERT_EQ(s.Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s.Resize(JobId(1), 8, Seconds(10)).ok());
  EXPECT_EQ(s.AllocationsOf(JobId(1))->front().gpus.size(), 8u);
  EXPECT_EQ(s.state().FreeGpuMilli(), 0);
  EXPECT_EQ(s.ProjectUsage("p"), 8000);
  EXPECT_EQ(s.Resize(JobId(1), 9, Seconds(11)).code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(s.Resize(JobId(1), 1, Seconds(11)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Resize(JobId(1), 4, Seconds(20)).ok());
  EXPECT_EQ(s.state().FreeGpuMilli(), 4000);
  EXPECT_EQ(s.ProjectUsage("p"), 4000);
  // The freed GPUs take a pending job; then there is no room to grow: nothing changes.
  ASSERT_TRUE(s.Submit(WholeGpuJob(2, 4)).ok());
  EXPECT_EQ(s.Schedule(Seconds(21)).starts.size(), 1u);
  EXPECT_EQ(s.Resize(JobId(1), 8, Seconds(22)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(s.AllocationsOf(JobId(1))->front().gpus.size(), 4u);
  EXPECT_EQ(s.ProjectUsage("p"), 8000);
  // A rigid job does not resize.
  EXPECT_EQ(s.Resize(JobId(2), 2, Seconds(23)).code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.Finish(JobId(1)).ok());
  EXPECT_EQ(s.state().FreeGpuMilli(), 4000);
  EXPECT_EQ(s.Resize(JobId(1), 2, Seconds(30)).code(), StatusCode::kNotFound);
}

// A plan not applied leaves the run as it was: its allocations, its start and its checkpoint
// (what a preemption would lose); applied, it is what Resize does.
TEST(SchedulerResize, APlanChangesNothingUntilApplied) {
  auto cluster = Cluster(1);
  ASSERT_TRUE(cluster->Submit(ElasticGpus(1, 2, 8)).ok());
  ASSERT_EQ(cluster->Schedule(Seconds(0)).starts.size(), 1u);  // at MIN: 2 GPUs
  Scheduler& s = *cluster;
  ASSERT_TRUE(s.NoteCheckpoint(JobId(1), Seconds(15)).ok());
  const std::vector<Allocation> before = *s.AllocationsOf(JobId(1));
  auto plan = s.PlanResize(JobId(1), 4);
  ASSERT_TRUE(plan.ok()) << plan.status().ToString();
  EXPECT_EQ(plan->front().gpus.size(), 4u);
  EXPECT_EQ(*s.AllocationsOf(JobId(1)), before);
  EXPECT_EQ(s.state().FreeGpuMilli(), 6000);
  EXPECT_EQ(s.LostWorkOf(JobId(1), Seconds(20)), 2 * 5);  // since the checkpoint, at 2 GPUs
  EXPECT_EQ(s.PlanResize(JobId(1), 9).status().code(), StatusCode::kInvalidArgument);
  ASSERT_TRUE(s.ApplyResize(JobId(1), *plan, Seconds(20)).ok());
  EXPECT_EQ(*s.AllocationsOf(JobId(1)), *plan);
  EXPECT_EQ(s.state().FreeGpuMilli(), 4000);
  EXPECT_EQ(s.ProjectUsage("p"), 4000);
  EXPECT_EQ(s.LostWorkOf(JobId(1), Seconds(25)), 4 * 5);  // a new run since 20
}

TEST(SchedulerResize, ANodesJobGrowsOneTaskPerNewNodeAndShrinksFromItsLastTask) {
  auto cluster = Cluster(4);
  Scheduler& s = *cluster;
  // Tasks of 2 GPUs: the first node could hold four, but each task needs a node of its own.
  ASSERT_TRUE(s.Submit(ElasticNodes(1, 1, 4, 2)).ok());
  ASSERT_EQ(s.Schedule(Seconds(0)).starts.size(), 1u);
  const NodeIndex first = s.AllocationsOf(JobId(1))->front().node;
  ASSERT_TRUE(s.Resize(JobId(1), 3, Seconds(10)).ok());
  const std::vector<Allocation> three = *s.AllocationsOf(JobId(1));
  ASSERT_EQ(three.size(), 3u);
  EXPECT_EQ(three[0].node, first);  // task 0 stays where it ran
  EXPECT_EQ(NodesOf(s, JobId(1)).size(), 3u);
  for (const Allocation& a : three) EXPECT_EQ(a.gpus.size(), 2u);
  EXPECT_EQ(s.ProjectUsage("p"), 6000);
  EXPECT_TRUE(s.state().node(first).schedulable);  // the nodes it set aside are restored
  // Shrinking keeps tasks 0..1.
  ASSERT_TRUE(s.Resize(JobId(1), 2, Seconds(20)).ok());
  const std::vector<Allocation> two = *s.AllocationsOf(JobId(1));
  ASSERT_EQ(two.size(), 2u);
  EXPECT_EQ(two[0], three[0]);
  EXPECT_EQ(two[1], three[1]);
  EXPECT_EQ(s.state().FreeGpuMilli(), 28000);
  // Two rigid jobs fill the two other nodes: growing to 4 does not fit, nothing changes.
  ASSERT_TRUE(s.Submit(WholeGpuJob(2, 8)).ok());
  ASSERT_TRUE(s.Submit(WholeGpuJob(3, 8)).ok());
  ASSERT_EQ(s.Schedule(Seconds(21)).starts.size(), 2u);
  EXPECT_EQ(s.Resize(JobId(1), 4, Seconds(22)).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(*s.AllocationsOf(JobId(1)), two);
  EXPECT_EQ(s.Resize(JobId(1), 5, Seconds(22)).code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerResize, OnlyMinCountsAgainstTheQuotaAndUseFollowsTheSize) {
  SharingConfig sharing;
  sharing.projects["p"].quota_milli = 4000;
  auto cluster = Cluster(1, sharing);
  Scheduler& s = *cluster;
  ASSERT_TRUE(s.Submit(ElasticGpus(1, 2, 8)).ok());
  ASSERT_EQ(s.Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s.Resize(JobId(1), 6, Seconds(10)).ok());
  EXPECT_EQ(s.ProjectUsage("p"), 6000);
  EXPECT_DOUBLE_EQ(s.fair_share().DominantShare("p"), 0.75);
  EXPECT_TRUE(s.BorrowedJobs().empty());  // its MIN (2) is inside the quota (4)
  // A rigid job of the project still has quota room: it starts as not borrowed.
  ASSERT_TRUE(s.Submit(WholeGpuJob(2, 2)).ok());
  const Decisions d = s.Schedule(Seconds(11));
  ASSERT_EQ(d.starts.size(), 1u);
  EXPECT_FALSE(d.starts[0].borrowed);
  EXPECT_TRUE(s.BorrowedJobs().empty());
  ASSERT_TRUE(s.Resize(JobId(1), 2, Seconds(20)).ok());
  EXPECT_EQ(s.ProjectUsage("p"), 4000);
  EXPECT_DOUBLE_EQ(s.fair_share().DominantShare("p"), 0.5);
  ASSERT_TRUE(s.Finish(JobId(1)).ok());
  ASSERT_TRUE(s.Finish(JobId(2)).ok());
  EXPECT_EQ(s.ProjectUsage("p"), 0);
  EXPECT_DOUBLE_EQ(s.fair_share().DominantShare("p"), 0.0);
}

TEST(SchedulerResize, APreemptedElasticJobWaitsForItsMinAgain) {
  SharingConfig sharing;
  sharing.projects["owner"].quota_milli = 8000;
  auto cluster = Cluster(1, sharing);
  Scheduler& s = *cluster;
  ASSERT_TRUE(s.Submit(ElasticGpus(1, 2, 8, "guest")).ok());
  ASSERT_EQ(s.Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s.Resize(JobId(1), 8, Seconds(10)).ok());
  EXPECT_EQ(s.BorrowedJobs(), std::vector<JobId>{JobId(1)});  // its MIN is beyond quota 0
  // The owner's 6 GPUs reclaim the node; the guest comes back at its MIN in the 2 left.
  ASSERT_TRUE(s.Submit(WholeGpuJob(2, 6, "owner")).ok());
  const Decisions d = s.Schedule(Seconds(20));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, JobId(1));
  const Decisions again = s.Schedule(Seconds(21));
  ASSERT_EQ(again.starts.size(), 1u);
  EXPECT_EQ(again.starts[0].job, JobId(1));
  EXPECT_EQ(again.starts[0].tasks.front().gpus.size(), 2u);
}

}  // namespace
}  // namespace corral::sched
