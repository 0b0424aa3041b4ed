#include "server/http/connection_guard.h"

#include <gtest/gtest.h>

#include <vector>

namespace corral::server {
namespace {

using namespace std::chrono_literals;
using Time = ConnectionGuard::Clock::time_point;

TEST(ConnectionGuardTest, CapsCountUnauthenticatedConnectionsPerAddressAndInAll) {
  ConnectionLimits limits;
  limits.max_unauthenticated_per_address = 2;
  limits.max_unauthenticated = 3;
  ConnectionGuard guard(limits);
  const Time t0;
  EXPECT_TRUE(guard.MayAccept("a"));
  const auto a1 = guard.Opened("a", 10, t0);
  guard.Opened("a", 11, t0);
  EXPECT_FALSE(guard.MayAccept("a"));
  EXPECT_TRUE(guard.MayAccept("b"));
  guard.Opened("b", 12, t0);
  EXPECT_FALSE(guard.MayAccept("c")) << "3 in all";
  guard.Authenticated(a1);
  EXPECT_TRUE(guard.MayAccept("a")) << "an authenticated connection no longer counts";
  guard.Authenticated(a1);  // twice is once
  EXPECT_EQ(guard.counts().unauthenticated, 2);
  guard.Closed(a1);
  EXPECT_EQ(guard.counts().unauthenticated, 2);
  EXPECT_EQ(guard.counts().open, 2);
  EXPECT_EQ(guard.counts().refused, 2);
}

TEST(ConnectionGuardTest, EachPhaseHasItsDeadlineAndAnsweringNone) {
  ConnectionLimits limits;
  limits.head_timeout = 10s;
  limits.body_timeout = 30s;
  ConnectionGuard guard(limits);
  const Time t0;
  const auto waiting = guard.Opened("a", 1, t0);
  const auto reading = guard.Opened("a", 2, t0);
  const auto answering = guard.Opened("a", 3, t0);
  guard.Entered(reading, ConnectionPhase::kReadingBody, t0 + 5s);
  guard.Entered(answering, ConnectionPhase::kAnswering, t0 + 5s);
  std::vector<int> shut;
  auto record = [&](int fd) { shut.push_back(fd); };
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 9s, record), 0);
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 10s, record), 1);
  EXPECT_EQ(shut, std::vector<int>{1});
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 11s, record), 0) << "once per phase";
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 35s, record), 1);
  EXPECT_EQ(shut, (std::vector<int>{1, 2}));
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 1000s, record), 0) << "answering has no deadline";
  // Answered: the connection waits for its next head, from then.
  guard.Entered(answering, ConnectionPhase::kAwaitingHead, t0 + 1000s);
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 1010s, record), 1);
  EXPECT_EQ(guard.counts().timed_out, 3);
  (void)waiting;
}

}  // namespace
}  // namespace corral::server
