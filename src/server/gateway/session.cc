#include "server/gateway/session.h"

#include <algorithm>
#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace corral::server {

Seconds LastUse(const SessionActivity& activity) {
  return std::max({activity.last_activity, activity.app_last_activity.value_or(Seconds(0)),
                   activity.gpus_last_busy.value_or(Seconds(0))});
}

Seconds IdleFor(const SessionActivity& activity, Seconds now) {
  return Seconds(std::max<int64_t>(0, now.value() - LastUse(activity).value()));
}

SessionStep NextSessionStep(const SessionActivity& activity, std::optional<Seconds> notice_at,
                            const IdlePolicy& policy, Seconds now) {
  if (policy.timeout.value() <= 0) {
    return notice_at ? SessionStep::kInUseAgain : SessionStep::kNothing;
  }
  const bool idle = IdleFor(activity, now) >= policy.timeout;
  if (!notice_at) return idle ? SessionStep::kNotice : SessionStep::kNothing;
  if (!idle) return SessionStep::kInUseAgain;
  return now - *notice_at >= policy.warning ? SessionStep::kStop : SessionStep::kNothing;
}

namespace {

// Days from 1970-01-01 to the given civil date (proleptic Gregorian; H. Hinnant's
// days_from_civil), so that no time zone or locale of this process plays a part.
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

// Reads `width` digits at `pos` (advancing it); nullopt when they are not all digits.
std::optional<int64_t> Digits(std::string_view text, size_t& pos, size_t width) {
  if (pos + width > text.size()) return std::nullopt;
  int64_t value = 0;
  for (size_t i = 0; i < width; ++i) {
    const char c = text[pos + i];
    if (c < '0' || c > '9') return std::nullopt;
    value = value * 10 + (c - '0');
  }
  pos += width;
  return value;
}

bool Expect(std::string_view text, size_t& pos, char c) {
  if (pos >= text.size() || text[pos] != c) return false;
  ++pos;
  return true;
}

// "YYYY-MM-DDTHH:MM:SS[.fraction](Z|±HH:MM|±HHMM)" as Unix seconds.
std::optional<Seconds> ParseIsoTime(std::string_view text) {
  size_t pos = 0;
  auto year = Digits(text, pos, 4);
  if (!year || !Expect(text, pos, '-')) return std::nullopt;
  auto month = Digits(text, pos, 2);
  if (!month || !Expect(text, pos, '-')) return std::nullopt;
  auto day = Digits(text, pos, 2);
  if (!day || (!Expect(text, pos, 'T') && !Expect(text, pos, ' '))) return std::nullopt;
  auto hour = Digits(text, pos, 2);
  if (!hour || !Expect(text, pos, ':')) return std::nullopt;
  auto minute = Digits(text, pos, 2);
  if (!minute || !Expect(text, pos, ':')) return std::nullopt;
  auto second = Digits(text, pos, 2);
  if (!second) return std::nullopt;
  if (*month < 1 || *month > 12 || *day < 1 || *day > 31 || *hour > 23 || *minute > 59 ||
      *second > 60) {
    return std::nullopt;
  }
  if (Expect(text, pos, '.')) {
    const size_t start = pos;
    while (pos < text.size() && text[pos] >= '0' && text[pos] <= '9') ++pos;
    if (pos == start) return std::nullopt;
  }
  int64_t offset = 0;  // seconds east of UTC
  if (!Expect(text, pos, 'Z')) {
    if (pos >= text.size() || (text[pos] != '+' && text[pos] != '-')) return std::nullopt;
    const int sign = text[pos++] == '-' ? -1 : 1;
    auto oh = Digits(text, pos, 2);
    if (!oh) return std::nullopt;
    Expect(text, pos, ':');
    auto om = Digits(text, pos, 2);
    if (!om || *oh > 23 || *om > 59) return std::nullopt;
    offset = sign * (*oh * 3600 + *om * 60);
  }
  if (pos != text.size()) return std::nullopt;
  const int64_t days = DaysFromCivil(*year, *month, *day);
  return Seconds(days * 86400 + *hour * 3600 + *minute * 60 + *second - offset);
}

}  // namespace

std::optional<Seconds> ParseAppLastActivity(std::string_view status_body) {
  // The app is the user's: its answer is read within the limits of any outside JSON.
  const nlohmann::json status = ParseJsonOrNull(status_body);
  if (!status.is_object()) return std::nullopt;  // also: not JSON at all
  const auto it = status.find("last_activity");
  if (it == status.end() || !it->is_string()) return std::nullopt;
  return ParseIsoTime(it->get<std::string>());
}

}  // namespace corral::server
