// The HTTP/JSON API under /api/v1, the agent gateway, /healthz and the status page, served
// with cpp-httplib (TLS when a certificate is given). Errors are application/problem+json
// ({"type","title","status","detail"}) with the detail naming the field; bodies over 1 MiB get
// 413; a body that is not a JSON object, or a field of the wrong type, gets 400. Every /api/v1
// route but the agent's needs `Authorization: Bearer <token>`. Sessions (docs/sessions.md):
// /api/v1/sessions, the reverse proxy /sessions/<id>/... (a bearer token or the corral_token
// cookie that POST /api/v1/login sets) and a minimal login page, GET /login.
#pragma once

#include <memory>
#include <string>

#include "server/controller.h"
#include "server/principal_cache.h"
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
