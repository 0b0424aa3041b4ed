// SaturationGuard as a plain object: pools, the line, refusals (HTTP: http_server_test.cc).
#include "server/http/saturation_guard.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <future>
#include <optional>
#include <thread>
#include <vector>

namespace corral::server {
namespace {

using namespace std::chrono_literals;
using ::testing::HasSubstr;

// Waits (up to 10 s) until `ok` holds.
template <typename Condition>
bool WaitUntil(Condition ok) {
  for (int i = 0; i < 2000 && !ok(); ++i) std::this_thread::sleep_for(5ms);
  return ok();
}

TEST(SaturationGuardTest, PastTheCapARequestWaitsItsTimeThenIsRefusedNamingTheCondition) {
  SaturationGuard guard({2, 0, 50ms});
  auto a = guard.Enter(Load::kRegular);
  auto b = guard.Enter(Load::kRegular);
  ASSERT_TRUE(a.ok() && b.ok());
  const auto start = std::chrono::steady_clock::now();
  auto c = guard.Enter(Load::kRegular);
  EXPECT_GE(std::chrono::steady_clock::now() - start, 50ms);
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().code(), StatusCode::kUnavailable);
  EXPECT_THAT(c.status().message(),
              HasSubstr("server saturated: 2 requests in flight (--max-requests-in-flight 2)"));
  ASSERT_TRUE(c.status().retry_after().has_value());
  EXPECT_GE(*c.status().retry_after(), Seconds(1));
  EXPECT_LE(*c.status().retry_after(), kMaxSaturationRetryAfter);
  const SaturationGuard::Counts counts = guard.counts();
  EXPECT_EQ(counts.regular.in_flight, 2);
  EXPECT_EQ(counts.regular.refused, 1);
  EXPECT_EQ(counts.regular.admitted, 2);
  // A slot given back is taken again.
  a = SaturationGuard::Slot();
  EXPECT_EQ(guard.counts().regular.in_flight, 1);
  EXPECT_TRUE(guard.Enter(Load::kRegular).ok());
}

TEST(SaturationGuardTest, NoWaitRefusesAtOnce) {
  SaturationGuard guard({1, 0, 0ms});
  auto a = guard.Enter(Load::kRegular);
  ASSERT_TRUE(a.ok());
  EXPECT_FALSE(guard.Enter(Load::kRegular).ok());
}

TEST(SaturationGuardTest, AFreedSlotGoesToTheOldestWaiterNotToANewcomer) {
  SaturationGuard guard({1, 0, 10s});
  std::optional<SaturationGuard::Slot> held;
  {
    auto a = guard.Enter(Load::kRegular);
    ASSERT_TRUE(a.ok());
    held = std::move(a).value();
  }
  std::vector<int> order;
  std::mutex mu;
  auto waiter = [&](int n) {
    auto slot = guard.Enter(Load::kRegular);
    EXPECT_TRUE(slot.ok());
    std::lock_guard lock(mu);
    order.push_back(n);
  };
  std::thread first(waiter, 1);
  ASSERT_TRUE(WaitUntil([&] { return guard.counts().regular.waiting == 1; }));
  std::thread second(waiter, 2);
  ASSERT_TRUE(WaitUntil([&] { return guard.counts().regular.waiting == 2; }));
  held.reset();  // handed to the first waiter, which hands it to the second when done
  first.join();
  second.join();
  EXPECT_EQ(order, (std::vector<int>{1, 2}));
  const SaturationGuard::Counts counts = guard.counts();
  EXPECT_EQ(counts.regular.waited, 2);
  EXPECT_EQ(counts.regular.in_flight, 0);
  EXPECT_EQ(counts.regular.refused, 0);
}

TEST(SaturationGuardTest, AgentsHaveTheirOwnPoolAndLongLivedRequestsNone) {
  SaturationGuard guard({1, 2, 20ms});
  auto regular = guard.Enter(Load::kRegular);
  ASSERT_TRUE(regular.ok());
  EXPECT_FALSE(guard.Enter(Load::kRegular).ok());
  // The API's pool is full: agents still get theirs, and long-lived requests are never counted.
  auto agent1 = guard.Enter(Load::kAgent);
  auto agent2 = guard.Enter(Load::kAgent);
  EXPECT_TRUE(agent1.ok() && agent2.ok());
  std::vector<SaturationGuard::Slot> streams;
  for (int i = 0; i < 100; ++i) {
    auto s = guard.Enter(Load::kUncounted);
    ASSERT_TRUE(s.ok());
    streams.push_back(std::move(s).value());
  }
  auto agent3 = guard.Enter(Load::kAgent);
  ASSERT_FALSE(agent3.ok());
  EXPECT_THAT(agent3.status().message(), HasSubstr("server saturated: 2 agent requests in flight"));
  const SaturationGuard::Counts counts = guard.counts();
  EXPECT_EQ(counts.regular.in_flight, 1);
  EXPECT_EQ(counts.agent.in_flight, 2);
  EXPECT_EQ(counts.agent.cap, 2);
  EXPECT_EQ(counts.agent.refused, 1);
  EXPECT_EQ(counts.regular.refused, 1);
}

TEST(SaturationGuardTest, NoCapCountsButNeverRefuses) {
  SaturationGuard guard({0, 0, 0ms});
  std::vector<SaturationGuard::Slot> slots;
  for (int i = 0; i < 500; ++i) {
    auto s = guard.Enter(i % 2 ? Load::kAgent : Load::kRegular);
    ASSERT_TRUE(s.ok());
    slots.push_back(std::move(s).value());
  }
  EXPECT_EQ(guard.counts().regular.in_flight, 250);
  EXPECT_EQ(guard.counts().agent.in_flight, 250);
  slots.clear();
  EXPECT_EQ(guard.counts().regular.in_flight, 0);
}

TEST(SaturationGuardTest, StopRefusesThoseWaitingAtOnce) {
  SaturationGuard guard({1, 0, 60s});
  auto held = guard.Enter(Load::kRegular);
  ASSERT_TRUE(held.ok());
  auto waiting = std::async(std::launch::async, [&] { return guard.Enter(Load::kRegular); });
  ASSERT_TRUE(WaitUntil([&] { return guard.counts().regular.waiting == 1; }));
  guard.Stop();
  ASSERT_EQ(waiting.wait_for(5s), std::future_status::ready);
  Result<SaturationGuard::Slot> refused = waiting.get();
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("server stopping"));
}

TEST(SaturationGuardTest, RetryAfterGrowsWithTheLineAndHowLongSlotsAreHeld) {
  using std::chrono::microseconds;
  // Quick requests: the least Retry-After, 1 s.
  EXPECT_EQ(SaturationRetryAfter(0, microseconds(2000), 64), Seconds(1));
  EXPECT_EQ(SaturationRetryAfter(500, microseconds(2000), 64), Seconds(1));
  // One slot held 1.2 s on average: the next frees in about 1.2 s, said as 2 s.
  EXPECT_EQ(SaturationRetryAfter(0, microseconds(1'200'000), 1), Seconds(2));
  // 127 ahead of it, 64 at a time, 1 s each: its turn comes in 2 s.
  EXPECT_EQ(SaturationRetryAfter(127, microseconds(1'000'000), 64), Seconds(2));
  EXPECT_EQ(SaturationRetryAfter(10'000, microseconds(1'000'000), 64), kMaxSaturationRetryAfter);
  EXPECT_EQ(SaturationRetryAfter(3, microseconds(0), 0), Seconds(1));
}

}  // namespace
}  // namespace corral::server
