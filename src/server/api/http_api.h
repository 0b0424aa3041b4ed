// The HTTP/JSON API under /api/v1, the agent gateway, /healthz and the status page, served
// by HttpServer (server/http/http_server.h, TLS when a certificate is given). Errors are
// application/problem+json ({"type","title","status","detail"}) with the detail naming the
// field; a body that is not a JSON object, or a field of the wrong type, gets 400. Admit decides
// from a request's head what it may send: an authenticated caller's body may be
// `max_body_bytes`, an anonymous one's `max_anonymous_body_bytes` (413 beyond). Every /api/v1
// route needs `Authorization: Bearer <token>` except the agent's (join and node tokens) and
// POST /api/v1/login and /api/v1/logout (which set and clear the login cookie; they are refused
// (403) when a browser says they come from another site: CrossSiteRefusal). Sessions
// (docs/sessions.md): /api/v1/sessions, a minimal login page, GET /login, and /sessions/<id>/...
// redirected (307) to the session gateway (session_gateway.h), which serves them. The dashboard
// (docs/dashboard.md): the built web/dist at / for browsers logged in by cookie (others go to
// /login?next=/), /assets/, GET /api/v1/summary and the live stream GET /api/v1/events/stream;
// the cookie authenticates the dashboard's own API requests only (CookieMayAuthenticate).
#pragma once

#include <chrono>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "server/control/controller.h"
#include "server/http/http_server.h"
#include "server/http/problem.h"  // HttpStatusOf, Problem
#include "server/http/web_assets.h"
#include "server/monitoring/gpu_history.h"

namespace corral::server {

struct HttpApiConfig {
  std::string join_token_hash;  // SHA-256 of the cluster's join token
  // SHA-256 of the token that opens GET /metrics (and nothing else); empty: admin tokens only.
  std::string metrics_token_hash;
  // The GPU metrics history (GET /api/v1/jobs/<id>/gpu-history); borrowed, must outlive the
  // API. Null: that route answers 404.
  GpuHistory* gpu_history = nullptr;
  size_t max_body_bytes = 1 << 20;
  // A caller without credentials (login, the dashboard's pages): its body may be this large.
  size_t max_anonymous_body_bytes = 16 << 10;
  // Logins (POST /api/v1/login) from one client address: at most this many a minute (429 with
  // Retry-After beyond).
  int logins_per_minute = 60;
  // Sessions (docs/sessions.md): the URL users reach this server at ("https://corral.example");
  // empty: the scheme and the request's Host header.
  std::string public_url;
  bool tls = false;  // the server speaks https (cookies get Secure; URLs say https)
  // The session gateway (session_gateway.h), which serves sessions' URLs: its URL as users
  // reach it; empty: the API's URL for the request (above) with `session_port`.
  std::string session_url;
  int session_port = 0;
  // The built dashboard served at / (docs/dashboard.md); none: / is the plain status page.
  std::optional<WebAssets> web_assets;
  // Live event streams (GET /api/v1/events/stream): at most this many at once, each holding
  // an HTTP thread, and a summary this often.
  int max_event_streams = 4;
  std::chrono::milliseconds event_period{2000};
};

// The routes, each through the controller's services (never the store itself). Borrows
// controller and clock; the HttpApi must outlive the HttpServer it registered on (its
// handlers point into it).
class HttpApi {
 public:
  HttpApi(Controller& controller, Clock& clock, HttpApiConfig config);
  ~HttpApi();
  void Register(HttpServer& http);
  // The admission rule of the server's requests (HttpServerOptions::admit): authenticated when
  // the head carries a credential the route accepts (an API token or the dashboard's cookie,
  // the join token for registration, a node token for heartbeats); the body limit by that; the
  // saturation guard's pool (saturation_guard.h): the agents' for a registration or heartbeat
  // whose token checks out, none for the event stream and /healthz, else the API's.
  Result<Admission> Admit(const HttpRequest& head);
  // Ends the live event streams now (server shutdown), not at their next event.
  void Shutdown();
  // Who an API token belongs to (Controller::Accounts(), whose principal cache it clears on
  // every change);
  // Unauthenticated when unknown or revoked. Thread-safe: the session gateway asks it too.
  Result<Principal> AuthenticateToken(const std::string& token);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::server
