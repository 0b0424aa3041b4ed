// API routes of monitoring (docs/monitoring.md): GET /metrics, the summary history, GPUs,
// usage, capacity forecast and what-if, and one job's GPUs and GPU history.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

// GET /metrics (Prometheus: an admin token, or the metrics token when one is configured; every
// job by name), the GPUs and idle GPUs (every user, as the nodes: other projects' jobs only as
// "in use"), and one job's GPUs (who may see the job).
void HttpApi::Impl::RegisterMonitoring(HttpServer& http) {
  // The server outlives its routes: they run on its threads.
  http.Get("/metrics", [this, &http](const HttpRequest& req, HttpResponse& res) {
    const std::string token = BearerToken(req);
    const bool metrics_token = !config_.metrics_token_hash.empty() && !token.empty() &&
                               SecureEquals(HashToken(token), config_.metrics_token_hash);
    if (!metrics_token) {
      auto who = Authenticate(req);
      if (!who.ok()) return SendProblem(res, who.status());
      if (!who->admin) {
        return SendProblem(res, PermissionDenied("/metrics needs an admin or metrics token"));
      }
    }
    res.SetContent(MetricsText(controller_, clock_.Now(), http.saturation()),
                   "text/plain; version=0.0.4; charset=utf-8");
  });
  http.Get("/api/v1/summary/history", Authed([this](const Principal&, const auto& req, auto& res) {
             auto since = IntParam(req, "since", 0, int64_t{1} << 40);
             if (!since.ok()) return SendProblem(res, since.status());
             const protocol::SummaryHistory history{
                 .summaries = controller_.SummaryHistory(Seconds(since->value_or(0)))};
             SendJson(res, 200, protocol::ToJson(history));
           }));
  http.Get("/api/v1/gpus", Authed([this](const Principal& who, const auto& req, auto& res) {
             SendJson(res, 200, GpusView(controller_, who, clock_.Now(), req.Param("idle") == "1"));
           }));
  // Allocated and used GPU-hours (docs/monitoring.md): the caller's own and those of the
  // projects they belong to (admins: all); JSON, or CSV with format=csv.
  http.Get(
      "/api/v1/usage", Authed([this](const Principal& who, const auto& req, auto& res) {
        auto by = ParseUsageGrouping(req.HasParam("by") ? req.Param("by") : std::string("project"));
        if (!by.ok()) return SendProblem(res, by.status());
        auto range = ParseDayRange(req.HasParam("since") ? req.Param("since") : std::string("30d"),
                                   req.Param("until"), clock_.Now());
        if (!range.ok()) return SendProblem(res, range.status());
        const std::string format = req.HasParam("format") ? req.Param("format") : "json";
        if (format != "json" && format != "csv") {
          return SendProblem(res, InvalidArgument("field 'format': json or csv"));
        }
        auto visible = controller_.GpuUsage(who, range->first, range->second);
        if (!visible.ok()) return SendProblem(res, visible.status());
        const json report = UsageReport(*visible, *by);
        if (format == "csv") {
          res.SetHeader("Content-Disposition", "attachment; filename=\"corral-usage.csv\"");
          return res.SetContent(UsageCsv(report, *by), "text/csv; charset=utf-8");
        }
        SendJson(res, 200, {{"since", range->first}, {"until", range->second}, {"rows", report}});
      }));
  // Capacity planning (capacity.h): the demand forecast for everyone; the what-if replay,
  // which runs the simulator over the recorded jobs, for admins.
  http.Get("/api/v1/capacity/forecast",
           Authed([this](const Principal&, const auto& req, auto& res) {
             auto history = IntParam(req, "history_days", 1, 90);
             if (!history.ok()) return SendProblem(res, history.status());
             auto horizon = IntParam(req, "horizon_days", 1, 28);
             if (!horizon.ok()) return SendProblem(res, horizon.status());
             const int history_days = static_cast<int>(history->value_or(28));
             const int horizon_days = static_cast<int>(horizon->value_or(7));
             const Seconds now = clock_.Now();
             auto view = forecasts_.Get(history_days, horizon_days, now, [&] {
               return CapacityForecastView(controller_, now, history_days, horizon_days);
             });
             if (!view.ok()) return SendProblem(res, view.status());
             SendJson(res, 200, *view);
           }));
  http.Post("/api/v1/capacity/what-if", Authed(
                                            [this](const Principal&, const auto& req, auto& res) {
                                              auto body = ParseBody(req);
                                              if (!body.ok())
                                                return SendProblem(res, body.status());
                                              auto view =
                                                  WhatIfView(controller_, clock_.Now(), *body);
                                              if (!view.ok())
                                                return SendProblem(res, view.status());
                                              SendJson(res, 200, *view);
                                            },
                                            /*admin_only=*/true));
  http.Get(R"(/api/v1/jobs/(\d+)/gpu-history)",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto id = PathId(req, "job");
             if (!id.ok()) return SendProblem(res, id.status());
             if (config_.gpu_history == nullptr) {
               return SendProblem(res, NotFound("this server keeps no GPU history"));
             }
             const int64_t now = clock_.Now().value();
             auto since = IntParam(req, "since", 0, int64_t{1} << 40);
             if (!since.ok()) return SendProblem(res, since.status());
             auto until = IntParam(req, "until", 0, int64_t{1} << 40);
             if (!until.ok()) return SendProblem(res, until.status());
             // Only who may see the job may see its GPUs.
             auto job = controller_.JobView(who, JobId(*id));
             if (!job.ok()) return SendProblem(res, job.status());
             auto view = JobGpuHistoryView(*config_.gpu_history, JobId(*id),
                                           Seconds(since->value_or(now - 86400)),
                                           Seconds(until->value_or(now + 1)));
             if (!view.ok()) return SendProblem(res, view.status());
             SendJson(res, 200, *view);
           }));
  http.Get(R"(/api/v1/jobs/(\d+)/gpus)",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto id = PathId(req, "job");
             if (!id.ok()) return SendProblem(res, id.status());
             auto since = IntParam(req, "since", 0, int64_t{1} << 40);
             if (!since.ok()) return SendProblem(res, since.status());
             // Only who may see the job may see its GPUs.
             auto job = controller_.JobView(who, JobId(*id));
             if (!job.ok()) return SendProblem(res, job.status());
             SendJson(res, 200,
                      JobGpusView(controller_, who, JobId(*id), clock_.Now(),
                                  Seconds(since->value_or(0))));
           }));
}

}  // namespace corral::server
