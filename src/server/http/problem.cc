#include "server/http/problem.h"

#include <algorithm>

namespace corral::server {

using nlohmann::json;

int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kUnauthenticated:
      return 401;
    case StatusCode::kPermissionDenied:
      return 403;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kAlreadyExists:
    case StatusCode::kFailedPrecondition:
      return 409;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    default:
      return 500;
  }
}

json Problem(int status, std::string_view title, std::string_view detail) {
  return {{"type", "about:blank"}, {"title", title}, {"status", status}, {"detail", detail}};
}

void SendJson(HttpResponse& res, int status, const json& body) {
  res.status = status;
  // Invalid UTF-8 (from a task's output or an agent's note) becomes U+FFFD instead of throwing.
  res.SetContent(body.dump(-1, ' ', false, json::error_handler_t::replace), "application/json");
}

void SendProblem(HttpResponse& res, const Status& s) {
  const int status = HttpStatusOf(s.code());
  if (const std::optional<Seconds> after = s.retry_after()) {
    res.SetHeader("Retry-After", std::to_string(std::max<int64_t>(after->value(), 1)));
  } else if (status == 503) {  // every 503 says when to come back
    res.SetHeader("Retry-After", "1");
  }
  res.status = status;
  // A detail may quote what the client sent (a JSON parser's error quotes the bytes it stopped
  // at): invalid UTF-8 becomes U+FFFD instead of throwing, which would turn a 400 into a 500.
  res.SetContent(Problem(status, StatusCodeName(s.code()), s.message())
                     .dump(-1, ' ', false, json::error_handler_t::replace),
                 "application/problem+json");
}

}  // namespace corral::server
