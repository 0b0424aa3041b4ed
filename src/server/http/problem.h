// Errors as application/problem+json (RFC 9457), and JSON answers, for every HTTP route of the
// server (the API, the agent gateway) and the session gateway's own answers.
#pragma once

#include <nlohmann/json.hpp>
#include <string_view>

#include "common/status.h"
#include "server/http/http_exchange.h"

namespace corral::server {

// The HTTP status for a Status code: 400, 401, 403, 404, 409, 429, else 500.
int HttpStatusOf(StatusCode code);
// An application/problem+json body (RFC 9457): {"type": "about:blank", "title", "status",
// "detail"}.
nlohmann::json Problem(int status, std::string_view title, std::string_view detail);

// Answers `status` with `body` as application/json; invalid UTF-8 in it becomes U+FFFD.
void SendJson(HttpResponse& res, int status, const nlohmann::json& body);
// Answers `s` as application/problem+json with its HTTP status (HttpStatusOf), and with
// Retry-After when it says when to ask again; invalid UTF-8 in its message (which may quote a
// request) becomes U+FFFD.
void SendProblem(HttpResponse& res, const Status& s);

}  // namespace corral::server
