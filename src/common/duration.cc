#include "common/duration.h"

#include <charconv>
#include <cstdint>

namespace corral {

Result<Seconds> ParseDuration(std::string_view text, const std::string& what) {
  int64_t value = 0;
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto [number_end, err] = std::from_chars(begin, end, value);
  const std::string_view unit(number_end, static_cast<size_t>(end - number_end));
  int64_t scale = 0;
  if (unit.empty() || unit == "s") scale = 1;
  if (unit == "m") scale = 60;
  if (unit == "h") scale = 3600;
  if (unit == "d") scale = 86400;
  if (err != std::errc() || number_end == begin || value < 0 || scale == 0 ||
      value > kMaxDuration.value() / scale) {
    return InvalidArgument(what + ": expected a duration like 90s, 30m, 2h or 1d, got '" +
                           std::string(text) + "'");
  }
  return Seconds(value * scale);
}

Result<int64_t> ParseDurationMs(std::string_view text, const std::string& what) {
  if (text.size() > 2 && text.substr(text.size() - 2) == "ms") {
    int64_t value = 0;
    const std::string_view number = text.substr(0, text.size() - 2);
    auto [end, err] = std::from_chars(number.data(), number.data() + number.size(), value);
    if (err != std::errc() || end != number.data() + number.size() || value < 0 ||
        value > kMaxDuration.value()) {
      return InvalidArgument(what + ": expected a duration like 500ms, 3s or 1m, got '" +
                             std::string(text) + "'");
    }
    return value;
  }
  auto seconds = ParseDuration(text, what);
  if (!seconds.ok()) {
    return InvalidArgument(what + ": expected a duration like 500ms, 3s or 1m, got '" +
                           std::string(text) + "'");
  }
  return seconds->value() * 1000;
}

}  // namespace corral
