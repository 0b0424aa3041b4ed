#include "protocol/api_session.h"

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_lists.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

json OrNull(const std::optional<std::string>& s) { return s ? json(*s) : json(nullptr); }

Status ReadOptionalString(const FieldReader& r, const char* field,
                          std::optional<std::string>& out) {
  if (r.Find(field) == nullptr) return Status::Ok();
  std::string s;
  CORRAL_RETURN_IF_ERROR(r.String(field, true, s));
  out = std::move(s);
  return Status::Ok();
}

Result<SessionView> ReadSession(const FieldReader& r) {
  SessionView s;
  int64_t id = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("id", true, id, 1));
  s.id = JobId(id);
  CORRAL_RETURN_IF_ERROR(r.String("name", true, s.name));
  CORRAL_RETURN_IF_ERROR(r.String("user", true, s.user));
  CORRAL_RETURN_IF_ERROR(r.String("project", true, s.project));
  std::string state;
  CORRAL_RETURN_IF_ERROR(r.String("state", true, state));
  auto parsed = model::ParseJobState(state, r.Path("state"));
  CORRAL_RETURN_IF_ERROR(r.Within(parsed.status()));
  s.state = *parsed;
  CORRAL_RETURN_IF_ERROR(r.String("reason", true, s.reason));
  CORRAL_RETURN_IF_ERROR(r.String("environment", false, s.environment));
  CORRAL_RETURN_IF_ERROR(r.String("path", true, s.path));
  CORRAL_RETURN_IF_ERROR(r.Secs("idle_timeout_s", true, s.idle_timeout));
  CORRAL_RETURN_IF_ERROR(r.Secs("submit_time", true, s.submit_time));
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("start_time", s.start_time));
  CORRAL_RETURN_IF_ERROR(r.Bool("stopping", s.stopping));
  CORRAL_RETURN_IF_ERROR(ReadOptionalString(r, "node", s.node));
  CORRAL_RETURN_IF_ERROR(ReadOptionalString(r, "address", s.address));
  CORRAL_RETURN_IF_ERROR(r.OptionalInt("port", s.port, 1, 65535));
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("last_activity", s.last_activity));
  CORRAL_RETURN_IF_ERROR(r.Object("idle_notice", false, [&](const FieldReader& n) {
    IdleNotice notice;
    CORRAL_RETURN_IF_ERROR(n.Secs("time", true, notice.time));
    CORRAL_RETURN_IF_ERROR(n.Secs("stops_at", true, notice.stops_at));
    s.idle_notice = notice;
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Object("pending_reason", false, [&](const FieldReader& p) {
    PendingReason reason;
    CORRAL_RETURN_IF_ERROR(p.String("code", true, reason.code));
    CORRAL_RETURN_IF_ERROR(p.String("message", true, reason.message));
    s.pending_reason = std::move(reason);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(ReadOptionalString(r, "token", s.token));
  CORRAL_RETURN_IF_ERROR(r.String("url", false, s.url));
  CORRAL_RETURN_IF_ERROR(ReadOptionalString(r, "direct_url", s.direct_url));
  return s;
}

}  // namespace

json ToJson(const SessionView& s) {
  json out = {{"id", s.id.value()},
              {"name", s.name},
              {"user", s.user},
              {"project", s.project},
              {"state", model::ToString(s.state)},
              {"reason", s.reason},
              {"environment", s.environment.empty() ? json(nullptr) : json(s.environment)},
              {"path", s.path},
              {"idle_timeout_s", s.idle_timeout.value()},
              {"submit_time", s.submit_time.value()},
              {"node", OrNull(s.node)},
              {"address", OrNull(s.address)},
              {"port", s.port ? json(*s.port) : json(nullptr)},
              {"last_activity", s.last_activity ? json(s.last_activity->value()) : json(nullptr)},
              {"idle_notice", nullptr},
              {"url", s.url},
              {"direct_url", OrNull(s.direct_url)}};
  if (s.start_time) out["start_time"] = s.start_time->value();
  if (s.stopping) out["stopping"] = true;
  if (s.idle_notice) {
    out["idle_notice"] = {{"time", s.idle_notice->time.value()},
                          {"stops_at", s.idle_notice->stops_at.value()}};
  }
  if (s.pending_reason) {
    out["pending_reason"] = {{"code", s.pending_reason->code},
                             {"message", s.pending_reason->message}};
  }
  if (s.token) out["token"] = *s.token;
  return out;
}

json ToJson(const std::vector<SessionView>& sessions) {
  return ListJson(sessions, [](const SessionView& s) { return ToJson(s); });
}

Result<SessionView> ParseSessionView(const json& json) {
  auto r = ReadObject(json, "session");
  if (!r.ok()) return r.status();
  return ReadSession(*r);
}

Result<std::vector<SessionView>> ParseSessionViews(const json& json) {
  return ReadList<SessionView>(json, "sessions", ReadSession);
}

}  // namespace corral::protocol
