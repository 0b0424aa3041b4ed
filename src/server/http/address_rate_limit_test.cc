#include "server/http/address_rate_limit.h"

#include <gtest/gtest.h>

namespace corral::server {
namespace {

using namespace std::chrono_literals;

TEST(AddressRateLimitTest, ABurstThenOneEveryIntervalPerAddress) {
  AddressRateLimit limit(60);  // one a second, bursts of 60
  const AddressRateLimit::Clock::time_point t0;
  for (int i = 0; i < 60; ++i) EXPECT_EQ(limit.Take("a", t0), 0) << i;
  EXPECT_EQ(limit.Take("a", t0), 1) << "the 61st waits a second";
  EXPECT_EQ(limit.Take("b", t0), 0) << "another address has its own";
  EXPECT_EQ(limit.Take("a", t0 + 1s), 0);
  EXPECT_GE(limit.Take("a", t0 + 1s), 1);
}

TEST(AddressRateLimitTest, ItsTableIsBounded) {
  AddressRateLimit limit(1, /*max_addresses=*/4);
  const AddressRateLimit::Clock::time_point t0;
  for (int i = 0; i < 100; ++i) EXPECT_EQ(limit.Take("a" + std::to_string(i), t0), 0);
  // The table was cleared along the way (every bucket busy): "a0" is new again.
  EXPECT_EQ(limit.Take("a0", t0), 0);
}

TEST(AddressRateLimitTest, ZeroIsNoLimit) {
  AddressRateLimit limit(0);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(limit.Take("a", {}), 0);
}

}  // namespace
}  // namespace corral::server
