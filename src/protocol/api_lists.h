// Helpers of the API resources' codecs (api_*.cc), private to protocol/: a list of resources as
// the API sends them (a JSON array of objects), read with one reader per item whose errors name
// the item ("nodes: field '[3].state': ...").
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "common/json_fields.h"
#include "common/status.h"
#include "model/submit_limits.h"

namespace corral::protocol::api_internal {

// The items of the array `json`, each read by `read` with a reader on the item.
template <typename T>
Result<std::vector<T>> ReadList(const nlohmann::json& json, const std::string& what,
                                const std::function<Result<T>(const FieldReader&)>& read) {
  if (!json.is_array()) return InvalidArgument(what + ": must be a JSON array");
  std::vector<T> out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    const std::string item = "[" + std::to_string(i) + "]";
    if (!json[i].is_object())
      return InvalidArgument(what + ": field '" + item + "': must be an object");
    auto value = read(FieldReader(json[i], what, item + "."));
    if (!value.ok()) return value.status();
    out.push_back(std::move(value).value());
  }
  return out;
}

// The JSON array of `items`, each encoded by `encode`.
template <typename T, typename Encode>
nlohmann::json ListJson(const std::vector<T>& items, Encode encode) {
  nlohmann::json out = nlohmann::json::array();
  for (const T& item : items) out.push_back(encode(item));
  return out;
}

// Submit limits (api_account.h) from the object `object` that `r` reads, whose path is
// `prefix`: users' and projects' "submit_limits", and PUT .../limits bodies.
Status ReadSubmitLimits(const FieldReader& r, const nlohmann::json& object,
                        const std::string& prefix, model::SubmitLimits& out);

}  // namespace corral::protocol::api_internal
