#include "common/check.h"

#include <gtest/gtest.h>

namespace corral {
namespace {

TEST(CheckTest, PassesWhenTheConditionHolds) {
  int evaluated = 0;
  CORRAL_CHECK(++evaluated == 1);
  EXPECT_EQ(evaluated, 1);  // evaluated once
}

// Also in Release builds (NDEBUG), where assert would let it pass.
TEST(CheckDeathTest, AbortsNamingTheConditionWhenItFails) {
  const int free_gpus = 3;
  EXPECT_DEATH(CORRAL_CHECK(free_gpus > 4), "CORRAL_CHECK failed: free_gpus > 4");
}

}  // namespace
}  // namespace corral
