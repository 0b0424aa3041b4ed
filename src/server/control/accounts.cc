#include "server/control/accounts.h"

namespace corral::server {

Accounts::Accounts(store::Store& store, Clock& clock, PrincipalCache::Options options)
    : store_(store), clock_(clock), principals_(clock, options) {}

Result<Principal> Accounts::Authenticate(const std::string& token) {
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
  for (const store::UserRecord& u : *users) out.push_back({u.name, u.admin});
  return out;
}

Result<protocol::NewUser> Accounts::CreateUser(const std::string& name, bool admin,
                                               const std::vector<std::string>& projects) {
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  auto user =
      store_.CreateUserWithToken(name, admin, projects, "initial", HashToken(*token), clock_.Now());
  if (!user.ok()) return user.status();
  principals_.Clear();
  return protocol::NewUser{{user->name, user->admin}, *std::move(token)};
}

Result<std::vector<protocol::TokenView>> Accounts::ListTokens(int64_t user_id) {
  auto tokens = store_.ListTokens(user_id);
  if (!tokens.ok()) return tokens.status();
  std::vector<protocol::TokenView> out;
  for (const store::TokenRecord& t : *tokens) {
    out.push_back({t.id, t.name, t.created_at, t.revoked_at.has_value()});
  }
  return out;
}

Result<protocol::NewToken> Accounts::CreateToken(int64_t user_id, const std::string& name) {
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  auto rec = store_.CreateToken(user_id, name, HashToken(*token), clock_.Now());
  if (!rec.ok()) return rec.status();
  principals_.Clear();
  return protocol::NewToken{rec->id, rec->name, *std::move(token)};
}

Status Accounts::RevokeToken(int64_t user_id, int64_t token_id) {
  Status s = store_.RevokeToken(user_id, token_id, clock_.Now());
  if (!s.ok()) return s;
  principals_.Clear();  // refused from the next request on
  return Status::Ok();
}

}  // namespace corral::server
