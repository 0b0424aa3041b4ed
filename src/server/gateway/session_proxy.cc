#include "server/gateway/session_proxy.h"

#include <httplib.h>

#include <algorithm>
#include <set>

#include "common/strings.h"
#include "server/http/auth.h"

namespace corral::server {

namespace {

// RFC 9110 7.6.1: meant for one connection, never forwarded. Transfer-Encoding is one too, but
// the gateway copies bodies as they were sent, so the encoding of both hops is the same.
const std::set<std::string> kHopByHop = {"connection",
                                         "keep-alive",
                                         "proxy-authenticate",
                                         "proxy-authorization",
                                         "proxy-connection",
                                         "te",
                                         "trailer",
                                         "trailers",
                                         "upgrade"};

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
      "authorization",     "forwarded", "x-forwarded-for", "x-forwarded-host",
      "x-forwarded-proto", "cookie"};  // cookies come back below, without corral's
  HeaderList out = Without(request_headers, kDrop);
  for (const auto& [name, value] : request_headers) {
    if (Lower(name) != "cookie") continue;
    const std::string rest = WithoutCookie(value, kTokenCookie);
    if (!rest.empty()) out.emplace_back(name, rest);
  }
  return out;
}

HeaderList DownstreamHeaders(const HeaderList& response_headers) {
  HeaderList out = Without(response_headers, {"clear-site-data", "service-worker-allowed"});
  std::erase_if(out, [](const auto& header) {
    return Lower(header.first) == "set-cookie" && SetsCookie(header.second, kTokenCookie);
  });
  return out;
}

std::string HeaderValue(const HeaderList& headers, std::string_view name) {
  for (const auto& [key, value] : headers) {
    if (Lower(key) == Lower(std::string(name))) return value;
  }
  return "";
}

bool WantsUpgrade(const HeaderList& request_headers) {
  return ConnectionTokens(request_headers).count("upgrade") > 0 &&
         !Trim(HeaderValue(request_headers, "Upgrade")).empty();
}

Result<std::string> SessionTokenOf(const HeaderList& request_headers) {
  std::string token = BearerTokenOf(HeaderValue(request_headers, "Authorization"));
  if (!token.empty()) return token;
  // Every Cookie header counts: HTTP/1.1 clients send one, but nothing stops a second.
  std::string cookies;
  for (const auto& [name, value] : request_headers) {
    if (Lower(name) == "cookie") cookies += (cookies.empty() ? "" : "; ") + value;
  }
  return LoginCookieToken(cookies);
}

Result<std::string> LoginCookieToken(const std::string& cookie_header) {
  if (CookieCount(cookie_header, kTokenCookie) > 1) {
    return Unauthenticated(
        "more than one corral_token cookie (a page set one of its own): clear this site's "
        "cookies and log in again");
  }
  return CookieValue(cookie_header, kTokenCookie);
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

std::string SafeRedirectTarget(const std::string& next,
                               const std::vector<std::string>& other_origins) {
  for (unsigned char c : next) {
    if (c < 0x20 || c == 0x7f || c == '\\') return "/";
  }
  if (!next.empty() && next[0] == '/' && next.rfind("//", 0) != 0) return next;
  for (const std::string& origin : other_origins) {
    const std::string own = OriginOf(origin);
    // The origin as written, then nothing or a path: no user info, port or host can follow.
    if (own.empty() || Lower(next.substr(0, own.size())) != own) continue;
    if (next.size() == own.size() || next[own.size()] == '/') return next;
  }
  return "/";
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

std::string WithPort(std::string_view url, int port) {
  std::string origin = OriginOf(url);
  if (origin.empty()) return "";
  const size_t colon = origin.rfind(':');
  const size_t bracket = origin.rfind(']');
  const size_t host = origin.find("://") + 3;
  if (colon > host && (bracket == std::string::npos || colon > bracket)) origin.resize(colon);
  return origin + ":" + std::to_string(port);
}

std::string UrlOfHost(std::string_view host, bool tls) {
  const bool plain = !host.empty() && host.size() <= 300 &&
                     host.find_first_not_of(
                         "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                         "0123456789.-:[]") == std::string_view::npos;
  return plain ? std::string(tls ? "https://" : "http://") + std::string(host) : "";
}

std::string CrossSiteRefusal(std::string_view method, std::string_view origin,
                             std::string_view sec_fetch_site,
                             const std::vector<std::string>& own_origins, RequestKind kind) {
  const bool upgrade = kind == RequestKind::kUpgrade;
  if (!upgrade && (method == "GET" || method == "HEAD" || method == "OPTIONS")) return "";
  const std::string what = upgrade ? "open a WebSocket" : std::string(method);
  const std::string site = Lower(Trim(sec_fetch_site));
  if (site == "cross-site" || site == "same-site") {
    return "a " + site + " request (Sec-Fetch-Site) may not " + what + " here";
  }
  const std::string from = Trim(origin);
  if (from.empty()) return "";
  const std::string normal = OriginOf(from);
  for (const std::string& own : own_origins) {
    if (!normal.empty() && OriginOf(own) == normal) return "";
  }
  return "a request from origin '" + from.substr(0, 200) + "', not this server's, may not " + what +
         " here (a server reached through another URL needs --public-url or --session-public-url)";
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
