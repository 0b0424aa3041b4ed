// HttpApi's implementation (http_api.h), shared by the files that register its routes, one per
// resource: http_api.cc (authentication, the top-level routes, the status page), jobs.cc (jobs,
// arrays, logs, the queue and the policy), environments.cc, nodes.cc, people.cc (projects, users,
// tokens), agents.cc (the agent gateway), sessions.cc (sessions and login), monitoring.cc and
// dashboard.cc. Not for use outside src/server/api/.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "model/states.h"
#include "server/api/api_common.h"
#include "server/api/dashboard_api.h"
#include "server/api/http_api.h"
#include "server/gateway/session_proxy.h"
#include "server/http/address_rate_limit.h"
#include "server/http/auth.h"
#include "server/http/http_server.h"
#include "server/http/problem.h"
#include "server/monitoring/monitoring_views.h"

namespace corral::server {

class HttpApi::Impl {
 public:
  Impl(Controller& controller, Clock& clock, HttpApiConfig config)
      : controller_(controller),
        clock_(clock),
        config_(std::move(config)),
        event_streams_(config_.max_event_streams),
        login_limit_(config_.logins_per_minute) {}

  void Shutdown() { event_streams_.Shutdown(); }

  // Wraps `handler(principal, req, res)` with authentication (and, if `admin_only`, a role check).
  template <typename Handler>
  HttpHandler Authed(Handler handler, bool admin_only = false) {
    return [this, handler, admin_only](const HttpRequest& req, HttpResponse& res) {
      auto who = Authenticate(req);
      if (!who.ok()) return SendProblem(res, who.status());
      if (admin_only && !who->admin) {
        return SendProblem(res, PermissionDenied("this needs an admin token"));
      }
      handler(*who, req, res);
    };
  }

  // http_api.cc
  Result<Admission> Admit(const HttpRequest& head);
  Result<Principal> Authenticate(const HttpRequest& req);
  Result<Principal> AuthenticateCookie(const HttpRequest& req);
  Result<Principal> AuthenticateToken(const std::string& token);
  void Register(HttpServer& http);
  // monitoring.cc
  void RegisterMonitoring(HttpServer& http);

 private:
  using json = nlohmann::json;

  // jobs.cc
  void RegisterJobs(HttpServer& http);
  void ListJobs(const Principal& who, const HttpRequest& req, HttpResponse& res);
  void Logs(const Principal& who, const HttpRequest& req, HttpResponse& res);
  void RegisterQueue(HttpServer& http);
  // environments.cc
  void RegisterEnvironments(HttpServer& http);
  // nodes.cc
  void RegisterNodes(HttpServer& http);
  // people.cc
  void RegisterPeople(HttpServer& http);
  void CreateUser(const HttpRequest& req, HttpResponse& res);
  // agents.cc
  void RegisterAgents(HttpServer& http);
  static constexpr const char* kRegisterPath = "/api/v1/agent/register";
  static constexpr const char* kHeartbeatPath = "/api/v1/agent/heartbeat";
  // OK when the request carries the cluster's join token.
  Status CheckJoinToken(const HttpRequest& req) const;
  // The registration a heartbeat's node name and node token belong to; Unauthenticated naming
  // what is wrong.
  Result<uint64_t> AuthenticateNode(const HttpRequest& req);
  // sessions.cc
  void RegisterSessions(HttpServer& http);
  protocol::SessionView WithUrls(protocol::SessionView view, const HttpRequest& req) const;
  std::string BaseUrl(const HttpRequest& req) const;
  std::string RequestUrl(const HttpRequest& req) const;
  std::string GatewayUrl(const HttpRequest& req) const;
  std::string CrossSiteRefusalOf(const HttpRequest& req) const;
  void Login(const HttpRequest& req, HttpResponse& res);
  void LoginPage(HttpResponse& res) const;
  // dashboard.cc
  void RegisterDashboard(HttpServer& http);
  void DashboardPage(const HttpRequest& req, HttpResponse& res);
  static void SendAsset(const WebAssets::Asset& asset, HttpResponse& res);
  static constexpr const char* kEventStreamPath = "/api/v1/events/stream";
  void EventStream(HttpResponse& res);
  // http_api.cc
  void StatusPage(HttpResponse& res);

  Controller& controller_;
  Clock& clock_;
  HttpApiConfig config_;
  EventStreams event_streams_;
  AddressRateLimit login_limit_;
  ForecastCache forecasts_{Seconds(60)};
};

}  // namespace corral::server
