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

}  // namespace corral
