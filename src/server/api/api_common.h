// What the API's route files (http_api_impl.h) share to read requests: the bearer token, the
// JSON body and its fields, query parameters and path ids. Errors name the field. Not for use
// outside src/server/api/.
#pragma once

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "server/http/http_exchange.h"

namespace corral::server::api_internal {

using nlohmann::json;

// The token of the request's "Authorization: Bearer <token>" header; "" when none.
std::string BearerToken(const HttpRequest& req);

// The request body: a JSON object, else 400.
Result<json> ParseBody(const HttpRequest& req);

// String field `name` of a request body (that names something that exists, or a login's
// token): `fallback` when the field is absent, InvalidArgument naming the field when it is
// absent without a fallback or is not a string. Requests that make something are typed in
// protocol/ (api_*.h) and checked there.
Result<std::string> StringField(const json& body, const std::string& name,
                                std::optional<std::string> fallback = {});

// Decimal digits (at most 18, so at most kMaxCount) as an integer; nullopt for anything else.
constexpr int64_t kMaxCount = 999'999'999'999'999'999;
std::optional<int64_t> ParseCount(const std::string& text);

// Query parameter `name` as an integer in [lo, hi]: nullopt when absent, InvalidArgument naming
// it when it is anything else.
Result<std::optional<int64_t>> IntParam(const HttpRequest& req, const std::string& name, int64_t lo,
                                        int64_t hi);

// The id a route captured as (\d+) (so only an overflow fails).
Result<int64_t> PathId(const HttpRequest& req, const std::string& what);

}  // namespace corral::server::api_internal
