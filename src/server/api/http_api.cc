#include "server/api/http_api.h"

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

// The bearer token first; else, for the dashboard's requests (CookieMayAuthenticate), the
// one corral_token cookie, refused for a request that may change something and comes from
// another site (CrossSiteRefusal).
Result<Principal> HttpApi::Impl::Authenticate(const httplib::Request& req) {
  const std::string token = BearerToken(req);
  if (!token.empty()) return AuthenticateToken(token);
  const std::string cookies = req.get_header_value("Cookie");
  if (CookieMayAuthenticate(req.method, req.path) && CookieCount(cookies, kTokenCookie) > 0) {
    if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
      return PermissionDenied(refused);
    }
    return AuthenticateCookie(req);
  }
  return Unauthenticated("missing 'Authorization: Bearer <token>' header");
}

// Who the request's one corral_token cookie belongs to (LoginCookieToken).
Result<Principal> HttpApi::Impl::AuthenticateCookie(const httplib::Request& req) {
  auto token = LoginCookieToken(req.get_header_value("Cookie"));
  if (!token.ok()) return token.status();
  if (token->empty()) return Unauthenticated("not logged in");
  return AuthenticateToken(*token);
}

// Who an API token belongs to; Unauthenticated when unknown or revoked.
Result<Principal> HttpApi::Impl::AuthenticateToken(const std::string& token) {
  return controller_.Accounts().Authenticate(token);
}

void HttpApi::Impl::Register(httplib::Server& http) {
  http.set_payload_max_length(config_.max_body_bytes);
  http.set_exception_handler([](const auto&, auto& res, std::exception_ptr) {
    SendProblem(res, Status(StatusCode::kInternal, "internal error"));
  });
  // Errors httplib answers itself (no route, a body over the limit, a malformed request) carry
  // no body: they get problem+json too. An answer a route wrote is left as it is.
  http.set_error_handler(httplib::Server::HandlerWithResponse(
      [this](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty() || res.has_header("Content-Type")) {
          return httplib::Server::HandlerResponse::Unhandled;  // a route's own answer
        }
        const std::string what = req.method + " " + req.path;
        std::string title = "invalid_argument", detail = "malformed request";
        if (!req.method.empty() && (req.method == "POST" || req.method == "PUT") &&
            !req.has_header("Content-Length") && !req.has_header("Transfer-Encoding")) {
          // httplib reads a body only by its length: `curl -X POST` without -d sends none.
          detail = what + " needs a Content-Length header (send a body, or Content-Length: 0)";
        } else if (!req.method.empty()) {
          detail = "cannot read the request " + what + " (a malformed head or body)";
        }
        if (res.status == 404) {
          title = "not_found";
          detail = "no such route: " + what;
        } else if (res.status == 413) {
          title = "resource_exhausted";
          detail = "the request body is over " + std::to_string(config_.max_body_bytes) + " bytes";
        } else if (res.status >= 500) {
          title = "internal";
          detail = "internal error answering " + what;
        }
        res.set_content(Problem(res.status, title, detail).dump(), "application/problem+json");
        return httplib::Server::HandlerResponse::Handled;
      }));
  http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  http.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
    if (config_.web_assets) return DashboardPage(req, res);
    StatusPage(res);
  });
  RegisterDashboard(http);
  http.Get(
      "/api/v1/whoami", Authed([](const Principal& who, const auto&, auto& res) {
        SendJson(res, 200, {{"user", who.name}, {"admin", who.admin}, {"projects", who.projects}});
      }));
  RegisterJobs(http);
  RegisterEnvironments(http);
  RegisterNodes(http);
  RegisterQueue(http);
  RegisterPeople(http);
  RegisterAgents(http);
  RegisterSessions(http);
  RegisterMonitoring(http);
}

void HttpApi::Impl::StatusPage(httplib::Response& res) {
  const std::vector<protocol::NodeView> nodes = controller_.Nodes();
  int gpus = 0, ready = 0;
  for (const protocol::NodeView& n : nodes) {
    gpus += n.gpus;
    ready += n.state == model::NodeState::kReady;
  }
  std::string html =
      "<!doctype html><html><head><meta charset=\"utf-8\"><title>corral</title></head><body>"
      "<h1>corral</h1><p>" +
      std::to_string(nodes.size()) + " nodes (" + std::to_string(ready) + " ready), " +
      std::to_string(gpus) +
      " GPUs.</p><p>Use the CLI (<code>corral jobs</code>, <code>corral nodes</code>) or the "
      "API under <code>/api/v1</code> with a token. The dashboard is coming.</p></body></html>";
  res.set_content(html, "text/html; charset=utf-8");
}

HttpApi::HttpApi(Controller& controller, Clock& clock, HttpApiConfig config)
    : impl_(std::make_unique<Impl>(controller, clock, std::move(config))) {}
HttpApi::~HttpApi() = default;
Result<Principal> HttpApi::AuthenticateToken(const std::string& token) {
  return impl_->AuthenticateToken(token);
}
void HttpApi::Register(httplib::Server& http) { impl_->Register(http); }
void HttpApi::Shutdown() { impl_->Shutdown(); }

}  // namespace corral::server
