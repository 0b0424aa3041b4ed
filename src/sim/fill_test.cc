#include "sim/fill.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <limits>
#include <tuple>

#include "sched/placer.h"
#include "sim/fill_bound.h"
#include "sim/report.h"
#include "sim/trace.h"

namespace corral::sim {
namespace {

std::vector<model::Node> SmallCluster() {
  std::vector<model::Node> nodes;
  for (int i = 0; i < 6; ++i) {
    nodes.push_back(model::MakeNode("n" + std::to_string(i), i < 3 ? "T4" : "V100M32",
                                    i % 2 ? 8 : 4, CpuMilli(64000), MemoryMib(262144)));
  }
  return nodes;
}

std::vector<model::TaskResources> SmallWorkload() {
  std::vector<model::TaskResources> tasks;
  for (int i = 0; i < 40; ++i) {
    if (i % 4 == 0) {
      tasks.push_back(model::MakeResources(1, 250 + 250 * (i % 3), 2000, 1024));
    } else {
      tasks.push_back(model::MakeResources(1 + i % 3, 1000, 4000, 1024));
    }
  }
  return tasks;
}

nlohmann::json WithoutWallTime(nlohmann::json j) {
  for (auto& r : j["results"]) r.erase("wall_ms");
  return j;
}

TEST(Fill, TunesTheWorkloadAndNeverOverAllocates) {
  auto r = RunFill(SmallCluster(), SmallWorkload(), FillConfig{"bestfit", 42, 1.3});
  ASSERT_TRUE(r.ok()) << r.status().message();
  ASSERT_FALSE(r->steps.empty());
  // Arrived load ends at or just under 130% of the 36 GPUs; it never exceeds it.
  EXPECT_LE(r->steps.back().arrived_pct, 130.0);
  EXPECT_GT(r->steps.back().arrived_pct, 120.0);
  for (const FillStep& s : r->steps) {
    EXPECT_GE(s.unallocated_pct, 0.0);
    EXPECT_LE(s.unallocated_pct, 100.0);
    EXPECT_LE(s.frag_pct_of_capacity, s.unallocated_pct + 1e-9);
    // Unallocated GPUs can never be below the ideal max(0, 100 - arrived).
    EXPECT_GE(s.unallocated_pct, std::max(0.0, 100.0 - s.arrived_pct) - 1e-9);
  }
}

TEST(Fill, ErrorsAreClear) {
  EXPECT_EQ(RunFill(SmallCluster(), SmallWorkload(), FillConfig{"nope", 1, 1.3}).status().code(),
            StatusCode::kInvalidArgument);
  auto none = RunFill(SmallCluster(), SmallWorkload(), FillConfig{"fgd", 1, 1e-9});
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tasks"), std::string::npos);
  std::vector<model::Node> cpu_only = {model::MakeNode("c", "", 0, CpuMilli(1000), MemoryMib(1))};
  auto r = RunFill(cpu_only, SmallWorkload(), FillConfig{"fgd", 1, 1.3});
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("no GPUs"), std::string::npos);
}

// One list per seed: RunFill and the fill bound present FillTasks', which is TuneWorkload's from
// SeededRng(seed) on the loaded cluster's capacity.
TEST(Fill, TheFillAndTheBoundPresentFillTasks) {
  sched::ClusterState state(sched::ClusterStateOptions{});
  auto list = FillTasks(SmallCluster(), SmallWorkload(), 42, 1.3, state);
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(list->capacity_milli, 36000);
  EXPECT_EQ(state.TotalGpuMilli(), 36000);
  SeededRng rng(42);
  const auto tuned = TuneWorkload(SmallWorkload(), 36000, 1.3, rng);
  ASSERT_EQ(list->tasks.size(), tuned.size());
  for (size_t i = 0; i < tuned.size(); ++i) {
    EXPECT_EQ(list->tasks[i].TotalMilli().value(), tuned[i].TotalMilli().value()) << "task " << i;
  }
  auto fill = RunFill(SmallCluster(), SmallWorkload(), FillConfig{"bestfit", 42, 1.3});
  auto bound = RunFillBound(SmallCluster(), SmallWorkload(), 42, 1.3);
  ASSERT_TRUE(fill.ok() && bound.ok());
  ASSERT_EQ(fill->tasks_presented, static_cast<int>(list->tasks.size()));
  ASSERT_EQ(bound->tasks_presented, fill->tasks_presented);
  for (size_t t = 0; t < fill->steps.size(); ++t) {
    EXPECT_DOUBLE_EQ(bound->steps[t].arrived_pct, fill->steps[t].arrived_pct) << "step " << t;
  }
  sched::ClusterState empty(sched::ClusterStateOptions{});
  auto none = FillTasks(SmallCluster(), SmallWorkload(), 42, 1e-9, empty);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no tasks"), std::string::npos);
}

TEST(Fill, SameSeedSameJsonWhateverTheThreadCount) {
  const std::vector<std::string> policies = {"random", "fgd", "clustering"};
  auto one = RunFillMatrix(SmallCluster(), SmallWorkload(), policies, {1, 2, 3}, 1.3, 1);
  auto two = RunFillMatrix(SmallCluster(), SmallWorkload(), policies, {1, 2, 3}, 1.3, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(WithoutWallTime(FillJson(*one)).dump(), WithoutWallTime(FillJson(*two)).dump());
  auto other = RunFillMatrix(SmallCluster(), SmallWorkload(), policies, {4, 5, 6}, 1.3, 2);
  EXPECT_NE(WithoutWallTime(FillJson(*one)).dump(), WithoutWallTime(FillJson(*other)).dump());
}

TEST(Fill, WritesCsvsAndPlot) {
  auto r = RunFillMatrix(SmallCluster(), SmallWorkload(), {"bestfit", "fgd"}, {7}, 1.3, 1);
  ASSERT_TRUE(r.ok());
  const auto dir = std::filesystem::temp_directory_path() / "corral_fill_test";
  std::filesystem::remove_all(dir);
  ASSERT_TRUE(WriteFillOutputs(*r, dir.string()).ok());
  EXPECT_TRUE(std::filesystem::exists(dir / "fill_bestfit_7.csv"));
  EXPECT_TRUE(std::filesystem::exists(dir / "fill_fgd_7.csv"));
  EXPECT_GT(std::filesystem::file_size(dir / "fill_unallocated.svg"), 1000u);
  std::filesystem::remove_all(dir);
}

// `best` generalises FGD: with FGD's weights (demand_exp=0), sigmoid (scale 1000, 100 levels),
// no bonus, no stranding, unusable-capacity or fraction terms it places every task exactly where
// fgd does.
TEST(FillBest, WithFgdParamsPlacesLikeFgd) {
  auto fgd_params = sched::ParseBestParams(
      "demand_exp=0,scale=1000,levels=100,used_bonus=0,cpu_weight=0,memory_weight=0,"
      "usable_weight=0,strand_levels=0");
  ASSERT_TRUE(fgd_params.ok());
  for (uint64_t seed : {1, 2, 3}) {
    auto fgd = RunFill(SmallCluster(), SmallWorkload(), FillConfig{"fgd", seed, 1.3});
    auto best =
        RunFill(SmallCluster(), SmallWorkload(), FillConfig{"best", seed, 1.3, *fgd_params});
    ASSERT_TRUE(fgd.ok() && best.ok());
    ASSERT_EQ(fgd->steps.size(), best->steps.size());
    for (size_t i = 0; i < fgd->steps.size(); ++i) {
      EXPECT_EQ(fgd->steps[i].unallocated_pct, best->steps[i].unallocated_pct) << "step " << i;
    }
  }
}

TEST(FillBest, DefaultsAreDeterministic) {
  auto one = RunFillMatrix(SmallCluster(), SmallWorkload(), {"best"}, {1, 2}, 1.3, 1);
  auto two = RunFillMatrix(SmallCluster(), SmallWorkload(), {"best"}, {1, 2}, 1.3, 2);
  ASSERT_TRUE(one.ok() && two.ok());
  EXPECT_EQ(WithoutWallTime(FillJson(*one)).dump(), WithoutWallTime(FillJson(*two)).dump());
}

// With used_bonus a task whose gradient is equal everywhere goes to the node already in use,
// whatever the tie order: the empty node stays whole for a task that needs all of it.
TEST(FillBest, UsedBonusKeepsAnEmptyNodeWhole) {
  auto params = sched::ParseBestParams("used_bonus=5");
  ASSERT_TRUE(params.ok());
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    sched::ClusterState state(sched::ClusterStateOptions{seed});
    auto used = state.AddNode(model::MakeNode("used", "V100", 8, CpuMilli(64000), MemoryMib(1024)));
    auto empty =
        state.AddNode(model::MakeNode("empty", "V100", 8, CpuMilli(64000), MemoryMib(1024)));
    ASSERT_TRUE(used.ok() && empty.ok());
    auto policy = sched::CreatePolicy(
        "best", sched::PolicyContext{{sched::TypicalTask{1, 1000, 1000, {}, 1}}, *params});
    ASSERT_TRUE(policy.ok());
    SeededRng rng(seed);
    sched::Placer placer(state, **policy, rng);
    const auto one_gpu = placer.Resolve(model::MakeResources(1, 1000, 1000, 1));
    ASSERT_TRUE(placer.PlaceOn(*used, one_gpu).has_value());
    auto next = placer.Place(one_gpu);
    ASSERT_TRUE(next.has_value());
    EXPECT_EQ(next->node, *used) << "seed " << seed;
  }
}

// The stranding tests' cluster: "gpus-free" (G2: 8 free GPUs, 96 cores, 384 GiB) and
// "gpus-taken" (T4: 104 cores, 512 GiB, both GPUs taken). Returns the name of the node `task`
// goes to under `policy_name` with `context`, nodes tied in `seed`'s order ("" if it fails).
std::string NodeChosenBesideTakenGpus(const std::string& policy_name,
                                      const sched::PolicyContext& context, uint64_t seed,
                                      const model::TaskResources& task) {
  sched::ClusterState state(sched::ClusterStateOptions{seed});
  auto gpus_free =
      state.AddNode(model::MakeNode("gpus-free", "G2", 8, CpuMilli(96000), MemoryMib(393216)));
  auto gpus_taken =
      state.AddNode(model::MakeNode("gpus-taken", "T4", 2, CpuMilli(104000), MemoryMib(524288)));
  auto policy = sched::CreatePolicy(policy_name, context);
  if (!gpus_free.ok() || !gpus_taken.ok() || !policy.ok()) return "";
  SeededRng rng(seed);
  sched::Placer placer(state, **policy, rng);
  if (!placer.PlaceOn(*gpus_taken, placer.Resolve(model::MakeResources(2, 1000, 1000, 1)))) {
    return "";
  }
  auto placed = placer.Place(placer.Resolve(task));
  return placed ? state.node(placed->node).name : "";
}

// The CPU-stranding term: a CPU-only task that fits both nodes goes to the node whose GPUs are
// all taken, whatever the tie order, rather than taking the cores that the free GPUs of the
// other node need (typical tasks ask 12 cores per GPU; 96 cores back 8 GPUs, 80 do not). fgd sees
// no difference (every typical task still fits both nodes) and follows the node permutation.
TEST(FillBest, CpuOnlyTaskLeavesGpuNodesTheirCores) {
  const sched::PolicyContext context{{sched::TypicalTask{1, 1000, 12000, {}, 1}}, {}};
  const auto cpu_only = model::MakeResources(0, 0, 16000, 1);
  int fgd_on_gpu_node = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    EXPECT_EQ(NodeChosenBesideTakenGpus("best", context, seed, cpu_only), "gpus-taken")
        << "seed " << seed;
    fgd_on_gpu_node += NodeChosenBesideTakenGpus("fgd", context, seed, cpu_only) == "gpus-free";
  }
  EXPECT_GT(fgd_on_gpu_node, 0);  // the scenario is a tie for fgd
}

// The memory-stranding term: a CPU-only task asking much memory goes to the node whose GPUs are
// all taken, whatever the tie order, rather than taking the memory that the free GPUs of the
// other node need (typical tasks ask 48 GiB per GPU; 384 GiB back 8 GPUs, 320 GiB do not). With
// the CPU term alone (the task's cores strand nothing) it is a tie that follows the permutation.
// (The unusable-capacity term, which also sees memory, is off in both.)
TEST(FillBest, MemoryHungryTaskLeavesGpuNodesTheirMemory) {
  auto with_memory = sched::ParseBestParams("memory_weight=2,usable_weight=0");
  auto without = sched::ParseBestParams("memory_weight=0,usable_weight=0");
  ASSERT_TRUE(with_memory.ok() && without.ok());
  const std::vector<sched::TypicalTask> typical = {{1, 1000, 1000, {}, 1, 49152}};
  const auto memory_hungry = model::MakeResources(0, 0, 1000, 65536);
  int without_on_gpu_node = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    EXPECT_EQ(NodeChosenBesideTakenGpus("best", sched::PolicyContext{typical, *with_memory}, seed,
                                        memory_hungry),
              "gpus-taken")
        << "seed " << seed;
    without_on_gpu_node +=
        NodeChosenBesideTakenGpus("best", sched::PolicyContext{typical, *without}, seed,
                                  memory_hungry) == "gpus-free";
  }
  EXPECT_GT(without_on_gpu_node, 0);  // the scenario is a tie without the memory term
}

// The unusable-capacity term: the typical task asks 2 whole GPUs, so a 1-GPU task goes to the
// node with 3 free GPUs (leaving 2, one more place) rather than break a pair of the node with 4
// (leaving 3, of which one no typical task can use), whatever the tie order. FGD's F is 0 on
// both (a pair fits before and after), so without the term it is a tie that follows the
// permutation.
TEST(FillBest, OneGpuTaskKeepsPairsWhole) {
  auto without = sched::ParseBestParams("usable_weight=0");
  ASSERT_TRUE(without.ok());
  const std::vector<sched::TypicalTask> typical = {{2, 1000, 1000, {}, 1}};
  const auto chosen = [&](const sched::BestParams& params, uint64_t seed) -> std::string {
    sched::ClusterState state(sched::ClusterStateOptions{seed});
    auto three =
        state.AddNode(model::MakeNode("three", "V100", 4, CpuMilli(64000), MemoryMib(1024)));
    auto four = state.AddNode(model::MakeNode("four", "V100", 4, CpuMilli(64000), MemoryMib(1024)));
    auto policy = sched::CreatePolicy("best", sched::PolicyContext{typical, params});
    if (!three.ok() || !four.ok() || !policy.ok()) return "";
    SeededRng rng(seed);
    sched::Placer placer(state, **policy, rng);
    const auto one_gpu = placer.Resolve(model::MakeResources(1, 1000, 1000, 1));
    if (!placer.PlaceOn(*three, one_gpu)) return "";
    auto placed = placer.Place(one_gpu);
    return placed ? state.node(placed->node).name : "";
  };
  int without_on_four = 0;
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    EXPECT_EQ(chosen(sched::BestParams{}, seed), "three") << "seed " << seed;
    without_on_four += chosen(*without, seed) == "four";
  }
  EXPECT_GT(without_on_four, 0);  // the scenario is a tie without the term
}

// The stranding rule: the typical tasks are whole GPUs and 500-milli shares, so a GPU left
// with under 500 free milli is stranded. A 500 share on the node whose GPU has 600 free leaves
// 100 that no typical task can use; on the fresh node it leaves 500, one more share. F prefers
// the 600 node (it keeps the fresh GPU whole, 8 points ahead); 100 stranded milli at
// strand_levels=100 cost 10 points, so the share goes to the fresh node. At strand_share=0.6 the
// 500 left on the fresh GPU counts as stranded too (the 500 shares are half the typical tasks),
// and F decides again. With the lookahead (strand_expect=1) the partly used GPU's 600 would
// end with 100 anyway (one more share), so filling it adds no expected waste, and F decides.
TEST(FillBest, ShareAvoidsStrandingAFraction) {
  const std::vector<sched::TypicalTask> typical = {{1, 1000, 1000, {}, 100, 1},
                                                   {1, 500, 1000, {}, 100, 1}};
  const auto chosen = [&](std::string_view params_text, uint64_t seed) -> std::string {
    auto params = sched::ParseBestParams(params_text);
    if (!params.ok()) return "";
    sched::ClusterState state(sched::ClusterStateOptions{seed});
    auto partly =
        state.AddNode(model::MakeNode("partly", "V100", 1, CpuMilli(64000), MemoryMib(1024)));
    auto fresh =
        state.AddNode(model::MakeNode("fresh", "V100", 1, CpuMilli(64000), MemoryMib(1024)));
    auto policy = sched::CreatePolicy("best", sched::PolicyContext{typical, *params});
    if (!partly.ok() || !fresh.ok() || !policy.ok()) return "";
    SeededRng rng(seed);
    sched::Placer placer(state, **policy, rng);
    if (!placer.PlaceOn(*partly, placer.Resolve(model::MakeResources(1, 400, 1000, 1)))) {
      return "";
    }
    auto placed = placer.Place(placer.Resolve(model::MakeResources(1, 500, 1000, 1)));
    return placed ? state.node(placed->node).name : "";
  };
  for (uint64_t seed = 1; seed <= 8; ++seed) {
    EXPECT_EQ(chosen("strand_levels=0", seed), "partly") << "seed " << seed;
    EXPECT_EQ(chosen("strand_levels=100,strand_expect=0", seed), "fresh") << "seed " << seed;
    EXPECT_EQ(chosen("strand_levels=100,strand_expect=0,strand_share=0.6", seed), "partly")
        << "seed " << seed;
    EXPECT_EQ(chosen("strand_levels=100,strand_expect=1", seed), "partly") << "seed " << seed;
  }
}

// The stranding rule's table (ExpectedWasteTable), a = strand_expect, waste(f) = (1 − a) ×
// (f if stranded else 0) + a × E(f). Typical tasks {500-milli share, whole GPU}, equal counts:
// a remainder under 500 is stranded (the shares are half the tasks). E(f) = f below 500; for
// 500 ≤ f < 1000 only the share fits, E(f) = E(f − 500): E(500) = E(0) = 0, E(600) = E(100) =
// 100; E(1000) = mean(E(500) = 0, 0 for a whole GPU) = 0. So waste(400) = 400 and waste(500) = 0
// for every a, waste(600) = 100a, waste(1000) = 0. With a 600 share instead: stranded under
// 600, E(700) = E(100) = 100, E(1000) = mean(E(400) = 400, 0) = 200, so waste(500) = 500,
// waste(700) = 100a, waste(1000) = 200a. A model no typical task runs on wastes nothing.
TEST(FillBest, ExpectedWasteTableFollowsTheLookahead) {
  sched::ClusterState state(sched::ClusterStateOptions{1});
  ASSERT_TRUE(
      state.AddNode(model::MakeNode("v", "V100", 1, CpuMilli(64000), MemoryMib(1024))).ok());
  ASSERT_TRUE(state.AddNode(model::MakeNode("t", "T4", 1, CpuMilli(64000), MemoryMib(1024))).ok());
  const int v100 = state.ModelId("V100"), t4 = state.ModelId("T4");
  const auto table = [&](int share, std::vector<std::string> models, double a, int model) {
    const std::vector<sched::TypicalTask> typical = {{1, 1000, 1000, models, 100, 1},
                                                     {1, share, 1000, models, 100, 1}};
    sched::BestParams params;
    params.strand_expect = a;
    return sched::ExpectedWasteTable(typical, params, state, model);
  };
  for (const double a : {0.0, 0.5, 1.0}) {
    const std::vector<double> w500 = table(500, {}, a, v100);
    ASSERT_EQ(w500.size(), 1001u);
    EXPECT_DOUBLE_EQ(w500[400], 400) << "a=" << a;
    EXPECT_DOUBLE_EQ(w500[500], 0) << "a=" << a;
    EXPECT_DOUBLE_EQ(w500[600], 100 * a) << "a=" << a;
    EXPECT_DOUBLE_EQ(w500[1000], 0) << "a=" << a;
    const std::vector<double> w600 = table(600, {}, a, v100);
    EXPECT_DOUBLE_EQ(w600[500], 500) << "a=" << a;
    EXPECT_DOUBLE_EQ(w600[700], 100 * a) << "a=" << a;
    EXPECT_DOUBLE_EQ(w600[1000], 200 * a) << "a=" << a;
    const std::vector<double> elsewhere = table(500, {"T4"}, a, v100);
    EXPECT_EQ(elsewhere, std::vector<double>(1001, 0.0)) << "a=" << a;
    EXPECT_DOUBLE_EQ(table(500, {"T4"}, a, t4)[600], 100 * a) << "a=" << a;
  }
}

// Score of a `share`-milli task under best with `params_text` and the typical tasks {500-milli
// share, whole GPU} on a one-GPU node with `taken` milli of its GPU taken (INT_MIN on failure).
int OneGpuShareScore(std::string_view params_text, int taken, int share) {
  const std::vector<sched::TypicalTask> typical = {{1, 1000, 1000, {}, 100, 1},
                                                   {1, 500, 1000, {}, 100, 1}};
  auto params = sched::ParseBestParams(params_text);
  if (!params.ok()) return std::numeric_limits<int>::min();
  sched::ClusterState state(sched::ClusterStateOptions{1});
  auto node = state.AddNode(model::MakeNode("n", "V100", 1, CpuMilli(64000), MemoryMib(1024)));
  auto policy = sched::CreatePolicy("best", sched::PolicyContext{typical, *params});
  if (!node.ok() || !policy.ok()) return std::numeric_limits<int>::min();
  SeededRng rng(1);
  sched::Placer placer(state, **policy, rng);
  if (taken > 0 &&
      !placer.PlaceOn(*node, placer.Resolve(model::MakeResources(1, taken, 1000, 1)))) {
    return std::numeric_limits<int>::min();
  }
  const sched::TaskRequest task = placer.Resolve(model::MakeResources(1, share, 1000, 1));
  (*policy)->OnModelsChanged(state);
  return (*policy)->Score(sched::ViewOf(state.node(*node), state), task);
}

// At strand_expect=0 the score is session 43's threshold rule: the score without the rule
// (strand_levels=0) minus strand_levels × (stranded milli after − before) / 1000, a remainder
// under 500 being stranded. 600 free, a 500 share: 0 → 100 stranded, −10 at strand_levels=100;
// 1000 free, a 500 share: 0 → 0, no change; 400 free, a 300 share: 400 → 100, +30. The shipped
// defaults (strand_levels=150, strand_expect=0.5): 700 free, a 300 share: waste(700) = 0.5 ×
// E(200) = 100 → waste(400) = 400, −150 × 300/1000 = −45; 1000 free, a 500 share: 0 → 0.
TEST(FillBest, ZeroStrandExpectScoresAsTheThresholdRule) {
  const auto base = [](int taken, int share) {
    return OneGpuShareScore("strand_levels=0", taken, share);
  };
  const std::string_view rule = "strand_levels=100,strand_expect=0";
  for (const auto& [taken, share, points] :
       std::vector<std::tuple<int, int, int>>{{400, 500, -10}, {0, 500, 0}, {600, 300, 30}}) {
    ASSERT_NE(base(taken, share), std::numeric_limits<int>::min());
    EXPECT_EQ(OneGpuShareScore(rule, taken, share), base(taken, share) + points)
        << "taken " << taken << ", share " << share;
  }
  auto shipped = sched::ParseBestParams("strand_levels=150,strand_expect=0.5");
  ASSERT_TRUE(shipped.ok());
  EXPECT_EQ(*shipped, sched::BestParams{});
  EXPECT_EQ(OneGpuShareScore("", 300, 300), base(300, 300) - 45);
  EXPECT_EQ(OneGpuShareScore("", 0, 500), base(0, 500));
}

TEST(FillBest, ParamsAreValidatedByName) {
  auto defaults = sched::ParseBestParams("");
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(*defaults, sched::BestParams{});
  auto round_trip = sched::ParseBestParams(sched::FormatBestParams(sched::BestParams{}));
  ASSERT_TRUE(round_trip.ok());
  EXPECT_EQ(*round_trip, sched::BestParams{});
  auto set = sched::ParseBestParams("scale=2000, levels=50");
  ASSERT_TRUE(set.ok());
  EXPECT_EQ(set->scale, 2000);
  EXPECT_EQ(set->levels, 50);
  EXPECT_EQ(set->demand_exp, sched::BestParams{}.demand_exp);
  for (const auto& [text, names] :
       std::vector<std::pair<std::string, std::string>>{{"scale=1", "scale"},
                                                        {"levels=2.5", "levels"},
                                                        {"demand_exp=x", "demand_exp"},
                                                        {"used_bonus=-1", "used_bonus"},
                                                        {"used_bonus=1.5", "used_bonus"},
                                                        {"cpu_weight=101", "cpu_weight"},
                                                        {"memory_weight=-0.5", "memory_weight"},
                                                        {"usable_weight=101", "usable_weight"},
                                                        {"strand_levels=1001", "strand_levels"},
                                                        {"strand_share=1.5", "strand_share"},
                                                        {"strand_expect=-0.1", "strand_expect"},
                                                        {"strand_expect=1.1", "strand_expect"},
                                                        {"speed=1", "speed"},
                                                        {"scale", "scale"}}) {
    auto r = sched::ParseBestParams(text);
    ASSERT_FALSE(r.ok()) << text;
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(names), std::string::npos) << r.status().message();
  }
}

// The published numbers of the FGD paper on the openb trace (fill-experiment.md): bestfit within
// ±0.7 of 7.09, fgd at most 5.0, random within ±1.5 of 13.75 (median of seeds 42-51 at 100%).
TEST(Fill, ReproducesThePublishedOpenbResults) {
  const char* traces = std::getenv("CORRAL_SHARED_TRACES");
  if (!traces || !std::filesystem::exists(std::string(traces) + "/openb_pod_list_default.csv")) {
    GTEST_SKIP() << "../shared/traces is absent; skipping the openb reproduction";
  }
  auto nodes = ReadOpenbNodes(std::string(traces) + "/openb_node_list_gpu_node.csv");
  auto pods = ReadOpenbPods(std::string(traces) + "/openb_pod_list_default.csv");
  ASSERT_TRUE(nodes.ok() && pods.ok());
  std::vector<model::TaskResources> tasks;
  for (const auto& j : pods->jobs) tasks.push_back(j.job.resources);
  std::vector<uint64_t> seeds;
  for (uint64_t s = 42; s <= 51; ++s) seeds.push_back(s);
  auto r = RunFillMatrix(*nodes, tasks, {"bestfit", "fgd", "random"}, seeds, 1.3, 0);
  ASSERT_TRUE(r.ok());
  auto summary = FillJson(*r)["summary"];
  auto median_at_100 = [&](const std::string& policy) {
    for (const auto& s : summary) {
      if (s["policy"] == policy) return s["unallocated_gpu_pct_median"]["100"].get<double>();
    }
    return -1.0;
  };
  EXPECT_NEAR(median_at_100("bestfit"), 7.09, 0.7);
  EXPECT_LE(median_at_100("fgd"), 5.0);
  EXPECT_NEAR(median_at_100("random"), 13.75, 1.5);
}

}  // namespace
}  // namespace corral::sim
