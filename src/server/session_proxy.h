// The server's reverse proxy to sessions (docs/sessions.md): /sessions/<id>/... is forwarded to
// http://<node address>:<port>/sessions/<id>/... with the method, query, body and most headers
// kept. This file holds the rules about headers, cookies and redirects (pure, tested alone) and
// the forwarding itself; who may pass is decided by the HTTP API before Forward is called.
// Thread safety: everything here is stateless and may be called from any thread.
#pragma once

#include <string>
#include <utility>
#include <vector>

namespace httplib {
struct Request;
struct Response;
}  // namespace httplib

namespace corral::server {

// The cookie `POST /api/v1/login` sets: an API token, HttpOnly, SameSite=Strict, Path=/.
inline constexpr char kTokenCookie[] = "corral_token";

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The request headers to send to the app: all but the hop-by-hop ones (and those the
// Connection header names), Host, Authorization, Content-Length, Accept-Encoding (the app then
// answers uncompressed; the server may compress towards the browser), Proxy-*, httplib's
// REMOTE_ADDR/REMOTE_PORT/LOCAL_ADDR/LOCAL_PORT, and corral's cookie (other cookies stay).
HeaderList UpstreamHeaders(const HeaderList& request_headers);
// The response headers to pass back: all but the hop-by-hop ones, Content-Length and
// Content-Type (set with the body).
HeaderList DownstreamHeaders(const HeaderList& response_headers);

// The value of cookie `name` in a Cookie header; "" when absent.
std::string CookieValue(const std::string& cookie_header, const std::string& name);
// The Cookie header without cookie `name`; "" when no other cookie is left.
std::string WithoutCookie(const std::string& cookie_header, const std::string& name);
// The Set-Cookie value that stores `token` (empty: clears the cookie). `secure` adds Secure
// (the server speaks https).
std::string TokenCookie(const std::string& token, bool secure);

// `next` when it is a path on this server: it starts with "/" but not "//" or "/\", and holds
// no control characters or backslashes (browsers read "/\x" as "//x"). Anything else: "/".
// What the login page redirects to after logging in, so that it never leads elsewhere.
std::string SafeRedirectTarget(const std::string& next);

// Where Forward sends a request.
struct ProxyUpstream {
  std::string address;  // host name or IP address of the session's node
  int port = 0;
  std::string token;  // the session's secret: sent as "Authorization: token <secret>"
};

// Sends `request` (its raw target, which starts with the session's prefix) to `upstream` and
// writes the app's answer into `response`: status, headers (DownstreamHeaders) and body. A
// connection failure is a 502 problem naming the address. Adds X-Forwarded-For, -Host and
// -Proto (`scheme`: "http" or "https").
void Forward(const httplib::Request& request, httplib::Response& response,
             const ProxyUpstream& upstream, const std::string& scheme);

}  // namespace corral::server
