// LeaderLease (leader_lease.h) on a real store: a follower learns who leads and takes over once
// the leader stops renewing; a leader whose lease was taken hears so once; the flags' rules; and
// what a server that does not lead answers.
#include "server/leader_lease.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <functional>
#include <nlohmann/json.hpp>
#include <thread>

#include "server/test_store.h"
#include "store/sqlite_connection.h"

namespace corral::server {
namespace {

using std::chrono::milliseconds;
using ::testing::HasSubstr;

constexpr LeaseTiming kFast{milliseconds(1000), milliseconds(200)};

std::string Header(const HttpResponse& res, const std::string& name) {
  auto it = res.headers.find(name);
  return it == res.headers.end() ? "" : it->second;
}

bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(milliseconds(5));
  }
  return true;
}

TEST(LeaderLease, AFollowerNamesTheLeaderAndTakesOverWhenItStopsRenewing) {
  TestStore db("leader-lease");
  auto second = store::OpenStore("sqlite:" + db.db_path());
  ASSERT_TRUE(second.ok());
  std::atomic<int64_t> a_epoch{0}, b_epoch{0};
  std::atomic<int> a_lost{0};
  LeaderLease a(
      *db.store(), "a", "http://a:8080", kFast, [&](int64_t e) { a_epoch = e; },
      [&](const Status&) { ++a_lost; });
  LeaderLease b(
      **second, "b", "http://b:8080", kFast, [&](int64_t e) { b_epoch = e; }, [](const Status&) {});
  a.Start();
  ASSERT_TRUE(WaitFor([&] { return a.Leading(); }));
  EXPECT_EQ(a_epoch, 1);
  b.Start();
  ASSERT_TRUE(WaitFor([&] { return b.Leader() == "http://a:8080"; }));
  EXPECT_FALSE(b.Leading());
  // a renews: b stays a follower for several lease durations.
  const auto until = std::chrono::steady_clock::now() + milliseconds(2500);
  while (std::chrono::steady_clock::now() < until) {
    ASSERT_FALSE(b.Leading());
    ASSERT_TRUE(a.Leading());
    std::this_thread::sleep_for(milliseconds(20));
  }
  // a stops (as a SIGKILL would: no renewal, no release): b leads with the next epoch.
  a.Stop();
  ASSERT_TRUE(WaitFor([&] { return b.Leading(); }));
  EXPECT_EQ(b_epoch, 2);
  EXPECT_EQ(b.Leader(), "http://b:8080");
  EXPECT_EQ(a_lost, 0);
  b.Stop();
}

TEST(LeaderLease, ALeaderWhoseLeaseWasTakenStopsLeadingAndHearsWhy) {
  TestStore db("leader-lease");
  Status why;
  std::atomic<bool> lost{false};
  LeaderLease a(
      *db.store(), "a", "http://a", kFast, [](int64_t) {},
      [&](const Status& s) {
        why = s;
        lost = true;
      });
  a.Start();
  ASSERT_TRUE(WaitFor([&] { return a.Leading(); }));
  // Another server takes the lease over (as it would once a's lapsed while a was frozen).
  auto raw = store::SqliteConnection::Open(db.db_path());
  ASSERT_TRUE(raw.ok());
  ASSERT_TRUE((*raw)
                  ->ExecuteScript(
                      "BEGIN IMMEDIATE; UPDATE leader_lease SET holder = 'b', url = 'http://b', "
                      "epoch = epoch + 1, expires_at_ms = expires_at_ms + 600000; "
                      "UPDATE leader_epoch SET epoch = epoch + 1; COMMIT")
                  .ok());
  ASSERT_TRUE(WaitFor([&] { return lost.load(); }));
  EXPECT_FALSE(a.Leading());
  EXPECT_EQ(why.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(why.message(), HasSubstr("taken over by server b (http://b)"));
  a.Stop();
}

TEST(LeaseTiming, TheRenewalMustComeWithinHalfTheLease) {
  EXPECT_TRUE(ValidateLeaseTiming({milliseconds(3000), milliseconds(500)}).ok());
  Status slow = ValidateLeaseTiming({milliseconds(3000), milliseconds(1500)});
  EXPECT_EQ(slow.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(slow.message(), HasSubstr("--lease-renew-interval: must be under half"));
  EXPECT_THAT(ValidateLeaseTiming({milliseconds(50), milliseconds(10)}).message(),
              HasSubstr("--lease-duration"));
  EXPECT_THAT(ValidateLeaseTiming({milliseconds(3000), milliseconds(10)}).message(),
              HasSubstr("--lease-renew-interval: must be at least 100 ms"));
}

TEST(FollowerAnswer, ServiceUnavailableNamingTheLeaderExceptHealthz) {
  HttpRequest post;
  post.method = "POST";
  post.path = "/api/v1/jobs";
  HttpResponse known = FollowerAnswer(post, "http://10.0.0.2:8080");
  EXPECT_EQ(known.status, 503);
  EXPECT_EQ(Header(known, "Content-Type"), "application/problem+json");
  EXPECT_EQ(Header(known, "Retry-After"), "1");
  EXPECT_EQ(Header(known, "Corral-Leader"), "http://10.0.0.2:8080");
  EXPECT_EQ(nlohmann::json::parse(known.body),
            nlohmann::json(
                {{"type", "about:blank"},
                 {"title", "Service Unavailable"},
                 {"status", 503},
                 {"detail", "this server is not the leader; the leader is http://10.0.0.2:8080"}}));
  HttpResponse unknown = FollowerAnswer(post, std::nullopt);
  EXPECT_EQ(unknown.headers.count("Corral-Leader"), 0u);
  EXPECT_THAT(unknown.body, HasSubstr("this server is not the leader; no leader yet"));
  HttpRequest health;
  health.method = "GET";
  health.path = "/healthz";
  HttpResponse ok = FollowerAnswer(health, std::nullopt);
  EXPECT_EQ(ok.status, 200);
  EXPECT_EQ(nlohmann::json::parse(ok.body),
            nlohmann::json({{"status", "ok"}, {"role", "follower"}, {"leader", nullptr}}));
}

}  // namespace
}  // namespace corral::server
