#include "server/session_proxy.h"

#include <httplib.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <set>

#include "common/strings.h"

namespace corral::server {

namespace {

// RFC 9110 7.6.1: meant for one connection, never forwarded.
const std::set<std::string> kHopByHop = {
    "connection", "keep-alive", "proxy-authenticate", "proxy-authorization", "proxy-connection",
    "te",         "trailer",    "trailers",           "transfer-encoding",   "upgrade"};

// The header names a Connection header lists (also hop-by-hop), lower case.
std::set<std::string> ConnectionTokens(const HeaderList& headers) {
  std::set<std::string> tokens;
  for (const auto& [name, value] : headers) {
    if (Lower(name) != "connection") continue;
    size_t start = 0;
    while (start <= value.size()) {
      size_t comma = std::min(value.find(',', start), value.size());
      const std::string token = Lower(Trim(value.substr(start, comma - start)));
      if (!token.empty()) tokens.insert(token);
      start = comma + 1;
    }
  }
  return tokens;
}

HeaderList Without(const HeaderList& headers, const std::set<std::string>& drop) {
  const std::set<std::string> named = ConnectionTokens(headers);
  HeaderList out;
  for (const auto& [name, value] : headers) {
    const std::string lower = Lower(name);
    if (kHopByHop.count(lower) || named.count(lower) || drop.count(lower)) continue;
    out.emplace_back(name, value);
  }
  return out;
}

// Splits a Cookie header into its "name=value" pairs (RFC 6265 5.4: separated by "; ").
std::vector<std::pair<std::string, std::string>> Cookies(const std::string& header) {
  std::vector<std::pair<std::string, std::string>> out;
  size_t start = 0;
  while (start < header.size()) {
    size_t semi = std::min(header.find(';', start), header.size());
    const std::string pair = Trim(header.substr(start, semi - start));
    start = semi + 1;
    if (pair.empty()) continue;
    const size_t eq = pair.find('=');
    if (eq == std::string::npos) {
      out.emplace_back(pair, "");
    } else {
      out.emplace_back(Trim(pair.substr(0, eq)), Trim(pair.substr(eq + 1)));
    }
  }
  return out;
}

}  // namespace

HeaderList UpstreamHeaders(const HeaderList& request_headers) {
  static const std::set<std::string> kDrop = {
      "host",        "authorization",   "content-length",   "accept-encoding",
      "remote_addr", "remote_port",     "local_addr",       "local_port",
      "forwarded",   "x-forwarded-for", "x-forwarded-host", "x-forwarded-proto",
      "cookie"};  // cookies come back below, without corral's
  HeaderList out = Without(request_headers, kDrop);
  for (const auto& [name, value] : request_headers) {
    if (Lower(name) != "cookie") continue;
    const std::string rest = WithoutCookie(value, kTokenCookie);
    if (!rest.empty()) out.emplace_back(name, rest);
  }
  return out;
}

HeaderList DownstreamHeaders(const HeaderList& response_headers) {
  HeaderList out = Without(response_headers, {"content-length", "content-type", "clear-site-data",
                                              "service-worker-allowed"});
  std::erase_if(out, [](const auto& header) {
    return Lower(header.first) == "set-cookie" && SetsCookie(header.second, kTokenCookie);
  });
  return out;
}

std::string CookieValue(const std::string& cookie_header, const std::string& name) {
  for (const auto& [key, value] : Cookies(cookie_header)) {
    if (key == name) return value;
  }
  return "";
}

int CookieCount(const std::string& cookie_header, const std::string& name) {
  int count = 0;
  for (const auto& [key, value] : Cookies(cookie_header)) count += key == name;
  return count;
}

std::string WithoutCookie(const std::string& cookie_header, const std::string& name) {
  std::string out;
  for (const auto& [key, value] : Cookies(cookie_header)) {
    if (key == name) continue;
    if (!out.empty()) out += "; ";
    out += key + "=" + value;
  }
  return out;
}

bool SetsCookie(const std::string& set_cookie, const std::string& name) {
  const std::string pair = set_cookie.substr(0, set_cookie.find(';'));
  const size_t eq = pair.find('=');
  std::string key = Trim(pair.substr(0, eq));
  if (key.empty() && eq != std::string::npos) {
    // A nameless cookie: browsers send its value back alone, "name=value" reading as a name.
    const std::string value = pair.substr(eq + 1);
    key = Trim(value.substr(0, value.find('=')));
  }
  return Lower(key) == Lower(name);
}

std::string TokenCookie(const std::string& token, bool secure) {
  std::string cookie = std::string(kTokenCookie) + "=" + token +
                       "; Path=/; HttpOnly; SameSite=Strict" + (secure ? "; Secure" : "");
  if (token.empty()) cookie += "; Max-Age=0";
  return cookie;
}

std::string SafeRedirectTarget(const std::string& next) {
  if (next.empty() || next[0] != '/' || next.rfind("//", 0) == 0) return "/";
  for (unsigned char c : next) {
    if (c < 0x20 || c == 0x7f || c == '\\') return "/";
  }
  return next;
}

std::string OriginOf(std::string_view url) {
  const std::string text = Lower(Trim(url));
  std::string scheme;
  for (const char* s : {"http", "https"}) {
    if (text.rfind(std::string(s) + "://", 0) == 0) scheme = s;
  }
  if (scheme.empty()) return "";
  std::string authority = text.substr(scheme.size() + 3);
  authority = authority.substr(0, authority.find_first_of("/?#"));
  if (const size_t at = authority.rfind('@'); at != std::string::npos) {
    authority = authority.substr(at + 1);
  }
  // The port: after the last ':' that is not inside an IPv6 address's brackets.
  std::string host = authority, port;
  const size_t colon = authority.rfind(':');
  const size_t bracket = authority.rfind(']');
  if (colon != std::string::npos && (bracket == std::string::npos || colon > bracket)) {
    host = authority.substr(0, colon);
    port = authority.substr(colon + 1);
  }
  if (host.empty() || port.find_first_not_of("0123456789") != std::string::npos) return "";
  if ((scheme == "http" && port == "80") || (scheme == "https" && port == "443")) port.clear();
  return scheme + "://" + host + (port.empty() ? "" : ":" + port);
}

std::string CrossSiteRefusal(std::string_view method, std::string_view origin,
                             std::string_view sec_fetch_site,
                             const std::vector<std::string>& own_origins) {
  if (method == "GET" || method == "HEAD" || method == "OPTIONS") return "";
  const std::string site = Lower(Trim(sec_fetch_site));
  if (site == "cross-site" || site == "same-site") {
    return "a " + site + " request (Sec-Fetch-Site) may not " + std::string(method) + " here";
  }
  const std::string from = Trim(origin);
  if (from.empty()) return "";
  const std::string normal = OriginOf(from);
  for (const std::string& own : own_origins) {
    if (!normal.empty() && OriginOf(own) == normal) return "";
  }
  return "a request from origin '" + from.substr(0, 200) + "', not this server's, may not " +
         std::string(method) + " here (a server reached through another URL needs --public-url)";
}

ProxyLimiter::Pass::Pass(Pass&& other) noexcept
    : limiter_(std::exchange(other.limiter_, nullptr)),
      session_(other.session_),
      refusal_(std::move(other.refusal_)) {}

ProxyLimiter::Pass::~Pass() {
  if (limiter_ != nullptr) limiter_->Leave(session_);
}

ProxyLimiter::Pass ProxyLimiter::Enter(int64_t session) {
  std::unique_lock lock(mu_);
  if (inside_ >= limits_.total) {
    return Pass(nullptr, session,
                "the session proxy serves at most " + std::to_string(limits_.total) +
                    " requests at once; try again shortly");
  }
  ++inside_;
  const bool placed = freed_.wait_for(lock, limits_.wait, [&] {
    const auto it = in_flight_.find(session);
    return it == in_flight_.end() || it->second < limits_.per_session;
  });
  if (!placed) {
    --inside_;
    return Pass(nullptr, session,
                "session " + std::to_string(session) + " has " +
                    std::to_string(limits_.per_session) +
                    " requests in flight, the most one session may; try again shortly");
  }
  ++in_flight_[session];
  return Pass(this, session, "");
}

void ProxyLimiter::Leave(int64_t session) {
  {
    std::lock_guard lock(mu_);
    if (--in_flight_[session] <= 0) in_flight_.erase(session);
    --inside_;
  }
  freed_.notify_all();
}

namespace {

ProxyAnswer BadGateway(const std::string& detail) {
  ProxyAnswer answer;
  answer.status = 502;
  answer.content_type = "application/problem+json";
  answer.body = nlohmann::json{
      {"type", "about:blank"},
      {"title", "bad_gateway"},
      {"status", 502},
      {"detail",
       detail}}.dump();
  return answer;
}

std::string HeaderValue(const HeaderList& headers, const std::string& name) {
  for (const auto& [key, value] : headers) {
    if (Lower(key) == Lower(name)) return value;
  }
  return "";
}

}  // namespace

ProxyAnswer Forward(const ProxyRequest& request, const ProxyUpstream& upstream,
                    const ForwardOptions& options) {
  httplib::Client client(upstream.address, upstream.port);
  client.set_connection_timeout(options.connect_timeout);
  client.set_read_timeout(options.read_timeout);
  client.set_write_timeout(options.write_timeout);
  client.set_url_encode(false);  // the target is sent as the browser sent it
  client.set_decompress(false);  // the body goes back as the app sent it
  client.set_keep_alive(false);

  httplib::Request out;
  out.method = request.method;
  out.path = request.target;
  for (auto& [name, value] : UpstreamHeaders(request.headers)) {
    out.headers.emplace(std::move(name), std::move(value));
  }
  // The app trusts the proxy through the session's secret (Jupyter reads "token <secret>").
  out.headers.emplace("Authorization", "token " + upstream.token);
  out.headers.emplace("X-Forwarded-For", request.remote_addr);
  out.headers.emplace("X-Forwarded-Proto", options.scheme);
  if (const std::string host = HeaderValue(request.headers, "Host"); !host.empty()) {
    out.headers.emplace("X-Forwarded-Host", host);
  }
  out.body = request.body;

  // The body is read through a receiver that stops at the limit (httplib would buffer any size).
  std::string body;
  bool too_big = false;
  out.response_handler = [&](const httplib::Response& head) {
    const std::string length = head.get_header_value("Content-Length");
    if (!length.empty() && length.size() < 20 &&
        length.find_first_not_of("0123456789") == std::string::npos &&
        std::stoull(length) > options.max_answer_bytes) {
      too_big = true;  // announced: refused before any of it is read
      return false;
    }
    return true;
  };
  out.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (body.size() + size > options.max_answer_bytes) {
      too_big = true;
      return false;
    }
    body.append(data, size);
    return true;
  };

  httplib::Result answer = client.send(out);
  const std::string where = upstream.address + ":" + std::to_string(upstream.port);
  if (too_big) {
    const size_t limit = options.max_answer_bytes;
    return BadGateway("the session's app on " + where + " answered more than " +
                      (limit % (1 << 20) == 0 ? std::to_string(limit >> 20) + " MiB"
                                              : std::to_string(limit) + " bytes") +
                      ", the most the proxy passes on; fetch large files through the direct URL");
  }
  if (!answer) {
    return BadGateway("the session's app does not answer on " + where + " (" +
                      httplib::to_string(answer.error()) + "); it may still be starting");
  }
  ProxyAnswer result;
  result.status = answer->status;
  result.headers = DownstreamHeaders(HeaderList(answer->headers.begin(), answer->headers.end()));
  result.content_type = answer->get_header_value("Content-Type");
  result.body = std::move(body);
  return result;
}

std::optional<Seconds> HttpSessionAppProbe::LastActivity(const SessionApp& app) {
  constexpr size_t kMaxStatusBytes = 64 << 10;  // Jupyter's status is ~200 bytes
  httplib::Client client(app.address, app.port);
  client.set_connection_timeout(timeout_);
  client.set_read_timeout(timeout_);
  client.set_write_timeout(timeout_);
  client.set_url_encode(false);
  client.set_keep_alive(false);
  httplib::Request request;
  request.method = "GET";
  request.path = app.url_prefix + "api/status";
  request.headers = {{"Authorization", "token " + app.token}, {"Accept", "application/json"}};
  std::string body;
  request.response_handler = [](const httplib::Response& head) { return head.status == 200; };
  request.content_receiver = [&](const char* data, size_t size, uint64_t, uint64_t) {
    if (body.size() + size > kMaxStatusBytes) return false;
    body.append(data, size);
    return true;
  };
  httplib::Result answer = client.send(request);
  if (!answer || answer->status != 200) return std::nullopt;
  return ParseAppLastActivity(body);
}

}  // namespace corral::server
