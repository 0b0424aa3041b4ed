#include "server/http/connection_guard.h"

#include <gtest/gtest.h>

#include <vector>

namespace corral::server {
namespace {

using namespace std::chrono_literals;
using Time = ConnectionGuard::Clock::time_point;

TEST(ConnectionGuardTest, AnAddressAtItsCapIsRefusedAndAuthenticatedConnectionsDoNotCount) {
  ConnectionLimits limits;
  limits.max_anonymous_per_address = 2;
  ConnectionGuard guard(limits);
  std::vector<int> shut;
  auto record = [&](int fd) { shut.push_back(fd); };
  const Time t0;
  EXPECT_TRUE(guard.MayAccept("a", record));
  const auto a1 = guard.Opened("a", 10, t0);
  guard.Opened("a", 11, t0);
  EXPECT_FALSE(guard.MayAccept("a", record));
  EXPECT_TRUE(guard.MayAccept("b", record));
  guard.Authenticated(a1);
  EXPECT_TRUE(guard.MayAccept("a", record)) << "an authenticated connection no longer counts";
  guard.Authenticated(a1);  // twice is once
  EXPECT_EQ(guard.counts().anonymous, 1);
  guard.Closed(a1);
  EXPECT_EQ(guard.counts().anonymous, 1);
  EXPECT_EQ(guard.counts().open, 1);
  EXPECT_EQ(guard.counts().refused, 1);
  EXPECT_TRUE(shut.empty());
}

TEST(ConnectionGuardTest, WhenEveryPlaceIsTakenTheOldestWaitingForAHeadMakesRoom) {
  ConnectionLimits limits;
  limits.max_anonymous = 3;
  ConnectionGuard guard(limits);
  std::vector<int> shut;
  auto record = [&](int fd) { shut.push_back(fd); };
  const Time t0;
  guard.Opened("a", 1, t0 + 2s);
  const auto reading = guard.Opened("b", 2, t0);  // older, but reading a body
  guard.Entered(reading, ConnectionPhase::kReadingBody, t0 + 1s);
  guard.Opened("c", 3, t0 + 3s);
  EXPECT_TRUE(guard.MayAccept("d", record));
  EXPECT_EQ(shut, std::vector<int>{1}) << "the oldest waiting for a head, not the one reading";
  EXPECT_EQ(guard.counts().evicted, 1);
  // Shut down already: the next newcomer takes the next oldest, until none waits for a head.
  EXPECT_TRUE(guard.MayAccept("d", record));
  EXPECT_EQ(shut, (std::vector<int>{1, 3}));
  EXPECT_FALSE(guard.MayAccept("d", record));
  EXPECT_EQ(guard.counts().refused, 1);
}

TEST(ConnectionGuardTest, EachPhaseHasItsDeadlineAndAnAuthenticatedAnswerNone) {
  ConnectionLimits limits;
  limits.head_timeout = 10s;
  limits.body_timeout = 30s;
  limits.anonymous_answer_timeout = 60s;
  ConnectionGuard guard(limits);
  const Time t0;
  guard.Opened("a", 1, t0);
  const auto reading = guard.Opened("a", 2, t0);
  const auto answering = guard.Opened("a", 3, t0);
  const auto anonymous_answer = guard.Opened("a", 4, t0);
  guard.Authenticated(answering);
  guard.Entered(reading, ConnectionPhase::kReadingBody, t0 + 5s);
  guard.Entered(answering, ConnectionPhase::kAnswering, t0 + 5s);
  guard.Entered(anonymous_answer, ConnectionPhase::kAnswering, t0 + 5s);
  std::vector<int> shut;
  auto record = [&](int fd) { shut.push_back(fd); };
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 9s, record), 0);
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 10s, record), 1);
  EXPECT_EQ(shut, std::vector<int>{1});
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 11s, record), 0) << "once per phase";
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 35s, record), 1);
  EXPECT_EQ(shut, (std::vector<int>{1, 2}));
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 65s, record), 1) << "an anonymous caller reading slowly";
  EXPECT_EQ(shut, (std::vector<int>{1, 2, 4}));
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 1000s, record), 0) << "an authenticated answer: none";
  // Answered: the connection waits for its next head, from then.
  guard.Entered(answering, ConnectionPhase::kAwaitingHead, t0 + 1000s);
  EXPECT_EQ(guard.ShutDownOverdue(t0 + 1010s, record), 1);
  EXPECT_EQ(guard.counts().timed_out, 4);
}

}  // namespace
}  // namespace corral::server
