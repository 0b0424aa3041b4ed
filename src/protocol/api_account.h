// The users and API tokens of the API, with their JSON codecs: the requests of POST
// /api/v1/users (admins) and POST /api/v1/tokens, the rows of GET /api/v1/users and GET
// /api/v1/tokens (the caller's), and the answers to the two POSTs, which carry a new token's
// secret once; and the submit limits admins set on users and projects (PUT
// /api/v1/users/NAME/limits, PUT /api/v1/projects/NAME/limits). The server builds the answers
// (server::Accounts), the HTTP API and the CLI encode and decode them with these codecs.
//
//   user request:  {"name": "alice", "admin": false, "projects": ["vision"]}
//   token request: {"name": "laptop", "expires_in_s": 2592000 (absent: the server's default)}
//   user:          {"name": "alice", "admin": false, "submit_limits": {...}}
//   new user:      {"name": "alice", "admin": false, "submit_limits": {...}, "token": "<secret>"}
//   token:         {"id": 3, "name": "laptop", "created_at": 1700000000,
//                   "expires_at": 1702592000 (null: never), "revoked": false}
//   new token:     {"id": 3, "name": "laptop", "expires_at": null, "token": "<secret>"}
//   submit limits: {"max_pending_jobs": 100, "max_submits_per_minute": null}
//                  each 0..1e9, null for no limit; taken, an absent field is no limit and an
//                  unknown one is refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/submit_limits.h"

namespace corral::protocol {

// A request to make a user. Only "name" is required; unknown fields are refused.
struct UserRequest {
  std::string name;  // a user name (names.h)
  bool admin = false;
  // Projects the user joins (names of existing projects; the server adds its default one): at
  // most kMaxUserProjects.
  std::vector<std::string> projects;
  bool operator==(const UserRequest&) const = default;
};
inline constexpr size_t kMaxUserProjects = 1024;

// A request to make a token of the caller's. "name" is optional; unknown fields are refused.
struct TokenRequest {
  std::string name = "token";  // a token name (names.h): what the token is for
  // Seconds from now until it expires, 1..kMaxDuration; none: the server's default.
  std::optional<int64_t> expires_in_s;
  bool operator==(const TokenRequest&) const = default;
};

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
// Errors name the field: "field 'name': a user name must be 1 to 32 ...", "field 'admin': must
// be true or false". A name is checked against its rule here, where it is made; the views'
// names are read as the server has them.
Result<UserRequest> ParseUserRequest(const nlohmann::json& json);
Result<TokenRequest> ParseTokenRequest(const nlohmann::json& json);
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
