#include "server/api/api_common.h"

#include "common/json_parse.h"
#include "server/http/auth.h"

namespace corral::server::api_internal {

std::string BearerToken(const httplib::Request& req) {
  return BearerTokenOf(req.get_header_value("Authorization"));
}

// The request body: a JSON object within the JSON limits (ParseJson), else 400.
Result<json> ParseBody(const httplib::Request& req) {
  auto body = ParseJson(req.body, "request body");
  if (!body.ok()) return body.status();
  if (!body->is_object()) return InvalidArgument("request body: must be a JSON object");
  return body;
}

void SetRetryAfter(httplib::Response& res, const Status& status) {
  if (auto after = status.retry_after()) {
    res.set_header("Retry-After", std::to_string(std::max<int64_t>(after->value(), 1)));
  }
}

std::optional<int64_t> ParseCount(const std::string& text) {
  if (text.empty() || text.size() > 18 || text.find_first_not_of("0123456789") != text.npos) {
    return std::nullopt;
  }
  return std::stoll(text);
}

// Query parameter `name` as an integer in [lo, hi]: nullopt when absent, InvalidArgument naming
// it when it is anything else.
Result<std::optional<int64_t>> IntParam(const httplib::Request& req, const std::string& name,
                                        int64_t lo, int64_t hi) {
  if (!req.has_param(name)) return std::optional<int64_t>();
  const std::optional<int64_t> v = ParseCount(req.get_param_value(name));
  if (!v || *v < lo || *v > hi) {
    return InvalidArgument("field '" + name + "': must be an integer from " + std::to_string(lo) +
                           " to " + std::to_string(hi));
  }
  return v;
}

// The id a route captured as (\d+) (so only an overflow fails).
Result<int64_t> PathId(const httplib::Request& req, const std::string& what) {
  const std::optional<int64_t> id = ParseCount(req.matches[1]);
  if (!id) return NotFound(what + " " + std::string(req.matches[1]) + " not found");
  return *id;
}

}  // namespace corral::server::api_internal
