// Back-pressure (docs/control-plane.md, "Back-pressure"): a cap on the requests the server
// handles at once, so that a saturated server answers at once "503, come back in N s" instead of
// letting every request slow down until clients time out.
//
// A request's Load (decided from its head: Admission::load) picks its pool:
//  - kRegular (API requests, pages): at most `max_requests_in_flight` at once;
//  - kAgent (an agent's registration, heartbeat or push): a pool of its own,
//    `max_agent_requests_in_flight`, which API load can never take: a node declared lost
//    because its heartbeats were shed would cost more than a slow submission, so heartbeats are
//    refused only when agents alone fill their pool;
//  - kUncounted (the dashboard's event stream, which lasts for ever and mostly sleeps; the
//    health check, which a front proxy must see answered even when the server is busy): never
//    counted, never refused.
// A request that finds its pool full waits in line (first come, first served) up to `max_wait`
// for a slot; past it, it is refused: Unavailable with a retry_after (SaturationRetryAfter), which
// the server answers as 503 with Retry-After (http_server.h). A slot is held while the route
// runs, not while a streamed answer is sent.
//
// Thread-safe: Enter blocks its caller (a connection's own thread) for at most max_wait.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <list>
#include <mutex>
#include <string>

#include "common/status.h"

namespace corral::server {

// What a request weighs on the server while it is handled.
enum class Load {
  kRegular,    // an API request or a page: the regular pool
  kAgent,      // an agent's request: the agents' pool
  kUncounted,  // an event stream, /healthz: neither
};

struct SaturationLimits {
  // Regular requests handled at once; 0: no cap (nothing is refused, the guard only counts).
  int max_requests_in_flight = 0;
  // Agents' requests handled at once (a heartbeat's long poll included); 0: no cap.
  int max_agent_requests_in_flight = 0;
  // How long a request may wait in line for a slot before it is refused.
  std::chrono::milliseconds max_wait{0};
};

// The most a refusal's Retry-After says, whatever the estimate.
inline constexpr Seconds kMaxSaturationRetryAfter{10};

// How long, in whole seconds (1 to kMaxSaturationRetryAfter), until a request refused now would
// likely find a slot: the `waiting` requests in line before it and itself served `cap` at a time,
// each holding its slot `mean_hold`.
Seconds SaturationRetryAfter(size_t waiting, std::chrono::microseconds mean_hold, int cap);

class SaturationGuard {
 public:
  using Clock = std::chrono::steady_clock;

  explicit SaturationGuard(SaturationLimits limits);
  SaturationGuard(const SaturationGuard&) = delete;
  SaturationGuard& operator=(const SaturationGuard&) = delete;

  // A slot of one pool (or none: kUncounted, an uncapped pool still counts), given back when
  // destroyed. Must not outlive the guard.
  class Slot {
   public:
    Slot() = default;
    Slot(Slot&& other) noexcept;
    Slot& operator=(Slot&& other) noexcept;
    ~Slot();

   private:
    friend class SaturationGuard;
    Slot(SaturationGuard* guard, Load load, Clock::time_point since)
        : guard_(guard), load_(load), since_(since) {}
    SaturationGuard* guard_ = nullptr;  // null: holds nothing
    Load load_ = Load::kUncounted;
    Clock::time_point since_;
  };

  // A slot for a request of `load`: at once when its pool has room (kUncounted always), else
  // after waiting in line up to max_wait. Unavailable when none came in time, or the guard is
  // stopped, its retry_after SaturationRetryAfter's and its message naming the condition: "server
  // saturated: 64 requests in flight (--max-requests-in-flight 64)".
  Result<Slot> Enter(Load load);
  // Refuses those waiting, and every Enter that would wait from now on (the server stops).
  void Stop();

  struct PoolCounts {
    int cap = 0;        // 0: none
    int in_flight = 0;  // slots held now
    int waiting = 0;    // in line now
    int64_t admitted = 0;
    int64_t waited = 0;   // admitted after waiting in line
    int64_t refused = 0;  // refused: no slot within max_wait
  };
  struct Counts {
    PoolCounts regular;
    PoolCounts agent;
  };
  Counts counts();
  const SaturationLimits& limits() const { return limits_; }

 private:
  // One waiter in a pool's line; `granted` set (and it woken) when a slot is handed to it.
  struct Waiter {
    bool granted = false;
    std::condition_variable wake;
  };
  struct Pool {
    int cap = 0;
    int in_flight = 0;
    std::list<Waiter*> line;  // oldest first
    // How long a slot is held, on average (exponentially weighted), in microseconds.
    double mean_hold_us = 0;
    int64_t admitted = 0;
    int64_t waited = 0;
    int64_t refused = 0;
  };

  Pool& PoolOf(Load load);  // kRegular or kAgent
  // Gives back a slot of `load` held since `since`: to the oldest waiter, else to the pool.
  void Leave(Load load, Clock::time_point since);
  // The refusal of a request of `load` now (SaturationRetryAfter for its pool).
  Status Refusal(Load load, const Pool& pool) const;  // mu_ held

  const SaturationLimits limits_;
  std::mutex mu_;
  Pool regular_;  // guarded by mu_
  Pool agent_;    // guarded by mu_
  bool stopped_ = false;
};

}  // namespace corral::server
