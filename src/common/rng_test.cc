#include "common/rng.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>

namespace corral {
namespace {

TEST(SeededRng, SameSeedSameSequence) {
  SeededRng a(42), b(42), c(43);
  bool differs = false;
  for (int i = 0; i < 100; ++i) {
    uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    differs |= (x != c.Next());
  }
  EXPECT_TRUE(differs);
}

TEST(SeededRng, UniformStaysInRangeAndCoversIt) {
  SeededRng rng(7);
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 10000; ++i) {
    uint64_t v = rng.Uniform(10);
    ASSERT_LT(v, 10u);
    ++seen[v];
  }
  for (int count : seen) {
    EXPECT_GT(count, 800);
    EXPECT_LT(count, 1200);
  }
}

TEST(SeededRng, ShuffleIsAPermutation) {
  SeededRng rng(1);
  std::vector<int> v(50);
  std::iota(v.begin(), v.end(), 0);
  rng.Shuffle(v);
  std::vector<int> sorted = v;
  std::sort(sorted.begin(), sorted.end());
  for (int i = 0; i < 50; ++i) EXPECT_EQ(sorted[i], i);
  EXPECT_FALSE(std::is_sorted(v.begin(), v.end()));
}

}  // namespace
}  // namespace corral
