#include "server/control/principal_cache.h"

#include <gtest/gtest.h>

#include <atomic>
#include <thread>
#include <vector>

namespace corral::server {
namespace {

// A loader standing in for the store: counts its calls and answers `who` or `error`.
struct FakeLoader {
  Principal who;
  Status error;
  int calls = 0;

  std::function<Result<Principal>()> Fn() {
    return [this]() -> Result<Principal> {
      ++calls;
      if (!error.ok()) return error;
      return who;
    };
  }
};

Principal Alice(std::vector<std::string> projects = {"default"}) {
  Principal p;
  p.user_id = 7;
  p.name = "alice";
  p.projects = std::move(projects);
  return p;
}

TEST(PrincipalCache, ServesAFreshEntryWithoutLoadingAgain) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 10, .ttl = Seconds(5)});
  FakeLoader store{Alice()};
  auto first = cache.Get("h1", store.Fn());
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->name, "alice");
  clock.Advance(Seconds(4));
  auto second = cache.Get("h1", store.Fn());
  ASSERT_TRUE(second.ok());
  EXPECT_EQ(second->projects, std::vector<std::string>{"default"});
  EXPECT_EQ(store.calls, 1);
}

TEST(PrincipalCache, LoadsAgainOnceTheTtlHasPassed) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 10, .ttl = Seconds(5)});
  FakeLoader store{Alice()};
  ASSERT_TRUE(cache.Get("h1", store.Fn()).ok());
  clock.Advance(Seconds(5));
  store.who = Alice({"default", "vision"});  // a change made elsewhere (another server)
  auto reloaded = cache.Get("h1", store.Fn());
  ASSERT_TRUE(reloaded.ok());
  EXPECT_EQ(reloaded->projects, (std::vector<std::string>{"default", "vision"}));
  EXPECT_EQ(store.calls, 2);
  // A clock stepped back does not stretch an entry's life.
  clock.Set(Seconds(900));
  ASSERT_TRUE(cache.Get("h1", store.Fn()).ok());
  EXPECT_EQ(store.calls, 3);
}

TEST(PrincipalCache, ClearMakesTheNextRequestSeeARevocation) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 10, .ttl = Seconds(5)});
  FakeLoader store{Alice()};
  ASSERT_TRUE(cache.Get("h1", store.Fn()).ok());
  store.error = Unauthenticated("unknown or revoked token");
  cache.Clear();
  auto refused = cache.Get("h1", store.Fn());
  EXPECT_EQ(refused.status().code(), StatusCode::kUnauthenticated);
  EXPECT_EQ(store.calls, 2);
}

TEST(PrincipalCache, ErrorsAreNotCached) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 10, .ttl = Seconds(5)});
  FakeLoader store{Alice(), Unauthenticated("unknown or revoked token")};
  EXPECT_FALSE(cache.Get("h1", store.Fn()).ok());
  store.error = Status::Ok();  // the token was created meanwhile
  EXPECT_TRUE(cache.Get("h1", store.Fn()).ok());
  EXPECT_EQ(store.calls, 2);
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PrincipalCache, AClearDuringALoadKeepsThatLoadOutOfTheCache) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 10, .ttl = Seconds(5)});
  int calls = 0;
  // The revocation commits and clears the cache while this request is reading the store.
  auto racing = [&]() -> Result<Principal> {
    ++calls;
    cache.Clear();
    return Alice();
  };
  EXPECT_TRUE(cache.Get("h1", racing).ok());  // answered, but not remembered
  EXPECT_EQ(cache.size(), 0u);
  FakeLoader store{Alice()};
  EXPECT_TRUE(cache.Get("h1", store.Fn()).ok());
  EXPECT_EQ(store.calls, 1);
}

TEST(PrincipalCache, KeepsAtMostCapacityEntriesDroppingTheOldest) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 3, .ttl = Seconds(5)});
  FakeLoader store{Alice()};
  for (const char* hash : {"h1", "h2", "h3", "h4"}) ASSERT_TRUE(cache.Get(hash, store.Fn()).ok());
  EXPECT_EQ(cache.size(), 3u);
  EXPECT_EQ(store.calls, 4);
  ASSERT_TRUE(cache.Get("h4", store.Fn()).ok());  // still cached
  EXPECT_EQ(store.calls, 4);
  ASSERT_TRUE(cache.Get("h1", store.Fn()).ok());  // dropped: loaded again
  EXPECT_EQ(store.calls, 5);
  // Expired entries go first, before any fresh one.
  clock.Advance(Seconds(5));
  ASSERT_TRUE(cache.Get("h5", store.Fn()).ok());
  EXPECT_EQ(cache.size(), 1u);
}

TEST(PrincipalCache, IsSafeUnderConcurrentGetsAndClears) {
  FakeClock clock(Seconds(1000));
  PrincipalCache cache(clock, {.capacity = 16, .ttl = Seconds(5)});
  std::atomic<int> loads{0};
  auto load = [&]() -> Result<Principal> {
    ++loads;
    return Alice();
  };
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 2000; ++i) {
        EXPECT_TRUE(cache.Get(std::to_string((i + t) % 32), load).ok());
        if (i % 100 == 0) cache.Clear();
      }
    });
  }
  for (auto& t : threads) t.join();
  EXPECT_LE(cache.size(), 16u);
  EXPECT_GT(loads.load(), 0);
}

}  // namespace
}  // namespace corral::server
