// API routes of the dashboard (docs/dashboard.md): its assets, the page at /, the cluster
// summary and the live event stream.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterDashboard(HttpServer& http) {
  // Static and public (the code, not the data): no credentials needed.
  http.Get(R"(/assets/.*)", [this](const HttpRequest& req, HttpResponse& res) {
    if (!config_.web_assets) return SendProblem(res, NotFound("no dashboard is served"));
    auto asset = config_.web_assets->Lookup(req.path);
    if (!asset.ok()) return SendProblem(res, asset.status());
    SendAsset(*asset, res);
  });
  http.Get("/api/v1/summary", Authed([this](const Principal&, const auto&, auto& res) {
             SendJson(res, 200, protocol::ToJson(controller_.ClusterSummary()));
           }));
  http.Get(kEventStreamPath,
           Authed([this](const Principal&, const auto&, auto& res) { EventStream(res); }));
}

// GET /: the dashboard's index.html for a browser logged in by cookie (the page's own API
// calls are authenticated by that cookie too), else a redirect to the login page.
void HttpApi::Impl::DashboardPage(const HttpRequest& req, HttpResponse& res) {
  auto who = AuthenticateCookie(req);
  if (!who.ok()) {
    if (who.status().code() != StatusCode::kUnauthenticated) {
      return SendProblem(res, who.status());
    }
    res.Redirect("/login?next=/", 302);
    res.SetHeader("Cache-Control", "no-store");
    return;
  }
  auto index = config_.web_assets->Lookup("/");
  if (!index.ok()) return SendProblem(res, index.status());
  SendAsset(*index, res);
  // Scripts and styles from this origin only; uPlot sets element styles from script, which
  // CSP's style-src does not govern, and its stylesheet is bundled.
  res.SetHeader("Content-Security-Policy",
                "default-src 'self'; img-src 'self' data:; connect-src 'self'; "
                "object-src 'none'; base-uri 'none'; form-action 'self'; "
                "frame-ancestors 'none'");
  res.SetHeader("Referrer-Policy", "same-origin");
}

void HttpApi::Impl::SendAsset(const WebAssets::Asset& asset, HttpResponse& res) {
  res.SetHeader("Cache-Control", asset.cache_control);
  res.SetHeader("X-Content-Type-Options", "nosniff");
  res.SetContent(asset.body, asset.content_type);
}

// GET /api/v1/events/stream: Server-Sent Events, a "summary" event (ClusterSummary) at once
// and then every event_period, until the client goes, the server shuts down or 10 minutes
// pass (EventSource reconnects). At most max_event_streams at once: each holds an HTTP
// thread; over the cap, 429 with Retry-After (EventSource gives up on an error status: the
// dashboard then polls /api/v1/summary).
void HttpApi::Impl::EventStream(HttpResponse& res) {
  auto ticket = std::make_shared<EventStreams::Ticket>(event_streams_.Open());
  if (!ticket->admitted()) {
    res.SetHeader("Retry-After", "10");
    return SendProblem(res, Status(StatusCode::kResourceExhausted,
                                   "too many live streams open; poll /api/v1/summary"));
  }
  res.SetHeader("Cache-Control", "no-store");
  res.SetHeader("X-Accel-Buffering", "no");  // a proxy in front must not hold the events
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
  auto next_id = std::make_shared<int64_t>(0);
  res.Stream("text/event-stream", [this, ticket, next_id, deadline](std::string& piece) {
    if (*next_id > 0 && !event_streams_.Wait(config_.event_period)) return false;
    if (std::chrono::steady_clock::now() > deadline) return false;
    piece = EventStreamFrame("summary", ++*next_id, protocol::ToJson(controller_.ClusterSummary()));
    return true;
  });
}

}  // namespace corral::server
