// The HTTP/JSON API under /api/v1, the agent gateway, /healthz and the status page, served
// with cpp-httplib (TLS when a certificate is given). Errors are application/problem+json
// ({"type","title","status","detail"}) with the detail naming the field; bodies over 1 MiB get
// 413; a body that is not a JSON object, or a field of the wrong type, gets 400. Every /api/v1
// route needs `Authorization: Bearer <token>` except the agent's (join and node tokens) and
// POST /api/v1/login and /api/v1/logout (which set and clear the login cookie; like every
// request through the session proxy that may change something, they are refused (403) when a
// browser says they come from another site: CrossSiteRefusal). Sessions (docs/sessions.md):
// /api/v1/sessions, the reverse proxy /sessions/<id>/... (the session's owner only, by bearer
// token or the corral_token cookie that POST /api/v1/login sets) and a minimal login page,
// GET /login.
#pragma once

#include <chrono>
#include <memory>
#include <string>

#include "server/controller.h"
#include "server/principal_cache.h"
#include "server/session_proxy.h"
#include "store/store.h"

namespace httplib {
class Server;
}

namespace corral::server {

struct HttpApiConfig {
  std::string join_token_hash;  // SHA-256 of the cluster's join token
  size_t max_body_bytes = 1 << 20;
  // Who a token belongs to is remembered this long; the API clears it on every change it makes
  // to tokens, users or memberships (principal_cache.h).
  PrincipalCache::Options principal_cache;
  // Sessions (docs/sessions.md): the URL users reach this server at ("https://corral.example"),
  // used for session URLs; empty: the scheme and the request's Host header.
  std::string public_url;
  bool tls = false;  // the server speaks https (cookies get Secure; URLs say https)
  // The session proxy's caps on requests in flight (ProxyLimiter) and how long an app may take
  // to answer one (longer: 502). A proxied request holds one of the server's HTTP threads while
  // it waits for the app, so the caps keep threads for the API.
  ProxyLimiter::Limits proxy_limits;
  std::chrono::milliseconds proxy_read_timeout{60000};
};

// The routes. Borrows controller, store and clock; the HttpApi must outlive the httplib server
// it registered on (its handlers point into it).
class HttpApi {
 public:
  HttpApi(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config);
  ~HttpApi();
  void Register(httplib::Server& http);

 private:
  class Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace corral::server
