#include "common/duration.h"

#include <charconv>
#include <cstdint>
#include <iterator>
#include <optional>
#include <utility>
#include <vector>

namespace corral {

namespace {

// A whole number that is all of `text` (no sign), or nullopt.
std::optional<int64_t> WholeNumber(std::string_view text) {
  // Digits only: from_chars alone would take a sign ("-0").
  if (text.empty() || text.find_first_not_of("0123456789") != std::string_view::npos) {
    return std::nullopt;
  }
  int64_t value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

// `total` plus `value` × `scale`, or nullopt past kMaxDuration.
std::optional<int64_t> Add(int64_t total, int64_t value, int64_t scale) {
  if (value > (kMaxDuration.value() - total) / scale) return std::nullopt;
  return total + value * scale;
}

// "2h30m", "1d12h", "90m", "45s": numbers each followed by a unit, units in decreasing order.
std::optional<int64_t> UnitsForm(std::string_view text) {
  constexpr std::pair<char, int64_t> kUnits[] = {{'d', 86400}, {'h', 3600}, {'m', 60}, {'s', 1}};
  if (text.empty()) return std::nullopt;
  int64_t total = 0;
  size_t next_unit = 0;  // units before this one are used up
  size_t pos = 0;
  while (pos < text.size()) {
    size_t digits = pos;
    while (digits < text.size() && text[digits] >= '0' && text[digits] <= '9') ++digits;
    if (digits == pos || digits == text.size()) return std::nullopt;
    const std::optional<int64_t> value = WholeNumber(text.substr(pos, digits - pos));
    size_t unit = next_unit;
    while (unit < std::size(kUnits) && kUnits[unit].first != text[digits]) ++unit;
    if (!value || unit == std::size(kUnits)) return std::nullopt;
    const std::optional<int64_t> sum = Add(total, *value, kUnits[unit].second);
    if (!sum) return std::nullopt;
    total = *sum;
    next_unit = unit + 1;
    pos = digits + 1;
  }
  return total;
}

// Slurm's "M:SS", "H:MM:SS", "D-H", "D-H:MM", "D-H:MM:SS".
std::optional<int64_t> ClockForm(std::string_view text) {
  int64_t days = 0;
  const size_t dash = text.find('-');
  if (dash != std::string_view::npos) {
    const std::optional<int64_t> d = WholeNumber(text.substr(0, dash));
    if (!d) return std::nullopt;
    days = *d;
    text.remove_prefix(dash + 1);
  }
  std::vector<int64_t> fields;
  while (true) {
    const size_t colon = text.find(':');
    const std::optional<int64_t> field = WholeNumber(text.substr(0, colon));
    if (!field || fields.size() == 3) return std::nullopt;
    // Every field after the first is a minute or a second.
    if (!fields.empty() && *field > 59) return std::nullopt;
    fields.push_back(*field);
    if (colon == std::string_view::npos) break;
    text.remove_prefix(colon + 1);
  }
  // Without days: M:SS or H:MM:SS (a lone number is not a clock form). With days: H, H:MM or
  // H:MM:SS.
  int64_t hours = 0, minutes = 0, seconds = 0;
  if (dash == std::string_view::npos) {
    if (fields.size() == 2) {
      minutes = fields[0];
      seconds = fields[1];
    } else if (fields.size() == 3) {
      hours = fields[0];
      minutes = fields[1];
      seconds = fields[2];
    } else {
      return std::nullopt;
    }
  } else {
    hours = fields[0];
    if (fields.size() > 1) minutes = fields[1];
    if (fields.size() > 2) seconds = fields[2];
  }
  std::optional<int64_t> total = Add(0, days, 86400);
  if (total) total = Add(*total, hours, 3600);
  if (total) total = Add(*total, minutes, 60);
  if (total) total = Add(*total, seconds, 1);
  return total;
}

}  // namespace

Result<Seconds> ParseDuration(std::string_view text, const std::string& what) {
  std::optional<int64_t> seconds = WholeNumber(text);
  if (seconds && *seconds > kMaxDuration.value()) seconds.reset();
  if (!seconds) seconds = UnitsForm(text);
  if (!seconds) {
    return InvalidArgument(what + ": expected a duration like 90s, 30m, 2h or 1d, got '" +
                           std::string(text) + "'");
  }
  return Seconds(*seconds);
}

Result<Seconds> ParseTimeLimit(std::string_view text, const std::string& what) {
  std::optional<int64_t> seconds;
  if (text.find_first_of(":-") != std::string_view::npos) {
    seconds = ClockForm(text);
  } else if (Result<Seconds> plain = ParseDuration(text, what); plain.ok()) {
    seconds = plain->value();
  }
  if (!seconds) {
    return InvalidArgument(what +
                           ": expected seconds or a duration like 90m, 2h30m, 1d, 1:30:00 or "
                           "2-00:00:00, got '" +
                           std::string(text) + "'");
  }
  return Seconds(*seconds);
}

std::string FormatDuration(Seconds seconds) {
  int64_t left = seconds.value();
  if (left == 0) return "0s";
  std::string text = left < 0 ? "-" : "";
  // Negated unit by unit, so that the most negative value needs no negation of its own.
  for (const auto& [unit, size] :
       {std::pair{'d', int64_t{86400}}, {'h', 3600}, {'m', 60}, {'s', 1}}) {
    const int64_t count = left / size;
    left -= count * size;
    if (count != 0) text += std::to_string(count < 0 ? -count : count) + unit;
  }
  return text;
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
