#include "protocol/api_account.h"

#include <nlohmann/json.hpp>

#include "common/duration.h"
#include "common/json_fields.h"
#include "protocol/api_lists.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

json OptionalJson(const std::optional<int64_t>& v) { return v ? json(*v) : json(nullptr); }
json OptionalJson(const std::optional<Seconds>& t) { return t ? json(t->value()) : json(nullptr); }

json UserJson(const UserView& u) {
  return {{"name", u.name}, {"admin", u.admin}, {"submit_limits", ToJson(u.submit_limits)}};
}

Result<UserView> ReadUser(const FieldReader& r) {
  UserView u;
  CORRAL_RETURN_IF_ERROR(r.String("name", true, u.name));
  if (r.Find("admin") == nullptr) return r.Bad("admin", "is required");
  CORRAL_RETURN_IF_ERROR(r.Bool("admin", u.admin));
  // Absent from an older server's answer: no limits.
  CORRAL_RETURN_IF_ERROR(r.Object("submit_limits", false, [&](const FieldReader& limits) {
    return api_internal::ReadSubmitLimits(limits, *r.Find("submit_limits"),
                                          r.Path("submit_limits."), u.submit_limits);
  }));
  return u;
}

Status ReadExpiry(const FieldReader& r, std::optional<Seconds>& out) {
  std::optional<int64_t> expires;
  CORRAL_RETURN_IF_ERROR(r.OptionalInt64("expires_at", expires, 0));
  if (expires) out = Seconds(*expires);
  return Status::Ok();
}

Result<TokenView> ReadToken(const FieldReader& r) {
  TokenView t;
  CORRAL_RETURN_IF_ERROR(r.Int("id", true, t.id, 1));
  CORRAL_RETURN_IF_ERROR(r.String("name", true, t.name));
  int64_t created = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("created_at", true, created, 0));
  t.created_at = Seconds(created);
  CORRAL_RETURN_IF_ERROR(ReadExpiry(r, t.expires_at));
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
  CORRAL_RETURN_IF_ERROR(CheckKeys(j, {"name", "expires_in_s"}, ""));
  TokenRequest t;
  if (j.contains("name")) {
    auto name = GetName(j["name"], "name", NameKind::kToken);
    if (!name.ok()) return name.status();
    t.name = *name;
  }
  if (j.contains("expires_in_s")) {
    auto seconds = GetInt(j["expires_in_s"], "expires_in_s", 1, kMaxDuration.value());
    if (!seconds.ok()) return seconds.status();
    t.expires_in_s = *seconds;
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
                {"expires_at", OptionalJson(t.expires_at)},
                {"revoked", t.revoked}};
  });
}

json ToJson(const NewToken& t) {
  return {{"id", t.id},
          {"name", t.name},
          {"expires_at", OptionalJson(t.expires_at)},
          {"token", t.token}};
}

json ToJson(const model::SubmitLimits& limits) {
  return {{"max_pending_jobs", OptionalJson(limits.max_pending_jobs)},
          {"max_submits_per_minute", OptionalJson(limits.max_submits_per_minute)}};
}

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
  CORRAL_RETURN_IF_ERROR(ReadExpiry(*r, t.expires_at));
  CORRAL_RETURN_IF_ERROR(r->String("token", true, t.token));
  return t;
}

Result<model::SubmitLimits> ParseSubmitLimits(const json& json) {
  auto r = ReadObject(json, "submit limits");
  if (!r.ok()) return r.status();
  model::SubmitLimits limits;
  CORRAL_RETURN_IF_ERROR(api_internal::ReadSubmitLimits(*r, json, "", limits));
  return limits;
}

namespace api_internal {

Status ReadSubmitLimits(const FieldReader& r, const json& object, const std::string& prefix,
                        model::SubmitLimits& out) {
  CORRAL_RETURN_IF_ERROR(
      r.Within(CheckKeys(object, {"max_pending_jobs", "max_submits_per_minute"}, prefix)));
  CORRAL_RETURN_IF_ERROR(
      r.OptionalInt64("max_pending_jobs", out.max_pending_jobs, 0, model::kMaxSubmitLimit));
  return r.OptionalInt64("max_submits_per_minute", out.max_submits_per_minute, 0,
                         model::kMaxSubmitLimit);
}

}  // namespace api_internal

}  // namespace corral::protocol
