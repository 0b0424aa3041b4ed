// API tokens and who a request acts for. A token is "crl_" + 32 random bytes in hex, shown once
// when created; the store keeps only its SHA-256. Agents authenticate with the cluster's join
// token (also stored hashed) and then with a per-node token.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"

namespace corral::server {

// Random bytes in a secret: a token's, a session's (RandomHexId(kSecretBytes), 64 hex).
inline constexpr size_t kSecretBytes = 32;
// A new random secret ("crl_<64 hex>") from the kernel's CSPRNG (RandomHexId); an error only
// when the system has no secure randomness.
Result<std::string> GenerateToken();
// Lowercase hex SHA-256 of a token: what the store keeps.
std::string HashToken(const std::string& token);
// Lowercase hex HMAC-SHA256 of `message` under `key`: secrets derived from a server's key.
std::string HmacSha256Hex(const std::string& key, std::string_view message);
// Constant-time comparison of two equal-length strings (hash checks).
bool SecureEquals(const std::string& a, const std::string& b);

// The token of an `Authorization: Bearer <token>` header value; "" for anything else.
std::string BearerTokenOf(std::string_view authorization);

// Who a request acts for.
struct Principal {
  int64_t user_id = 0;
  std::string name;
  bool admin = false;
  std::vector<std::string> projects;  // projects the user is a member of
  // When the token it was authenticated with stops authenticating; none: never.
  std::optional<Seconds> expires_at;
  // Authenticated by a job token (job_token.h): the job it acts for, whose user and project are
  // `name` and `projects`. It may use only JobTokenMayUse()'s routes, which the API checks
  // before any handler runs.
  std::optional<JobId> job;

  // Admins act on everything; members on their projects' jobs.
  bool CanAccessProject(const std::string& project) const;
};

}  // namespace corral::server
