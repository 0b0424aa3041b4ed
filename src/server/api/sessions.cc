// API routes of sessions (docs/sessions.md): create, list, view, stop; login and logout, the
// login page, and the redirect of old session links to the session gateway.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterSessions(HttpServer& http) {
  http.Post("/api/v1/sessions", Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              // A session's spec need not say it is one.
              if (body->is_object() && !body->contains("session"))
                (*body)["session"] = json::object();
              auto spec = protocol::ParseJobSpec(*body);
              if (!spec.ok()) return SendProblem(res, spec.status());
              auto job = controller_.SubmitSession(who, std::move(spec).value());
              if (!job.ok()) {
                return SendProblem(res, job.status());
              }
              auto view = controller_.SessionView(who, job->id);
              if (!view.ok()) return SendProblem(res, view.status());
              SendJson(res, 201, protocol::ToJson(WithUrls(*view, req)));
            }));
  http.Get("/api/v1/sessions", Authed([this](const Principal& who, const auto& req, auto& res) {
             std::vector<protocol::SessionView> sessions = controller_.ListSessions(who);
             for (auto& s : sessions) s = WithUrls(std::move(s), req);
             SendJson(res, 200, protocol::ToJson(sessions));
           }));
  http.Get(R"(/api/v1/sessions/(\d+))",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto id = PathId(req, "session");
             if (!id.ok()) return SendProblem(res, id.status());
             auto view = controller_.SessionView(who, JobId(*id));
             if (!view.ok()) return SendProblem(res, view.status());
             SendJson(res, 200, protocol::ToJson(WithUrls(*view, req)));
           }));
  http.Delete(R"(/api/v1/sessions/(\d+))",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto id = PathId(req, "session");
                if (!id.ok()) return SendProblem(res, id.status());
                Status s = controller_.StopSession(who, JobId(*id));
                if (!s.ok()) return SendProblem(res, s);
                SendJson(res, 202, {{"status", "stopping"}, {"id", *id}});
              }));
  http.Post("/api/v1/login",
            [this](const HttpRequest& req, HttpResponse& res) { Login(req, res); });
  http.Post("/api/v1/logout", [this](const HttpRequest& req, HttpResponse& res) {
    // No credentials needed (clearing a cookie gives nothing away), but only from this
    // server's own pages: another site must not log its visitors out.
    if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
      return SendProblem(res, PermissionDenied(refused));
    }
    res.SetHeader("Set-Cookie", TokenCookie("", config_.tls));
    SendJson(res, 200, {{"status", "logged out"}});
  });
  http.Get("/login", [this](const HttpRequest&, HttpResponse& res) { LoginPage(res); });
  // Sessions are served by the session gateway: old links, any method (HEAD is served by
  // the GET route), go there with their method and body (307).
  const std::string sessions = R"(/sessions/(\d+)(/.*)?)";
  auto redirect = [this](const HttpRequest& req, HttpResponse& res) {
    const std::string gateway = GatewayUrl(req);
    if (gateway.empty()) {
      return SendProblem(res, NotFound("sessions are served by the session gateway"));
    }
    res.Redirect(gateway + req.target, 307);
  };
  http.Get(sessions, redirect);
  http.Post(sessions, redirect);
  http.Put(sessions, redirect);
  http.Patch(sessions, redirect);
  http.Delete(sessions, redirect);
  http.Options(sessions, redirect);
}

// The session's URLs: "url" through the session gateway, and for its owner (who holds the
// token) "direct_url" to the app on its node (the app's own token check).
protocol::SessionView HttpApi::Impl::WithUrls(protocol::SessionView view,
                                              const HttpRequest& req) const {
  view.url = GatewayUrl(req) + view.path;
  view.direct_url.reset();
  if (view.token && view.address && view.port) {
    std::string host = *view.address;
    if (host.find(':') != std::string::npos) host = "[" + host + "]";  // an IPv6 address
    view.direct_url =
        "http://" + host + ":" + std::to_string(*view.port) + view.path + "?token=" + *view.token;
  }
  return view;
}

// "https://corral.example": the configured public URL, else RequestUrl, else nothing (URLs
// are then paths).
std::string HttpApi::Impl::BaseUrl(const HttpRequest& req) const {
  if (!config_.public_url.empty()) {
    std::string url = config_.public_url;
    while (!url.empty() && url.back() == '/') url.pop_back();
    return url;
  }
  return RequestUrl(req);
}

// The scheme and the request's Host ("http://corral:8080") when the Host is a plain
// host[:port]; else "".
std::string HttpApi::Impl::RequestUrl(const HttpRequest& req) const {
  return UrlOfHost(req.Header("Host"), config_.tls);
}

// The session gateway's URL for users: configured, else BaseUrl with the gateway's port.
std::string HttpApi::Impl::GatewayUrl(const HttpRequest& req) const {
  std::string url = config_.session_url;
  if (url.empty()) url = WithPort(BaseUrl(req), config_.session_port);
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// Why `req` is refused as a cross-site request (CrossSiteRefusal), "" when it may pass. This
// server's origins: --public-url's and the one the request itself was sent to.
std::string HttpApi::Impl::CrossSiteRefusalOf(const HttpRequest& req) const {
  std::vector<std::string> own = {RequestUrl(req)};
  if (!config_.public_url.empty()) own.push_back(config_.public_url);
  return CrossSiteRefusal(req.method, req.Header("Origin"), req.Header("Sec-Fetch-Site"), own);
}

// POST /api/v1/login {"token", "next"?}: checks the token and sets the corral_token cookie
// (HttpOnly, SameSite=Strict) for the session proxy; answers the user and where to go next
// (SafeRedirectTarget). JSON only, and not from another site (CrossSiteRefusal), so that a
// cross-site page cannot log anyone in.
void HttpApi::Impl::Login(const HttpRequest& req, HttpResponse& res) {
  // Guessing tokens from one address is slowed down (tokens are 256 bits: this keeps the log
  // and the CPU quiet rather than the tokens safe).
  if (const int64_t wait = login_limit_.Take(req.counted_address, std::chrono::steady_clock::now());
      wait > 0) {
    res.SetHeader("Retry-After", std::to_string(wait));
    return SendProblem(res, Status(StatusCode::kResourceExhausted,
                                   "too many logins from " + req.client_address +
                                       "; try again in " + std::to_string(wait) + " s"));
  }
  // Another site must not log its visitors in (as someone else, e.g. its author).
  if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
    return SendProblem(res, PermissionDenied(refused));
  }
  if (req.Header("Content-Type").rfind("application/json", 0) != 0) {
    return SendProblem(res, InvalidArgument("request body: must be application/json"));
  }
  auto body = ParseBody(req);
  if (!body.ok()) return SendProblem(res, body.status());
  auto token = StringField(*body, "token");
  if (!token.ok()) return SendProblem(res, token.status());
  auto next = StringField(*body, "next", "/");
  if (!next.ok()) return SendProblem(res, next.status());
  if (token->empty()) return SendProblem(res, Unauthenticated("field 'token': is empty"));
  auto who = AuthenticateToken(*token);
  if (!who.ok()) return SendProblem(res, who.status());
  res.SetHeader("Set-Cookie", TokenCookie(*token, config_.tls));
  SendJson(res, 200, {{"user", who->name}, {"next", SafeRedirectTarget(*next, {GatewayUrl(req)})}});
}

// GET /login: the dashboard's login page (web/dist/login.html, styled like the dashboard, its
// script a file under /assets/) when a dashboard with one is served, else the plain page below
// (for servers without a dashboard, whose users log in for sessions). Either is static: nothing
// from the request is written into the page. The server decides where to go next (POST
// /api/v1/login answers "next"), never the page's query string alone.
void HttpApi::Impl::LoginPage(HttpResponse& res) const {
  if (config_.web_assets) {
    if (auto page = config_.web_assets->Lookup("/login.html"); page.ok()) {
      SendAsset(*page, res);
      res.SetHeader("Content-Security-Policy",
                    "default-src 'self'; connect-src 'self'; object-src 'none'; "
                    "base-uri 'none'; form-action 'self'; frame-ancestors 'none'");
      res.SetHeader("Referrer-Policy", "same-origin");
      return;
    }
  }
  static const char kPage[] = R"html(<!doctype html>
<html><head><meta charset="utf-8"><title>corral: log in</title></head>
<body>
<h1>corral</h1>
<form id="login">
<p><label>API token <input id="token" type="password" autocomplete="off" size="72" required></label></p>
<p><button type="submit">Log in</button> <span id="error"></span></p>
</form>
<p>Your token is the one <code>corral login</code> uses (<code>corral token create NAME</code> makes one).</p>
<script>
document.getElementById("login").addEventListener("submit", async (event) => {
  event.preventDefault();
  const next = new URLSearchParams(location.search).get("next") || "/";
  const answer = await fetch("/api/v1/login", {
    method: "POST", credentials: "same-origin",
    headers: {"Content-Type": "application/json"},
    body: JSON.stringify({token: document.getElementById("token").value, next: next})});
  const body = await answer.json().catch(() => ({}));
  if (answer.ok) {
    location.assign(body.next || "/");
  } else {
    document.getElementById("error").textContent = body.detail || ("HTTP " + answer.status);
  }
});
</script>
</body></html>
)html";
  res.SetHeader("Content-Security-Policy",
                "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'; "
                "form-action 'self'; frame-ancestors 'none'");
  res.SetContent(kPage, "text/html; charset=utf-8");
}

}  // namespace corral::server
