#include "server/api/http_api.h"

#include <fcntl.h>
#include <httplib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <limits>
#include <optional>
#include <type_traits>

#include "common/build_info.h"
#include "model/states.h"
#include "protocol/agent_messages.h"
#include "server/api/dashboard_api.h"
#include "server/gateway/session_proxy.h"
#include "server/http/auth.h"
#include "server/monitoring/gpu_history.h"
#include "server/monitoring/monitoring_views.h"

namespace corral::server {

using nlohmann::json;

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    default:
      return 500;
  }
}

json Problem(int status, std::string_view title, std::string_view detail) {
  return {{"type", "about:blank"}, {"title", title}, {"status", status}, {"detail", detail}};
}

namespace {

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Invalid UTF-8 (from a task's output or an agent's note) becomes U+FFFD instead of throwing.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendProblem(httplib::Response& res, const Status& s) {
  const int status = HttpStatusOf(s.code());
  res.status = status;
  res.set_content(Problem(status, StatusCodeName(s.code()), s.message()).dump(),
                  "application/problem+json");
}

std::string BearerToken(const httplib::Request& req) {
  return BearerTokenOf(req.get_header_value("Authorization"));
}

constexpr int kDefaultJobPage = 100;        // jobs per GET /api/v1/jobs without ?limit
constexpr int kMaxJobPage = 1000;           // the largest ?limit
constexpr int64_t kLogPageBytes = 1 << 20;  // the most one GET .../logs answers

// The request body: a JSON object, else 400.
Result<json> ParseBody(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return InvalidArgument("request body: not valid JSON");
  if (!body.is_object()) return InvalidArgument("request body: must be a JSON object");
  return body;
}

// Field `name` of a request body as T (std::string, bool, int64_t, std::vector<std::string>):
// `fallback` when the field is absent, InvalidArgument naming the field when it is absent
// without a fallback or has another JSON type.
template <typename T>
Result<T> Field(const json& body, const std::string& name, std::optional<T> fallback = {}) {
  const auto it = body.find(name);
  if (it == body.end()) {
    if (fallback) return *std::move(fallback);
    return InvalidArgument("field '" + name + "': is required");
  }
  bool ok = false;
  const char* expected = "";
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
    expected = "a string";
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
    expected = "true or false";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    ok = it->is_number_integer();
    expected = "an integer";
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "unsupported field type");
    ok = it->is_array() &&
         std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_string(); });
    expected = "an array of strings";
  }
  if (!ok) return InvalidArgument("field '" + name + "': must be " + expected);
  return it->template get<T>();
}

// Decimal digits (at most 18, so at most kMaxCount) as an integer; nullopt for anything else.
constexpr int64_t kMaxCount = 999'999'999'999'999'999;
std::optional<int64_t> ParseCount(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos) {
    return std::nullopt;
  }
  return std::stoll(text);
}

// Query parameter `name` as an integer in [lo, hi]: nullopt when absent, InvalidArgument naming
// it when it is anything else.
Result<std::optional<int64_t>> IntParam(const httplib::Request& req, const std::string& name,
                                        int64_t lo, int64_t hi) {
  if (!req.has_param(name)) return std::optional<int64_t>();
  const std::optional<int64_t> v = ParseCount(req.get_param_value(name));
  if (!v || *v < lo || *v > hi) {
    return InvalidArgument("field '" + name + "': must be an integer from " + std::to_string(lo) +
                           " to " + std::to_string(hi));
  }
  return v;
}

// The id a route captured as (\d+) (so only an overflow fails).
Result<int64_t> PathId(const httplib::Request& req, const std::string& what) {
  const std::optional<int64_t> id = ParseCount(req.matches[1]);
  if (!id) return NotFound(what + " " + std::string(req.matches[1]) + " not found");
  return *id;
}

struct LogPage {
  std::string data;  // at most kLogPageBytes from the asked offset
  int64_t size = 0;  // of the whole file
};

// Up to kLogPageBytes of the file at `path` from `offset`, read with pread (never more). A file
// that does not exist yet reads as empty; an offset at or past its end gives no data.
Result<LogPage> ReadLogPage(const std::string& path, int64_t offset) {
  LogPage page;
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return page;
    return IoError("open log file: " + std::string(std::strerror(errno)));
  }
  struct stat st {};
  Status s;
  if (fstat(fd, &st) != 0) {
    s = IoError("stat log file: " + std::string(std::strerror(errno)));
  } else {
    page.size = st.st_size;
    page.data.resize(std::clamp<int64_t>(page.size - offset, 0, kLogPageBytes));
    size_t done = 0;
    while (done < page.data.size()) {
      const ssize_t n = pread(fd, page.data.data() + done, page.data.size() - done,
                              offset + static_cast<int64_t>(done));
      if (n < 0 && errno == EINTR) continue;
      if (n < 0) {
        s = IoError("read log file: " + std::string(std::strerror(errno)));
        break;
      }
      if (n == 0) break;  // the file shrank meanwhile
      done += n;
    }
    page.data.resize(done);
  }
  close(fd);
  if (!s.ok()) return s;
  return page;
}

}  // namespace

class HttpApi::Impl {
 public:
  Impl(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config)
      : controller_(controller),
        store_(store),
        clock_(clock),
        config_(std::move(config)),
        principals_(clock, config_.principal_cache),
        event_streams_(config_.max_event_streams) {}

  // The bearer token first; else, for the dashboard's requests (CookieMayAuthenticate), the
  // one corral_token cookie, refused for a request that may change something and comes from
  // another site (CrossSiteRefusal).
  Result<Principal> Authenticate(const httplib::Request& req) {
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
  Result<Principal> AuthenticateCookie(const httplib::Request& req) {
    auto token = LoginCookieToken(req.get_header_value("Cookie"));
    if (!token.ok()) return token.status();
    if (token->empty()) return Unauthenticated("not logged in");
    return AuthenticateToken(*token);
  }

  void Shutdown() { event_streams_.Shutdown(); }

  // Who an API token belongs to; Unauthenticated when unknown or revoked.
  Result<Principal> AuthenticateToken(const std::string& token) {
    const std::string hash = HashToken(token);
    return principals_.Get(hash, [&]() -> Result<Principal> {
      auto user = store_.UserForTokenHash(hash);
      if (!user.ok()) {
        if (user.status().code() == StatusCode::kNotFound) {
          return Unauthenticated("unknown or revoked token");
        }
        return user.status();
      }
      Principal p;
      p.user_id = user->id;
      p.name = user->name;
      p.admin = user->admin;
      auto projects = store_.ProjectsOf(user->id);
      if (!projects.ok()) return projects.status();
      p.projects = *projects;
      return p;
    });
  }

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

  void Register(httplib::Server& http) {
    http.set_payload_max_length(config_.max_body_bytes);
    http.set_exception_handler([](const auto&, auto& res, std::exception_ptr) {
      SendProblem(res, Status(StatusCode::kInternal, "internal error"));
    });
    http.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
      res.set_content("ok\n", "text/plain");
    });
    http.Get("/", [this](const httplib::Request& req, httplib::Response& res) {
      if (config_.web_assets) return DashboardPage(req, res);
      StatusPage(res);
    });
    RegisterDashboard(http);
    http.Get("/api/v1/whoami", Authed([](const Principal& who, const auto&, auto& res) {
               SendJson(res, 200,
                        {{"user", who.name}, {"admin", who.admin}, {"projects", who.projects}});
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

  // GET /metrics (Prometheus: an admin token, or the metrics token when one is configured),
  // the GPUs and idle GPUs (every user, as the nodes), and one job's GPUs (who may see the job).
  void RegisterMonitoring(httplib::Server& http) {
    http.Get("/metrics", [this](const httplib::Request& req, httplib::Response& res) {
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
      res.set_content(MetricsText(controller_, clock_.Now()),
                      "text/plain; version=0.0.4; charset=utf-8");
    });
    http.Get("/api/v1/summary/history",
             Authed([this](const Principal&, const auto& req, auto& res) {
               auto since = IntParam(req, "since", 0, int64_t{1} << 40);
               if (!since.ok()) return SendProblem(res, since.status());
               SendJson(res, 200,
                        {{"step_s", 60},
                         {"summaries", controller_.SummaryHistory(Seconds(since->value_or(0)))}});
             }));
    http.Get("/api/v1/gpus", Authed([this](const Principal&, const auto& req, auto& res) {
               SendJson(res, 200,
                        GpusView(controller_, clock_.Now(), req.get_param_value("idle") == "1"));
             }));
    // Allocated and used GPU-hours (docs/monitoring.md): the caller's own and those of the
    // projects they belong to (admins: all); JSON, or CSV with format=csv.
    http.Get(
        "/api/v1/usage", Authed([this](const Principal& who, const auto& req, auto& res) {
          auto by = ParseUsageGrouping(req.has_param("by") ? req.get_param_value("by")
                                                           : std::string("project"));
          if (!by.ok()) return SendProblem(res, by.status());
          auto range = ParseDayRange(
              req.has_param("since") ? req.get_param_value("since") : std::string("30d"),
              req.get_param_value("until"), clock_.Now());
          if (!range.ok()) return SendProblem(res, range.status());
          const std::string format =
              req.has_param("format") ? req.get_param_value("format") : "json";
          if (format != "json" && format != "csv") {
            return SendProblem(res, InvalidArgument("field 'format': json or csv"));
          }
          auto rows = store_.GpuUsage(range->first, range->second);
          if (!rows.ok()) return SendProblem(res, rows.status());
          std::vector<store::GpuUsageRow> visible;
          for (const auto& r : *rows) {
            if (who.admin || r.user == who.name || who.CanAccessProject(r.project)) {
              visible.push_back(r);
            }
          }
          const json report = UsageReport(visible, *by);
          if (format == "csv") {
            res.set_header("Content-Disposition", "attachment; filename=\"corral-usage.csv\"");
            return res.set_content(UsageCsv(report, *by), "text/csv; charset=utf-8");
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
                 return CapacityForecastView(controller_, store_, now, history_days, horizon_days);
               });
               if (!view.ok()) return SendProblem(res, view.status());
               SendJson(res, 200, *view);
             }));
    http.Post("/api/v1/capacity/what-if", Authed(
                                              [this](const Principal&, const auto& req, auto& res) {
                                                auto body = ParseBody(req);
                                                if (!body.ok())
                                                  return SendProblem(res, body.status());
                                                auto view = WhatIfView(controller_, store_,
                                                                       clock_.Now(), *body);
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
               SendJson(
                   res, 200,
                   JobGpusView(controller_, JobId(*id), clock_.Now(), Seconds(since->value_or(0))));
             }));
  }

 private:
  void RegisterJobs(httplib::Server& http) {
    http.Post("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                if (body->contains("array")) return SubmitArray(who, *body, res);
                auto job = controller_.Submit(who, *body);
                if (!job.ok()) return SendProblem(res, job.status());
                SendJson(res, 201,
                         {{"id", job->id.value()},
                          {"state", model::ToString(job->state)},
                          {"project", job->project},
                          {"user", job->user},
                          {"reason", job->reason}});
              }));
    http.Get("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
               ListJobs(who, req, res);
             }));
    http.Get(R"(/api/v1/jobs/(\d+))",
             Authed([this](const Principal& who, const auto& req, auto& res) {
               auto id = PathId(req, "job");
               if (!id.ok()) return SendProblem(res, id.status());
               auto view = controller_.JobView(who, JobId(*id));
               if (!view.ok()) return SendProblem(res, view.status());
               SendJson(res, 200, *view);
             }));
    http.Post(R"(/api/v1/jobs/(\d+)/cancel)",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto id = PathId(req, "job");
                if (!id.ok()) return SendProblem(res, id.status());
                Status s = controller_.Cancel(who, JobId(*id));
                if (!s.ok()) return SendProblem(res, s);
                SendJson(res, 202, {{"status", "cancelling"}});
              }));
    http.Get(R"(/api/v1/jobs/(\d+)/logs)", Authed([this](const Principal& who, const auto& req,
                                                         auto& res) { Logs(who, req, res); }));
    http.Post(
        R"(/api/v1/arrays/(\d+)/cancel)",
        Authed([this](const Principal& who, const auto& req, auto& res) {
          auto id = PathId(req, "array");
          if (!id.ok()) return SendProblem(res, id.status());
          auto ids = controller_.CancelArray(who, JobId(*id));
          if (!ids.ok()) return SendProblem(res, ids.status());
          json cancelled = json::array();
          for (JobId j : *ids) cancelled.push_back(j.value());
          SendJson(res, 202, {{"status", "cancelling"}, {"array_id", *id}, {"ids", cancelled}});
        }));
  }

  // 201 with the array's id and its elements' ids, in the order of the indices.
  void SubmitArray(const Principal& who, const json& body, httplib::Response& res) {
    auto jobs = controller_.SubmitArray(who, body);
    if (!jobs.ok()) return SendProblem(res, jobs.status());
    json ids = json::array();
    for (const auto& j : *jobs) ids.push_back(j.id.value());
    const store::JobRecord& first = jobs->front();
    SendJson(res, 201,
             {{"array_id", first.id.value()},
              {"ids", ids},
              {"state", model::ToString(first.state)},
              {"project", first.project},
              {"user", first.user},
              {"reason", first.reason}});
  }

  // Newest first, a page at a time: `limit` jobs with ids below `before` (only the elements of
  // `array` when given); the header X-Corral-Next-Before carries the next page's `before` when
  // older jobs match.
  void ListJobs(const Principal& who, const httplib::Request& req, httplib::Response& res) {
    auto states = model::ParseJobStates(req.get_param_value("state"));
    if (!states.ok()) return SendProblem(res, states.status());
    auto limit = IntParam(req, "limit", 1, kMaxJobPage);
    if (!limit.ok()) return SendProblem(res, limit.status());
    auto before = IntParam(req, "before", 1, kMaxCount);
    if (!before.ok()) return SendProblem(res, before.status());
    std::optional<JobId> before_id;
    if (*before) before_id = JobId(**before);
    auto array = IntParam(req, "array", 1, kMaxCount);
    if (!array.ok()) return SendProblem(res, array.status());
    std::optional<JobId> array_id;
    if (*array) array_id = JobId(**array);
    auto page = controller_.ListJobs(who, *states, req.get_param_value("all") == "1",
                                     static_cast<int>(limit->value_or(kDefaultJobPage)), before_id,
                                     array_id);
    if (!page.ok()) return SendProblem(res, page.status());
    if (page->next_before) {
      res.set_header("X-Corral-Next-Before", std::to_string(page->next_before->value()));
    }
    SendJson(res, 200, page->jobs);
  }

  // A page of a task's log: X-Corral-Log-Offset is the offset to ask for next (unchanged past
  // the end), X-Corral-Log-Size the file's size now.
  void Logs(const Principal& who, const httplib::Request& req, httplib::Response& res) {
    auto id = PathId(req, "job");
    if (!id.ok()) return SendProblem(res, id.status());
    auto task = IntParam(req, "task", 0, 999999);
    if (!task.ok()) return SendProblem(res, task.status());
    auto offset = IntParam(req, "offset", 0, kMaxCount);
    if (!offset.ok()) return SendProblem(res, offset.status());
    auto generation = IntParam(req, "generation", 1, std::numeric_limits<int32_t>::max());
    if (!generation.ok()) return SendProblem(res, generation.status());
    const std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
    auto path = controller_.LogPath(who, JobId(*id), static_cast<int>(task->value_or(0)), stream,
                                    *generation);
    if (!path.ok()) return SendProblem(res, path.status());
    const int64_t from = offset->value_or(0);
    auto page = ReadLogPage(*path, from);
    if (!page.ok()) return SendProblem(res, page.status());
    res.set_header("X-Corral-Log-Offset", std::to_string(from + page->data.size()));
    res.set_header("X-Corral-Log-Size", std::to_string(page->size));
    res.set_content(page->data, "text/plain; charset=utf-8");
  }

  void RegisterEnvironments(httplib::Server& http) {
    http.Get("/api/v1/environments", Authed([this](const Principal& who, const auto&, auto& res) {
               auto envs = controller_.Environments().List(who);
               if (!envs.ok()) return SendProblem(res, envs.status());
               json out = json::array();
               for (const auto& e : *envs) out.push_back(ToJson(e));
               SendJson(res, 200, {{"environments", out}});
             }));
    http.Get(R"(/api/v1/environments/([^/]+))",
             Authed([this](const Principal& who, const auto& req, auto& res) {
               auto version = IntParam(req, "version", 1, kMaxCount);
               if (!version.ok()) return SendProblem(res, version.status());
               auto env = controller_.Environments().Get(who, req.matches[1], *version);
               if (!env.ok()) return SendProblem(res, env.status());
               SendJson(res, 200, ToJson(*env));
             }));
    http.Post("/api/v1/environments",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto env = controller_.Environments().Create(who, *body);
                if (!env.ok()) return SendProblem(res, env.status());
                SendJson(res, 201, ToJson(*env));
              }));
    http.Post(R"(/api/v1/environments/([^/]+)/clone)",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto env = controller_.Environments().Clone(who, req.matches[1], *body);
                if (!env.ok()) return SendProblem(res, env.status());
                SendJson(res, 201, ToJson(*env));
              }));
    http.Post(R"(/api/v1/environments/([^/]+)/share)",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto project = Field<std::string>(*body, "project");
                if (!project.ok()) return SendProblem(res, project.status());
                Status s = controller_.Environments().Share(who, req.matches[1], *project);
                if (!s.ok()) return SendProblem(res, s);
                auto env = controller_.Environments().Get(who, req.matches[1], std::nullopt);
                if (!env.ok()) return SendProblem(res, env.status());
                SendJson(res, 200, ToJson(*env));
              }));
  }

  void RegisterQueue(httplib::Server& http) {
    http.Get("/api/v1/queue", Authed([this](const Principal& who, const auto& req, auto& res) {
               auto limit = IntParam(req, "limit", 1, kMaxJobPage);
               if (!limit.ok()) return SendProblem(res, limit.status());
               auto queue =
                   controller_.QueueView(who, static_cast<int>(limit->value_or(kDefaultJobPage)));
               if (!queue.ok()) return SendProblem(res, queue.status());
               SendJson(res, 200, *queue);
             }));
    http.Get("/api/v1/policy", Authed([this](const Principal&, const auto&, auto& res) {
               SendJson(res, 200, controller_.PolicyView());
             }));
  }

  void RegisterNodes(httplib::Server& http) {
    http.Get("/api/v1/nodes", Authed([this](const Principal&, const auto&, auto& res) {
               SendJson(res, 200, controller_.Nodes());
             }));
    http.Post(R"(/api/v1/nodes/([^/]+)/(cordon|uncordon|drain))",
              Authed(
                  [this](const Principal&, const auto& req, auto& res) {
                    Status s = controller_.SetNodeState(req.matches[1], req.matches[2]);
                    if (!s.ok()) return SendProblem(res, s);
                    SendJson(res, 200,
                             {{"node", std::string(req.matches[1])},
                              {"action", std::string(req.matches[2])}});
                  },
                  /*admin_only=*/true));
  }

  void RegisterPeople(httplib::Server& http) {
    http.Get("/api/v1/projects", Authed([this](const Principal& who, const auto&, auto& res) {
               auto projects = controller_.ProjectsView(who);
               if (!projects.ok()) return SendProblem(res, projects.status());
               SendJson(res, 200, *projects);
             }));
    http.Put(
        R"(/api/v1/projects/([^/]+)/sharing)",
        Authed(
            [this](const Principal&, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto sharing = controller_.SetProjectSharing(req.matches[1], *body);
              if (!sharing.ok()) return SendProblem(res, sharing.status());
              SendJson(res, 200, {{"project", std::string(req.matches[1])}, {"sharing", *sharing}});
            },
            /*admin_only=*/true));
    http.Post("/api/v1/projects",
              Authed(
                  [this](const Principal&, const auto& req, auto& res) {
                    auto body = ParseBody(req);
                    if (!body.ok()) return SendProblem(res, body.status());
                    auto name = Field<std::string>(*body, "name");
                    if (!name.ok()) return SendProblem(res, name.status());
                    auto description = Field<std::string>(*body, "description", "");
                    if (!description.ok()) return SendProblem(res, description.status());
                    auto p = store_.CreateProject(*name, *description, clock_.Now());
                    if (!p.ok()) return SendProblem(res, p.status());
                    SendJson(res, 201, {{"name", p->name}, {"description", p->description}});
                  },
                  true));
    http.Post(
        R"(/api/v1/projects/([^/]+)/members)",
        Authed(
            [this](const Principal&, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto name = Field<std::string>(*body, "user");
              if (!name.ok()) return SendProblem(res, name.status());
              auto user = store_.FindUser(*name);
              if (!user.ok()) return SendProblem(res, user.status());
              Status s = store_.AddMember(req.matches[1], user->id);
              if (!s.ok()) return SendProblem(res, s);
              principals_.Clear();  // the member's principal lists their projects
              SendJson(res, 200, {{"project", std::string(req.matches[1])}, {"user", user->name}});
            },
            true));
    http.Get("/api/v1/users", Authed(
                                  [this](const Principal&, const auto&, auto& res) {
                                    auto users = store_.ListUsers();
                                    if (!users.ok()) return SendProblem(res, users.status());
                                    json out = json::array();
                                    for (const auto& u : *users) {
                                      out.push_back({{"name", u.name}, {"admin", u.admin}});
                                    }
                                    SendJson(res, 200, out);
                                  },
                                  true));
    http.Post("/api/v1/users",
              Authed([this](const Principal&, const auto& req, auto& res) { CreateUser(req, res); },
                     true));
    http.Get("/api/v1/tokens", Authed([this](const Principal& who, const auto&, auto& res) {
               auto tokens = store_.ListTokens(who.user_id);
               if (!tokens.ok()) return SendProblem(res, tokens.status());
               json out = json::array();
               for (const auto& t : *tokens) {
                 out.push_back({{"id", t.id},
                                {"name", t.name},
                                {"created_at", t.created_at.value()},
                                {"revoked", t.revoked_at.has_value()}});
               }
               SendJson(res, 200, out);
             }));
    http.Post("/api/v1/tokens", Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto name = Field<std::string>(*body, "name", "token");
                if (!name.ok()) return SendProblem(res, name.status());
                auto token = GenerateToken();
                if (!token.ok()) return SendProblem(res, token.status());
                auto rec = store_.CreateToken(who.user_id, *name, HashToken(*token), clock_.Now());
                if (!rec.ok()) return SendProblem(res, rec.status());
                principals_.Clear();
                SendJson(res, 201, {{"id", rec->id}, {"name", rec->name}, {"token", *token}});
              }));
    http.Delete(R"(/api/v1/tokens/(\d+))",
                Authed([this](const Principal& who, const auto& req, auto& res) {
                  auto id = PathId(req, "token");
                  if (!id.ok()) return SendProblem(res, id.status());
                  Status s = store_.RevokeToken(who.user_id, *id, clock_.Now());
                  if (!s.ok()) return SendProblem(res, s);
                  principals_.Clear();  // refused from the next request on
                  SendJson(res, 200, {{"revoked", *id}});
                }));
  }

  // Creates the user, their memberships (always "default") and their first token atomically.
  void CreateUser(const httplib::Request& req, httplib::Response& res) {
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    auto name = Field<std::string>(*body, "name");
    if (!name.ok()) return SendProblem(res, name.status());
    auto admin = Field<bool>(*body, "admin", false);
    if (!admin.ok()) return SendProblem(res, admin.status());
    auto projects = Field(*body, "projects", std::optional(std::vector<std::string>()));
    if (!projects.ok()) return SendProblem(res, projects.status());
    projects->push_back("default");
    auto token = GenerateToken();
    if (!token.ok()) return SendProblem(res, token.status());
    auto user = store_.CreateUserWithToken(*name, *admin, *projects, "initial", HashToken(*token),
                                           clock_.Now());
    if (!user.ok()) return SendProblem(res, user.status());
    principals_.Clear();
    SendJson(res, 201, {{"name", user->name}, {"admin", user->admin}, {"token", *token}});
  }

  // The agent gateway (docs/control-plane.md, "Agent protocol"): each route authenticates from
  // headers first, then checks the protocol version, and only then reads the body through its
  // codec (protocol/agent_messages.h).
  void RegisterAgents(httplib::Server& http) {
    http.Post("/api/v1/agent/register",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (config_.join_token_hash.empty() ||
                    !SecureEquals(HashToken(BearerToken(req)), config_.join_token_hash)) {
                  return SendProblem(res, Unauthenticated("invalid join token"));
                }
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto version = protocol::ReadProtocolVersion(*body);
                if (!version.ok()) return SendProblem(res, version.status());
                if (Status s = protocol::CheckAgentProtocolVersion(*version, kVersion,
                                                                   controller_.NodeTimeout());
                    !s.ok()) {
                  return SendProblem(res, s);
                }
                auto request = protocol::ParseRegisterRequest(*body);
                if (!request.ok()) return SendProblem(res, request.status());
                auto registered = controller_.RegisterNode(*request);
                if (!registered.ok()) return SendProblem(res, registered.status());
                SendJson(res, 200, protocol::ToJson(*registered));
              });
    http.Post(
        "/api/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
          const std::string name = req.get_header_value(protocol::kNodeHeader);
          if (name.empty()) {
            // Agents before protocol versions named their node in the body. Unauthenticated: such
            // an agent registers again, and its registration is refused naming the upgrade.
            return SendProblem(
                res, Unauthenticated(std::string("no ") + protocol::kNodeHeader + " header: " +
                                     protocol::CheckAgentProtocolVersion(std::nullopt, kVersion,
                                                                         controller_.NodeTimeout())
                                         .message()));
          }
          if (!controller_.AuthenticateNode(name, BearerToken(req))) {
            return SendProblem(res, Unauthenticated("invalid node token: register again"));
          }
          auto body = ParseBody(req);
          if (!body.ok()) return SendProblem(res, body.status());
          auto report = protocol::ParseReport(*body);
          if (!report.ok()) return SendProblem(res, report.status());
          auto answer = controller_.Heartbeat(name, *report);
          if (!answer.ok()) return SendProblem(res, answer.status());
          SendJson(res, 200, protocol::ToJson(*answer));
        });
  }

  // --- Sessions (docs/sessions.md) ------------------------------------------------------------

  void RegisterSessions(httplib::Server& http) {
    http.Post("/api/v1/sessions", Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto job = controller_.SubmitSession(who, *body);
                if (!job.ok()) return SendProblem(res, job.status());
                auto view = controller_.SessionView(who, job->id);
                if (!view.ok()) return SendProblem(res, view.status());
                SendJson(res, 201, WithUrls(*view, req));
              }));
    http.Get("/api/v1/sessions", Authed([this](const Principal& who, const auto& req, auto& res) {
               json out = json::array();
               for (const json& s : controller_.ListSessions(who)) out.push_back(WithUrls(s, req));
               SendJson(res, 200, out);
             }));
    http.Get(R"(/api/v1/sessions/(\d+))",
             Authed([this](const Principal& who, const auto& req, auto& res) {
               auto id = PathId(req, "session");
               if (!id.ok()) return SendProblem(res, id.status());
               auto view = controller_.SessionView(who, JobId(*id));
               if (!view.ok()) return SendProblem(res, view.status());
               SendJson(res, 200, WithUrls(*view, req));
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
              [this](const httplib::Request& req, httplib::Response& res) { Login(req, res); });
    http.Post("/api/v1/logout", [this](const httplib::Request& req, httplib::Response& res) {
      // No credentials needed (clearing a cookie gives nothing away), but only from this
      // server's own pages: another site must not log its visitors out.
      if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
        return SendProblem(res, PermissionDenied(refused));
      }
      res.set_header("Set-Cookie", TokenCookie("", config_.tls));
      SendJson(res, 200, {{"status", "logged out"}});
    });
    http.Get("/login", [](const httplib::Request&, httplib::Response& res) { LoginPage(res); });
    // Sessions are served by the session gateway: old links, any method (HEAD is served by
    // the GET route), go there with their method and body (307).
    const std::string sessions = R"(/sessions/(\d+)(/.*)?)";
    auto redirect = [this](const httplib::Request& req, httplib::Response& res) {
      const std::string gateway = GatewayUrl(req);
      if (gateway.empty()) {
        return SendProblem(res, NotFound("sessions are served by the session gateway"));
      }
      res.set_redirect(gateway + req.target, 307);
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
  json WithUrls(json view, const httplib::Request& req) const {
    view["url"] = GatewayUrl(req) + view.value("path", "");
    view["direct_url"] = nullptr;
    if (view.contains("token") && view["address"].is_string() && view["port"].is_number()) {
      std::string host = view["address"].get<std::string>();
      if (host.find(':') != std::string::npos) host = "[" + host + "]";  // an IPv6 address
      view["direct_url"] = "http://" + host + ":" + std::to_string(view["port"].get<int>()) +
                           view.value("path", "") + "?token=" + view["token"].get<std::string>();
    }
    return view;
  }

  // "https://corral.example": the configured public URL, else RequestUrl, else nothing (URLs
  // are then paths).
  std::string BaseUrl(const httplib::Request& req) const {
    if (!config_.public_url.empty()) {
      std::string url = config_.public_url;
      while (!url.empty() && url.back() == '/') url.pop_back();
      return url;
    }
    return RequestUrl(req);
  }

  // The scheme and the request's Host ("http://corral:8080") when the Host is a plain
  // host[:port]; else "".
  std::string RequestUrl(const httplib::Request& req) const {
    return UrlOfHost(req.get_header_value("Host"), config_.tls);
  }

  // The session gateway's URL for users: configured, else BaseUrl with the gateway's port.
  std::string GatewayUrl(const httplib::Request& req) const {
    std::string url = config_.session_url;
    if (url.empty()) url = WithPort(BaseUrl(req), config_.session_port);
    while (!url.empty() && url.back() == '/') url.pop_back();
    return url;
  }

  // Why `req` is refused as a cross-site request (CrossSiteRefusal), "" when it may pass. This
  // server's origins: --public-url's and the one the request itself was sent to.
  std::string CrossSiteRefusalOf(const httplib::Request& req) const {
    std::vector<std::string> own = {RequestUrl(req)};
    if (!config_.public_url.empty()) own.push_back(config_.public_url);
    return CrossSiteRefusal(req.method, req.get_header_value("Origin"),
                            req.get_header_value("Sec-Fetch-Site"), own);
  }

  // POST /api/v1/login {"token", "next"?}: checks the token and sets the corral_token cookie
  // (HttpOnly, SameSite=Strict) for the session proxy; answers the user and where to go next
  // (SafeRedirectTarget). JSON only, and not from another site (CrossSiteRefusal), so that a
  // cross-site page cannot log anyone in.
  void Login(const httplib::Request& req, httplib::Response& res) {
    // Another site must not log its visitors in (as someone else, e.g. its author).
    if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
      return SendProblem(res, PermissionDenied(refused));
    }
    if (req.get_header_value("Content-Type").rfind("application/json", 0) != 0) {
      return SendProblem(res, InvalidArgument("request body: must be application/json"));
    }
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    auto token = Field<std::string>(*body, "token");
    if (!token.ok()) return SendProblem(res, token.status());
    auto next = Field<std::string>(*body, "next", "/");
    if (!next.ok()) return SendProblem(res, next.status());
    if (token->empty()) return SendProblem(res, Unauthenticated("field 'token': is empty"));
    auto who = AuthenticateToken(*token);
    if (!who.ok()) return SendProblem(res, who.status());
    res.set_header("Set-Cookie", TokenCookie(*token, config_.tls));
    SendJson(res, 200,
             {{"user", who->name}, {"next", SafeRedirectTarget(*next, {GatewayUrl(req)})}});
  }

  static void LoginPage(httplib::Response& res) {
    // Static: nothing from the request is written into the page. The server decides where to
    // go next (POST /api/v1/login answers "next"), never the page's query string alone.
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
    res.set_header("Content-Security-Policy",
                   "default-src 'none'; script-src 'unsafe-inline'; connect-src 'self'; "
                   "form-action 'self'; frame-ancestors 'none'");
    res.set_content(kPage, "text/html; charset=utf-8");
  }

  // --- The dashboard (docs/dashboard.md) --------------------------------------------------------

  void RegisterDashboard(httplib::Server& http) {
    // Static and public (the code, not the data): no credentials needed.
    http.Get(R"(/assets/.*)", [this](const httplib::Request& req, httplib::Response& res) {
      if (!config_.web_assets) return SendProblem(res, NotFound("no dashboard is served"));
      auto asset = config_.web_assets->Lookup(req.path);
      if (!asset.ok()) return SendProblem(res, asset.status());
      SendAsset(*asset, res);
    });
    http.Get("/api/v1/summary", Authed([this](const Principal&, const auto&, auto& res) {
               SendJson(res, 200, controller_.ClusterSummary());
             }));
    http.Get("/api/v1/events/stream",
             Authed([this](const Principal&, const auto&, auto& res) { EventStream(res); }));
  }

  // GET /: the dashboard's index.html for a browser logged in by cookie (the page's own API
  // calls are authenticated by that cookie too), else a redirect to the login page.
  void DashboardPage(const httplib::Request& req, httplib::Response& res) {
    auto who = AuthenticateCookie(req);
    if (!who.ok()) {
      if (who.status().code() != StatusCode::kUnauthenticated) {
        return SendProblem(res, who.status());
      }
      res.set_redirect("/login?next=/", 302);
      res.set_header("Cache-Control", "no-store");
      return;
    }
    auto index = config_.web_assets->Lookup("/");
    if (!index.ok()) return SendProblem(res, index.status());
    SendAsset(*index, res);
    // Scripts and styles from this origin only; uPlot sets element styles from script, which
    // CSP's style-src does not govern, and its stylesheet is bundled.
    res.set_header("Content-Security-Policy",
                   "default-src 'self'; img-src 'self' data:; connect-src 'self'; "
                   "object-src 'none'; base-uri 'none'; form-action 'self'; "
                   "frame-ancestors 'none'");
    res.set_header("Referrer-Policy", "same-origin");
  }

  static void SendAsset(const WebAssets::Asset& asset, httplib::Response& res) {
    res.set_header("Cache-Control", asset.cache_control);
    res.set_header("X-Content-Type-Options", "nosniff");
    res.set_content(asset.body, asset.content_type);
  }

  // GET /api/v1/events/stream: Server-Sent Events, a "summary" event (ClusterSummary) at once
  // and then every event_period, until the client goes, the server shuts down or 10 minutes
  // pass (EventSource reconnects). At most max_event_streams at once: each holds an HTTP
  // thread; over the cap, 429 with Retry-After (EventSource gives up on an error status: the
  // dashboard then polls /api/v1/summary).
  void EventStream(httplib::Response& res) {
    auto ticket = std::make_shared<EventStreams::Ticket>(event_streams_.Open());
    if (!ticket->admitted()) {
      res.set_header("Retry-After", "10");
      return SendProblem(res, Status(StatusCode::kResourceExhausted,
                                     "too many live streams open; poll /api/v1/summary"));
    }
    res.set_header("Cache-Control", "no-store");
    res.set_header("X-Accel-Buffering", "no");  // a proxy in front must not hold the events
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::minutes(10);
    auto next_id = std::make_shared<int64_t>(0);
    res.set_chunked_content_provider(
        "text/event-stream", [this, ticket, next_id, deadline](size_t, httplib::DataSink& sink) {
          if (*next_id > 0 && !event_streams_.Wait(config_.event_period)) return false;
          if (std::chrono::steady_clock::now() > deadline || !sink.is_writable()) return false;
          const std::string frame =
              EventStreamFrame("summary", ++*next_id, controller_.ClusterSummary());
          return sink.write(frame.data(), frame.size());
        });
  }

  void StatusPage(httplib::Response& res) {
    json nodes = controller_.Nodes();
    int gpus = 0, ready = 0;
    for (const auto& n : nodes) {
      gpus += n.value("gpus", 0);
      ready += n.value("state", "") == model::ToString(model::NodeState::kReady);
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

  Controller& controller_;
  store::Store& store_;
  Clock& clock_;
  HttpApiConfig config_;
  PrincipalCache principals_;
  EventStreams event_streams_;
  ForecastCache forecasts_{Seconds(60)};
};

HttpApi::HttpApi(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config)
    : impl_(std::make_unique<Impl>(controller, store, clock, std::move(config))) {}
HttpApi::~HttpApi() = default;
Result<Principal> HttpApi::AuthenticateToken(const std::string& token) {
  return impl_->AuthenticateToken(token);
}
void HttpApi::Register(httplib::Server& http) { impl_->Register(http); }
void HttpApi::Shutdown() { impl_->Shutdown(); }

}  // namespace corral::server
