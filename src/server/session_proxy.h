// The server's reverse proxy to sessions (docs/sessions.md): /sessions/<id>/... is forwarded to
// http://<node address>:<port>/sessions/<id>/... with the method, query, body and most headers
// kept. This file holds the rules about headers, cookies, origins and redirects (pure, tested
// alone), the cap on requests in flight, the forwarding itself and the HTTP probe that asks an
// app about its use; who may pass is decided by the HTTP API before Forward is called.
// Thread safety: everything here but ProxyLimiter is stateless and may be called from any
// thread; ProxyLimiter is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <mutex>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/session.h"

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
// Content-Type (set with the body), and those that would reach beyond the app on corral's
// origin: a Set-Cookie that sets (or clears) corral's cookie, whatever its path or domain
// (SetsCookie), Clear-Site-Data (which can clear it) and Service-Worker-Allowed (which would let
// the app's service worker take over every path of the origin, /login included).
HeaderList DownstreamHeaders(const HeaderList& response_headers);

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

// `next` when it is a path on this server: it starts with "/" but not "//" or "/\", and holds
// no control characters or backslashes (browsers read "/\x" as "//x"). Anything else: "/".
// What the login page redirects to after logging in, so that it never leads elsewhere.
std::string SafeRedirectTarget(const std::string& next);

// "scheme://host[:port]" of an http(s) URL as browsers write it in an Origin header: lower case,
// without a default port (80, 443), path, query or user info. "" for anything else.
std::string OriginOf(std::string_view url);
// Why a request must be refused as a cross-site request forgery, or "" when it may pass. GET,
// HEAD and OPTIONS always pass (they must not change anything); other methods are refused when
// they carry an `Origin` that is none of `own_origins` (each compared as OriginOf; "null" is
// none), or `Sec-Fetch-Site: cross-site` or `same-site`. A request with neither header (the CLI,
// curl) passes: browsers send them with every such request.
std::string CrossSiteRefusal(std::string_view method, std::string_view origin,
                             std::string_view sec_fetch_site,
                             const std::vector<std::string>& own_origins);

// Caps the proxied requests inside the proxy, so that slow apps cannot hold the server's API
// threads: at most `total` at once (in flight or waiting for a place), and for one session at
// most `per_session` in flight; a request over its session's cap waits up to `wait` for a place
// (browsers fire a few requests at once), a request over `total` is refused at once.
// Thread-safe.
class ProxyLimiter {
 public:
  struct Limits {
    int total = 8;
    int per_session = 4;
    std::chrono::milliseconds wait{1000};
  };
  explicit ProxyLimiter(Limits limits) : limits_(limits) {}

  // A request's place in the proxy: admitted or not; an admitted one gives its place back when
  // destroyed. Move-only; must not outlive its limiter.
  class Pass {
   public:
    Pass(Pass&& other) noexcept;
    Pass& operator=(Pass&&) = delete;
    ~Pass();
    bool admitted() const { return limiter_ != nullptr; }
    // Why it was not admitted ("" when it was), for the 503's detail.
    const std::string& refusal() const { return refusal_; }

   private:
    friend class ProxyLimiter;
    Pass(ProxyLimiter* limiter, int64_t session, std::string refusal)
        : limiter_(limiter), session_(session), refusal_(std::move(refusal)) {}
    ProxyLimiter* limiter_;  // null: not admitted
    int64_t session_;
    std::string refusal_;
  };

  // A place for a request to session `session`, waiting up to `wait` when its session is full.
  Pass Enter(int64_t session);
  const Limits& limits() const { return limits_; }

 private:
  void Leave(int64_t session);

  const Limits limits_;
  std::mutex mu_;
  std::condition_variable freed_;
  int inside_ = 0;                    // admitted or waiting
  std::map<int64_t, int> in_flight_;  // session -> admitted requests; no zero entries
};

// A request as the proxy forwards it.
struct ProxyRequest {
  std::string method;
  std::string target;  // the raw path and query, as the browser sent them
  HeaderList headers;
  std::string body;
  std::string remote_addr;  // the client's address, for X-Forwarded-For
};

// The app's answer as the proxy passes it back (or the proxy's own 502).
struct ProxyAnswer {
  int status = 502;
  HeaderList headers;  // DownstreamHeaders of the app's
  std::string content_type;
  std::string body;
};

// Where Forward sends a request.
struct ProxyUpstream {
  std::string address;  // host name or IP address of the session's node
  int port = 0;
  std::string token;  // the session's secret: sent as "Authorization: token <secret>"
};

struct ForwardOptions {
  std::chrono::milliseconds connect_timeout{5000};
  // How long the app may take to send (each part of) its answer; long-polling apps are cut here.
  std::chrono::milliseconds read_timeout{60000};
  std::chrono::milliseconds write_timeout{60000};
  // The largest answer body passed back: it is held in memory whole (cpp-httplib 0.11 cannot
  // stream it), so the caps of ProxyLimiter times this bound the proxy's memory. 64 MiB: far
  // above any page or notebook an app serves, well below a server's memory; larger files go by
  // the direct URL.
  size_t max_answer_bytes = size_t{64} << 20;
  std::string scheme = "http";  // how the client reached the server (X-Forwarded-Proto)
};

// Sends `request` (its target starts with the session's prefix) to `upstream` and returns the
// app's answer: status, headers (DownstreamHeaders) and body. Adds X-Forwarded-For, -Host and
// -Proto. An app that does not answer (in time) is a 502 problem naming the address, as is an
// answer larger than `options.max_answer_bytes`.
ProxyAnswer Forward(const ProxyRequest& request, const ProxyUpstream& upstream,
                    const ForwardOptions& options);

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
