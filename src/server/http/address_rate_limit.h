// A rate limit per client address (docs/security.md): at most `per_minute` events a minute from
// one address, with bursts of up to `per_minute` (a token bucket refilled continuously). Memory
// is bounded: an address whose bucket is full again is forgotten when the table grows past
// `max_addresses`, and if all are busy the table is cleared (a flood of addresses resets the
// limit rather than growing without bound). Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>
#include <unordered_map>

namespace corral::server {

class AddressRateLimit {
 public:
  using Clock = std::chrono::steady_clock;

  explicit AddressRateLimit(int per_minute, size_t max_addresses = 4096)
      : per_minute_(per_minute), max_addresses_(max_addresses) {}

  // Takes one event for `address` at `now`: 0 when it is allowed, else the whole seconds until
  // one will be (for Retry-After), at least 1.
  int64_t Take(const std::string& address, Clock::time_point now);

 private:
  struct Bucket {
    double tokens = 0;
    Clock::time_point at;
  };
  double Refilled(const Bucket& b, Clock::time_point now) const;

  const int per_minute_;
  const size_t max_addresses_;
  std::mutex mu_;
  std::unordered_map<std::string, Bucket> buckets_;
};

}  // namespace corral::server
