// The in-job channel's write rate (docs/in-job.md, "Limits"): each job's reports and checkpoints
// take a token from the job's bucket, which holds at most kBurst and refills kPerSecond tokens
// each second. A write with no token left is refused with ResourceExhausted and a retry_after,
// before it reaches the store. The buckets live in memory (a restart forgives), one per job that
// wrote within the last few seconds: a full bucket is forgotten.
//
// Thread safety: Take may be called from any thread (one mutex, never held for I/O).
#pragma once

#include <cstdint>
#include <mutex>
#include <unordered_map>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"

namespace corral::server {

class ChannelRateLimiter {
 public:
  static constexpr int64_t kPerSecond = 10;
  static constexpr int64_t kBurst = 20;
  static constexpr Seconds kRetryAfter{1};

  // Takes one token of job `id`'s bucket at `now`: OK, or ResourceExhausted naming the job and
  // the rate, with retry_after kRetryAfter.
  Status Take(JobId id, Seconds now);

 private:
  struct Bucket {
    int64_t tokens = kBurst;
    Seconds at{0};  // when `tokens` was counted
  };
  // Drops the buckets that are full again at `now` (their job wrote nothing for a while).
  void ForgetFullLocked(Seconds now);

  std::mutex mu_;
  std::unordered_map<JobId, Bucket> buckets_;
};

}  // namespace corral::server
