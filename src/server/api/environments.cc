// API routes of environments (docs/environments.md): list, view, create, clone, share.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterEnvironments(httplib::Server& http) {
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

}  // namespace corral::server
