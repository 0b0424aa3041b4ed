#include "server/http/address_rate_limit.h"

#include <algorithm>
#include <cmath>

namespace corral::server {

double AddressRateLimit::Refilled(const Bucket& b, Clock::time_point now) const {
  const double minutes = std::chrono::duration<double>(now - b.at).count() / 60.0;
  return std::min<double>(per_minute_, b.tokens + minutes * per_minute_);
}

int64_t AddressRateLimit::Take(const std::string& address, Clock::time_point now) {
  if (per_minute_ <= 0) return 0;  // no limit
  std::lock_guard lock(mu_);
  auto it = buckets_.find(address);
  if (it == buckets_.end()) {
    if (buckets_.size() >= max_addresses_) {
      std::erase_if(buckets_,
                    [&](const auto& entry) { return Refilled(entry.second, now) >= per_minute_; });
      if (buckets_.size() >= max_addresses_) buckets_.clear();
    }
    it = buckets_.emplace(address, Bucket{static_cast<double>(per_minute_), now}).first;
  }
  Bucket& b = it->second;
  b.tokens = Refilled(b, now);
  b.at = now;
  if (b.tokens >= 1) {
    b.tokens -= 1;
    return 0;
  }
  const double seconds = (1 - b.tokens) * 60.0 / per_minute_;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(seconds)));
}

}  // namespace corral::server
