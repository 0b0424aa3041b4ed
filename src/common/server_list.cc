#include "common/server_list.h"

#include <algorithm>
#include <charconv>

#include "common/strings.h"

namespace corral {

namespace {

struct Url {
  std::string scheme;  // "http" or "https"
  std::string host;    // lower case; an IPv6 address with its brackets
  std::optional<int> port;

  std::string Normalized() const {
    return scheme + "://" + host + (port ? ":" + std::to_string(*port) : "");
  }
  // What two URLs alike share: the port made explicit.
  std::string Key() const {
    return scheme + "://" + host + ":" +
           std::to_string(port.value_or(scheme == "https" ? 443 : 80));
  }
};

bool HostNameChar(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
         c == '-' || c == '_';
}

bool Ipv6Char(char c) {
  return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f') || (c >= 'A' && c <= 'F') || c == ':' ||
         c == '.';
}

// `text` (trimmed) as a URL, or the rule it breaks.
Result<Url> ParseUrl(std::string_view text) {
  if (text.empty()) return InvalidArgument("is empty");
  if (text.size() > kMaxServerUrlBytes) {
    return InvalidArgument("is longer than " + std::to_string(kMaxServerUrlBytes) + " bytes");
  }
  Url url;
  const std::string lowered = Lower(std::string(text));
  for (const char* scheme : {"http", "https"}) {
    if (lowered.rfind(std::string(scheme) + "://", 0) == 0) url.scheme = scheme;
  }
  if (url.scheme.empty()) return InvalidArgument("must start with http:// or https://");
  std::string_view rest = text.substr(url.scheme.size() + 3);
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find_first_of("/?#@") != std::string_view::npos) {
    return InvalidArgument("must be scheme://host[:port] (no user, path, query or fragment)");
  }
  size_t host_end;
  if (!rest.empty() && rest.front() == '[') {
    host_end = rest.find(']');
    if (host_end == std::string_view::npos || host_end == 1 ||
        !std::all_of(rest.begin() + 1, rest.begin() + host_end, Ipv6Char)) {
      return InvalidArgument("has a malformed [IPv6] host");
    }
    ++host_end;
  } else {
    host_end = std::min(rest.find(':'), rest.size());
    if (host_end == 0 || !std::all_of(rest.begin(), rest.begin() + host_end, HostNameChar)) {
      return InvalidArgument("has no host name or a character no host name has");
    }
  }
  url.host = Lower(std::string(rest.substr(0, host_end)));
  std::string_view port = rest.substr(host_end);
  if (!port.empty()) {
    if (port.front() != ':') return InvalidArgument("must be scheme://host[:port]");
    port.remove_prefix(1);
    int value = 0;
    auto [end, err] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || err != std::errc() || end != port.data() + port.size() || value < 1 ||
        value > 65535) {
      return InvalidArgument("has a port that is not a number in 1..65535");
    }
    url.port = value;
  }
  return url;
}

// "10 s", "1500 ms".
std::string DurationText(std::chrono::milliseconds d) {
  return d.count() % 1000 == 0 ? std::to_string(d.count() / 1000) + " s"
                               : std::to_string(d.count()) + " ms";
}

}  // namespace

Result<ServerList> ServerList::Parse(std::string_view text) {
  const std::vector<std::string> entries = Split(text, ',');
  if (entries.size() > kMaxServers) {
    return InvalidArgument("server list: " + std::to_string(entries.size()) +
                           " URLs, more than the limit of " + std::to_string(kMaxServers));
  }
  std::vector<std::string> urls;
  std::vector<std::string> keys;
  for (size_t i = 0; i < entries.size(); ++i) {
    const std::string entry = Trim(entries[i]);
    const std::string where = "server list: URL " + std::to_string(i + 1) + " '" + entry + "'";
    Result<Url> url = ParseUrl(entry);
    if (!url.ok()) return InvalidArgument(where + " " + url.status().message());
    const std::string key = url->Key();
    if (auto same = std::find(keys.begin(), keys.end(), key); same != keys.end()) {
      return InvalidArgument(where + " is URL " + std::to_string(same - keys.begin() + 1) +
                             " again");
    }
    keys.push_back(key);
    urls.push_back(url->Normalized());
  }
  return ServerList(std::move(urls));
}

Result<std::string> ServerList::NormalizeUrl(std::string_view url) {
  Result<Url> parsed = ParseUrl(Trim(url));
  if (!parsed.ok()) {
    return InvalidArgument("URL '" + std::string(url) + "' " + parsed.status().message());
  }
  return parsed->Normalized();
}

std::string ServerList::ToString() const { return Join(urls_, ","); }

std::optional<size_t> ServerList::Find(std::string_view url) const {
  Result<Url> parsed = ParseUrl(Trim(url));
  if (!parsed.ok()) return std::nullopt;
  for (size_t i = 0; i < urls_.size(); ++i) {
    if (ParseUrl(urls_[i])->Key() == parsed->Key()) return i;
  }
  return std::nullopt;
}

std::chrono::milliseconds RetryWait(int round) {
  int64_t wait = 100;
  for (int i = 1; i < round && wait < 1000; ++i) wait *= 2;
  return std::chrono::milliseconds(std::min<int64_t>(wait, 1000));
}

LeaderSearch::LeaderSearch(const ServerList& servers, const std::string& start,
                           Idempotency idempotency,
                           std::optional<std::chrono::milliseconds> deadline)
    : servers_(servers), idempotency_(idempotency), deadline_(deadline) {
  const std::optional<size_t> listed = start.empty() ? std::nullopt : servers.Find(start);
  Result<std::string> leader = ServerList::NormalizeUrl(start);
  if (listed) {
    cursor_ = *listed;
    url_listed_ = true;
    url_ = servers.urls()[cursor_];
  } else if (!start.empty() && leader.ok()) {
    // A leader named outside the list: after it, the list from its first entry.
    cursor_ = servers.urls().size() - 1;
    url_listed_ = false;
    url_ = *leader;
  } else {
    cursor_ = 0;
    url_listed_ = true;
    url_ = servers.urls()[0];
  }
  in_round_.push_back(url_);
}

std::optional<std::string> LeaderSearch::LeaderToFollow(const Attempt& attempt) const {
  // Only a listed server is taken at its word: one the client was sent to cannot send it on.
  if (attempt.outcome != Outcome::kNotLeader || attempt.leader.empty() || !url_listed_) {
    return std::nullopt;
  }
  Result<std::string> leader = ServerList::NormalizeUrl(attempt.leader);
  if (!leader.ok() || servers_.Find(*leader) == cursor_) return std::nullopt;
  // An https server cannot send the client's token over plain http.
  if (url_.rfind("https://", 0) == 0 && leader->rfind("https://", 0) != 0) return std::nullopt;
  return *std::move(leader);
}

LeaderSearch::Decision LeaderSearch::Next(const Attempt& attempt,
                                          std::chrono::milliseconds elapsed) {
  auto it =
      std::find_if(tried_.begin(), tried_.end(), [&](const Tries& t) { return t.url == url_; });
  if (it == tried_.end()) it = tried_.insert(tried_.end(), Tries{url_, "", 0});
  it->detail = attempt.detail;
  ++it->count;
  listened_ = listened_ || !attempt.nothing_listening;

  if (attempt.outcome == Outcome::kAnswered) return {Step::kDone, {}, {}};
  if (attempt.outcome == Outcome::kLostAfterSend && idempotency_ == Idempotency::kNotIdempotent) {
    return {Step::kFailed,
            {},
            IoError("no answer from " + url_ + " once the request was sent (" + attempt.detail +
                    "): not sent again, since the server may have carried it out; check before "
                    "trying again" +
                    (tried_.size() > 1 ? " (tried " + Tried() + ")" : ""))};
  }
  // Where next: the leader a listed server names, else the list's next entry.
  std::optional<std::string> leader = LeaderToFollow(attempt);
  const std::optional<size_t> leader_listed = leader ? servers_.Find(*leader) : std::nullopt;
  const size_t next_cursor =
      leader ? leader_listed.value_or(cursor_) : (cursor_ + 1) % servers_.urls().size();
  const std::string next_url = leader ? *leader : servers_.urls()[next_cursor];
  std::chrono::milliseconds wait{0};
  if (std::find(in_round_.begin(), in_round_.end(), next_url) != in_round_.end()) {
    wait = RetryWait(++rounds_);
    in_round_.clear();
  }
  if (deadline_ && elapsed + wait > *deadline_) {
    const bool one = servers_.urls().size() == 1 && tried_.size() == 1;
    return {Step::kFailed,
            {},
            IoError(std::string(one ? "cannot reach the server" : "cannot reach a leader") +
                    " within " + DurationText(*deadline_) + ": tried " + Tried()),
            !listened_};
  }
  cursor_ = next_cursor;
  url_listed_ = !leader || leader_listed.has_value();
  url_ = next_url;
  in_round_.push_back(url_);
  return {Step::kRetry, wait, {}};
}

std::string LeaderSearch::Tried() const {
  std::vector<std::string> parts;
  for (const Tries& t : tried_) {
    parts.push_back(t.url + " (" + t.detail +
                    (t.count > 1 ? ", " + std::to_string(t.count) + " times" : "") + ")");
  }
  return Join(parts, ", ");
}

}  // namespace corral
