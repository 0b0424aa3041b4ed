// Accounts: users, their API tokens and project memberships, and who a token belongs to — the
// service behind the API's /api/v1/{projects,users,tokens} routes and its authentication. It
// owns the principal cache (principal_cache.h) and clears it on every change it makes to
// tokens, users or memberships, so that a revoked token is refused from the next request on.
// Tokens may expire: an expired one is refused from its expiry on (checked at every request,
// cached or not).
//
// Thread safety: every method may be called from any thread (the store's calls are, and the
// principal cache has its own lock). Owned by the Controller (Controller::Accounts()).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "protocol/api_account.h"
#include "server/control/principal_cache.h"
#include "server/http/auth.h"
#include "store/store.h"

namespace corral::server {

class Accounts {
 public:
  // Borrows `store` and `clock`, which must outlive the accounts. `default_token_expiry`: how
  // long new tokens last when their creator asks nothing (none: forever). `session_key`: the
  // cluster's, which job tokens are derived from (job_token.h).
  Accounts(store::Store& store, Clock& clock, PrincipalCache::Options options,
           std::optional<Seconds> default_token_expiry, std::string session_key);

  // Who an API token belongs to (through the principal cache); Unauthenticated when unknown or
  // revoked, or "token expired ..." from its expiry on.
  Result<Principal> Authenticate(const std::string& token);
  // Who a job token (job_token.h) acts for: its job (Principal::job), as its user in its
  // project. Unauthenticated for a token of no job or not the job's (compared in constant time),
  // and once the job has ended. Read from the store at every request (no cache): a job that ends
  // on another server revokes its token at once.
  Result<Principal> AuthenticateJob(const std::string& token);

  // A new project (AlreadyExists when the name is taken).
  Result<store::ProjectRecord> CreateProject(const std::string& name,
                                             const std::string& description);
  // Adds user `user` to `project`; answers the user.
  Result<store::UserRecord> AddMember(const std::string& project, const std::string& user);
  Result<std::vector<protocol::UserView>> ListUsers();
  // Creates the user, their memberships (`projects`, which the caller completes with
  // "default") and their first token ("initial", lasting the default expiry) atomically.
  Result<protocol::NewUser> CreateUser(const std::string& name, bool admin,
                                       const std::vector<std::string>& projects);

  // The tokens of user `user_id` (revoked ones too).
  Result<std::vector<protocol::TokenView>> ListTokens(int64_t user_id);
  // A new token of user `user_id`, with its secret (shown once, never stored), that lasts
  // `lifetime` (none: the default expiry).
  Result<protocol::NewToken> CreateToken(int64_t user_id, const std::string& name,
                                         std::optional<Seconds> lifetime);
  // Revokes token `token_id` of user `user_id`: refused from the next request on.
  Status RevokeToken(int64_t user_id, int64_t token_id);

 private:
  // When a token made now with `lifetime` (none: the default) expires.
  std::optional<Seconds> ExpiryOf(std::optional<Seconds> lifetime);

  store::Store& store_;
  Clock& clock_;
  const std::optional<Seconds> default_token_expiry_;
  const std::string session_key_;
  PrincipalCache principals_;
};

}  // namespace corral::server
