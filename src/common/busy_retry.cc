#include "common/busy_retry.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "common/strings.h"

namespace corral {

std::optional<Seconds> ParseRetryAfter(std::string_view value) {
  const std::string text = Trim(value);
  int64_t seconds = -1;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (text.empty() || err != std::errc() || end != text.data() + text.size() || seconds < 0) {
    return std::nullopt;
  }
  return Seconds(seconds);
}

std::chrono::milliseconds Jittered(Seconds at_least, double spread, double jitter) {
  const double ms = static_cast<double>(at_least.value()) * 1000;
  return std::chrono::milliseconds(
      static_cast<int64_t>(std::ceil(ms * (1 + spread * std::clamp(jitter, 0.0, 1.0)))));
}

std::optional<std::chrono::milliseconds> BusyBudget::Next(const BusyAnswer& busy, double jitter) {
  if (busy.status == 429 && busy.retry_after > max_limit_wait_) return std::nullopt;
  const std::chrono::milliseconds wait = Jittered(busy.retry_after, kBusyJitterSpread, jitter);
  if (waited_ + wait > budget_) return std::nullopt;
  waited_ += wait;
  return wait;
}

}  // namespace corral
