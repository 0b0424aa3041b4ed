#include "common/duration.h"

#include <gtest/gtest.h>

namespace corral {
namespace {

TEST(ParseDurationTest, AWholeNumberWithOneUnit) {
  EXPECT_EQ(ParseDuration("90", "--x")->value(), 90);
  EXPECT_EQ(ParseDuration("90s", "--x")->value(), 90);
  EXPECT_EQ(ParseDuration("30m", "--x")->value(), 1800);
  EXPECT_EQ(ParseDuration("2h", "--x")->value(), 7200);
  EXPECT_EQ(ParseDuration("30d", "--x")->value(), 30 * 86400);
  EXPECT_EQ(ParseDuration("0", "--x")->value(), 0);
}

TEST(ParseDurationTest, AnythingElseIsRefusedNamingTheFlag) {
  for (const char* bad : {"", "d", "5x", "1.5h", "-1s", "1dd", "2 h", "99999999999999999999d"}) {
    auto d = ParseDuration(bad, "--expires");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(
        d.status().message(),
        std::string("--expires: expected a duration like 90s, 30m, 2h or 1d, got '") + bad + "'");
  }
  EXPECT_TRUE(ParseDuration(std::to_string(kMaxDuration.value()), "--x").ok());
  EXPECT_FALSE(ParseDuration(std::to_string(kMaxDuration.value() + 1), "--x").ok());
  EXPECT_FALSE(ParseDuration(std::to_string(kMaxDuration.value() / 86400 + 1) + "d", "--x").ok());
}

TEST(ParseDurationMsTest, TakesMillisecondsAndEveryLongerUnit) {
  EXPECT_EQ(*ParseDurationMs("500ms", "--x"), 500);
  EXPECT_EQ(*ParseDurationMs("3s", "--x"), 3000);
  EXPECT_EQ(*ParseDurationMs("3", "--x"), 3000);
  EXPECT_EQ(*ParseDurationMs("1m", "--x"), 60000);
  for (const char* bad : {"", "ms", "1.5ms", "-1ms", "5 ms", "5x"}) {
    auto d = ParseDurationMs(bad, "--lease-duration");
    ASSERT_FALSE(d.ok()) << bad;
    EXPECT_EQ(d.status().message(),
              std::string("--lease-duration: expected a duration like 500ms, 3s or 1m, got '") +
                  bad + "'");
  }
}

}  // namespace
}  // namespace corral
