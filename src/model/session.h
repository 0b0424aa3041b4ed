// Interactive sessions (docs/sessions.md): a job whose spec has a `session` object runs one HTTP
// app that users reach through the server's reverse proxy at /sessions/<job id>/. These are the
// variables its task gets; like every CORRAL_* name (IsTaskEnvName) a job's env may not set them.
#pragma once

#include <cstdint>
#include <string>

namespace corral::model {

// The port the app must listen on (reserved for the session on its node).
inline constexpr char kSessionPortEnv[] = "CORRAL_SESSION_PORT";
// The path the app must serve under ("/sessions/<job id>/"): the proxy keeps it.
inline constexpr char kSessionUrlPrefixEnv[] = "CORRAL_SESSION_URL_PREFIX";
// The session's secret (64 hex characters): the app should accept only requests carrying it
// (the proxy sends "Authorization: token <secret>"; the direct URL carries "?token=<secret>").
inline constexpr char kSessionTokenEnv[] = "CORRAL_SESSION_TOKEN";

// The smallest idle timeout a spec may ask for (0 means never).
inline constexpr int64_t kMinSessionIdleTimeoutS = 60;

// "/sessions/<job id>/".
inline std::string SessionUrlPrefix(int64_t job_id) {
  return "/sessions/" + std::to_string(job_id) + "/";
}

}  // namespace corral::model
