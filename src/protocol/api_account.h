// The users and API tokens of the API, with their JSON codecs: the rows of GET /api/v1/users
// (admins) and GET /api/v1/tokens (the caller's), and the answers to POST /api/v1/users and
// POST /api/v1/tokens, which carry a new token's secret once; and the submit limits admins set
// on users and projects (PUT /api/v1/users/NAME/limits, PUT /api/v1/projects/NAME/limits). The
// server builds them (server::Accounts), the HTTP API and the CLI encode and decode them with
// these codecs.
//
//   user:          {"name": "alice", "admin": false, "submit_limits": {...}}
//   new user:      {"name": "alice", "admin": false, "submit_limits": {...}, "token": "<secret>"}
//   token:         {"id": 3, "name": "laptop", "created_at": 1700000000,
//                   "expires_at": 1702592000 (null: never), "revoked": false}
//   new token:     {"id": 3, "name": "laptop", "expires_at": null, "token": "<secret>"}
//   submit limits: {"max_pending_jobs": 100, "max_submits_per_minute": null}
//                  each 0..1e9, null for no limit; taken, an absent field is no limit and an
//                  unknown one is refused.
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/submit_limits.h"

namespace corral::protocol {

struct UserView {
  std::string name;
  bool admin = false;
  model::SubmitLimits submit_limits;
  bool operator==(const UserView&) const = default;
};

// A user just made, with the secret of their first token (shown once, never stored).
struct NewUser {
  UserView user;
  std::string token;
  bool operator==(const NewUser&) const = default;
};

struct TokenView {
  int64_t id = 0;
  std::string name;  // what it is for: "laptop", "initial", "admin-bootstrap"
  Seconds created_at{0};
  bool revoked = false;               // a revoked token authenticates nobody
  std::optional<Seconds> expires_at;  // from then on it authenticates nobody; none: never
  bool operator==(const TokenView&) const = default;
};

// A token just made, with its secret (shown once, never stored).
struct NewToken {
  int64_t id = 0;
  std::string name;
  std::string token;
  std::optional<Seconds> expires_at;
  bool operator==(const NewToken&) const = default;
};

nlohmann::json ToJson(const std::vector<UserView>& users);
nlohmann::json ToJson(const NewUser& user);
nlohmann::json ToJson(const std::vector<TokenView>& tokens);
nlohmann::json ToJson(const NewToken& token);
nlohmann::json ToJson(const model::SubmitLimits& limits);
// Errors name the field: "users: field '[0].admin': must be true or false", "new token: field
// 'token': is required".
Result<std::vector<UserView>> ParseUserViews(const nlohmann::json& json);
Result<NewUser> ParseNewUser(const nlohmann::json& json);
Result<std::vector<TokenView>> ParseTokenViews(const nlohmann::json& json);
Result<NewToken> ParseNewToken(const nlohmann::json& json);
// "submit limits: field 'max_pending_jobs': must be an integer in [0, 1000000000]".
Result<model::SubmitLimits> ParseSubmitLimits(const nlohmann::json& json);

}  // namespace corral::protocol
