// API routes of environments (docs/environments.md): list, view, create, clone, share.

#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterEnvironments(HttpServer& http) {
  http.Get("/api/v1/environments", Authed([this](const Principal& who, const auto&, auto& res) {
             auto envs = controller_.Environments().List(who);
             if (!envs.ok()) return SendProblem(res, envs.status());
             std::vector<protocol::EnvironmentView> views;
             for (const auto& e : *envs) {
               views.push_back(ViewOf(e));
               views.back().runs_here = controller_.RunsHere(e.spec);
             }
             SendJson(res, 200, protocol::ToJson(views));
           }));
  http.Get(R"(/api/v1/environments/([^/]+))",
           Authed([this](const Principal& who, const auto& req, auto& res) {
             auto version = IntParam(req, "version", 1, kMaxCount);
             if (!version.ok()) return SendProblem(res, version.status());
             auto env = controller_.Environments().Get(who, req.matches[1], *version);
             if (!env.ok()) return SendProblem(res, env.status());
             protocol::EnvironmentView view = ViewOf(*env);
             view.runs_here = controller_.RunsHere(env->spec);
             SendJson(res, 200, protocol::ToJson(view));
           }));
  http.Post("/api/v1/environments",
            Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto spec = protocol::ParseEnvironmentSpec(*body);
              if (!spec.ok()) return SendProblem(res, spec.status());
              auto env = controller_.Environments().Create(who, *spec);
              if (!env.ok()) return SendProblem(res, env.status());
              SendJson(res, 201, protocol::ToJson(ViewOf(*env)));
            }));
  http.Post(R"(/api/v1/environments/([^/]+)/clone)",
            Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              EnvironmentCatalog& envs = controller_.Environments();
              auto source = envs.Get(who, req.matches[1], std::nullopt);
              if (!source.ok()) return SendProblem(res, source.status());
              auto spec = protocol::CloneEnvironmentSpec(source->spec, *body);
              if (!spec.ok()) return SendProblem(res, spec.status());
              auto env = envs.Create(who, *spec);
              if (!env.ok()) return SendProblem(res, env.status());
              SendJson(res, 201, protocol::ToJson(ViewOf(*env)));
            }));
  http.Post(R"(/api/v1/environments/([^/]+)/share)",
            Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto project = StringField(*body, "project");
              if (!project.ok()) return SendProblem(res, project.status());
              Status s = controller_.Environments().Share(who, req.matches[1], *project);
              if (!s.ok()) return SendProblem(res, s);
              auto env = controller_.Environments().Get(who, req.matches[1], std::nullopt);
              if (!env.ok()) return SendProblem(res, env.status());
              SendJson(res, 200, protocol::ToJson(ViewOf(*env)));
            }));
}

}  // namespace corral::server
