#include "server/api/http_api.h"

#include "server/api/http_api_impl.h"
#include "server/http/job_token.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

// The bearer token first; else, for the dashboard's requests (CookieMayAuthenticate), the
// one corral_token cookie, refused for a request that may change something and comes from
// another site (CrossSiteRefusal).
Result<Principal> HttpApi::Impl::Authenticate(const HttpRequest& req) {
  const std::string token = BearerToken(req);
  if (LooksLikeJobToken(token)) {
    // A job token's scope is checked here, before any handler runs (job_token.h).
    auto job = controller_.Accounts().AuthenticateJob(token);
    if (!job.ok()) return job.status();
    if (!JobTokenMayUse(*job->job, req.method, req.path)) return PermissionDenied(kJobTokenScope);
    return job;
  }
  if (!token.empty()) return AuthenticateToken(token);
  const std::string cookies = req.Header("Cookie");
  if (CookieMayAuthenticate(req.method, req.path) && CookieCount(cookies, kTokenCookie) > 0) {
    if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
      return PermissionDenied(refused);
    }
    return AuthenticateCookie(req);
  }
  return Unauthenticated("missing 'Authorization: Bearer <token>' header");
}

// Who the request's one corral_token cookie belongs to (LoginCookieToken).
Result<Principal> HttpApi::Impl::AuthenticateCookie(const HttpRequest& req) {
  auto token = LoginCookieToken(req.Header("Cookie"));
  if (!token.ok()) return token.status();
  if (token->empty()) return Unauthenticated("not logged in");
  return AuthenticateToken(*token);
}

// Who an API token belongs to; Unauthenticated when unknown or revoked.
Result<Principal> HttpApi::Impl::AuthenticateToken(const std::string& token) {
  return controller_.Accounts().Authenticate(token);
}

// The saturation guard's pools (saturation_guard.h): an agent's requests, once its join or node
// token checks out, in the agents' own; the event stream (it lasts for ever, mostly asleep) and
// the health check (a front proxy must not take a busy leader for a dead one) in none; the rest
// in the regular one.
Result<Admission> HttpApi::Impl::Admit(const HttpRequest& head) {
  const Admission agent{Caller::kAuthenticated, config_.max_body_bytes, Load::kAgent};
  if (head.path == kRegisterPath) {
    if (Status joined = CheckJoinToken(head); !joined.ok()) return joined;
    return agent;
  }
  if (head.path == kHeartbeatPath) {
    auto node = AuthenticateNode(head);
    if (!node.ok()) return node.status();
    return agent;
  }
  const Load load =
      head.path == kEventStreamPath || head.path == "/healthz" ? Load::kUncounted : Load::kRegular;
  if (Authenticate(head).ok()) {
    return Admission{Caller::kAuthenticated, config_.max_body_bytes, load};
  }
  return Admission{Caller::kAnonymous, config_.max_anonymous_body_bytes, load};
}

void HttpApi::Impl::Register(HttpServer& http) {
  // A server that does not lead answers {"status":"ok","role":"follower",...} instead
  // (leader_lease.h); this route runs on the leader only.
  http.Get("/healthz", [](const HttpRequest&, HttpResponse& res) {
    SendJson(res, 200, {{"status", "ok"}, {"role", "leader"}});
  });
  http.Get("/", [this](const HttpRequest& req, HttpResponse& res) {
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

void HttpApi::Impl::StatusPage(HttpResponse& res) {
  const std::vector<protocol::NodeView> nodes = controller_.Nodes(Principal{});  // counts only
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
  res.SetContent(html, "text/html; charset=utf-8");
}

HttpApi::HttpApi(Controller& controller, Clock& clock, HttpApiConfig config)
    : impl_(std::make_unique<Impl>(controller, clock, std::move(config))) {}
HttpApi::~HttpApi() = default;
Result<Principal> HttpApi::AuthenticateToken(const std::string& token) {
  return impl_->AuthenticateToken(token);
}
void HttpApi::Register(HttpServer& http) { impl_->Register(http); }
Result<Admission> HttpApi::Admit(const HttpRequest& head) { return impl_->Admit(head); }
void HttpApi::Shutdown() { impl_->Shutdown(); }

}  // namespace corral::server
