#include "common/busy_retry.h"

#include <gtest/gtest.h>

namespace corral {
namespace {

using std::chrono::milliseconds;

TEST(BusyRetryTest, RetryAfterIsDelaySecondsOnly) {
  EXPECT_EQ(ParseRetryAfter("1"), Seconds(1));
  EXPECT_EQ(ParseRetryAfter(" 120 "), Seconds(120));
  EXPECT_EQ(ParseRetryAfter("0"), Seconds(0));
  // An HTTP-date, a fraction, a sign, junk or nothing promise nothing.
  EXPECT_EQ(ParseRetryAfter("Wed, 21 Oct 2015 07:28:00 GMT"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1.5"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("-1"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("1s"), std::nullopt);
  EXPECT_EQ(ParseRetryAfter(""), std::nullopt);
  EXPECT_EQ(ParseRetryAfter("99999999999999999999999"), std::nullopt);
}

TEST(BusyRetryTest, JitterNeverComesBackEarly) {
  EXPECT_EQ(Jittered(Seconds(2), 0.5, 0.0), milliseconds(2000));
  EXPECT_EQ(Jittered(Seconds(2), 0.5, 0.5), milliseconds(2500));
  EXPECT_EQ(Jittered(Seconds(2), 0.5, 0.999), milliseconds(2999));
  // Out of range draws are clamped, never below the server's word.
  EXPECT_EQ(Jittered(Seconds(2), 0.5, -3), milliseconds(2000));
  EXPECT_EQ(Jittered(Seconds(2), 0.5, 7), milliseconds(3000));
}

TEST(BusyRetryTest, SaturationIsWaitedOutWithinTheBudget) {
  BusyBudget budget(milliseconds(30'000), Seconds(5));
  const BusyAnswer saturated{503, Seconds(10), "server saturated: 64 requests in flight"};
  EXPECT_EQ(budget.Next(saturated, 0), milliseconds(10'000));
  EXPECT_EQ(budget.Next(saturated, 0), milliseconds(10'000));
  EXPECT_EQ(budget.waited(), milliseconds(20'000));
  // 20 s waited: another 10 s (12 s jittered) would pass 30 s.
  EXPECT_EQ(budget.Next(saturated, 1), std::nullopt);
  EXPECT_EQ(budget.Next(saturated, 0), milliseconds(10'000));
  EXPECT_EQ(budget.Next({503, Seconds(1), ""}, 0), std::nullopt);
  EXPECT_EQ(budget.waited(), milliseconds(30'000));
}

TEST(BusyRetryTest, ALimitThatClearsLaterIsShownAtOnce) {
  BusyBudget budget(milliseconds(30'000), Seconds(5));
  // The submit limiter's pending cap (10 s) and a rate's minute: shown, not retried.
  EXPECT_EQ(budget.Next({429, Seconds(10), "user 'alice': at most 5 pending jobs"}, 0),
            std::nullopt);
  EXPECT_EQ(budget.Next({429, Seconds(60), "at most 100 submissions a minute"}, 0), std::nullopt);
  EXPECT_EQ(budget.waited(), milliseconds(0));
  // One that clears within seconds is waited out.
  EXPECT_EQ(budget.Next({429, Seconds(5), ""}, 0.5), milliseconds(5500));
  EXPECT_EQ(budget.Next({429, Seconds(2), ""}, 0), milliseconds(2000));
}

}  // namespace
}  // namespace corral
