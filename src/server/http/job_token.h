// The job token (docs/in-job.md, docs/security.md): what a task authenticates with to read and
// report on its own job (CORRAL_JOB_TOKEN). It is derived, not stored:
//   "crj_<job id>_<hex HMAC-SHA256(session key, "corral job token v1:<job id>:<submit time>")>"
// so that every server of a cluster (they share the session key) accepts it and nothing secret
// is at rest; the submit time makes a job id reused after a store reset give another token. It
// is revoked by its job's state: once the job has ended it authenticates no more (the caller
// checks; JobTokenScope below is pure).
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/ids.h"
#include "common/units.h"

namespace corral::server {

inline constexpr std::string_view kJobTokenPrefix = "crj_";

// The token of job `job` submitted at `submit_time` (Unix seconds).
std::string JobToken(const std::string& session_key, JobId job, Seconds submit_time);

// True for a token of the job token's form ("crj_..."), valid or not: it is never an API token.
bool LooksLikeJobToken(std::string_view token);
// The job a token of the form "crj_<id>_<64 lowercase hex>" names; nullopt for anything else.
// Says nothing of whether it is the job's token: compare with JobToken() (SecureEquals).
std::optional<JobId> JobOfToken(std::string_view token);

// The routes a job token may use, for its own job only: GET /api/v1/jobs/ID, .../logs and
// .../metrics, POST .../report and .../checkpoint (`path` without its query string).
bool JobTokenMayUse(JobId job, std::string_view method, std::string_view path);
inline constexpr char kJobTokenScope[] = "a job token may only read and report on its own job";

}  // namespace corral::server
