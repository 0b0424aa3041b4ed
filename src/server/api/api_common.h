// What the API's route files (http_api_impl.h) share to read requests: the bearer token, the
// JSON body and its fields, query parameters and path ids. Errors name the field. Not for use
// outside src/server/api/.
#pragma once

#include <httplib.h>

#include <algorithm>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "common/status.h"

namespace corral::server::api_internal {

using nlohmann::json;

// The token of the request's "Authorization: Bearer <token>" header; "" when none.
std::string BearerToken(const httplib::Request& req);

// The request body: a JSON object, else 400.
Result<json> ParseBody(const httplib::Request& req);

// Field `name` of a request body as T (std::string, bool, int64_t, std::vector<std::string>):
// `fallback` when the field is absent, InvalidArgument naming the field when it is absent
// without a fallback or has another JSON type.
template <typename T>
Result<T> Field(const json& body, const std::string& name, std::optional<T> fallback = {}) {
  const auto it = body.find(name);
  if (it == body.end()) {
    if (fallback) return *std::move(fallback);
    return InvalidArgument("field '" + name + "': is required");
  }
  bool ok = false;
  const char* expected = "";
  if constexpr (std::is_same_v<T, std::string>) {
    ok = it->is_string();
    expected = "a string";
  } else if constexpr (std::is_same_v<T, bool>) {
    ok = it->is_boolean();
    expected = "true or false";
  } else if constexpr (std::is_same_v<T, int64_t>) {
    // A uint64 above int64's range would read negative through get<int64_t>().
    ok = it->is_number_integer() &&
         !(it->is_number_unsigned() &&
           it->template get<uint64_t>() > static_cast<uint64_t>(INT64_MAX));
    expected = "an integer no greater than 9223372036854775807";
  } else {
    static_assert(std::is_same_v<T, std::vector<std::string>>, "unsupported field type");
    ok = it->is_array() &&
         std::all_of(it->begin(), it->end(), [](const json& v) { return v.is_string(); });
    expected = "an array of strings";
  }
  if (!ok) return InvalidArgument("field '" + name + "': must be " + expected);
  return it->template get<T>();
}

// Decimal digits (at most 18, so at most kMaxCount) as an integer; nullopt for anything else.
constexpr int64_t kMaxCount = 999'999'999'999'999'999;
std::optional<int64_t> ParseCount(const std::string& text);

// Query parameter `name` as an integer in [lo, hi]: nullopt when absent, InvalidArgument naming
// it when it is anything else.
Result<std::optional<int64_t>> IntParam(const httplib::Request& req, const std::string& name,
                                        int64_t lo, int64_t hi);

// The id a route captured as (\d+) (so only an overflow fails).
Result<int64_t> PathId(const httplib::Request& req, const std::string& what);

// A refusal that says when to ask again (Status::retry_after: a submit limit reached) gets the
// header Retry-After, in whole seconds; any other answer is left as it is.
void SetRetryAfter(httplib::Response& res, const Status& status);

}  // namespace corral::server::api_internal
