#include "server/control/accounts.h"

#include <ctime>

#include "model/states.h"
#include "server/http/job_token.h"

namespace corral::server {

namespace {

// "2026-12-03 10:00:00 UTC".
std::string UtcTime(Seconds t) {
  const std::time_t time = t.value();
  std::tm tm{};
  char text[32];
  if (gmtime_r(&time, &tm) == nullptr ||
      std::strftime(text, sizeof text, "%Y-%m-%d %H:%M:%S UTC", &tm) == 0) {
    return std::to_string(t.value()) + " (Unix time)";
  }
  return text;
}

}  // namespace

Accounts::Accounts(store::Store& store, Clock& clock, PrincipalCache::Options options,
                   std::optional<Seconds> default_token_expiry, std::string session_key)
    : store_(store),
      clock_(clock),
      default_token_expiry_(default_token_expiry),
      session_key_(std::move(session_key)),
      principals_(clock, options) {}

Result<Principal> Accounts::Authenticate(const std::string& token) {
  const std::string hash = HashToken(token);
  auto who = principals_.Get(hash, [&]() -> Result<Principal> {
    auto owner = store_.FindTokenOwner(hash);
    if (!owner.ok()) {
      if (owner.status().code() == StatusCode::kNotFound) {
        return Unauthenticated("unknown or revoked token");
      }
      return owner.status();
    }
    Principal p;
    p.user_id = owner->user.id;
    p.name = owner->user.name;
    p.admin = owner->user.admin;
    p.expires_at = owner->expires_at;
    auto projects = store_.ProjectsOf(owner->user.id);
    if (!projects.ok()) return projects.status();
    p.projects = *projects;
    return p;
  });
  // After the cache: a remembered principal outlives no expiry.
  if (who.ok() && who->expires_at && *who->expires_at <= clock_.Now()) {
    return Unauthenticated("token expired at " + UtcTime(*who->expires_at) +
                           ": create another (corral token create)");
  }
  return who;
}

Result<Principal> Accounts::AuthenticateJob(const std::string& token) {
  const std::optional<JobId> id = JobOfToken(token);
  if (!id) return Unauthenticated("malformed job token");
  // Without the cluster's key a job token could be forged: none is accepted (nor given).
  if (session_key_.empty()) return Unauthenticated("this server gives no job tokens");
  auto record = store_.GetJob(*id);
  if (!record.ok()) {
    if (record.status().code() == StatusCode::kNotFound)
      return Unauthenticated("unknown job token");
    return record.status();
  }
  if (!SecureEquals(token, JobToken(session_key_, *id, record->submit_time))) {
    return Unauthenticated("unknown job token");
  }
  if (model::IsFinal(record->state)) {
    return Unauthenticated("job " + std::to_string(id->value()) +
                           " has ended: its job token no longer works");
  }
  Principal p;
  p.name = record->user;
  p.projects = {record->project};
  p.job = *id;
  return p;
}

std::optional<Seconds> Accounts::ExpiryOf(std::optional<Seconds> lifetime) {
  if (!lifetime) lifetime = default_token_expiry_;
  if (!lifetime) return std::nullopt;
  return clock_.Now() + *lifetime;
}

Result<store::ProjectRecord> Accounts::CreateProject(const std::string& name,
                                                     const std::string& description) {
  return store_.CreateProject(name, description, clock_.Now());
}

Result<store::UserRecord> Accounts::AddMember(const std::string& project, const std::string& user) {
  auto record = store_.FindUser(user);
  if (!record.ok()) return record.status();
  Status s = store_.AddMember(project, record->id);
  if (!s.ok()) return s;
  principals_.Clear();  // the member's principal lists their projects
  return record;
}

Result<std::vector<protocol::UserView>> Accounts::ListUsers() {
  auto users = store_.ListUsers();
  if (!users.ok()) return users.status();
  std::vector<protocol::UserView> out;
  for (const store::UserRecord& u : *users) out.push_back({u.name, u.admin, u.submit_limits});
  return out;
}

Result<protocol::NewUser> Accounts::CreateUser(const std::string& name, bool admin,
                                               const std::vector<std::string>& projects) {
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  auto user = store_.CreateUserWithToken(name, admin, projects, "initial", HashToken(*token),
                                         clock_.Now(), ExpiryOf(std::nullopt));
  if (!user.ok()) return user.status();
  principals_.Clear();
  return protocol::NewUser{{user->name, user->admin, user->submit_limits}, *std::move(token)};
}

Result<std::vector<protocol::TokenView>> Accounts::ListTokens(int64_t user_id) {
  auto tokens = store_.ListTokens(user_id);
  if (!tokens.ok()) return tokens.status();
  std::vector<protocol::TokenView> out;
  for (const store::TokenRecord& t : *tokens) {
    out.push_back({t.id, t.name, t.created_at, t.revoked_at.has_value(), t.expires_at});
  }
  return out;
}

Result<protocol::NewToken> Accounts::CreateToken(int64_t user_id, const std::string& name,
                                                 std::optional<Seconds> lifetime) {
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  auto rec = store_.CreateToken(user_id, name, HashToken(*token), clock_.Now(), ExpiryOf(lifetime));
  if (!rec.ok()) return rec.status();
  principals_.Clear();
  return protocol::NewToken{rec->id, rec->name, *std::move(token), rec->expires_at};
}

Status Accounts::RevokeToken(int64_t user_id, int64_t token_id) {
  Status s = store_.RevokeToken(user_id, token_id, clock_.Now());
  if (!s.ok()) return s;
  principals_.Clear();  // refused from the next request on
  return Status::Ok();
}

}  // namespace corral::server
