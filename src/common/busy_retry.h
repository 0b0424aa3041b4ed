// How a client honours a server's "not now" (docs/control-plane.md, "Back-pressure"): a
// saturated server answers 503 with Retry-After (and the Corral-Busy header), a limit that frees
// up with time 429 with Retry-After. Neither carried the request out, so sending it again to the
// same server after Retry-After cannot do it twice, a submission included.
//
// Pure: no sockets and no clock (http_attempt.h reads an HTTP answer into a BusyAnswer; the
// caller sleeps as told).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "common/units.h"

namespace corral {

// A server's "not now": nothing was done; ask again after `retry_after`.
struct BusyAnswer {
  int status = 0;  // 503 (saturated) or 429 (a limit)
  Seconds retry_after{1};
  std::string detail;  // the problem's detail
};

// A Retry-After header's value as delay-seconds (RFC 9110, "120"); nullopt for an HTTP-date or
// anything else, which clients treat as no promise.
std::optional<Seconds> ParseRetryAfter(std::string_view value);

// `at_least` spread by `jitter` (in [0, 1)) times `spread` of it more: clients refused together
// come back apart, none before the server asked.
std::chrono::milliseconds Jittered(Seconds at_least, double spread, double jitter);

// The CLI's rule: how long one command may wait on busy answers in all before it shows the
// answer. A 503 (saturated) is sent again after its Retry-After, a 429 only when its Retry-After
// is at most `max_limit_wait` (a limit that clears later is shown at once: the user decides),
// each while the waits stay within `budget`. Not thread-safe.
class BusyBudget {
 public:
  BusyBudget(std::chrono::milliseconds budget, Seconds max_limit_wait)
      : budget_(budget), max_limit_wait_(max_limit_wait) {}

  // The wait before sending again after `busy` (its Retry-After, jittered: Jittered with
  // kBusyJitterSpread), counted as spent; nullopt: show the answer.
  std::optional<std::chrono::milliseconds> Next(const BusyAnswer& busy, double jitter);
  // The waits Next gave so far.
  std::chrono::milliseconds waited() const { return waited_; }

  // The most a wait is spread (a fraction of the Retry-After).
  static constexpr double kBusyJitterSpread = 0.2;

 private:
  std::chrono::milliseconds budget_;
  Seconds max_limit_wait_;
  std::chrono::milliseconds waited_{0};
};

}  // namespace corral
