// The elastic decisions of a pass over a cluster state (sched/elastic_plan.h).
#include "sched/elastic_plan.h"

#include <gtest/gtest.h>

namespace corral::sched {
namespace {

// A cluster of `nodes` nodes of 8 A100s, 64 cores and 256 GiB each.
ClusterState PlanCluster(int nodes) {
  ClusterState state;
  for (int n = 0; n < nodes; ++n) {
    auto added = state.AddNode(
        model::MakeNode("n" + std::to_string(n), "A100", 8, CpuMilli(64000), MemoryMib(262144)));
    EXPECT_TRUE(added.ok()) << added.status().ToString();
  }
  return state;
}

// Allocates whole GPUs first..first+count-1 of `node` (1 core, 1 GiB) and returns the allocation.
Allocation Hold(ClusterState& state, NodeIndex node, int first, int count) {
  Allocation a{node, CpuMilli(1000), MemoryMib(1024)};
  for (int g = first; g < first + count; ++g) a.gpus.push_back(GpuShare{g, kWholeGpu});
  EXPECT_TRUE(state.Allocate(a).ok());
  return a;
}

ElasticRun GpuRun(int64_t id, int min, int max, int size, NodeIndex node, int64_t started = 0) {
  auto range = ElasticRange::Create(min, max);
  EXPECT_TRUE(range.ok());
  ElasticRun run{JobId(id), *range};
  run.size = size;
  run.nodes = {node};
  run.last_resize = Seconds(started);
  run.remaining_s = 36000;
  return run;
}

// A kNodes run of 1 task of `task_gpus` GPUs (1 core, 1 GiB) on `node`, range 1..max.
ElasticRun GangRun(int64_t id, int max, NodeIndex node, int task_gpus) {
  auto range = ElasticRange::Create(1, max);
  EXPECT_TRUE(range.ok());
  ElasticRun gang{JobId(id), *range, model::ElasticUnit::kNodes};
  gang.size = 1;
  gang.nodes = {node};
  gang.task_gpus = task_gpus;
  gang.task_cpu = CpuMilli(1000);
  gang.task_memory = MemoryMib(1024);
  gang.remaining_s = 36000;
  return gang;
}

model::Job Pending(int64_t id, int gpus, int tasks = 1) {
  model::Job job;
  job.id = JobId(id);
  job.user = "u";
  job.project = "p";
  job.tasks = tasks;
  job.resources = model::MakeResources(gpus, 1000, 1000, 1024);
  return job;
}

TEST(ElasticPlan, WholeFreeGpusCountsOnlyWholeGpusOnNodesTakingWork) {
  ClusterState state = PlanCluster(3);
  Hold(state, 0, 0, 3);
  Allocation share{0, CpuMilli(100), MemoryMib(10), {GpuShare{3, MilliGpu(500)}}};
  ASSERT_TRUE(state.Allocate(share).ok());
  ASSERT_TRUE(state.SetSchedulable(2, false).ok());
  EXPECT_EQ(WholeFreeGpus(state), (std::vector<int>{4, 8, 0}));
}

TEST(ElasticPlan, NodesAcceptingCheckModelCpuMemoryAndCordons) {
  ClusterState state = PlanCluster(3);
  ASSERT_TRUE(
      state.AddNode(model::MakeNode("v", "V100", 8, CpuMilli(64000), MemoryMib(262144))).ok());
  ASSERT_TRUE(state.SetSchedulable(1, false).ok());
  Allocation cpu_hog{2, CpuMilli(63500), MemoryMib(1024)};
  ASSERT_TRUE(state.Allocate(cpu_hog).ok());
  model::Job job = Pending(1, 2);
  EXPECT_EQ(NodesAccepting(state, job), (std::vector<bool>{true, false, false, true}));
  job.resources.gpu_models = {"V100"};
  EXPECT_EQ(NodesAccepting(state, job), (std::vector<bool>{false, false, false, true}));
}

TEST(ElasticPlan, PlanRoomShrinksForPendingJobsInOrderSeeingEarlierPlans) {
  ClusterState state = PlanCluster(1);
  Hold(state, 0, 0, 8);  // job 1 holds the node at 8 of 2..8
  const std::vector<ElasticRun> runs = {GpuRun(1, 2, 8, 8, 0)};
  // Job 10 needs 2: 8 -> 4 (the ladder's next size down) leaves 2 spare; job 11 needs 4: 4 -> 2.
  std::vector<Resize> plan = PlanRoom(state, runs, {Pending(10, 2), Pending(11, 4)});
  ASSERT_EQ(plan.size(), 2u);
  EXPECT_EQ(plan[0].job, JobId(1));
  EXPECT_EQ(plan[0].from, 8);
  EXPECT_EQ(plan[0].to, 4);
  EXPECT_EQ(plan[0].reason, ResizeReason::kPendingJob);
  EXPECT_EQ(plan[1].from, 4);
  EXPECT_EQ(plan[1].to, 2);
  // A job no shrink makes room for is passed over; the one behind it is still served.
  plan = PlanRoom(state, runs, {Pending(10, 8), Pending(11, 4)});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].to, 4);
  // Nothing above MIN: nothing to give back.
  EXPECT_TRUE(PlanRoom(state, {GpuRun(1, 8, 8, 8, 0)}, {Pending(10, 1)}).empty());
}

TEST(ElasticPlan, APendingElasticJobNeedsOnlyItsMin) {
  ClusterState state = PlanCluster(1);
  Hold(state, 0, 0, 8);
  model::Job elastic = Pending(10, 2);
  elastic.elastic = model::ElasticBounds{model::ElasticUnit::kGpus, 2, 8, 0};
  std::vector<Resize> plan = PlanRoom(state, {GpuRun(1, 4, 8, 8, 0)}, {elastic});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].to, 4);  // 4 free would do for MIN 2; 6 is not on 4..8's ladder
}

TEST(ElasticPlan, PlanRoomLooksAtTheFirstPendingJobsOnly) {
  ClusterState state = PlanCluster(1);
  Hold(state, 0, 0, 8);
  std::vector<model::Job> pending;
  for (int k = 0; k < kShrinkLookahead; ++k) pending.push_back(Pending(100 + k, 16));
  pending.push_back(Pending(999, 1));  // would fit after a shrink, but is not looked at
  EXPECT_TRUE(PlanRoom(state, {GpuRun(1, 1, 8, 8, 0)}, pending).empty());
  pending.erase(pending.begin());
  EXPECT_EQ(PlanRoom(state, {GpuRun(1, 1, 8, 8, 0)}, pending).size(), 1u);
}

TEST(ElasticPlan, AfterAPassFreshJobsTakeIdleGpusFirstThenOthersUnderTheRules) {
  ClusterState state = PlanCluster(1);
  Hold(state, 0, 0, 2);  // job 1, running since 0 at 2 of 2..8
  Hold(state, 0, 2, 2);  // job 2, started now at 2 of 2..4
  ResizeRules rules;
  rules.min_interval = Seconds(300);
  const std::vector<ElasticRun> fresh = {GpuRun(2, 2, 4, 2, 0, 1000)};
  const std::vector<ElasticRun> others = {GpuRun(1, 2, 8, 2, 0, 0)};
  // 4 idle GPUs: job 2 takes 2 (to its MAX 4) at its start, job 1 grows into the other 2.
  GrowthPlan plan = PlanAfterPass(state, fresh, others, rules, Seconds(1000));
  ASSERT_EQ(plan.at_start.size(), 1u);
  EXPECT_EQ(plan.at_start[0].job, JobId(2));
  EXPECT_EQ(plan.at_start[0].to, 4);
  ASSERT_EQ(plan.grown.size(), 1u);
  EXPECT_EQ(plan.grown[0].job, JobId(1));
  EXPECT_EQ(plan.grown[0].to, 4);
  EXPECT_EQ(plan.grown[0].reason, ResizeReason::kIdleGpus);
  // Within the interval since job 1's last resize it does not grow; a fresh job always may.
  const std::vector<ElasticRun> recent = {GpuRun(1, 2, 8, 2, 0, 900)};
  plan = PlanAfterPass(state, fresh, recent, rules, Seconds(1000));
  EXPECT_EQ(plan.at_start.size(), 1u);
  EXPECT_TRUE(plan.grown.empty());
}

TEST(ElasticPlan, GrowthLeavesTheReservedNodesAlone) {
  ClusterState state = PlanCluster(3);
  Hold(state, 0, 0, 2);  // job 1 at 2 of 2..8 on node 0, reserved for the head job
  Hold(state, 1, 0, 4);  // job 2, a gang task of 4 GPUs on node 1
  const std::vector<ElasticRun> others = {GpuRun(1, 2, 8, 2, 0), GangRun(2, 4, 1, 4)};
  // Unreserved, job 1 grows into node 0's 6 idle GPUs and the gang takes node 2.
  GrowthPlan plan = PlanAfterPass(state, {}, others, ResizeRules{}, Seconds(1000));
  ASSERT_EQ(plan.grown.size(), 2u);
  // With nodes 0 and 2 reserved, neither grows; a fresh job does not take them either.
  const std::vector<bool> reserved = {true, false, true};
  plan = PlanAfterPass(state, {}, others, ResizeRules{}, Seconds(1000), reserved);
  EXPECT_TRUE(plan.grown.empty());
  plan = PlanAfterPass(state, {GpuRun(1, 2, 8, 2, 0, 1000)}, {}, ResizeRules{}, Seconds(1000),
                       reserved);
  EXPECT_TRUE(plan.at_start.empty());
}

TEST(ElasticPlan, AGangGrowsByWholeTasksOnNodesWithoutOneOfItsTasks) {
  ClusterState state = PlanCluster(4);
  ASSERT_TRUE(
      state.AddNode(model::MakeNode("v", "V100", 8, CpuMilli(64000), MemoryMib(262144))).ok());
  Hold(state, 0, 0, 6);  // its task 0
  Hold(state, 1, 0, 7);  // node 1: 1 GPU left, too few for a task
  Allocation cpu_hog{2, CpuMilli(63500), MemoryMib(1024)};
  ASSERT_TRUE(state.Allocate(cpu_hog).ok());  // node 2: GPUs but no CPU
  const ElasticRun gang = GangRun(1, 8, 0, 6);
  // Only node 3 qualifies (node 4 is a V100): 1 -> 2 tasks.
  GrowthPlan plan = PlanAfterPass(state, {}, {gang}, ResizeRules{}, Seconds(1000));
  ASSERT_EQ(plan.grown.size(), 1u);
  EXPECT_EQ(plan.grown[0].from, 1);
  EXPECT_EQ(plan.grown[0].to, 2);
  // Started in this pass, it takes node 3 (2 GPUs left there); a second gang finds no room.
  ElasticRun second = gang;
  second.job = JobId(2);
  plan = PlanAfterPass(state, {gang}, {second}, ResizeRules{}, Seconds(1000));
  ASSERT_EQ(plan.at_start.size(), 1u);
  EXPECT_EQ(plan.at_start[0].to, 2);
  EXPECT_TRUE(plan.grown.empty());
}

TEST(ElasticPlan, PlanRoomTakesAGangsTasksAboveMin) {
  ClusterState state = PlanCluster(2);
  Hold(state, 0, 0, 8);  // task 0 of job 1
  Hold(state, 1, 0, 8);  // task 1
  auto range = ElasticRange::Create(1, 2);
  ASSERT_TRUE(range.ok());
  ElasticRun gang{JobId(1), *range, model::ElasticUnit::kNodes};
  gang.size = 2;
  gang.nodes = {0, 1};
  gang.task_gpus = 8;
  std::vector<Resize> plan = PlanRoom(state, {gang}, {Pending(10, 4)});
  ASSERT_EQ(plan.size(), 1u);
  EXPECT_EQ(plan[0].from, 2);
  EXPECT_EQ(plan[0].to, 1);
}

}  // namespace
}  // namespace corral::sched
