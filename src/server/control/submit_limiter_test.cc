#include "server/control/submit_limiter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace corral::server {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kNoClusterCap = SubmitLimiter::kDefaultMaxPendingJobs;

// The refusal of a Take, or OK.
Status TakeStatus(SubmitLimiter& limiter, const std::string& user, const std::string& project,
                  int64_t jobs, int64_t now) {
  auto taken = limiter.Take(user, project, jobs, Seconds(now));
  return taken.ok() ? Status::Ok() : taken.status();
}

TEST(SubmitLimiterTest, WithoutLimitsOnlyTheClusterCapHolds) {
  SubmitLimiter limiter(3);
  ASSERT_TRUE(limiter.Take("alice", "p", 2, Seconds(0)).ok());
  ASSERT_TRUE(limiter.Take("bob", "q", 1, Seconds(0)).ok());
  Status full = TakeStatus(limiter, "carol", "r", 1, 0);
  EXPECT_EQ(full.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(full.message(),
            "the cluster may hold at most 3 jobs pending (corral server --max-pending-jobs) and "
            "holds 3; this submission adds 1");
  EXPECT_EQ(full.retry_after(), SubmitLimiter::kPendingRetryAfter);
  limiter.AddPending("alice", "p", -1);  // one started
  EXPECT_TRUE(limiter.Take("carol", "r", 1, Seconds(0)).ok());
  EXPECT_EQ(limiter.PendingJobs(), 3);
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 1);
  EXPECT_EQ(limiter.PendingJobsOfProject("r"), 1);
}

TEST(SubmitLimiterTest, AnArrayCountsItsElementsAndIsRefusedWhole) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_pending_jobs = 5});
  ASSERT_TRUE(limiter.Take("alice", "p", 3, Seconds(0)).ok());
  Status over = TakeStatus(limiter, "alice", "p", 3, 0);
  EXPECT_EQ(over.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(over.message(),
            "user 'alice' may have at most 5 jobs pending (max_pending_jobs) and has 3; this "
            "submission adds 3");
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 3);  // nothing of the refused array was taken
  EXPECT_EQ(limiter.PendingJobs(), 3);
  EXPECT_TRUE(limiter.Take("alice", "p", 2, Seconds(0)).ok());
  EXPECT_EQ(TakeStatus(limiter, "alice", "q", 1, 0).code(), StatusCode::kResourceExhausted);
  EXPECT_TRUE(limiter.Take("bob", "p", 100, Seconds(0)).ok());  // others are not held back
  limiter.AddPending("alice", "p", -1);
  EXPECT_TRUE(limiter.Take("alice", "q", 1, Seconds(0)).ok());
}

TEST(SubmitLimiterTest, MoreJobsThanACapIsRefusedForGood) {
  SubmitLimiter limiter(10);
  limiter.SetUserLimits("alice", {.max_pending_jobs = 5, .max_submits_per_minute = 4});
  limiter.SetProjectLimits("blocked", {.max_pending_jobs = 0});
  Status never = TakeStatus(limiter, "alice", "p", 6, 0);
  EXPECT_EQ(never.code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(never.message(),
            "this submission adds 6 jobs, more than user 'alice' may ever have pending "
            "(max_pending_jobs is 5)");
  EXPECT_EQ(never.retry_after(), std::nullopt);
  EXPECT_THAT(TakeStatus(limiter, "alice", "p", 5, 0).message(),
              HasSubstr("more than user 'alice' may submit in a minute (max_submits_per_minute "
                        "is 4)"));
  EXPECT_THAT(TakeStatus(limiter, "bob", "p", 11, 0).message(),
              HasSubstr("more than the cluster may ever hold pending (corral server "
                        "--max-pending-jobs is 10)"));
  EXPECT_THAT(TakeStatus(limiter, "bob", "blocked", 1, 0).message(),
              HasSubstr("more than project 'blocked' may ever have pending (max_pending_jobs is "
                        "0)"));
  EXPECT_EQ(limiter.PendingJobs(), 0);
}

TEST(SubmitLimiterTest, ARateRefusalSaysWhenEnoughOfTheMinuteHasPassed) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_submits_per_minute = 10});
  ASSERT_TRUE(limiter.Take("alice", "p", 4, Seconds(100)).ok());
  ASSERT_TRUE(limiter.Take("alice", "p", 6, Seconds(110)).ok());
  Status one = TakeStatus(limiter, "alice", "p", 1, 120);
  EXPECT_EQ(one.code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(one.message(),
            "user 'alice' may submit at most 10 jobs a minute (max_submits_per_minute) and "
            "submitted 10 in the last 60 s; this submission adds 1");
  EXPECT_EQ(one.retry_after(), Seconds(40));  // the 4 of second 100 leave at 160
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 5, 120).retry_after(), Seconds(50));
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 1, 159).retry_after(), Seconds(1));
  EXPECT_TRUE(limiter.Take("alice", "p", 4, Seconds(160)).ok());
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 1, 169).retry_after(), Seconds(1));
  // Pending jobs are another cap: they need not end for the rate to allow more.
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 14);
  EXPECT_TRUE(limiter.Take("alice", "p", 6, Seconds(170)).ok());
}

TEST(SubmitLimiterTest, AProjectsCapsCountAllItsMembers) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetProjectLimits("vision", {.max_pending_jobs = 2, .max_submits_per_minute = 3});
  ASSERT_TRUE(limiter.Take("alice", "vision", 1, Seconds(0)).ok());
  ASSERT_TRUE(limiter.Take("bob", "vision", 1, Seconds(0)).ok());
  EXPECT_THAT(TakeStatus(limiter, "carol", "vision", 1, 0).message(),
              HasSubstr("project 'vision' may have at most 2 jobs pending"));
  EXPECT_TRUE(limiter.Take("carol", "nlp", 1, Seconds(0)).ok());
  limiter.AddPending("alice", "vision", -1);
  ASSERT_TRUE(limiter.Take("carol", "vision", 1, Seconds(1)).ok());
  limiter.AddPending("bob", "vision", -1);
  EXPECT_THAT(TakeStatus(limiter, "dave", "vision", 1, 2).message(),
              HasSubstr("project 'vision' may submit at most 3 jobs a minute"));
}

TEST(SubmitLimiterTest, TheFirstCapIsNamedAndTheLongestWaitIsAsked) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetProjectLimits("vision", {.max_submits_per_minute = 1});
  limiter.SetUserLimits("alice", {.max_pending_jobs = 1});
  ASSERT_TRUE(limiter.Take("alice", "vision", 1, Seconds(100)).ok());
  Status both = TakeStatus(limiter, "alice", "vision", 1, 105);
  EXPECT_THAT(both.message(), HasSubstr("project 'vision' may submit at most 1 job a minute"));
  EXPECT_EQ(both.retry_after(), Seconds(55));  // the rate's wait, longer than pending's 10 s
}

TEST(SubmitLimiterTest, GiveBackReturnsThePendingJobsAndThePlaceInTheRate) {
  SubmitLimiter limiter(5);
  limiter.SetUserLimits("alice", {.max_submits_per_minute = 3});
  auto taken = limiter.Take("alice", "p", 3, Seconds(10));
  ASSERT_TRUE(taken.ok());
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 1, 10).code(), StatusCode::kResourceExhausted);
  limiter.GiveBack(*taken);  // its commit failed
  EXPECT_EQ(limiter.PendingJobs(), 0);
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 0);
  EXPECT_TRUE(limiter.Take("alice", "p", 3, Seconds(11)).ok());
}

TEST(SubmitLimiterTest, RequeuedJobsCountButAreNeverRefused) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_pending_jobs = 2});
  ASSERT_TRUE(limiter.Take("alice", "p", 2, Seconds(0)).ok());
  limiter.AddPending("alice", "p", -2);  // both started
  ASSERT_TRUE(limiter.Take("alice", "p", 2, Seconds(0)).ok());
  limiter.AddPending("alice", "p", 2);  // the first two lost their node and wait again
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 4);
  EXPECT_THAT(TakeStatus(limiter, "alice", "p", 1, 0).message(), HasSubstr("and has 4"));
  limiter.AddPending("alice", "p", -3);
  EXPECT_TRUE(limiter.Take("alice", "p", 1, Seconds(0)).ok());
}

TEST(SubmitLimiterTest, ALimitTakenAwayStopsCountingAndOneSetAgainCountsFromThen) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_submits_per_minute = 1});
  ASSERT_TRUE(limiter.Take("alice", "p", 1, Seconds(0)).ok());
  limiter.SetUserLimits("alice", {});
  ASSERT_TRUE(limiter.Take("alice", "p", 100, Seconds(1)).ok());
  limiter.SetUserLimits("alice", {.max_submits_per_minute = 1});
  EXPECT_TRUE(limiter.Take("alice", "p", 1, Seconds(2)).ok());
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 1, 3).code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(limiter.PendingJobsOfUser("alice"), 102);  // pending jobs count with or without caps
}

TEST(SubmitLimiterTest, RecoveredSubmissionsCountInTheRatesUntilTheyLeaveTheWindow) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_submits_per_minute = 2});
  limiter.AddSubmitted("alice", "p", Seconds(40), Seconds(100));  // left the window already
  limiter.AddSubmitted("alice", "p", Seconds(90), Seconds(100));
  limiter.AddSubmitted("alice", "p", Seconds(70), Seconds(100));  // out of order
  EXPECT_EQ(TakeStatus(limiter, "alice", "p", 1, 100).retry_after(), Seconds(30));
  EXPECT_TRUE(limiter.Take("alice", "p", 1, Seconds(130)).ok());
  EXPECT_EQ(limiter.PendingJobs(), 1);  // AddSubmitted counts no pending job
}

TEST(SubmitLimiterTest, ConcurrentSubmissionsNeverOvershootACap) {
  SubmitLimiter limiter(kNoClusterCap);
  limiter.SetUserLimits("alice", {.max_pending_jobs = 500});
  limiter.SetProjectLimits("p", {.max_submits_per_minute = 700});
  std::atomic<int64_t> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 100; ++i) {
        const int64_t jobs = 1 + (t + i) % 3;  // single jobs and small arrays
        const bool alice = (t + i) % 2 == 0;
        auto taken = limiter.Take(alice ? "alice" : "bob", "p", jobs, Seconds(0));
        (taken.ok() ? admitted : refused) += taken.ok() ? jobs : 1;
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(limiter.PendingJobsOfUser("alice"), 500);
  EXPECT_EQ(limiter.PendingJobsOfProject("p"), admitted.load());
  EXPECT_LE(admitted.load(), 700);
  EXPECT_GE(admitted.load(), 698);  // refused only when the next one did not fit
  EXPECT_GT(refused.load(), 0);
}

}  // namespace
}  // namespace corral::server
