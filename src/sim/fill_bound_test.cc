#include "sim/fill_bound.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <set>

#include "common/rng.h"
#include "sched/placement_policy.h"
#include "sim/fill_tightness.h"
#include "sim/report.h"

namespace corral::sim {
namespace {

// The most GPU milli any subset of `tasks` placed on `nodes` at once holds, by exhaustive
// search: each task is left out or placed on a node where its model, CPU and memory fit, a share
// on any GPU with enough free milli, k whole GPUs on k fully free ones (which k does not matter).
int64_t BruteForceOptimum(const std::vector<model::Node>& nodes,
                          const std::vector<model::TaskResources>& tasks) {
  struct Free {
    std::vector<int64_t> gpu;
    int64_t cpu, memory;
  };
  std::vector<Free> free;
  for (const auto& n : nodes) {
    free.push_back(
        Free{std::vector<int64_t>(n.gpus.size(), 1000), n.cpu.value(), n.memory.value()});
  }
  std::function<int64_t(size_t)> best = [&](size_t i) -> int64_t {
    if (i == tasks.size()) return 0;
    const model::TaskResources& t = tasks[i];
    int64_t out = best(i + 1);
    for (size_t n = 0; n < nodes.size(); ++n) {
      Free& f = free[n];
      const auto& models = t.gpu_models;
      if (!models.empty() &&
          std::find(models.begin(), models.end(), nodes[n].gpu_model) == models.end()) {
        continue;
      }
      if (t.cpu.value() > f.cpu || t.memory.value() > f.memory) continue;
      f.cpu -= t.cpu.value();
      f.memory -= t.memory.value();
      if (t.IsShare()) {
        for (int64_t& g : f.gpu) {
          if (g < t.gpu_milli.value()) continue;
          g -= t.gpu_milli.value();
          out = std::max(out, t.gpu_milli.value() + best(i + 1));
          g += t.gpu_milli.value();
        }
      } else {
        std::vector<int64_t*> whole;
        for (int64_t& g : f.gpu) {
          if (g == 1000 && static_cast<int64_t>(whole.size()) < t.gpus.value()) whole.push_back(&g);
        }
        if (static_cast<int64_t>(whole.size()) == t.gpus.value()) {
          for (int64_t* g : whole) *g = 0;
          out = std::max(out, t.TotalMilli().value() + best(i + 1));
          for (int64_t* g : whole) *g = 1000;
        }
      }
      f.cpu += t.cpu.value();
      f.memory += t.memory.value();
    }
    return out;
  };
  return best(0);
}

double Bound(const std::vector<model::Node>& nodes,
             const std::vector<model::TaskResources>& tasks) {
  auto b = PlaceableMilliBound(nodes, tasks);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? *b : 0;
}

int64_t Exact(const std::vector<model::Node>& nodes,
              const std::vector<model::TaskResources>& tasks) {
  auto e = ExactPlaceableMilli(nodes, tasks, 60);
  EXPECT_TRUE(e.ok()) << e.status().message();
  if (!e.ok()) return -1;
  EXPECT_EQ(e->status, ExactStatus::kOptimal);
  return e->milli;
}

model::Node Node(const std::string& model, int gpus, int64_t cores, int64_t memory_gib = 64) {
  return model::MakeNode("n", model, gpus, CpuMilli(cores * 1000), MemoryMib(memory_gib * 1024));
}

model::TaskResources Task(int gpus, int milli, int64_t cores, std::vector<std::string> pins = {}) {
  return model::MakeResources(gpus, milli, cores * 1000, 1024, std::move(pins));
}

// Instances whose optimum the LP reaches exactly: the bound equals the brute-force optimum.
TEST(FillBound, ExactOnSmallInstancesItModels) {
  struct Case {
    const char* what;
    std::vector<model::Node> nodes;
    std::vector<model::TaskResources> tasks;
    int64_t optimum;
  };
  const std::vector<Case> cases = {
      {"pins: two tasks ask a model the cluster lacks",
       {Node("T4", 2, 16)},
       {Task(1, 1000, 1, {"V100"}), Task(1, 1000, 1, {"V100"}), Task(1, 1000, 1, {"T4", "A10"})},
       1000},
      {"CPU binds: 10 of 16 cores each, so one of the two 1-GPU tasks fits",
       {Node("T4", 2, 16)},
       {Task(1, 1000, 10), Task(1, 1000, 10)},
       1000},
      {"k-GPU tasks need k GPUs on one node: the 4-GPU task fits on neither 2-GPU node",
       {Node("T4", 2, 16), Node("T4", 2, 16)},
       {Task(4, 1000, 1), Task(2, 1000, 1)},
       2000},
      {"shares of 600 cannot share a GPU",
       {Node("T4", 2, 16)},
       {Task(1, 600, 1), Task(1, 600, 1), Task(1, 600, 1)},
       1200},
      {"a whole GPU and two shares of 600 on two GPUs",
       {Node("T4", 2, 16)},
       {Task(1, 1000, 1), Task(1, 600, 1), Task(1, 600, 1)},
       1600},
      {"memory binds",
       {Node("T4", 2, 64, /*memory_gib=*/1)},
       {model::MakeResources(1, 1000, 1000, 700), model::MakeResources(1, 1000, 1000, 700)},
       1000},
  };
  for (const Case& c : cases) {
    EXPECT_EQ(BruteForceOptimum(c.nodes, c.tasks), c.optimum) << c.what;
    EXPECT_NEAR(Bound(c.nodes, c.tasks), static_cast<double>(c.optimum), 1e-6) << c.what;
    EXPECT_EQ(Exact(c.nodes, c.tasks), c.optimum) << c.what;
  }
}

// A random tiny instance: 1-3 T4 or V100 nodes of 1, 2 or 4 GPUs, 4-16 cores, 1-8 GiB, and 2-6
// tasks (shares of 100-1000 milli, a quarter k-GPU, a quarter pinned to a model).
std::pair<std::vector<model::Node>, std::vector<model::TaskResources>> RandomInstance(
    SeededRng& rng) {
  const std::vector<std::string> models = {"T4", "V100"};
  const int gpu_counts[] = {1, 2, 4};
  const int shares[] = {100, 250, 300, 400, 500, 600, 700, 1000};
  std::vector<model::Node> nodes;
  for (size_t n = 1 + rng.Uniform(3); n > 0; --n) {
    nodes.push_back(Node(models[rng.Uniform(2)], gpu_counts[rng.Uniform(3)],
                         4 + static_cast<int64_t>(rng.Uniform(13)), 1 + rng.Uniform(8)));
  }
  std::vector<model::TaskResources> tasks;
  for (size_t t = 2 + rng.Uniform(5); t > 0; --t) {
    const int gpus = rng.Uniform(4) == 0 ? gpu_counts[rng.Uniform(3)] : 1;
    const int milli = gpus > 1 ? 1000 : shares[rng.Uniform(8)];
    std::vector<std::string> pins;
    if (rng.Uniform(4) == 0) pins.push_back(models[rng.Uniform(2)]);
    tasks.push_back(model::MakeResources(gpus, milli, 1000 * (1 + rng.Uniform(8)),
                                         1024 * (1 + rng.Uniform(4)), pins));
  }
  return {nodes, tasks};
}

// Random tiny instances: the bound is never below the optimum (it is sound), and often equal;
// the exact solver finds the optimum itself.
TEST(FillBound, NeverBelowTheBruteForceOptimum) {
  SeededRng rng(7);
  int exact = 0;
  constexpr int kInstances = 300;
  for (int i = 0; i < kInstances; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const double optimum = static_cast<double>(BruteForceOptimum(nodes, tasks));
    const double bound = Bound(nodes, tasks);
    ASSERT_GE(bound, optimum - 1e-6) << "instance " << i;
    ASSERT_EQ(static_cast<double>(Exact(nodes, tasks)), optimum) << "instance " << i;
    if (bound < optimum + 1e-6) ++exact;
  }
  // Not a contract, a tripwire: the relaxation is tight on most tiny instances.
  EXPECT_GE(exact, kInstances / 2);
}

// A pricing limit no tiny instance reaches, however loaded the machine: the default (10 s of wall
// time) could time a pricing problem out on a starved test process, and a timed-out pricing is
// bounded loosely, which the tests below would read as a wrong bound.
constexpr double kUntimedPricingS = 3600;

ConfigurationBound Configuration(const std::vector<model::Node>& nodes,
                                 const std::vector<model::TaskResources>& tasks,
                                 const ConfigurationOptions& options = {
                                     .pricing_time_limit_s = kUntimedPricingS}) {
  auto b = ConfigurationMilliBound(nodes, tasks, options);
  EXPECT_TRUE(b.ok()) << b.status().message();
  return b.ok() ? *b : ConfigurationBound{};
}

// Where GPU and CPU bind together, the configuration LP sees it and the dual feasible rows (one
// resource at a time) do not: on one 1-GPU node, two 500-milli shares of 6 of 10 cores cannot pair
// (CPU), nor either with a 600-milli share (GPU), so one task fits, the 600 (OPT 600). The old
// LP takes the 500 and half the 600 (800).
TEST(ConfigurationBound, TighterWhereGpuAndCpuBindTogether) {
  const std::vector<model::Node> nodes = {Node("T4", 1, 10)};
  const std::vector<model::TaskResources> tasks = {Task(1, 500, 6), Task(1, 500, 6),
                                                   Task(1, 600, 1)};
  EXPECT_EQ(BruteForceOptimum(nodes, tasks), 600);
  EXPECT_NEAR(Bound(nodes, tasks), 800, 1e-6);
  const ConfigurationBound config = Configuration(nodes, tasks);
  EXPECT_TRUE(config.converged());
  EXPECT_NEAR(config.milli, 600, 0.1);  // the tolerance added to CBC's bounds only raises it
  EXPECT_GE(config.milli, 600);
}

// Random tiny instances: OPT ≤ the configuration bound ≤ the old LP's (up to the tolerance the
// configuration bound adds), whether the column generation converges or is cut off after one
// master solve (the Lagrangian bound), and it is strictly tighter on some.
TEST(ConfigurationBound, BetweenTheOptimumAndTheLp) {
  SeededRng rng(11);
  int tighter = 0, converged = 0;
  constexpr int kInstances = 150;
  for (int i = 0; i < kInstances; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const double optimum = static_cast<double>(BruteForceOptimum(nodes, tasks));
    const double lp = Bound(nodes, tasks);
    const ConfigurationBound config = Configuration(nodes, tasks);
    ASSERT_GE(config.milli, optimum - 1e-6) << "instance " << i;
    const ConfigurationBound cut = Configuration(
        nodes, tasks, {.max_iterations = 1, .pricing_time_limit_s = kUntimedPricingS});
    ASSERT_GE(cut.milli, optimum - 1e-6) << "instance " << i;
    ASSERT_GE(cut.milli, config.milli - 0.5) << "instance " << i;
    // The old LP has every configuration's rows as valid inequalities only in aggregate.
    ASSERT_LE(config.milli, lp + 0.5) << "instance " << i;
    if (config.milli < lp - 0.5) ++tighter;
    if (config.converged()) ++converged;
  }
  EXPECT_EQ(converged, kInstances);
  EXPECT_GT(tighter, 0);
}

// A CBC pricing problem cut off by its time limit, before CBC has a root bound, or a pricing
// search cut off by its node budget, still gives a sound bound: the configuration bound stays
// ≥ OPT, and timed-out pricing never counts as converged.
TEST(ConfigurationBound, SoundWhenPricingTimesOut) {
  SeededRng rng(13);
  int search_cut = 0;
  constexpr int kInstances = 60;
  for (int i = 0; i < kInstances; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const double optimum = static_cast<double>(BruteForceOptimum(nodes, tasks));
    const ConfigurationBound cut = Configuration(
        nodes, tasks, {.pricing = ConfigurationPricing::kCbc, .pricing_time_limit_s = 1e-9});
    ASSERT_GE(cut.milli, optimum - 1e-6) << "instance " << i;
    // One master solve: the bound rests on the pricing bounds alone.
    const ConfigurationBound once = Configuration(
        nodes, tasks,
        {.max_iterations = 1, .pricing = ConfigurationPricing::kCbc, .pricing_time_limit_s = 1e-9});
    ASSERT_GE(once.milli, optimum - 1e-6) << "instance " << i;
    // Converged claims the configuration LP's optimum, which the untimed generation reaches.
    if (cut.converged()) {
      ASSERT_NEAR(cut.milli, Configuration(nodes, tasks).milli, 0.5) << "instance " << i;
    }
    // The same for the exact search cut off after a few nodes (its open nodes bound it).
    for (size_t budget : {size_t{0}, size_t{2}}) {
      const ConfigurationBound search = Configuration(nodes, tasks, {.pricing_nodes = budget});
      ASSERT_GE(search.milli, optimum - 1e-6) << "instance " << i << " budget " << budget;
      if (!search.converged()) ++search_cut;
    }
  }
  EXPECT_GT(search_cut, 0);  // the budgets do cut searches off
}

// The exact search and CBC price alike: on random tiny instances both converge to the same
// configuration LP optimum (up to the tolerance added to the pricing bounds).
TEST(ConfigurationBound, SearchPricingMatchesCbcPricing) {
  SeededRng rng(19);
  constexpr int kInstances = 150;
  for (int i = 0; i < kInstances; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const ConfigurationBound search = Configuration(nodes, tasks);
    const ConfigurationBound cbc = Configuration(
        nodes, tasks,
        {.pricing = ConfigurationPricing::kCbc, .pricing_time_limit_s = kUntimedPricingS});
    ASSERT_TRUE(search.converged()) << "instance " << i;
    ASSERT_TRUE(cbc.converged()) << "instance " << i;
    ASSERT_NEAR(search.milli, cbc.milli, 0.5) << "instance " << i;
  }
}

// A time limit stops the column generation with a sound bound, never called converged: one past
// before the first master solve leaves the tasks' total request (nothing holds more), and the
// bound stays above the optimum.
TEST(ConfigurationBound, TimeLimitGivesASoundBoundNotConverged) {
  SeededRng rng(29);
  for (int i = 0; i < 40; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const double optimum = static_cast<double>(BruteForceOptimum(nodes, tasks));
    double requested = 0;
    for (const auto& t : tasks) requested += static_cast<double>(t.TotalMilli().value());
    const ConfigurationBound cut = Configuration(
        nodes, tasks, {.pricing_time_limit_s = kUntimedPricingS, .time_limit_s = 1e-9});
    EXPECT_EQ(cut.stop, ConfigurationStop::kTimeLimit) << "instance " << i;
    EXPECT_FALSE(cut.converged()) << "instance " << i;
    EXPECT_EQ(cut.iterations, 0u) << "instance " << i;
    ASSERT_GE(cut.milli, optimum - 1e-6) << "instance " << i;
    EXPECT_NEAR(cut.milli, requested, 1e-6) << "instance " << i;
    // A generous limit changes nothing.
    const ConfigurationBound untimed = Configuration(nodes, tasks);
    const ConfigurationBound timed = Configuration(
        nodes, tasks, {.pricing_time_limit_s = kUntimedPricingS, .time_limit_s = 3600});
    EXPECT_TRUE(timed.converged()) << "instance " << i;
    EXPECT_DOUBLE_EQ(timed.milli, untimed.milli) << "instance " << i;
  }
}

// The same at the size the bound runs at: 8-GPU nodes (two classes, CPU scarce: 24-32 cores) and
// 30 task shapes of openb's kinds (shares of 100-900 milli and 2-12 cores, whole 1, 2, 4 and 8
// GPUs and 2-8 cores a GPU; 2-64 GiB), one to four tasks each, so that the search's pruning and the
// patterns over eight GPUs are exercised, on an instance where configurations bound tighter than
// the LP.
TEST(ConfigurationBound, SearchPricingMatchesCbcPricingOnEightGpuNodes) {
  SeededRng rng(23);
  const std::vector<model::Node> nodes = {Node("A100", 8, 32, 256), Node("A100", 8, 32, 256),
                                          Node("V100", 8, 24, 128)};
  const int wholes[] = {1, 2, 4, 8};
  std::vector<model::TaskResources> tasks;
  for (int shape = 0; shape < 30; ++shape) {
    const bool share = rng.Uniform(5) < 3;
    const int gpus = share ? 1 : wholes[rng.Uniform(4)];
    const int milli = share ? 100 * (1 + static_cast<int>(rng.Uniform(9))) : 1000;
    const int64_t cores = share ? 2 + rng.Uniform(11) : gpus * (2 + rng.Uniform(7));
    const model::TaskResources task =
        model::MakeResources(gpus, milli, 1000 * cores, 2048 * (1 + rng.Uniform(32)), {});
    for (size_t n = 1 + rng.Uniform(4); n > 0; --n) tasks.push_back(task);
  }
  const ConfigurationBound search = Configuration(nodes, tasks);
  const ConfigurationBound cbc = Configuration(
      nodes, tasks,
      {.pricing = ConfigurationPricing::kCbc, .pricing_time_limit_s = kUntimedPricingS});
  ASSERT_TRUE(search.converged());
  ASSERT_TRUE(cbc.converged());
  EXPECT_NEAR(search.milli, cbc.milli, 0.5);
  EXPECT_LT(search.milli, Bound(nodes, tasks) - 0.5);  // an instance where configurations matter
}

// The exact solve cut off before CBC has a bound still brackets OPT: the placement it found
// below, its upper bound above.
TEST(FillBound, ExactCutOffBracketsTheOptimum) {
  SeededRng rng(17);
  int open = 0;
  constexpr int kInstances = 60;
  for (int i = 0; i < kInstances; ++i) {
    const auto [nodes, tasks] = RandomInstance(rng);
    const int64_t optimum = BruteForceOptimum(nodes, tasks);
    auto cut = ExactPlaceableMilli(nodes, tasks, 1e-9);
    ASSERT_TRUE(cut.ok()) << cut.status().message();
    ASSERT_LE(cut->milli, optimum) << "instance " << i;
    ASSERT_GE(cut->upper_milli, optimum) << "instance " << i;
    if (cut->status == ExactStatus::kTimeLimit) ++open;
  }
  EXPECT_GT(open, 0);  // the limit did cut solves off
}

// T4 and V100M32 nodes of 4 or 8 GPUs, 48 cores each.
std::vector<model::Node> MixedCluster() {
  const std::pair<const char*, int> kinds[] = {{"T4", 4},      {"T4", 8},      {"T4", 4},
                                               {"V100M32", 8}, {"V100M32", 4}, {"V100M32", 8}};
  std::vector<model::Node> nodes;
  for (const auto& [gpu_model, gpus] : kinds) {
    nodes.push_back(model::MakeNode("n" + std::to_string(nodes.size()), gpu_model, gpus,
                                    CpuMilli(48000), MemoryMib(262144)));
  }
  return nodes;
}

std::vector<model::TaskResources> MixedWorkload() {
  std::vector<model::TaskResources> tasks;
  for (int i = 0; i < 60; ++i) {
    std::vector<std::string> pins;
    if (i % 7 == 0) pins.push_back("T4");
    if (i % 5 == 0) {
      tasks.push_back(model::MakeResources(1, 300 + 100 * (i % 6), 6000, 1024, pins));
    } else {
      const int gpus = 1 << (i % 4);
      tasks.push_back(model::MakeResources(gpus, 1000, 8000 * gpus, 1024, pins));
    }
  }
  return tasks;
}

// Every policy, at every step of the same arrival sequence, leaves at least the bound
// unallocated; the bound itself never drops below the ideal max(0, 100 − arrived).
TEST(FillBound, NoPolicyBeatsTheBound) {
  auto bounds = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3);
  ASSERT_TRUE(bounds.ok()) << bounds.status().message();
  ASSERT_FALSE(bounds->solves.empty());
  for (const ConfigurationSolve& s : bounds->solves) EXPECT_TRUE(s.bound.converged()) << s.step;
  const FillResult* bound = &bounds->configuration;
  // The raw configuration bound (not the curve, which also takes the LP's) over the tasks
  // presented up to each checkpoint.
  const double capacity = 36 * 1000;  // MixedCluster's GPUs
  SeededRng rng(42);
  const auto tasks = TuneWorkload(MixedWorkload(), static_cast<int64_t>(capacity), 1.3, rng);
  ASSERT_EQ(tasks.size(), bound->steps.size());
  std::map<size_t, double> raw;  // checkpoint → ConfigurationMilliBound
  for (size_t k : BoundCheckpoints(bound->steps)) {
    const std::vector<model::TaskResources> first(
        tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(k + 1));
    raw[k] = Configuration(MixedCluster(), first).milli;
  }
  for (const FillStep& s : bound->steps) {
    EXPECT_GE(s.unallocated_pct, std::max(0.0, 100.0 - s.arrived_pct) - 1e-9);
  }
  for (const std::string& policy : sched::PolicyNames()) {
    auto fill = RunFill(MixedCluster(), MixedWorkload(), FillConfig{policy, 42, 1.3});
    ASSERT_TRUE(fill.ok()) << policy << ": " << fill.status().message();
    ASSERT_EQ(fill->steps.size(), bound->steps.size()) << policy;
    for (size_t t = 0; t < fill->steps.size(); ++t) {
      ASSERT_DOUBLE_EQ(fill->steps[t].arrived_pct, bound->steps[t].arrived_pct) << policy;
      EXPECT_GE(fill->steps[t].unallocated_pct, bound->steps[t].unallocated_pct - 1e-9)
          << policy << " step " << t;
    }
    for (const auto& [k, milli] : raw) {
      const double held = (100.0 - fill->steps[k].unallocated_pct) / 100.0 * capacity;
      EXPECT_LE(held, milli + 1e-6) << policy << " checkpoint " << k;
    }
    for (int x : kFillReportLoads) {
      EXPECT_GE(fill->At(x).unallocated_pct, bound->At(x).unallocated_pct - 1e-9) << policy;
    }
  }
  // The bound says more than the ideal here: at 8 cores per GPU, a 48-core node of 8 GPUs holds
  // at most 6 GPUs' worth of tasks.
  EXPECT_GT(bound->At(130).unallocated_pct, 0.0);
}

// Every registered policy's fill of the mixed workload (seed 42, tuned to 130%) leaves at least
// the bound curve `steps` unallocated at every step.
void ExpectEveryPolicyAbove(const std::vector<FillStep>& steps) {
  for (const std::string& policy : sched::PolicyNames()) {
    auto fill = RunFill(MixedCluster(), MixedWorkload(), FillConfig{policy, 42, 1.3});
    ASSERT_TRUE(fill.ok()) << policy << ": " << fill.status().message();
    for (size_t t = 0; t < fill->steps.size(); ++t) {
      EXPECT_GE(fill->steps[t].unallocated_pct, steps[t].unallocated_pct - 1e-9)
          << policy << " step " << t;
    }
  }
}

// Solved at one checkpoint (at_load 100), started from the policies' fills: one checkpoint,
// converged; at and before it the curve is the smaller of the LP's and the raw configuration bound
// at the checkpoint (what a fresh master without the policies' columns converges to), after it the
// LP's alone; every policy stays above it.
TEST(FillBound, OneCheckpointFromThePoliciesFills) {
  auto all = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3);
  auto one = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3, {.at_loads = {100}});
  ASSERT_TRUE(all.ok()) << all.status().message();
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_EQ(one->solves.size(), 1u);
  EXPECT_TRUE(one->solves[0].bound.converged());
  EXPECT_EQ(one->solves[0].load, 100);
  const std::vector<FillStep>& steps = one->configuration.steps;
  std::optional<size_t> at;
  for (size_t k : BoundCheckpoints(steps)) {
    if (std::nearbyint(steps[k].arrived_pct) <= 100) at = k;
  }
  ASSERT_TRUE(at.has_value());
  const double capacity = 36 * 1000;  // MixedCluster's GPUs
  SeededRng rng(42);
  const auto tasks = TuneWorkload(MixedWorkload(), static_cast<int64_t>(capacity), 1.3, rng);
  const std::vector<model::TaskResources> first(
      tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(*at + 1));
  const double raw = Configuration(MixedCluster(), first).milli;
  double arrived = 0;
  for (size_t t = 0; t < steps.size(); ++t) {
    arrived += static_cast<double>(tasks[t].TotalMilli().value());
    const double lp = one->lp.steps[t].unallocated_pct;
    ASSERT_DOUBLE_EQ(lp, all->lp.steps[t].unallocated_pct) << "step " << t;
    if (t > *at) {
      EXPECT_DOUBLE_EQ(steps[t].unallocated_pct, lp) << "step " << t;
      continue;
    }
    const double held = std::min(arrived, raw);
    EXPECT_NEAR(steps[t].unallocated_pct,
                std::max(lp, std::max(0.0, 100.0 - 100.0 * held / capacity)), 0.01)
        << "step " << t;
  }
  ExpectEveryPolicyAbove(steps);
}

// Solved at several loads (90, 100, 110, 130): one solve per checkpoint, ascending; each solve's
// bound holds for every step up to it, the 100% solve agrees with a run at 100 alone, and every
// policy stays above the curve. Loads past the last step share its checkpoint (one solve, for the
// largest). A time limit hit at once leaves the LP's curve, the solves not converged.
TEST(FillBound, SeveralLoads) {
  auto one = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3, {.at_loads = {100}});
  auto bands =
      RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3, {.at_loads = {130, 90, 110, 100}});
  ASSERT_TRUE(one.ok()) << one.status().message();
  ASSERT_TRUE(bands.ok()) << bands.status().message();
  // Each load's checkpoint: the last whose arrived load rounds to at most it; a checkpoint two
  // loads share is solved once, for the larger (the tasks here are coarse: two loads share one).
  const std::vector<FillStep>& steps = bands->configuration.steps;
  std::map<size_t, int> expected;
  for (int load : {90, 100, 110, 130}) {
    std::optional<size_t> at;
    for (size_t k : BoundCheckpoints(steps)) {
      if (std::nearbyint(steps[k].arrived_pct) <= load) at = k;
    }
    ASSERT_TRUE(at.has_value()) << load;
    expected[*at] = load;
  }
  ASSERT_GE(expected.size(), 3u);
  ASSERT_EQ(bands->solves.size(), expected.size());
  const double capacity = 36 * 1000;  // MixedCluster's GPUs
  SeededRng rng(42);
  const auto tasks = TuneWorkload(MixedWorkload(), static_cast<int64_t>(capacity), 1.3, rng);
  std::vector<double> arrived;
  double sum = 0;
  for (const auto& t : tasks) arrived.push_back(sum += static_cast<double>(t.TotalMilli().value()));
  size_t i = 0;
  for (const auto& [step, load] : expected) {
    const ConfigurationSolve& s = bands->solves[i++];
    EXPECT_EQ(s.step, step);
    EXPECT_EQ(s.load, load);
    EXPECT_TRUE(s.bound.converged()) << load;
    const double milli = capacity * (100 - s.unallocated_pct) / 100;
    for (size_t t = 0; t <= s.step; ++t) {
      const double bound = std::max(0.0, 100 - 100 * std::min(arrived[t], milli) / capacity);
      ASSERT_GE(steps[t].unallocated_pct, bound - 1e-6) << "load " << load << " step " << t;
    }
  }
  const auto hundred = std::find_if(bands->solves.begin(), bands->solves.end(),
                                    [](const ConfigurationSolve& s) { return s.load == 100; });
  ASSERT_NE(hundred, bands->solves.end());
  EXPECT_EQ(hundred->step, one->solves[0].step);
  EXPECT_NEAR(hundred->unallocated_pct, one->solves[0].unallocated_pct, 0.01);
  ExpectEveryPolicyAbove(steps);

  auto past = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3, {.at_loads = {999, 1000}});
  ASSERT_TRUE(past.ok()) << past.status().message();
  ASSERT_EQ(past->solves.size(), 1u);
  EXPECT_EQ(past->solves[0].load, 1000);
  EXPECT_EQ(past->solves[0].step, tasks.size() - 1);

  auto cut = RunFillBounds(MixedCluster(), MixedWorkload(), 42, 1.3,
                           {.time_limit_s = 1e-9, .at_loads = {90, 100, 110, 130}});
  ASSERT_TRUE(cut.ok()) << cut.status().message();
  ASSERT_EQ(cut->solves.size(), expected.size());
  for (const ConfigurationSolve& s : cut->solves) {
    EXPECT_EQ(s.bound.stop, ConfigurationStop::kTimeLimit);
    EXPECT_NEAR(s.unallocated_pct, std::max(0.0, 100 - s.arrived_pct), 1e-6);
  }
  for (size_t t = 0; t < steps.size(); ++t) {
    EXPECT_NEAR(cut->configuration.steps[t].unallocated_pct, cut->lp.steps[t].unallocated_pct, 1e-9)
        << "step " << t;
  }
}

// The LP re-solved from its last basis gives, at each checkpoint, what a fresh LP over the same
// prefix of the tasks gives.
TEST(FillBound, WarmStartedLpMatchesAFreshOne) {
  auto bound = RunFillBound(MixedCluster(), MixedWorkload(), 42, 1.3);
  ASSERT_TRUE(bound.ok()) << bound.status().message();
  const double capacity = 36 * 1000;  // MixedCluster's GPUs
  SeededRng rng(42);
  const auto tasks = TuneWorkload(MixedWorkload(), static_cast<int64_t>(capacity), 1.3, rng);
  ASSERT_EQ(tasks.size(), bound->steps.size());
  const std::set<size_t> checkpoints = BoundCheckpoints(bound->steps);
  ASSERT_GT(checkpoints.size(), 2u);
  EXPECT_EQ(*checkpoints.rbegin(), tasks.size() - 1);
  double arrived = 0;
  size_t prefix = 0;
  for (size_t k : checkpoints) {
    for (; prefix <= k; ++prefix)
      arrived += static_cast<double>(tasks[prefix].TotalMilli().value());
    const std::vector<model::TaskResources> first(
        tasks.begin(), tasks.begin() + static_cast<std::ptrdiff_t>(k + 1));
    const double fresh = Bound(MixedCluster(), first);
    EXPECT_NEAR(bound->steps[k].unallocated_pct,
                std::max(0.0, 100 - 100 * std::min(arrived, fresh) / capacity), 1e-6)
        << "checkpoint " << k;
  }
}

TEST(FillBound, ErrorsAreClear) {
  auto none = RunFillBound({model::MakeNode("cpu", "", 0, CpuMilli(8000), MemoryMib(1024))},
                           MixedWorkload(), 42, 1.3);
  ASSERT_FALSE(none.ok());
  EXPECT_NE(none.status().message().find("no GPUs"), std::string::npos);
  EXPECT_FALSE(RunFillBound(MixedCluster(), MixedWorkload(), 42, 1e-9).ok());
  // One shape more than the LP may have (each task asks another amount of memory): refused,
  // naming the limit, by the bound and by the fill bound before it tunes the workload.
  std::vector<model::TaskResources> distinct;
  for (size_t i = 0; i <= kMaxBoundShapes; ++i) {
    distinct.push_back(model::MakeResources(1, 500, 1000, 1 + static_cast<int64_t>(i)));
  }
  auto shapes = PlaceableMilliBound(MixedCluster(), distinct);
  ASSERT_FALSE(shapes.ok());
  EXPECT_NE(shapes.status().message().find("kMaxBoundShapes"), std::string::npos);
  auto fill = RunFillBound(MixedCluster(), distinct, 42, 1e-9);
  ASSERT_FALSE(fill.ok());
  EXPECT_NE(fill.status().message().find("kMaxBoundShapes"), std::string::npos);
}

// Several identical nodes, shares of several sizes and whole GPUs, more than fits: the exact
// solver (with its symmetry rows) agrees with brute force, and the bound is not below it.
TEST(FillBound, ExactMatchesBruteForceWithIdenticalNodes) {
  SeededRng rng(11);
  const int shares[] = {200, 300, 500, 700, 1000};
  for (int i = 0; i < 40; ++i) {
    std::vector<model::Node> nodes(3, Node("T4", 2, 8 + static_cast<int64_t>(rng.Uniform(9))));
    std::vector<model::TaskResources> tasks;
    for (size_t t = 5 + rng.Uniform(3); t > 0; --t) {
      const int gpus = rng.Uniform(5) == 0 ? 2 : 1;
      tasks.push_back(Task(gpus, gpus > 1 ? 1000 : shares[rng.Uniform(5)],
                           1 + static_cast<int64_t>(rng.Uniform(5))));
    }
    const int64_t optimum = BruteForceOptimum(nodes, tasks);
    EXPECT_EQ(Exact(nodes, tasks), optimum) << "instance " << i;
    EXPECT_GE(Bound(nodes, tasks), static_cast<double>(optimum) - 1e-6) << "instance " << i;
  }
}

// A placement of some of `tasks` made at random (each task, in random order, on a random node
// and GPUs where it fits, or left out), as a policy's fill would record it; and what it holds.
std::pair<TaskPlacements, int64_t> RandomPlacement(const std::vector<model::Node>& nodes,
                                                   const std::vector<model::TaskResources>& tasks,
                                                   Rng& rng) {
  std::vector<std::vector<int64_t>> gpu;
  std::vector<int64_t> cpu, memory;
  for (const auto& n : nodes) {
    gpu.emplace_back(n.gpus.size(), 1000);
    cpu.push_back(n.cpu.value());
    memory.push_back(n.memory.value());
  }
  std::vector<size_t> order(tasks.size());
  for (size_t t = 0; t < order.size(); ++t) order[t] = t;
  rng.Shuffle(order);
  TaskPlacements out(tasks.size());
  int64_t held = 0;
  for (size_t t : order) {
    const model::TaskResources& task = tasks[t];
    const size_t n = rng.Uniform(nodes.size());
    const auto& pins = task.gpu_models;
    if ((!pins.empty() && std::find(pins.begin(), pins.end(), nodes[n].gpu_model) == pins.end()) ||
        task.cpu.value() > cpu[n] || task.memory.value() > memory[n]) {
      continue;
    }
    std::vector<size_t> fit;  // GPUs with room, from a random start
    const size_t first = rng.Uniform(gpu[n].size());
    for (size_t i = 0; i < gpu[n].size(); ++i) {
      const size_t g = (first + i) % gpu[n].size();
      if (task.IsShare() ? gpu[n][g] >= task.gpu_milli.value() : gpu[n][g] == 1000)
        fit.push_back(g);
    }
    const size_t need = task.IsShare() ? 1 : static_cast<size_t>(task.gpus.value());
    if (fit.size() < need) continue;
    FillPlacement p{n, {}};
    for (size_t i = 0; i < need; ++i) {
      const int64_t milli = std::min<int64_t>(task.gpu_milli.value(), 1000);
      gpu[n][fit[i]] -= milli;
      p.gpus.push_back(model::GpuShare{static_cast<int>(fit[i]), MilliGpu(milli)});
    }
    cpu[n] -= task.cpu.value();
    memory[n] -= task.memory.value();
    held += task.TotalMilli().value();
    out[t] = std::move(p);
  }
  return {std::move(out), held};
}

// Started from a random placement (its identical nodes and GPUs in any order: the start is
// reordered to meet the symmetry rows), the exact solver still finds the brute-force optimum,
// and reports what the start holds.
TEST(FillBound, ExactFromARandomStartMatchesBruteForce) {
  SeededRng rng(13);
  const int shares[] = {200, 300, 500, 700, 1000};
  for (int i = 0; i < 40; ++i) {
    std::vector<model::Node> nodes(3, Node("T4", 2, 8 + static_cast<int64_t>(rng.Uniform(9))));
    nodes.push_back(Node("V100", 4, 12));
    std::vector<model::TaskResources> tasks;
    for (size_t t = 5 + rng.Uniform(3); t > 0; --t) {
      const int gpus = rng.Uniform(5) == 0 ? 2 : 1;
      tasks.push_back(Task(gpus, gpus > 1 ? 1000 : shares[rng.Uniform(5)],
                           1 + static_cast<int64_t>(rng.Uniform(5))));
    }
    const auto [start, start_milli] = RandomPlacement(nodes, tasks, rng);
    auto exact = ExactPlaceableMilli(nodes, tasks, 60, {start});
    ASSERT_TRUE(exact.ok()) << "instance " << i << ": " << exact.status().message();
    EXPECT_EQ(exact->status, ExactStatus::kOptimal) << "instance " << i;
    EXPECT_EQ(exact->milli, BruteForceOptimum(nodes, tasks)) << "instance " << i;
    EXPECT_EQ(exact->start_milli, start_milli) << "instance " << i;
  }
}

// A start that is not a placement of the tasks is refused, naming the task or node.
TEST(FillBound, ExactStartErrorsNameTheTask) {
  const std::vector<model::Node> nodes = {Node("T4", 2, 8), Node("V100", 1, 8)};
  const std::vector<model::TaskResources> tasks = {Task(1, 500, 1, {"T4"}), Task(2, 1000, 1),
                                                   Task(1, 1000, 1)};
  auto error = [&](TaskPlacements start) {
    auto e = ExactPlaceableMilli(nodes, tasks, 10, {std::move(start)});
    EXPECT_FALSE(e.ok());
    return e.ok() ? std::string() : e.status().message();
  };
  auto on = [](size_t node, std::vector<int> gpus, int milli = 1000) {
    FillPlacement p{node, {}};
    for (int g : gpus) p.gpus.push_back(model::GpuShare{g, MilliGpu(milli)});
    return std::optional<FillPlacement>(p);
  };
  // The pinned share on the V100 node.
  EXPECT_NE(error({on(1, {0}, 500)}).find("task 0 is on a node it does not fit"),
            std::string::npos);
  EXPECT_NE(error({on(0, {0, 1}, 500)}).find("task 0 is a share not on one GPU"),
            std::string::npos);
  EXPECT_NE(error({std::nullopt, std::nullopt, on(5, {0})}).find("task 2 is on no node"),
            std::string::npos);
  // Two whole GPUs and a share on a node of two GPUs: the share's GPU taken whole.
  EXPECT_NE(error({on(0, {0}, 500), on(0, {0, 1})})
                .find("task 1 holds GPU 0 of node 0 whole, which another task holds"),
            std::string::npos);
  EXPECT_NE(error(TaskPlacements(4)).find("4 placements for 3 tasks"), std::string::npos);
  // Whole-GPU tasks: the 2-GPU task on one GPU, on the same GPU twice, on a GPU the node lacks;
  // the 1-GPU task on the GPU the share holds, and on the GPU the 2-GPU task holds.
  EXPECT_NE(
      error({std::nullopt, on(0, {0})}).find("task 1 holds 1 GPU(s) of node 0 but asks for 2"),
      std::string::npos);
  EXPECT_NE(error({std::nullopt, on(0, {1, 1})}).find("task 1 holds GPU 1 of node 0 whole"),
            std::string::npos);
  EXPECT_NE(error({std::nullopt, on(0, {0, 2})}).find("task 1 holds GPU 2 of node 0, which has 2"),
            std::string::npos);
  EXPECT_NE(error({std::nullopt, std::nullopt, on(1, {-1})})
                .find("task 2 holds GPU -1 of node 1, which has 1"),
            std::string::npos);
  EXPECT_NE(
      error({on(0, {1}, 500), std::nullopt, on(0, {1})}).find("task 2 holds GPU 1 of node 0 whole"),
      std::string::npos);
  EXPECT_NE(
      error({std::nullopt, on(0, {0, 1}), on(0, {0})}).find("task 2 holds GPU 0 of node 0 whole"),
      std::string::npos);
  // A share on the GPU a task listed before it holds whole.
  auto share_after = ExactPlaceableMilli({Node("T4", 2, 8)}, {Task(1, 1000, 1), Task(1, 500, 1)},
                                         10, {{on(0, {0}), on(0, {0}, 500)}});
  ASSERT_FALSE(share_after.ok());
  EXPECT_NE(share_after.status().message().find(
                "task 1 shares GPU 0 of node 0, which another task holds whole"),
            std::string::npos);
  // A valid one: the 2-GPU task and the share cannot share node 0; the whole GPU on node 1.
  auto ok = ExactPlaceableMilli(nodes, tasks, 10, {{std::nullopt, on(0, {0, 1}), on(1, {0})}});
  ASSERT_TRUE(ok.ok()) << ok.status().message();
  EXPECT_EQ(ok->start_milli, 3000);
  EXPECT_EQ(ok->milli, 3000);
}

TEST(FillBound, ExactErrorsNameTheLimit) {
  std::vector<model::Node> many(kMaxExactNodes + 1, Node("T4", 1, 4));
  auto nodes = ExactPlaceableMilli(many, {Task(1, 1000, 1)}, 1);
  ASSERT_FALSE(nodes.ok());
  EXPECT_NE(nodes.status().message().find("kMaxExactNodes"), std::string::npos);
  auto limit = ExactPlaceableMilli(MixedCluster(), {Task(1, 1000, 1)}, 0);
  ASSERT_FALSE(limit.ok());
  EXPECT_NE(limit.status().message().find("time limit"), std::string::npos);
  // Nothing to place: optimal at 0.
  auto empty = ExactPlaceableMilli(MixedCluster(), {}, 1);
  ASSERT_TRUE(empty.ok());
  EXPECT_EQ(empty->milli, 0);
  EXPECT_EQ(empty->status, ExactStatus::kOptimal);
}

// 4 T4 nodes, 2 V100M32 nodes and 1 A100 node, in this order.
std::vector<model::Node> ModelMix() {
  std::vector<model::Node> nodes;
  for (const char* m : {"T4", "V100M32", "T4", "A100", "T4", "V100M32", "T4"}) {
    nodes.push_back(model::MakeNode("n" + std::to_string(nodes.size()), m, 4, CpuMilli(32000),
                                    MemoryMib(65536)));
  }
  return nodes;
}

TEST(FillTightness, SampleKeepsTheModelMixAndIsDeterministicPerSeed) {
  const auto nodes = ModelMix();
  auto names = [](const std::vector<model::Node>& sample) {
    std::vector<std::string> out;
    for (const auto& n : sample) out.push_back(n.name);
    return out;
  };
  std::set<std::vector<std::string>> seen;
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    auto a = SampleFillNodes(nodes, 4, seed);
    auto b = SampleFillNodes(nodes, 4, seed);
    ASSERT_TRUE(a.ok() && b.ok());
    EXPECT_EQ(names(*a), names(*b)) << "seed " << seed;
    // 4 of 7: T4 4·4/7 = 2.29 → 2, V100M32 1.14 → 1, A100 0.57 → 0 + 1 (largest remainder).
    std::map<std::string, int> per_model;
    for (const auto& n : *a) ++per_model[n.gpu_model];
    EXPECT_EQ(per_model, (std::map<std::string, int>{{"A100", 1}, {"T4", 2}, {"V100M32", 1}}));
    EXPECT_TRUE(std::is_sorted(a->begin(), a->end(), [](const auto& x, const auto& y) {
      return std::stoi(x.name.substr(1)) < std::stoi(y.name.substr(1));
    })) << "input order";
    seen.insert(names(*a));
  }
  EXPECT_GT(seen.size(), 1u) << "the seed chooses the nodes";
  EXPECT_EQ(SampleFillNodes(nodes, 7, 3)->size(), 7u);
  for (size_t bad : {size_t{0}, size_t{8}}) {
    auto r = SampleFillNodes(nodes, bad, 1);
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("--exact-nodes"), std::string::npos);
  }
}

// With keep_placements the fill records, per step, where its task went: placed steps only, on
// as many GPUs as it asks, and the recorded milli add up to the allocated GPU at every step.
TEST(FillTightness, FillKeepsWhereTasksWent) {
  const auto nodes = MixedCluster();
  sched::ClusterState state(sched::ClusterStateOptions{});
  auto list = FillTasks(nodes, MixedWorkload(), 42, 1.3, state);
  ASSERT_TRUE(list.ok());
  for (const std::string& policy : kTightnessPolicies) {
    auto fill = RunFill(nodes, MixedWorkload(),
                        FillConfig{.policy = policy, .seed = 42, .keep_placements = true});
    ASSERT_TRUE(fill.ok()) << fill.status().message();
    ASSERT_EQ(fill->placements.size(), fill->steps.size()) << policy;
    int64_t held = 0;
    for (size_t t = 0; t < fill->steps.size(); ++t) {
      const auto& p = fill->placements[t];
      ASSERT_EQ(p.has_value(), fill->steps[t].placed) << policy << " step " << t;
      if (p) {
        ASSERT_LT(p->node, nodes.size());
        const model::TaskResources& task = list->tasks[t];
        EXPECT_EQ(static_cast<int64_t>(p->gpus.size()), task.gpus.value()) << policy;
        for (const auto& g : p->gpus) held += g.milli.value();
      }
      EXPECT_NEAR(100.0 - 100.0 * static_cast<double>(held) / 36000.0,
                  fill->steps[t].unallocated_pct, 1e-9)
          << policy << " step " << t;
    }
    EXPECT_TRUE(RunFill(nodes, MixedWorkload(), FillConfig{policy, 42})->placements.empty());
  }
}

// On a small cluster the three numbers line up: LP bound ≤ exact optimum ≤ every policy, at the
// same step of the same tasks as the policies' fills.
TEST(FillTightness, BoundBelowExactBelowPolicies) {
  for (uint64_t seed : {42, 43, 44}) {
    auto row = RunFillTightness(MixedCluster(), MixedWorkload(), seed, 1.3, 4, 100, 60);
    ASSERT_TRUE(row.ok()) << row.status().message();
    EXPECT_EQ(row->nodes, 4u);
    ASSERT_EQ(row->exact.status, ExactStatus::kOptimal) << "seed " << seed;
    EXPECT_LE(row->arrived_pct, 100.0);
    EXPECT_LE(row->config_bound_pct, row->exact_pct + 1e-9) << "seed " << seed;
    ASSERT_EQ(row->policy_pct.size(), kTightnessPolicies.size());
    for (double p : row->policy_pct) EXPECT_GE(p, row->exact_pct - 1e-9) << "seed " << seed;
    // The raw configuration bound over the same tasks holds the exact optimum.
    auto sampled = SampleFillNodes(MixedCluster(), 4, seed);
    ASSERT_TRUE(sampled.ok());
    sched::ClusterState state(sched::ClusterStateOptions{});
    auto list = FillTasks(*sampled, MixedWorkload(), seed, 1.3, state);
    ASSERT_TRUE(list.ok()) << list.status().message();
    list->tasks.resize(row->tasks);
    const ConfigurationBound raw = Configuration(*sampled, list->tasks);
    EXPECT_GE(raw.milli, static_cast<double>(row->exact.milli) - 1e-6) << "seed " << seed;
    // Started from the best of the policies' placements at the step.
    const double best_policy = *std::min_element(row->policy_pct.begin(), row->policy_pct.end());
    EXPECT_NEAR(100.0 - 100.0 * static_cast<double>(row->exact.start_milli) /
                            static_cast<double>(row->capacity_milli),
                best_policy, 1e-9)
        << "seed " << seed;
    // The policies' step: the same tasks, so the same arrived load as a fill on the sample.
    auto sample = SampleFillNodes(MixedCluster(), 4, seed);
    auto fill = RunFill(*sample, MixedWorkload(), FillConfig{"fgd", seed, 1.3});
    ASSERT_TRUE(fill.ok());
    EXPECT_DOUBLE_EQ(fill->steps[row->tasks - 1].arrived_pct, row->arrived_pct);
    EXPECT_DOUBLE_EQ(fill->steps[row->tasks - 1].unallocated_pct, row->policy_pct[1]);
  }
}

// The table gives a timed-out instance's ranges, never a gap it has not proven: exact as
// low-high, the LP gap as [low − lp, high − lp], the online gap as [best − high, best − low].
TEST(FillTightness, TableShowsTheOpenRanges) {
  TightnessRow proven{.seed = 1, .nodes = 6, .tasks = 40, .arrived_pct = 99, .lp_bound_pct = 2};
  proven.exact = ExactOptimum{ExactStatus::kOptimal, 970, 970, 960, 1.5};
  proven.exact_pct = proven.exact_low_pct = 3;
  proven.policy_pct = {9, 8, 4};
  TightnessRow open = proven;
  open.seed = 2;
  open.exact = ExactOptimum{ExactStatus::kTimeLimit, 950, 975, 950, 30};
  open.exact_pct = 5;
  open.exact_low_pct = 2.5;
  open.policy_pct = {9, 8, 6};
  const std::string table = FillTightnessTable({proven, open});
  EXPECT_NE(table.find("3.00    9.00    8.00    4.00        1.00         1.00"), std::string::npos)
      << table;
  EXPECT_NE(table.find("2.50-5.00    9.00    8.00    6.00   0.50-3.00    1.00-3.50"),
            std::string::npos)
      << table;
  EXPECT_NE(table.find("mean of 1 solved of 2"), std::string::npos) << table;
}

}  // namespace
}  // namespace corral::sim
