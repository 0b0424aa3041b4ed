#include "server/control/channel_rate_limiter.h"

#include <algorithm>
#include <string>

namespace corral::server {
namespace {

// The bucket's tokens at `now`, refilled since it was counted.
int64_t TokensAt(int64_t tokens, Seconds at, Seconds now) {
  const int64_t elapsed = std::max<int64_t>(0, now.value() - at.value());
  // Past a full refill the product could only overflow: the bucket is full.
  if (elapsed >= ChannelRateLimiter::kBurst) return ChannelRateLimiter::kBurst;
  return std::min(ChannelRateLimiter::kBurst, tokens + elapsed * ChannelRateLimiter::kPerSecond);
}

}  // namespace

Status ChannelRateLimiter::Take(JobId id, Seconds now) {
  std::lock_guard<std::mutex> lock(mu_);
  // Bounded by the jobs writing in the last few seconds.
  if (buckets_.size() >= 1024) ForgetFullLocked(now);
  Bucket& bucket = buckets_[id];
  bucket.tokens = TokensAt(bucket.tokens, bucket.at, now);
  bucket.at = now;
  if (bucket.tokens == 0) {
    return ResourceExhausted(
        "job " + std::to_string(id.value()) + " writes to the in-job channel faster than " +
            std::to_string(kPerSecond) + " a second (bursts of " + std::to_string(kBurst) + ")",
        kRetryAfter);
  }
  --bucket.tokens;
  return Status::Ok();
}

void ChannelRateLimiter::ForgetFullLocked(Seconds now) {
  for (auto it = buckets_.begin(); it != buckets_.end();) {
    if (TokensAt(it->second.tokens, it->second.at, now) == kBurst) {
      it = buckets_.erase(it);
    } else {
      ++it;
    }
  }
}

}  // namespace corral::server
