#include "protocol/api_account.h"

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_lists.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

json UserJson(const UserView& u) { return {{"name", u.name}, {"admin", u.admin}}; }

Result<UserView> ReadUser(const FieldReader& r) {
  UserView u;
  CORRAL_RETURN_IF_ERROR(r.String("name", true, u.name));
  if (r.Find("admin") == nullptr) return r.Bad("admin", "is required");
  CORRAL_RETURN_IF_ERROR(r.Bool("admin", u.admin));
  return u;
}

Result<TokenView> ReadToken(const FieldReader& r) {
  TokenView t;
  CORRAL_RETURN_IF_ERROR(r.Int("id", true, t.id, 1));
  CORRAL_RETURN_IF_ERROR(r.String("name", true, t.name));
  int64_t created = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("created_at", true, created, 0));
  t.created_at = Seconds(created);
  if (r.Find("revoked") == nullptr) return r.Bad("revoked", "is required");
  CORRAL_RETURN_IF_ERROR(r.Bool("revoked", t.revoked));
  return t;
}

}  // namespace

Result<UserRequest> ParseUserRequest(const json& j) {
  if (!j.is_object()) return InvalidArgument("user request: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(j, {"name", "admin", "projects"}, ""));
  UserRequest u;
  if (!j.contains("name")) return FieldError("name", "is required");
  auto name = GetName(j["name"], "name", NameKind::kUser);
  if (!name.ok()) return name.status();
  u.name = *name;
  if (j.contains("admin")) {
    if (!j["admin"].is_boolean()) return FieldError("admin", "must be true or false");
    u.admin = j["admin"].get<bool>();
  }
  if (j.contains("projects")) {
    const json& projects = j["projects"];
    if (!projects.is_array() || projects.size() > kMaxUserProjects) {
      return FieldError("projects", "must be an array of at most " +
                                        std::to_string(kMaxUserProjects) + " project names");
    }
    for (size_t i = 0; i < projects.size(); ++i) {
      auto project = GetString(projects[i], "projects[" + std::to_string(i) + "]");
      if (!project.ok()) return project.status();
      u.projects.push_back(*project);
    }
  }
  return u;
}

Result<TokenRequest> ParseTokenRequest(const json& j) {
  if (!j.is_object()) return InvalidArgument("token request: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(j, {"name"}, ""));
  TokenRequest t;
  if (j.contains("name")) {
    auto name = GetName(j["name"], "name", NameKind::kToken);
    if (!name.ok()) return name.status();
    t.name = *name;
  }
  return t;
}

json ToJson(const std::vector<UserView>& users) { return ListJson(users, UserJson); }

json ToJson(const NewUser& u) {
  json out = UserJson(u.user);
  out["token"] = u.token;
  return out;
}

json ToJson(const std::vector<TokenView>& tokens) {
  return ListJson(tokens, [](const TokenView& t) {
    return json{{"id", t.id},
                {"name", t.name},
                {"created_at", t.created_at.value()},
                {"revoked", t.revoked}};
  });
}

json ToJson(const NewToken& t) { return {{"id", t.id}, {"name", t.name}, {"token", t.token}}; }

Result<std::vector<UserView>> ParseUserViews(const json& json) {
  return ReadList<UserView>(json, "users", ReadUser);
}

Result<NewUser> ParseNewUser(const json& json) {
  auto r = ReadObject(json, "new user");
  if (!r.ok()) return r.status();
  auto user = ReadUser(*r);
  if (!user.ok()) return user.status();
  NewUser u{std::move(user).value(), ""};
  CORRAL_RETURN_IF_ERROR(r->String("token", true, u.token));
  return u;
}

Result<std::vector<TokenView>> ParseTokenViews(const json& json) {
  return ReadList<TokenView>(json, "tokens", ReadToken);
}

Result<NewToken> ParseNewToken(const json& json) {
  auto r = ReadObject(json, "new token");
  if (!r.ok()) return r.status();
  NewToken t;
  CORRAL_RETURN_IF_ERROR(r->Int("id", true, t.id, 1));
  CORRAL_RETURN_IF_ERROR(r->String("name", true, t.name));
  CORRAL_RETURN_IF_ERROR(r->String("token", true, t.token));
  return t;
}

}  // namespace corral::protocol
