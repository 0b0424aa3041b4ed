// Wall-clock time behind an interface, so that tests drive timeouts, grace periods and time
// limits without sleeping (architecture.md, contract 4).
#pragma once

#include <atomic>

#include "common/units.h"

namespace corral {

class Clock {
 public:
  virtual ~Clock() = default;
  // Seconds since the Unix epoch. Thread-safe.
  virtual Seconds Now() = 0;
};

// The real wall clock (CLOCK_REALTIME).
class SystemClock final : public Clock {
 public:
  Seconds Now() override;
};

// A clock that moves only when told to. Thread-safe.
class FakeClock final : public Clock {
 public:
  explicit FakeClock(Seconds start) : now_(start.value()) {}
  Seconds Now() override { return Seconds(now_.load()); }
  void Advance(Seconds by) { now_ += by.value(); }
  void Set(Seconds to) { now_ = to.value(); }

 private:
  std::atomic<int64_t> now_;
};

}  // namespace corral
