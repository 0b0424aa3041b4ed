#include "server/http_api.h"

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

#include "server/auth.h"
#include "server/session_proxy.h"

namespace corral::server {

namespace {

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

void SendJson(httplib::Response& res, int status, const json& body) {
  res.status = status;
  // Invalid UTF-8 (from a task's output or an agent's note) becomes U+FFFD instead of throwing.
  res.set_content(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendProblem(httplib::Response& res, const Status& s) {
  const int status = HttpStatusOf(s.code());
  res.status = status;
  res.set_content(json{{"type", "about:blank"},
                       {"title", StatusCodeName(s.code())},
                       {"status", status},
                       {"detail", s.message()}}
                      .dump(),
                  "application/problem+json");
}

std::string BearerToken(const httplib::Request& req) {
  const std::string header = req.get_header_value("Authorization");
  const std::string prefix = "Bearer ";
  return header.rfind(prefix, 0) == 0 ? header.substr(prefix.size()) : "";
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
        proxy_limiter_(config_.proxy_limits) {}

  Result<Principal> Authenticate(const httplib::Request& req) {
    const std::string token = BearerToken(req);
    if (token.empty()) return Unauthenticated("missing 'Authorization: Bearer <token>' header");
    return AuthenticateToken(token);
  }

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
    http.Get("/", [this](const httplib::Request&, httplib::Response& res) { StatusPage(res); });
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
                          {"state", job->state},
                          {"project", job->project},
                          {"user", job->user}});
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
              {"state", first.state},
              {"project", first.project},
              {"user", first.user}});
  }

  // Newest first, a page at a time: `limit` jobs with ids below `before` (only the elements of
  // `array` when given); the header X-Corral-Next-Before carries the next page's `before` when
  // older jobs match.
  void ListJobs(const Principal& who, const httplib::Request& req, httplib::Response& res) {
    std::vector<std::string> states;
    std::string list = req.get_param_value("state");
    for (size_t start = 0; !list.empty() && start <= list.size();) {
      size_t comma = std::min(list.find(',', start), list.size());
      states.push_back(list.substr(start, comma - start));
      start = comma + 1;
    }
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
    auto page = controller_.ListJobs(who, states, req.get_param_value("all") == "1",
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

  void RegisterAgents(httplib::Server& http) {
    http.Post("/api/v1/agent/register",
              [this](const httplib::Request& req, httplib::Response& res) {
                if (config_.join_token_hash.empty() ||
                    !SecureEquals(HashToken(BearerToken(req)), config_.join_token_hash)) {
                  return SendProblem(res, Unauthenticated("invalid join token"));
                }
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto name = Field<std::string>(*body, "name");
                if (!name.ok()) return SendProblem(res, name.status());
                auto node_id = Field<std::string>(*body, "node_id");
                if (!node_id.ok()) return SendProblem(res, node_id.status());
                if (!(*body)["inventory"].is_object()) {
                  return SendProblem(res, InvalidArgument("field 'inventory': must be an object"));
                }
                auto token = controller_.RegisterNode(*name, *node_id, (*body)["inventory"]);
                if (!token.ok()) return SendProblem(res, token.status());
                SendJson(res, 200, {{"node_token", *token}, {"heartbeat_interval_s", 5}});
              });
    http.Post(
        "/api/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
          auto body = ParseBody(req);
          if (!body.ok()) return SendProblem(res, body.status());
          auto name = Field<std::string>(*body, "name");
          if (!name.ok()) return SendProblem(res, name.status());
          auto wait_ms = Field<int64_t>(*body, "wait_ms", 0);
          if (!wait_ms.ok()) return SendProblem(res, wait_ms.status());
          if (!controller_.AuthenticateNode(*name, BearerToken(req))) {
            return SendProblem(res, Unauthenticated("invalid node token: register again"));
          }
          // The controller bounds the wait itself; this keeps the value an int.
          auto answer = controller_.Heartbeat(
              *name, *body,
              static_cast<int>(std::clamp<int64_t>(*wait_ms, 0, std::numeric_limits<int>::max())));
          if (!answer.ok()) return SendProblem(res, answer.status());
          SendJson(res, 200, *answer);
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
    // Every method the proxy passes on (HEAD is served by the GET route).
    const std::string proxy = R"(/sessions/(\d+)(/.*)?)";
    auto handler = [this](const httplib::Request& req, httplib::Response& res) {
      ProxySession(req, res);
    };
    http.Get(proxy, handler);
    http.Post(proxy, handler);
    http.Put(proxy, handler);
    http.Patch(proxy, handler);
    http.Delete(proxy, handler);
    http.Options(proxy, handler);
  }

  // The session's URLs: "url" through this server's proxy, and for its owner (who holds the
  // token) "direct_url" to the app on its node (Jupyter's own token check; for WebSockets,
  // which the proxy cannot carry).
  json WithUrls(json view, const httplib::Request& req) const {
    view["url"] = BaseUrl(req) + view.value("path", "");
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
    const std::string host = req.get_header_value("Host");
    const bool plain = !host.empty() && host.size() <= 300 &&
                       host.find_first_not_of(
                           "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                           "0123456789.-:[]") == std::string::npos;
    return plain ? std::string(config_.tls ? "https://" : "http://") + host : "";
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
    SendJson(res, 200, {{"user", who->name}, {"next", SafeRedirectTarget(*next)}});
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

  // /sessions/<id>/...: not a cross-site request that may change something, the session's
  // owner (bearer token or cookie), a running session, a place in the proxy (ProxyLimiter),
  // then the app's answer.
  void ProxySession(const httplib::Request& req, httplib::Response& res) {
    const std::optional<int64_t> id = ParseCount(req.matches[1]);
    if (!id) return SendProblem(res, NotFound("session not found"));
    if (auto refused = CrossSiteRefusalOf(req); !refused.empty()) {
      return SendProblem(res, PermissionDenied(refused));
    }
    const std::string prefix = "/sessions/" + std::to_string(*id) + "/";
    std::string token = BearerToken(req);
    const std::string cookies = req.get_header_value("Cookie");
    if (token.empty() && CookieCount(cookies, kTokenCookie) > 1) {
      return LoginNeeded(req, res, prefix,
                         "more than one corral_token cookie (a page set one of its own): clear "
                         "this site's cookies");
    }
    if (token.empty()) token = CookieValue(cookies, kTokenCookie);
    Result<Principal> who = token.empty() ? Result<Principal>(Unauthenticated("not logged in"))
                                          : AuthenticateToken(token);
    if (!who.ok()) {
      if (who.status().code() != StatusCode::kUnauthenticated)
        return SendProblem(res, who.status());
      return LoginNeeded(req, res, prefix, who.status().message());
    }
    auto target = controller_.ProxyTarget(*who, JobId(*id));
    if (!target.ok()) return SendProblem(res, target.status());
    if (target->state != "running") {
      res.status = 503;
      res.set_header("Retry-After", "5");
      res.set_content(json{{"type", "about:blank"},
                           {"title", "unavailable"},
                           {"status", 503},
                           {"state", target->state},
                           {"detail", "session " + std::to_string(*id) + " is " + target->state +
                                          ", not running"}}
                          .dump(),
                      "application/problem+json");
      return;
    }
    if (!req.matches[2].matched) {  // "/sessions/7": the app's base URL ends with '/'
      const size_t query = req.target.find('?');
      res.set_redirect(prefix + (query == std::string::npos ? "" : req.target.substr(query)), 301);
      return;
    }
    if (req.target.rfind(prefix, 0) != 0) {
      return SendProblem(res, InvalidArgument("request target: must start with " + prefix));
    }
    const ProxyLimiter::Pass pass = proxy_limiter_.Enter(*id);
    if (!pass.admitted()) {
      res.status = 503;
      res.set_header("Retry-After", "1");
      res.set_content(json{{"type", "about:blank"},
                           {"title", "unavailable"},
                           {"status", 503},
                           {"detail", pass.refusal()}}
                          .dump(),
                      "application/problem+json");
      return;
    }
    ProxyRequest request;
    request.method = req.method;
    request.target = req.target;
    request.headers.assign(req.headers.begin(), req.headers.end());
    request.body = req.body;
    request.remote_addr = req.remote_addr;
    ForwardOptions options;
    options.read_timeout = config_.proxy_read_timeout;
    options.scheme = config_.tls ? "https" : "http";
    ProxyAnswer answer = Forward(request, {target->address, target->port, target->token}, options);
    res.status = answer.status;
    for (auto& [name, value] : answer.headers) {
      res.headers.emplace(std::move(name), std::move(value));
    }
    res.body = std::move(answer.body);
    if (!answer.content_type.empty()) res.set_header("Content-Type", answer.content_type);
  }

  // 401 for a request to a session without valid credentials: browsers get a page with a link
  // to the login page (coming back here), programs a problem.
  static void LoginNeeded(const httplib::Request& req, httplib::Response& res,
                          const std::string& prefix, const std::string& why) {
    res.status = 401;
    res.set_header("WWW-Authenticate", "Bearer");
    const std::string detail = why + ": log in at /login (or send 'Authorization: Bearer <token>')";
    if (req.get_header_value("Accept").find("text/html") != std::string::npos) {
      // `prefix` holds only digits and slashes: safe in HTML and in a query string.
      res.set_content(
          "<!doctype html><html><head><meta charset=\"utf-8\"><title>corral: log in"
          "</title></head><body><p>This session needs you to log in: <a href=\"/login"
          "?next=" +
              prefix + "\">log in</a>.</p></body></html>",
          "text/html; charset=utf-8");
      return;
    }
    res.set_content(json{{"type", "about:blank"},
                         {"title", "unauthenticated"},
                         {"status", 401},
                         {"detail", detail}}
                        .dump(),
                    "application/problem+json");
  }

  void StatusPage(httplib::Response& res) {
    json nodes = controller_.Nodes();
    int gpus = 0, ready = 0;
    for (const auto& n : nodes) {
      gpus += n.value("gpus", 0);
      ready += n.value("state", "") == "ready";
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
  ProxyLimiter proxy_limiter_;
};

HttpApi::HttpApi(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config)
    : impl_(std::make_unique<Impl>(controller, store, clock, std::move(config))) {}
HttpApi::~HttpApi() = default;
void HttpApi::Register(httplib::Server& http) { impl_->Register(http); }

}  // namespace corral::server
