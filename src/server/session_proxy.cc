#include "server/session_proxy.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <nlohmann/json.hpp>
#include <set>

namespace corral::server {

namespace {

std::string Lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return std::tolower(c); });
  return text;
}

std::string Trim(const std::string& text) {
  const size_t start = text.find_first_not_of(" \t");
  if (start == std::string::npos) return "";
  return text.substr(start, text.find_last_not_of(" \t") - start + 1);
}

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
  return Without(response_headers, {"content-length", "content-type"});
}

std::string CookieValue(const std::string& cookie_header, const std::string& name) {
  for (const auto& [key, value] : Cookies(cookie_header)) {
    if (key == name) return value;
  }
  return "";
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

void Forward(const httplib::Request& request, httplib::Response& response,
             const ProxyUpstream& upstream, const std::string& scheme) {
  httplib::Client client(upstream.address, upstream.port);
  client.set_connection_timeout(5);
  client.set_read_timeout(300);  // apps may long-poll
  client.set_write_timeout(60);
  client.set_url_encode(false);  // the target is sent as the browser sent it
  client.set_decompress(false);  // the body goes back as the app sent it
  client.set_keep_alive(false);

  httplib::Request out;
  out.method = request.method;
  out.path = request.target;
  for (auto& [name, value] :
       UpstreamHeaders(HeaderList(request.headers.begin(), request.headers.end()))) {
    out.headers.emplace(std::move(name), std::move(value));
  }
  // The app trusts the proxy through the session's secret (Jupyter reads "token <secret>").
  out.headers.emplace("Authorization", "token " + upstream.token);
  out.headers.emplace("X-Forwarded-For", request.remote_addr);
  out.headers.emplace("X-Forwarded-Proto", scheme);
  if (request.has_header("Host")) {
    out.headers.emplace("X-Forwarded-Host", request.get_header_value("Host"));
  }
  out.body = request.body;

  httplib::Result answer = client.send(out);
  if (!answer) {
    response.status = 502;
    response.set_content(
        nlohmann::json{
            {"type", "about:blank"},
            {"title", "bad_gateway"},
            {"status", 502},
            {"detail", "the session's app does not answer on " + upstream.address + ":" +
                           std::to_string(upstream.port) + " (" +
                           httplib::to_string(answer.error()) + "); it may still be starting"}}
            .dump(),
        "application/problem+json");
    return;
  }
  response.status = answer->status;
  for (auto& [name, value] :
       DownstreamHeaders(HeaderList(answer->headers.begin(), answer->headers.end()))) {
    response.headers.emplace(std::move(name), std::move(value));
  }
  response.body = std::move(answer->body);
  if (answer->has_header("Content-Type")) {
    response.set_header("Content-Type", answer->get_header_value("Content-Type"));
  }
}

}  // namespace corral::server
