#include "common/duration.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <utility>

namespace corral {
namespace {

using ::testing::HasSubstr;

TEST(ParseDurationTest, AWholeNumberWithOneUnit) {
  EXPECT_EQ(ParseDuration("90", "--x")->value(), 90);
  EXPECT_EQ(ParseDuration("90s", "--x")->value(), 90);
  EXPECT_EQ(ParseDuration("30m", "--x")->value(), 1800);
  EXPECT_EQ(ParseDuration("2h", "--x")->value(), 7200);
  EXPECT_EQ(ParseDuration("30d", "--x")->value(), 30 * 86400);
  EXPECT_EQ(ParseDuration("0", "--x")->value(), 0);
}

TEST(ParseDurationTest, UnitsInDecreasingOrderAddUp) {
  EXPECT_EQ(ParseDuration("1d12h", "--expires")->value(), 129600);
  EXPECT_EQ(ParseDuration("1h30m", "--idle-timeout")->value(), 5400);
  EXPECT_FALSE(ParseDuration("30m1h", "--x").ok());
  EXPECT_FALSE(ParseDuration("1:30:00", "--x").ok());  // clock forms are time limits' only
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

TEST(ParseTimeLimitTest, SecondsUnitsAndSlurmsClockForms) {
  const std::pair<const char*, int64_t> cases[] = {
      {"90", 90},
      {"90s", 90},
      {"90m", 5400},
      {"2h", 7200},
      {"1d", 86400},
      {"2h30m", 9000},
      {"1d12h", 129600},
      {"1h0m30s", 3630},
      {"0:02", 2},
      {"0:00:02", 2},
      {"1:30:00", 5400},
      {"10:00", 600},
      {"2-0", 172800},
      {"1-2:30", 95400},
      {"2-00:00:00", 172800},
      {"1-00:00:01", 86401},
      {"100:00:00", 360000},
      {"0", 0},
  };
  for (const auto& [text, seconds] : cases) {
    auto parsed = ParseTimeLimit(text, "--time-limit");
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().ToString();
    EXPECT_EQ(parsed->value(), seconds) << text;
  }
}

TEST(ParseTimeLimitTest, AnythingElseIsRefusedNamingTheFlagAndTheForms) {
  for (const char* text : {"",
                           "h",
                           "2x",
                           "-1",
                           "1h2h",
                           "30m1h",
                           "1.5h",
                           "2h30",
                           "1:60",
                           "1:00:60",
                           "1:2:3:4",
                           "5:",
                           ":5",
                           "-1:00",
                           "1-",
                           "1--2",
                           "a-1:00",
                           "1-1:00:00:00",
                           "99999999999999999999",
                           "1099511627777",
                           "1099511627776d",
                           "1--0",
                           "1-1:-0",
                           "+5"}) {
    auto refused = ParseTimeLimit(text, "--time-limit");
    ASSERT_FALSE(refused.ok()) << text;
    EXPECT_THAT(refused.status().message(), HasSubstr("--time-limit"));
    EXPECT_THAT(refused.status().message(), HasSubstr("2h30m"));
  }
  // The longest one taken, to the second.
  EXPECT_EQ(ParseTimeLimit("1099511627776", "t")->value(), kMaxDuration.value());
}

TEST(FormatDurationTest, UnitsFromDaysDownThatParseTimeLimitReadsBack) {
  EXPECT_EQ(FormatDuration(Seconds(0)), "0s");
  EXPECT_EQ(FormatDuration(Seconds(45)), "45s");
  EXPECT_EQ(FormatDuration(Seconds(9000)), "2h30m");
  EXPECT_EQ(FormatDuration(Seconds(86401)), "1d1s");
  EXPECT_EQ(FormatDuration(Seconds(-90)), "-1m30s");
  for (int64_t s : {int64_t{1}, int64_t{59}, int64_t{3600}, int64_t{95400}, kMaxDuration.value()}) {
    EXPECT_EQ(ParseTimeLimit(FormatDuration(Seconds(s)), "t")->value(), s) << s;
  }
}

}  // namespace
}  // namespace corral
