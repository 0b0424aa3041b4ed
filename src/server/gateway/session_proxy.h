// The rules of the session gateway (docs/sessions.md; session_gateway.h carries the bytes):
// which headers go to an app and which come back, cookies, origins and redirects, all pure and
// tested alone, and the HTTP probe that asks an app about its use. Who may pass is decided by
// the gateway with these rules. Thread safety: everything here is stateless and may be called
// from any thread.
#pragma once

#include <chrono>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "server/gateway/session.h"

namespace corral::server {

// The cookie `POST /api/v1/login` sets: an API token, HttpOnly, SameSite=Strict, Path=/.
inline constexpr char kTokenCookie[] = "corral_token";

using HeaderList = std::vector<std::pair<std::string, std::string>>;

// The request headers to send to the app: all but the hop-by-hop ones (and those the
// Connection header names; the gateway adds its own Connection, and Upgrade for a handshake),
// Authorization, Proxy-*, incoming Forwarded/X-Forwarded-*, and corral's cookie (other cookies
// stay). Content-Length and Transfer-Encoding stay (the body is copied as it was sent), and so
// does Host (apps such as Jupyter compare a WebSocket's Origin with it).
HeaderList UpstreamHeaders(const HeaderList& request_headers);
// The response headers to pass back: all but the hop-by-hop ones (Content-Length and
// Transfer-Encoding stay, as above), and those that would reach beyond the app: a Set-Cookie
// that sets (or clears) corral's cookie, whatever its path or domain (SetsCookie; cookies are
// per host, not per port, so the API's origin would get it too), Clear-Site-Data (which can
// clear it) and Service-Worker-Allowed (which would let the app's service worker take over
// every path of the gateway's origin, other sessions included).
HeaderList DownstreamHeaders(const HeaderList& response_headers);
// The value of the first header called `name` (any case); "" when there is none.
std::string HeaderValue(const HeaderList& headers, std::string_view name);
// True when the request asks to switch protocols (a WebSocket handshake): its Connection header
// lists "upgrade" and it has a non-empty Upgrade header.
bool WantsUpgrade(const HeaderList& request_headers);

// The API token a request to a session carries: `Authorization: Bearer <token>`, else the
// corral_token cookie; "" when it carries neither. Unauthenticated when it has no bearer token
// and more than one corral_token cookie (CookieCount): then none is trusted.
Result<std::string> SessionTokenOf(const HeaderList& request_headers);
// The token of the one corral_token cookie in a Cookie header; "" when there is none.
// Unauthenticated when there are several: a page set one of its own (see CookieCount), and none
// is trusted.
Result<std::string> LoginCookieToken(const std::string& cookie_header);

// The value of cookie `name` in a Cookie header; "" when absent.
std::string CookieValue(const std::string& cookie_header, const std::string& name);
// How many cookies called `name` a Cookie header holds. Corral sets one; more mean that a page
// added its own for a longer path (document.cookie may, HttpOnly or not), which browsers send
// first: the proxy then trusts none of them.
int CookieCount(const std::string& cookie_header, const std::string& name);
// The Cookie header without cookie `name`; "" when no other cookie is left.
std::string WithoutCookie(const std::string& cookie_header, const std::string& name);
// True when the Set-Cookie value `set_cookie` sets cookie `name` (compared without case), also
// as a nameless cookie ("=name=value", or "name" alone) that browsers send back as "name=value".
bool SetsCookie(const std::string& set_cookie, const std::string& name);
// The Set-Cookie value that stores `token` (empty: clears the cookie). `secure` adds Secure
// (the server speaks https).
std::string TokenCookie(const std::string& token, bool secure);

// Where the login page may send the browser after logging in, so that it never leads elsewhere:
// `next` when it is a path on this server (it starts with "/" but not "//" or "/\\") or an
// absolute URL on one of `other_origins` (the session gateway's: the origin exactly as OriginOf
// writes it, then nothing or a path), and holds no control characters or backslashes (browsers
// read "/\\x" as "//x"). Anything else: "/".
std::string SafeRedirectTarget(const std::string& next,
                               const std::vector<std::string>& other_origins = {});

// "scheme://host[:port]" of an http(s) URL as browsers write it in an Origin header: lower case,
// without a default port (80, 443), path, query or user info. "" for anything else.
std::string OriginOf(std::string_view url);
// OriginOf(url) with its port replaced by `port` ("https://corral.example" and 8081:
// "https://corral.example:8081"): the session gateway's URL from the API's. "" when `url` is
// not an http(s) URL.
std::string WithPort(std::string_view url, int port);
// "http(s)://<host>" for a request's Host header when it is a plain host[:port] (letters,
// digits, ".-:[]", at most 300 characters); "" otherwise. `tls`: the request came over https.
std::string UrlOfHost(std::string_view host, bool tls);

// What a request asks for, as far as CrossSiteRefusal cares.
enum class RequestKind {
  kPlain,
  // A protocol switch (a WebSocket handshake): it opens a channel that both reads and writes,
  // so another site's page may not open one (cross-site WebSocket hijacking), whatever the
  // method.
  kUpgrade,
};
// Why a request must be refused as a cross-site request forgery, or "" when it may pass. GET,
// HEAD and OPTIONS pass (they must not change anything) unless `kind` is kUpgrade; other
// requests are refused when they carry an `Origin` that is none of `own_origins` (each compared
// as OriginOf; "null" is none), or `Sec-Fetch-Site: cross-site` or `same-site`. A request with
// neither header (the CLI, curl) passes: browsers send them with every such request.
std::string CrossSiteRefusal(std::string_view method, std::string_view origin,
                             std::string_view sec_fetch_site,
                             const std::vector<std::string>& own_origins,
                             RequestKind kind = RequestKind::kPlain);

// SessionAppProbe over HTTP: GET http://<address>:<port><url_prefix>api/status (Jupyter Server's
// status endpoint) with "Authorization: token <secret>", connecting and reading within
// `timeout` each; only a 200 whose body ParseAppLastActivity reads counts.
class HttpSessionAppProbe final : public SessionAppProbe {
 public:
  explicit HttpSessionAppProbe(std::chrono::milliseconds timeout = std::chrono::seconds(2))
      : timeout_(timeout) {}
  std::optional<Seconds> LastActivity(const SessionApp& app) override;

 private:
  const std::chrono::milliseconds timeout_;
};

}  // namespace corral::server
