#include "server/http/saturation_guard.h"

#include <algorithm>
#include <cmath>
#include <utility>

namespace corral::server {

namespace {

// The weight of the newest hold time in the pool's mean.
constexpr double kHoldWeight = 1.0 / 16;

}  // namespace

SaturationGuard::Slot::Slot(Slot&& other) noexcept
    : guard_(std::exchange(other.guard_, nullptr)), load_(other.load_), since_(other.since_) {}

SaturationGuard::Slot& SaturationGuard::Slot::operator=(Slot&& other) noexcept {
  if (this != &other) {
    if (guard_ != nullptr) guard_->Leave(load_, since_);
    guard_ = std::exchange(other.guard_, nullptr);
    load_ = other.load_;
    since_ = other.since_;
  }
  return *this;
}

SaturationGuard::Slot::~Slot() {
  if (guard_ != nullptr) guard_->Leave(load_, since_);
}

SaturationGuard::SaturationGuard(SaturationLimits limits) : limits_(limits) {
  regular_.cap = std::max(limits_.max_requests_in_flight, 0);
  agent_.cap = std::max(limits_.max_agent_requests_in_flight, 0);
}

SaturationGuard::Pool& SaturationGuard::PoolOf(Load load) {
  return load == Load::kAgent ? agent_ : regular_;
}

Result<SaturationGuard::Slot> SaturationGuard::Enter(Load load) {
  if (load == Load::kUncounted) return Slot();
  std::unique_lock lock(mu_);
  Pool& pool = PoolOf(load);
  // Room, and no one in line before this request: at once.
  if (pool.cap == 0 || (pool.in_flight < pool.cap && pool.line.empty())) {
    ++pool.in_flight;
    ++pool.admitted;
    return Slot(this, load, Clock::now());
  }
  if (stopped_ || limits_.max_wait.count() <= 0) {
    ++pool.refused;
    return Refusal(load, pool);
  }
  Waiter waiter;
  auto place = pool.line.insert(pool.line.end(), &waiter);
  const bool granted = waiter.wake.wait_for(lock, limits_.max_wait, [&] {
    return waiter.granted || stopped_;
  }) && waiter.granted;
  if (!granted) {
    // Leave the line (a slot handed over at the last moment is not: `granted` would be set).
    pool.line.erase(place);
    ++pool.refused;
    return Refusal(load, pool);
  }
  // Leave() counted the slot as held and took this waiter out of the line.
  ++pool.admitted;
  ++pool.waited;
  return Slot(this, load, Clock::now());
}

void SaturationGuard::Leave(Load load, Clock::time_point since) {
  const double held_us = std::chrono::duration<double, std::micro>(Clock::now() - since).count();
  std::lock_guard lock(mu_);
  Pool& pool = PoolOf(load);
  pool.mean_hold_us = pool.mean_hold_us == 0
                          ? held_us
                          : pool.mean_hold_us + kHoldWeight * (held_us - pool.mean_hold_us);
  if (!pool.line.empty()) {
    // Handed straight to the oldest waiter: in_flight stays, so no newcomer takes it first.
    Waiter* next = pool.line.front();
    pool.line.pop_front();
    next->granted = true;
    next->wake.notify_one();
    return;
  }
  --pool.in_flight;
}

void SaturationGuard::Stop() {
  std::lock_guard lock(mu_);
  stopped_ = true;
  for (Pool* pool : {&regular_, &agent_}) {
    for (Waiter* w : pool->line) w->wake.notify_one();
  }
}

Seconds SaturationRetryAfter(size_t waiting, std::chrono::microseconds mean_hold, int cap) {
  const double ahead = static_cast<double>(waiting) + 1;
  const double seconds = ahead * static_cast<double>(mean_hold.count()) / std::max(cap, 1) / 1e6;
  if (!(seconds < static_cast<double>(kMaxSaturationRetryAfter.value()))) {
    return kMaxSaturationRetryAfter;
  }
  return Seconds(std::max<int64_t>(static_cast<int64_t>(std::ceil(seconds)), 1));
}

Status SaturationGuard::Refusal(Load load, const Pool& pool) const {
  const bool agent = load == Load::kAgent;
  std::string message = "server saturated: " + std::to_string(pool.in_flight) +
                        (agent ? " agent requests" : " requests") + " in flight";
  if (stopped_) {
    message = "server stopping";
  } else if (!agent) {
    message += " (--max-requests-in-flight " + std::to_string(pool.cap) + ")";
  }
  const Seconds after = SaturationRetryAfter(
      pool.line.size(), std::chrono::microseconds(static_cast<int64_t>(pool.mean_hold_us)),
      pool.cap);
  return Unavailable(message + "; try again in " + std::to_string(after.value()) + " s", after);
}

SaturationGuard::Counts SaturationGuard::counts() {
  std::lock_guard lock(mu_);
  auto of = [](const Pool& p) {
    return PoolCounts{p.cap,      p.in_flight, static_cast<int>(p.line.size()),
                      p.admitted, p.waited,    p.refused};
  };
  return Counts{of(regular_), of(agent_)};
}

}  // namespace corral::server
