// API routes of projects, users and tokens (admins manage projects and users, and their submit
// limits; everyone their own tokens).

#include "common/duration.h"
#include "server/api/http_api_impl.h"

namespace corral::server {

using namespace api_internal;  // NOLINT(google-build-using-namespace)
using nlohmann::json;

void HttpApi::Impl::RegisterPeople(HttpServer& http) {
  http.Get("/api/v1/projects", Authed([this](const Principal& who, const auto&, auto& res) {
             auto projects = controller_.ProjectsView(who);
             if (!projects.ok()) return SendProblem(res, projects.status());
             SendJson(res, 200, protocol::ToJson(*projects));
           }));
  http.Put(R"(/api/v1/projects/([^/]+)/sharing)",
           Authed(
               [this](const Principal&, const auto& req, auto& res) {
                 auto body = ParseBody(req);
                 if (!body.ok()) return SendProblem(res, body.status());
                 auto asked = protocol::ParseProjectSharing(*body);
                 if (!asked.ok()) return SendProblem(res, asked.status());
                 auto sharing = controller_.SetProjectSharing(req.matches[1], *asked);
                 if (!sharing.ok()) return SendProblem(res, sharing.status());
                 SendJson(res, 200,
                          {{"project", std::string(req.matches[1])},
                           {"sharing", protocol::ToJson(*sharing)}});
               },
               /*admin_only=*/true));
  http.Put(R"(/api/v1/projects/([^/]+)/limits)",
           Authed(
               [this](const Principal&, const auto& req, auto& res) {
                 auto body = ParseBody(req);
                 if (!body.ok()) return SendProblem(res, body.status());
                 auto limits = protocol::ParseSubmitLimits(*body);
                 if (!limits.ok()) return SendProblem(res, limits.status());
                 Status s = controller_.SetProjectSubmitLimits(req.matches[1], *limits);
                 if (!s.ok()) return SendProblem(res, s);
                 SendJson(res, 200,
                          {{"project", std::string(req.matches[1])},
                           {"submit_limits", protocol::ToJson(*limits)}});
               },
               /*admin_only=*/true));
  http.Put(R"(/api/v1/users/([^/]+)/limits)",
           Authed(
               [this](const Principal&, const auto& req, auto& res) {
                 auto body = ParseBody(req);
                 if (!body.ok()) return SendProblem(res, body.status());
                 auto limits = protocol::ParseSubmitLimits(*body);
                 if (!limits.ok()) return SendProblem(res, limits.status());
                 Status s = controller_.SetUserSubmitLimits(req.matches[1], *limits);
                 if (!s.ok()) return SendProblem(res, s);
                 SendJson(res, 200,
                          {{"user", std::string(req.matches[1])},
                           {"submit_limits", protocol::ToJson(*limits)}});
               },
               /*admin_only=*/true));
  http.Post("/api/v1/projects",
            Authed(
                [this](const Principal&, const auto& req, auto& res) {
                  auto body = ParseBody(req);
                  if (!body.ok()) return SendProblem(res, body.status());
                  auto asked = protocol::ParseProjectRequest(*body);
                  if (!asked.ok()) return SendProblem(res, asked.status());
                  auto p = controller_.Accounts().CreateProject(asked->name, asked->description);
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
            auto name = StringField(*body, "user");
            if (!name.ok()) return SendProblem(res, name.status());
            auto user = controller_.Accounts().AddMember(req.matches[1], *name);
            if (!user.ok()) return SendProblem(res, user.status());
            SendJson(res, 200, {{"project", std::string(req.matches[1])}, {"user", user->name}});
          },
          true));
  http.Get("/api/v1/users", Authed(
                                [this](const Principal&, const auto&, auto& res) {
                                  auto users = controller_.Accounts().ListUsers();
                                  if (!users.ok()) return SendProblem(res, users.status());
                                  SendJson(res, 200, protocol::ToJson(*users));
                                },
                                true));
  http.Post(
      "/api/v1/users",
      Authed([this](const Principal&, const auto& req, auto& res) { CreateUser(req, res); }, true));
  http.Get("/api/v1/tokens", Authed([this](const Principal& who, const auto&, auto& res) {
             auto tokens = controller_.Accounts().ListTokens(who.user_id);
             if (!tokens.ok()) return SendProblem(res, tokens.status());
             SendJson(res, 200, protocol::ToJson(*tokens));
           }));
  http.Post("/api/v1/tokens", Authed([this](const Principal& who, const auto& req, auto& res) {
              auto body = ParseBody(req);
              if (!body.ok()) return SendProblem(res, body.status());
              auto asked = protocol::ParseTokenRequest(*body);
              if (!asked.ok()) return SendProblem(res, asked.status());
              // Absent: the server's default expiry (--default-token-expiry).
              std::optional<Seconds> lifetime;
              if (asked->expires_in_s) lifetime = Seconds(*asked->expires_in_s);
              auto token = controller_.Accounts().CreateToken(who.user_id, asked->name, lifetime);
              if (!token.ok()) return SendProblem(res, token.status());
              SendJson(res, 201, protocol::ToJson(*token));
            }));
  http.Delete(R"(/api/v1/tokens/(\d+))",
              Authed([this](const Principal& who, const auto& req, auto& res) {
                auto id = PathId(req, "token");
                if (!id.ok()) return SendProblem(res, id.status());
                Status s = controller_.Accounts().RevokeToken(who.user_id, *id);
                if (!s.ok()) return SendProblem(res, s);
                SendJson(res, 200, {{"revoked", *id}});
              }));
}

// Creates the user, their memberships (always "default") and their first token atomically.
void HttpApi::Impl::CreateUser(const HttpRequest& req, HttpResponse& res) {
  auto body = ParseBody(req);
  if (!body.ok()) return SendProblem(res, body.status());
  auto asked = protocol::ParseUserRequest(*body);
  if (!asked.ok()) return SendProblem(res, asked.status());
  asked->projects.push_back("default");
  auto user = controller_.Accounts().CreateUser(asked->name, asked->admin, asked->projects);
  if (!user.ok()) return SendProblem(res, user.status());
  SendJson(res, 201, protocol::ToJson(*user));
}

}  // namespace corral::server
