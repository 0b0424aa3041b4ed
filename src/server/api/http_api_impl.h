// HttpApi's implementation (http_api.h), shared by the files that register its routes, one per
// resource: http_api.cc (authentication, the top-level routes, the status page), jobs.cc (jobs,
// arrays, logs, the queue and the policy), environments.cc, nodes.cc, people.cc (projects, users,
// tokens), agents.cc (the agent gateway), sessions.cc (sessions and login), monitoring.cc and
// dashboard.cc. Not for use outside src/server/api/.
#pragma once

#include <httplib.h>

#include <nlohmann/json.hpp>
#include <string>

#include "model/states.h"
#include "server/api/api_common.h"
#include "server/api/dashboard_api.h"
#include "server/api/http_api.h"
#include "server/gateway/session_proxy.h"
#include "server/http/auth.h"
#include "server/http/problem.h"
#include "server/monitoring/monitoring_views.h"

namespace corral::server {

class HttpApi::Impl {
 public:
  Impl(Controller& controller, Clock& clock, HttpApiConfig config)
      : controller_(controller),
        clock_(clock),
        config_(std::move(config)),
        event_streams_(config_.max_event_streams) {}

  void Shutdown() { event_streams_.Shutdown(); }

  // Wraps `handler(principal, req, res)` with authentication (and, if `admin_only`, a role check).
  template <typename Handler>
  httplib::Server::Handler Authed(Handler handler, bool admin_only = false) {
    return [this, handler, admin_only](const httplib::Request& req, httplib::Response& res) {
      auto who = Authenticate(req);
      if (!who.ok()) return SendProblem(res, who.status());
      if (admin_only && !who->admin) {
        return SendProblem(res, PermissionDenied("this needs an admin token"));
      }
      handler(*who, req, res);
    };
  }

  // http_api.cc
  Result<Principal> Authenticate(const httplib::Request& req);
  Result<Principal> AuthenticateCookie(const httplib::Request& req);
  Result<Principal> AuthenticateToken(const std::string& token);
  void Register(httplib::Server& http);
  // monitoring.cc
  void RegisterMonitoring(httplib::Server& http);

 private:
  using json = nlohmann::json;

  // jobs.cc
  void RegisterJobs(httplib::Server& http);
  void ListJobs(const Principal& who, const httplib::Request& req, httplib::Response& res);
  void Logs(const Principal& who, const httplib::Request& req, httplib::Response& res);
  void RegisterQueue(httplib::Server& http);
  // environments.cc
  void RegisterEnvironments(httplib::Server& http);
  // nodes.cc
  void RegisterNodes(httplib::Server& http);
  // people.cc
  void RegisterPeople(httplib::Server& http);
  void CreateUser(const httplib::Request& req, httplib::Response& res);
  // agents.cc
  void RegisterAgents(httplib::Server& http);
  // sessions.cc
  void RegisterSessions(httplib::Server& http);
  protocol::SessionView WithUrls(protocol::SessionView view, const httplib::Request& req) const;
  std::string BaseUrl(const httplib::Request& req) const;
  std::string RequestUrl(const httplib::Request& req) const;
  std::string GatewayUrl(const httplib::Request& req) const;
  std::string CrossSiteRefusalOf(const httplib::Request& req) const;
  void Login(const httplib::Request& req, httplib::Response& res);
  static void LoginPage(httplib::Response& res);
  // dashboard.cc
  void RegisterDashboard(httplib::Server& http);
  void DashboardPage(const httplib::Request& req, httplib::Response& res);
  static void SendAsset(const WebAssets::Asset& asset, httplib::Response& res);
  void EventStream(httplib::Response& res);
  // http_api.cc
  void StatusPage(httplib::Response& res);

  Controller& controller_;
  Clock& clock_;
  HttpApiConfig config_;
  EventStreams event_streams_;
  ForecastCache forecasts_{Seconds(60)};
};

}  // namespace corral::server
