#include "server/http_api.h"

#include <httplib.h>

#include <fstream>

#include "server/auth.h"

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
  res.set_content(body.dump(), "application/json");
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

Result<json> ParseBody(const httplib::Request& req) {
  json body = json::parse(req.body, nullptr, false);
  if (body.is_discarded()) return InvalidArgument("request body: not valid JSON");
  return body;
}

}  // namespace

class HttpApi::Impl {
 public:
  Impl(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config)
      : controller_(controller), store_(store), clock_(clock), config_(std::move(config)) {}

  Result<Principal> Authenticate(const httplib::Request& req) {
    const std::string token = BearerToken(req);
    if (token.empty()) return Unauthenticated("missing 'Authorization: Bearer <token>' header");
    auto user = store_.UserForTokenHash(HashToken(token));
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
    RegisterNodes(http);
    RegisterPeople(http);
    RegisterAgents(http);
  }

 private:
  void RegisterJobs(httplib::Server& http) {
    http.Post("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                auto job = controller_.Submit(who, *body);
                if (!job.ok()) return SendProblem(res, job.status());
                SendJson(res, 201,
                         {{"id", job->id.value()},
                          {"state", job->state},
                          {"project", job->project},
                          {"user", job->user}});
              }));
    http.Get("/api/v1/jobs", Authed([this](const Principal& who, const auto& req, auto& res) {
               std::vector<std::string> states;
               std::string list = req.get_param_value("state");
               for (size_t start = 0; !list.empty() && start <= list.size();) {
                 size_t comma = std::min(list.find(',', start), list.size());
                 states.push_back(list.substr(start, comma - start));
                 start = comma + 1;
               }
               auto jobs = controller_.ListJobs(who, states, req.get_param_value("all") == "1");
               if (!jobs.ok()) return SendProblem(res, jobs.status());
               SendJson(res, 200, *jobs);
             }));
    http.Get(R"(/api/v1/jobs/(\d+))",
             Authed([this](const Principal& who, const auto& req, auto& res) {
               auto view = controller_.JobView(who, JobId(std::stoll(req.matches[1])));
               if (!view.ok()) return SendProblem(res, view.status());
               SendJson(res, 200, *view);
             }));
    http.Post(R"(/api/v1/jobs/(\d+)/cancel)",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                Status s = controller_.Cancel(who, JobId(std::stoll(req.matches[1])));
                if (!s.ok()) return SendProblem(res, s);
                SendJson(res, 202, {{"status", "cancelling"}});
              }));
    http.Get(R"(/api/v1/jobs/(\d+)/logs)", Authed([this](const Principal& who, const auto& req,
                                                         auto& res) { Logs(who, req, res); }));
  }

  void Logs(const Principal& who, const httplib::Request& req, httplib::Response& res) {
    const std::string task = req.has_param("task") ? req.get_param_value("task") : "0";
    const std::string offset = req.has_param("offset") ? req.get_param_value("offset") : "0";
    if (task.empty() || task.size() > 6 ||
        task.find_first_not_of("0123456789") != std::string::npos) {
      return SendProblem(res, InvalidArgument("field 'task': must be a task index"));
    }
    if (offset.empty() || offset.size() > 15 ||
        offset.find_first_not_of("0123456789") != std::string::npos) {
      return SendProblem(res, InvalidArgument("field 'offset': must be a byte offset"));
    }
    const std::string stream = req.has_param("stream") ? req.get_param_value("stream") : "stdout";
    auto path =
        controller_.LogPath(who, JobId(std::stoll(req.matches[1])), std::stoi(task), stream);
    if (!path.ok()) return SendProblem(res, path.status());
    std::ifstream in(*path, std::ios::binary);
    std::string data;
    if (in) {
      in.seekg(std::stoll(offset));
      data.assign(std::istreambuf_iterator<char>(in), {});
      if (data.size() > (4u << 20)) data.resize(4u << 20);  // a page; clients ask again
    }
    res.set_header("X-Corral-Log-Offset", std::to_string(std::stoll(offset) + data.size()));
    res.set_content(data, "text/plain; charset=utf-8");
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
               auto projects = store_.ListProjects();
               if (!projects.ok()) return SendProblem(res, projects.status());
               json out = json::array();
               for (const auto& p : *projects) {
                 if (!who.CanAccessProject(p.name)) continue;
                 out.push_back({{"name", p.name}, {"description", p.description}});
               }
               SendJson(res, 200, out);
             }));
    http.Post("/api/v1/projects",
              Authed(
                  [this](const Principal&, const auto& req, auto& res) {
                    auto body = ParseBody(req);
                    if (!body.ok()) return SendProblem(res, body.status());
                    auto p = store_.CreateProject(body->value("name", ""),
                                                  body->value("description", ""), clock_.Now());
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
              auto user = store_.FindUser(body->value("user", ""));
              if (!user.ok()) return SendProblem(res, user.status());
              Status s = store_.AddMember(req.matches[1], user->id);
              if (!s.ok()) return SendProblem(res, s);
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
                auto token = GenerateToken();
                if (!token.ok()) return SendProblem(res, token.status());
                auto rec = store_.CreateToken(who.user_id, body->value("name", "token"),
                                              HashToken(*token), clock_.Now());
                if (!rec.ok()) return SendProblem(res, rec.status());
                SendJson(res, 201, {{"id", rec->id}, {"name", rec->name}, {"token", *token}});
              }));
    http.Delete(
        R"(/api/v1/tokens/(\d+))", Authed([this](const Principal& who, const auto& req, auto& res) {
          Status s = store_.RevokeToken(who.user_id, std::stoll(req.matches[1]), clock_.Now());
          if (!s.ok()) return SendProblem(res, s);
          SendJson(res, 200, {{"revoked", std::stoll(req.matches[1])}});
        }));
  }

  void CreateUser(const httplib::Request& req, httplib::Response& res) {
    auto body = ParseBody(req);
    if (!body.ok()) return SendProblem(res, body.status());
    if (!(*body)["name"].is_string()) {
      return SendProblem(res, InvalidArgument("field 'name': must be a string"));
    }
    auto user = store_.CreateUser((*body)["name"], body->value("admin", false), clock_.Now());
    if (!user.ok()) return SendProblem(res, user.status());
    std::vector<std::string> projects = body->value("projects", std::vector<std::string>{});
    projects.push_back("default");
    for (const auto& p : projects) {
      Status s = store_.AddMember(p, user->id);
      if (!s.ok() && s.code() != StatusCode::kAlreadyExists) return SendProblem(res, s);
    }
    auto token = GenerateToken();
    if (!token.ok()) return SendProblem(res, token.status());
    auto rec = store_.CreateToken(user->id, "initial", HashToken(*token), clock_.Now());
    if (!rec.ok()) return SendProblem(res, rec.status());
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
                if (!(*body)["name"].is_string() || !(*body)["inventory"].is_object()) {
                  return SendProblem(res, InvalidArgument("fields 'name' (string) and 'inventory' "
                                                          "(object) are required"));
                }
                auto token = controller_.RegisterNode((*body)["name"], (*body)["inventory"]);
                if (!token.ok()) return SendProblem(res, token.status());
                SendJson(res, 200, {{"node_token", *token}, {"heartbeat_interval_s", 5}});
              });
    http.Post("/api/v1/agent/heartbeat",
              [this](const httplib::Request& req, httplib::Response& res) {
                auto body = ParseBody(req);
                if (!body.ok()) return SendProblem(res, body.status());
                const std::string name = body->value("name", "");
                if (!controller_.AuthenticateNode(name, BearerToken(req))) {
                  return SendProblem(res, Unauthenticated("invalid node token: register again"));
                }
                auto answer = controller_.Heartbeat(name, *body, body->value("wait_ms", 0));
                if (!answer.ok()) return SendProblem(res, answer.status());
                SendJson(res, 200, *answer);
              });
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
};

HttpApi::HttpApi(Controller& controller, store::Store& store, Clock& clock, HttpApiConfig config)
    : impl_(std::make_unique<Impl>(controller, store, clock, std::move(config))) {}
HttpApi::~HttpApi() = default;
void HttpApi::Register(httplib::Server& http) { impl_->Register(http); }

}  // namespace corral::server
