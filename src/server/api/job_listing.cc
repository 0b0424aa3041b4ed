#include "server/api/job_listing.h"

#include <openssl/evp.h>

#include <algorithm>
#include <array>
#include <charconv>
#include <ctime>
#include <optional>
#include <utility>
#include <vector>

#include "common/strings.h"
#include "model/states.h"
#include "server/api/api_common.h"

namespace corral::server::api_internal {
namespace {

constexpr std::string_view kCursorVersion = "1";

constexpr std::array<std::pair<std::string_view, store::JobSortKey>, 5> kSortKeys = {{
    {"id", store::JobSortKey::kId},
    {"submit_time", store::JobSortKey::kSubmitTime},
    {"start_time", store::JobSortKey::kStartTime},
    {"end_time", store::JobSortKey::kEndTime},
    {"gpus", store::JobSortKey::kGpus},
}};

std::string_view SortName(store::JobSortKey sort) {
  for (const auto& [name, key] : kSortKeys) {
    if (key == sort) return name;
  }
  return "id";
}

std::string_view DirectionName(store::SortDirection direction) {
  return direction == store::SortDirection::kAscending ? "asc" : "desc";
}

Status ParamError(std::string_view field, const std::string& why) {
  return InvalidArgument("field '" + std::string(field) + "': " + why);
}

Result<store::JobSortKey> ParseSort(const HttpRequest& req) {
  if (!req.HasParam("sort")) return store::JobSortKey::kId;
  const std::string text = req.Param("sort");
  std::string valid;
  for (const auto& [name, key] : kSortKeys) {
    if (name == text) return key;
    valid += (valid.empty() ? "" : ", ") + std::string(name);
  }
  return ParamError("sort", "must be one of " + valid + "; got '" + text.substr(0, 32) + "'");
}

Result<store::SortDirection> ParseDirection(const HttpRequest& req) {
  if (!req.HasParam("order")) return store::SortDirection::kDescending;
  const std::string text = req.Param("order");
  if (text == "asc") return store::SortDirection::kAscending;
  if (text == "desc") return store::SortDirection::kDescending;
  return ParamError("order", "must be asc or desc; got '" + text.substr(0, 32) + "'");
}

// A filter value that names something: printable ASCII without ',' (the list separator), at
// most kMaxFilterNameBytes. Names are looked up, never checked against today's naming rules
// (protocol/names.h: names a store holds from before a rule are listed as they are).
bool IsLookupName(std::string_view name) {
  if (name.empty() || name.size() > kMaxFilterNameBytes) return false;
  for (char c : name) {
    if (c <= ' ' || c >= 0x7f || c == ',') return false;
  }
  return true;
}

Result<std::vector<std::string>> ParseNames(const HttpRequest& req, std::string_view field) {
  const std::string key(field);
  if (!req.HasParam(key)) return std::vector<std::string>();
  std::vector<std::string> names = Split(req.Param(key), ',');
  if (names.size() > kMaxListedNames) {
    return ParamError(field, "at most " + std::to_string(kMaxListedNames) + " names");
  }
  for (const std::string& name : names) {
    if (!IsLookupName(name)) {
      return ParamError(field, "a comma-separated list of names, each 1 to " +
                                   std::to_string(kMaxFilterNameBytes) +
                                   " printable ASCII characters without blanks");
    }
  }
  return names;
}

Result<std::string> ParseNamePrefix(const HttpRequest& req) {
  if (!req.HasParam("name")) return std::string();
  std::string prefix = req.Param("name");
  const bool printable =
      std::all_of(prefix.begin(), prefix.end(), [](char c) { return c > ' ' && c < 0x7f; });
  if (prefix.empty() || prefix.size() > kMaxNamePrefixBytes || !printable) {
    return ParamError("name", "a job name prefix: 1 to " + std::to_string(kMaxNamePrefixBytes) +
                                  " printable ASCII characters without blanks");
  }
  return prefix;
}

// Digits at text[pos, pos + n) as a number; none when any is not a digit.
std::optional<int> Digits(std::string_view text, size_t pos, size_t n) {
  if (pos + n > text.size()) return std::nullopt;
  int v = 0;
  const char* first = text.data() + pos;
  auto [end, ec] = std::from_chars(first, first + n, v);
  if (ec != std::errc() || end != first + n || *first == '+' || *first == '-') return std::nullopt;
  return v;
}

// RFC 3339's date-time ("2024-05-01T12:00:00.25+02:00") as Unix seconds, the fraction dropped.
std::optional<int64_t> ParseRfc3339(std::string_view t) {
  auto year = Digits(t, 0, 4), month = Digits(t, 5, 2), day = Digits(t, 8, 2);
  auto hour = Digits(t, 11, 2), minute = Digits(t, 14, 2), second = Digits(t, 17, 2);
  if (!year || !month || !day || !hour || !minute || !second || t.size() < 20) return std::nullopt;
  if (t[4] != '-' || t[7] != '-' || (t[10] != 'T' && t[10] != 't') || t[13] != ':' ||
      t[16] != ':') {
    return std::nullopt;
  }
  size_t pos = 19;
  if (t[pos] == '.') {
    ++pos;
    const size_t digits_start = pos;
    while (pos < t.size() && t[pos] >= '0' && t[pos] <= '9') ++pos;
    if (pos == digits_start) return std::nullopt;
  }
  int offset_s = 0;
  if (pos < t.size() && (t[pos] == 'Z' || t[pos] == 'z') && pos + 1 == t.size()) {
    offset_s = 0;
  } else if (pos + 6 == t.size() && (t[pos] == '+' || t[pos] == '-') && t[pos + 3] == ':') {
    auto oh = Digits(t, pos + 1, 2), om = Digits(t, pos + 4, 2);
    if (!oh || !om || *oh > 23 || *om > 59) return std::nullopt;
    offset_s = (*oh * 3600 + *om * 60) * (t[pos] == '+' ? 1 : -1);
  } else {
    return std::nullopt;
  }
  if (*year < 1970 || *month < 1 || *month > 12 || *day < 1 || *day > 31 || *hour > 23 ||
      *minute > 59 || *second > 60) {
    return std::nullopt;
  }
  std::tm tm{};
  tm.tm_year = *year - 1900;
  tm.tm_mon = *month - 1;
  tm.tm_mday = *day;
  tm.tm_hour = *hour;
  tm.tm_min = *minute;
  tm.tm_sec = std::min(*second, 59);  // a leap second reads as the second before it
  const time_t utc = timegm(&tm);
  if (tm.tm_mday != *day) return std::nullopt;  // timegm normalised a day the month lacks
  return static_cast<int64_t>(utc) - offset_s;
}

std::string Base64Url(std::string_view bytes) {
  std::string out(4 * ((bytes.size() + 2) / 3) + 1, '\0');
  const int n = EVP_EncodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(bytes.data()),
                                static_cast<int>(bytes.size()));
  out.resize(n);
  while (!out.empty() && out.back() == '=') out.pop_back();
  for (char& c : out) {
    if (c == '+') c = '-';
    if (c == '/') c = '_';
  }
  return out;
}

std::optional<std::string> FromBase64Url(std::string_view text) {
  std::string b64(text);
  for (char& c : b64) {
    if (c == '-') {
      c = '+';
    } else if (c == '_') {
      c = '/';
    } else if (c == '+' || c == '/' || c == '=') {
      return std::nullopt;  // not base64url
    }
  }
  if (b64.size() % 4 == 1) return std::nullopt;
  const size_t padding = (4 - b64.size() % 4) % 4;
  b64.append(padding, '=');
  std::string out(b64.size() / 4 * 3, '\0');
  const int n = EVP_DecodeBlock(reinterpret_cast<unsigned char*>(out.data()),
                                reinterpret_cast<const unsigned char*>(b64.data()),
                                static_cast<int>(b64.size()));
  if (n < 0 || static_cast<size_t>(n) < padding) return std::nullopt;
  out.resize(static_cast<size_t>(n) - padding);
  return out;
}

std::optional<int64_t> ParseInt64(std::string_view text) {
  int64_t v = 0;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return v;
}

}  // namespace

std::string EncodeJobCursor(store::JobSortKey sort, store::SortDirection direction,
                            const store::JobListPosition& position) {
  std::string text = std::string(kCursorVersion) + ":" + std::string(SortName(sort)) + ":" +
                     std::string(DirectionName(direction)) + ":" +
                     (position.key ? std::to_string(*position.key) : "") + ":" +
                     std::to_string(position.id.value());
  return Base64Url(text);
}

Result<store::JobListPosition> DecodeJobCursor(std::string_view cursor, store::JobSortKey sort,
                                               store::SortDirection direction) {
  const Status bad = ParamError("cursor",
                                "not a cursor of this listing: pass a page's "
                                "X-Corral-Next-Cursor unchanged");
  if (cursor.empty() || cursor.size() > kMaxCursorBytes) return bad;
  auto text = FromBase64Url(cursor);
  if (!text) return bad;
  const std::vector<std::string> parts = Split(*text, ':');
  if (parts.size() != 5 || parts[0] != kCursorVersion) return bad;
  if (parts[1] != SortName(sort) || parts[2] != DirectionName(direction)) {
    return ParamError("cursor", "made for sort=" + parts[1].substr(0, 16) +
                                    "&order=" + parts[2].substr(0, 8) +
                                    ", not sort=" + std::string(SortName(sort)) +
                                    "&order=" + std::string(DirectionName(direction)));
  }
  store::JobListPosition position;
  if (!parts[3].empty()) {
    position.key = ParseInt64(parts[3]);
    if (!position.key) return bad;
  }
  auto id = ParseInt64(parts[4]);
  if (!id || *id < 1) return bad;
  position.id = JobId(*id);
  // The key is there exactly when the sort has one for this row (store::PositionOf).
  const bool keyless_sort = sort == store::JobSortKey::kId;
  const bool may_lack_key =
      sort == store::JobSortKey::kStartTime || sort == store::JobSortKey::kEndTime;
  if ((keyless_sort && position.key) || (!keyless_sort && !may_lack_key && !position.key)) {
    return bad;
  }
  return position;
}

Result<Seconds> ParseTimeParam(std::string_view text, std::string_view field) {
  if (auto unix_s = ParseCount(std::string(text)); unix_s && *unix_s <= (int64_t{1} << 40)) {
    return Seconds(*unix_s);
  }
  if (text.size() <= 40) {
    if (auto t = ParseRfc3339(text); t && *t >= 0) return Seconds(*t);
  }
  return ParamError(field,
                    "a time: RFC 3339 (2024-05-01T12:00:00Z, or with an offset: +02:00) or Unix "
                    "seconds");
}

Result<JobListingRequest> ParseJobListing(const HttpRequest& req) {
  JobListingRequest out;
  store::JobFilter& listing = out.listing;
  out.all_projects = req.Param("all") == "1";
  auto users = ParseNames(req, "user");
  if (!users.ok()) return users.status();
  listing.users = std::move(users).value();
  auto projects = ParseNames(req, "project");
  if (!projects.ok()) return projects.status();
  listing.projects = std::move(projects).value();
  auto states = model::ParseJobStates(req.Param("state"));
  if (!states.ok()) return states.status();
  if (states->size() > model::kJobStates.size()) {
    return ParamError("state", "at most " + std::to_string(model::kJobStates.size()) + " states");
  }
  listing.states = std::move(states).value();
  auto prefix = ParseNamePrefix(req);
  if (!prefix.ok()) return prefix.status();
  listing.name_prefix = std::move(prefix).value();
  auto array = IntParam(req, "array", 1, kMaxCount);
  if (!array.ok()) return array.status();
  if (*array) listing.array = JobId(**array);
  if (req.HasParam("since")) {
    auto since = ParseTimeParam(req.Param("since"), "since");
    if (!since.ok()) return since.status();
    listing.submitted_since = *since;
  }
  auto sort = ParseSort(req);
  if (!sort.ok()) return sort.status();
  listing.sort = *sort;
  auto direction = ParseDirection(req);
  if (!direction.ok()) return direction.status();
  listing.direction = *direction;
  auto limit = IntParam(req, "limit", 1, kMaxJobPage);
  if (!limit.ok()) return limit.status();
  listing.limit = static_cast<int>(limit->value_or(kDefaultJobPage));
  if (req.HasParam("cursor")) {
    auto after = DecodeJobCursor(req.Param("cursor"), listing.sort, listing.direction);
    if (!after.ok()) return after.status();
    listing.after = *after;
  }
  // Deprecated (X-Corral-Next-Before): the page below an id, newest first.
  auto before = IntParam(req, "before", 1, kMaxCount);
  if (!before.ok()) return before.status();
  if (*before) {
    if (listing.after) return ParamError("before", "give either cursor or before (deprecated)");
    if (listing.sort != store::JobSortKey::kId ||
        listing.direction != store::SortDirection::kDescending) {
      return ParamError("before", "only with sort=id and order=desc: use cursor");
    }
    listing.after = store::JobListPosition{std::nullopt, JobId(**before)};
  }
  return out;
}

}  // namespace corral::server::api_internal
