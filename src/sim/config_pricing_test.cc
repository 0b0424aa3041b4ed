#include "sim/config_pricing.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>

#include "common/rng.h"

namespace corral::sim {
namespace {

// The best value of any configuration of one node, by exhaustive search: each task of each shape
// is left out or placed, a share on any GPU with enough free milli, a whole-GPU task on its count
// of fully free GPUs; CPU and memory summed.
double BruteForceBest(const PricingNode& node, const std::vector<PricingShape>& shapes) {
  std::vector<size_t> task_shape;
  for (size_t s = 0; s < shapes.size(); ++s) {
    for (int64_t k = 0; k < shapes[s].count; ++k) task_shape.push_back(s);
  }
  std::vector<int64_t> gpu(static_cast<size_t>(node.gpus), 1000);
  int64_t cpu = node.cpu, memory = node.memory;
  std::function<double(size_t)> best = [&](size_t i) -> double {
    if (i == task_shape.size()) return 0;
    const PricingShape& p = shapes[task_shape[i]];
    double out = best(i + 1);
    if (p.cpu > cpu || p.memory > memory) return out;
    cpu -= p.cpu;
    memory -= p.memory;
    if (p.gpus == 1 && p.gpu_milli < 1000) {
      for (int64_t& g : gpu) {
        if (g < p.gpu_milli) continue;
        g -= p.gpu_milli;
        out = std::max(out, p.value + best(i + 1));
        g += p.gpu_milli;
      }
    } else if (std::count(gpu.begin(), gpu.end(), 1000) >= p.gpus) {
      std::vector<int64_t*> taken;
      for (int64_t& g : gpu) {
        if (g == 1000 && static_cast<int64_t>(taken.size()) < p.gpus) taken.push_back(&g);
      }
      for (int64_t* g : taken) *g = 0;
      out = std::max(out, p.value + best(i + 1));
      for (int64_t* g : taken) *g = 1000;
    }
    cpu += p.cpu;
    memory += p.memory;
    return out;
  };
  return best(0);
}

// Whether `tasks` (per shape) is a configuration of the node: checked by the brute force with
// every shape's value 1 and counts the configuration's, which must place all of them.
bool IsConfiguration(const PricingNode& node, std::vector<PricingShape> shapes,
                     const std::vector<int64_t>& tasks) {
  int64_t total = 0;
  for (size_t s = 0; s < shapes.size(); ++s) {
    if (tasks[s] < 0 || tasks[s] > shapes[s].count) return false;
    shapes[s].count = tasks[s];
    shapes[s].value = 1;
    total += tasks[s];
  }
  return BruteForceBest(node, shapes) == static_cast<double>(total);
}

std::pair<PricingNode, std::vector<PricingShape>> RandomPricing(SeededRng& rng) {
  const int gpu_counts[] = {1, 2, 4};
  const int shares[] = {100, 250, 300, 400, 500, 600, 700, 1000};
  PricingNode node{gpu_counts[rng.Uniform(3)], 1000 * (4 + static_cast<int64_t>(rng.Uniform(13))),
                   1024 * (1 + static_cast<int64_t>(rng.Uniform(8)))};
  std::vector<PricingShape> shapes;
  for (size_t n = 1 + rng.Uniform(4); n > 0; --n) {
    const int64_t gpus = rng.Uniform(4) == 0 ? gpu_counts[rng.Uniform(3)] : 1;
    const int64_t milli = gpus > 1 ? 1000 : shares[rng.Uniform(8)];
    // Values from −0.2 to 1.8 GPUs a task: some not worth taking.
    const double value = static_cast<double>(rng.Uniform(2001)) / 1000.0 - 0.2;
    shapes.push_back(PricingShape{gpus, milli, 1000 * (1 + static_cast<int64_t>(rng.Uniform(6))),
                                  1024 * (1 + static_cast<int64_t>(rng.Uniform(3))),
                                  1 + static_cast<int64_t>(rng.Uniform(4)), value});
  }
  return {node, shapes};
}

// Random small nodes: the search's best is the brute force's, a configuration of the node, worth
// its value, and proven.
TEST(ConfigPricing, MatchesBruteForce) {
  SeededRng rng(31);
  for (int i = 0; i < 400; ++i) {
    const auto [node, shapes] = RandomPricing(rng);
    const PricedConfiguration got = BestConfiguration(node, shapes, 1'000'000);
    const double want = BruteForceBest(node, shapes);
    ASSERT_TRUE(got.proven) << "instance " << i;
    ASSERT_NEAR(got.value, want, 1e-9) << "instance " << i;
    ASSERT_NEAR(got.upper, want, 1e-9) << "instance " << i;
    ASSERT_TRUE(IsConfiguration(node, shapes, got.tasks)) << "instance " << i;
    double value = 0;
    for (size_t s = 0; s < shapes.size(); ++s) {
      value += static_cast<double>(got.tasks[s]) * shapes[s].value;
    }
    ASSERT_NEAR(value, got.value, 1e-9) << "instance " << i;
  }
}

// Shares pack per GPU, not in aggregate: two 600-milli shares do not fit one 2-GPU node's first
// GPU together, and a 2-GPU task leaves no GPU for them.
TEST(ConfigPricing, PacksSharesPerGpu) {
  const PricingNode node{2, 64'000, 65'536};
  const std::vector<PricingShape> shapes = {
      {1, 600, 1000, 1024, 3, 0.6}, {1, 400, 1000, 1024, 2, 0.5}, {2, 1000, 1000, 1024, 1, 1.9}};
  const PricedConfiguration got = BestConfiguration(node, shapes, 1'000'000);
  // 600 + 400 on each GPU: 2.2, better than the 2-GPU task (1.9) or three 600s (no room).
  EXPECT_TRUE(got.proven);
  EXPECT_NEAR(got.value, 2.2, 1e-9);
  EXPECT_EQ(got.tasks, (std::vector<int64_t>{2, 2, 0}));
}

// Every search node is counted once: the configuration where the whole-GPU shapes are all
// decided is the shares' first node, not a second one. No shapes: the empty configuration alone.
// One whole-GPU task on a 1-GPU node: the root (its count open), with it, without it.
TEST(ConfigPricing, CountsEachSearchNodeOnce) {
  const PricingNode node{1, 8000, 8192};
  const PricedConfiguration none = BestConfiguration(node, {}, 1'000'000);
  EXPECT_TRUE(none.proven);
  EXPECT_EQ(none.searched, 1u);
  const PricedConfiguration one =
      BestConfiguration(node, {{1, 1000, 1000, 1024, 1, 0.9}}, 1'000'000);
  EXPECT_TRUE(one.proven);
  EXPECT_NEAR(one.value, 0.9, 1e-9);
  EXPECT_EQ(one.searched, 3u);
}

// A search cut off by its node budget keeps a sound bound: its value is a configuration's, no
// more than the optimum, and its upper no less; not proven when cut.
TEST(ConfigPricing, CutOffBracketsTheOptimum) {
  SeededRng rng(37);
  int cut = 0;
  for (int i = 0; i < 300; ++i) {
    const auto [node, shapes] = RandomPricing(rng);
    const double want = BruteForceBest(node, shapes);
    for (size_t budget : {size_t{0}, size_t{1}, size_t{3}, size_t{10}}) {
      const PricedConfiguration got = BestConfiguration(node, shapes, budget);
      ASSERT_LE(got.value, want + 1e-9) << "instance " << i << " budget " << budget;
      ASSERT_GE(got.upper, want - 1e-9) << "instance " << i << " budget " << budget;
      ASSERT_LE(got.searched, budget);
      ASSERT_TRUE(IsConfiguration(node, shapes, got.tasks)) << "instance " << i;
      if (!got.proven) ++cut;
    }
  }
  EXPECT_GT(cut, 0);
}

}  // namespace
}  // namespace corral::sim
