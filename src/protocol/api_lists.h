// Helpers of the API resources' codecs (api_*.cc), private to protocol/: a list of resources as
// the API sends them (a JSON array of objects), read with one reader per item whose errors name
// the item ("nodes: field '[3].state': ...").
#pragma once

#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>
#include <vector>

#include "common/json_fields.h"
#include "common/json_parse.h"
#include "common/status.h"
#include "model/submit_limits.h"

namespace corral::protocol::api_internal {

// Item `i` of a list, read by `read` with a reader on it (ReadList, ReadListText).
template <typename T>
Result<T> ReadListItem(size_t i, const nlohmann::json& item, const std::string& what,
                       const std::function<Result<T>(const FieldReader&)>& read) {
  const std::string name = "[" + std::to_string(i) + "]";
  if (!item.is_object()) return InvalidArgument(what + ": field '" + name + "': must be an object");
  return read(FieldReader(item, what, name + "."));
}

// The items of the array `json`, each read by `read` with a reader on the item.
template <typename T>
Result<std::vector<T>> ReadList(const nlohmann::json& json, const std::string& what,
                                const std::function<Result<T>(const FieldReader&)>& read) {
  if (!json.is_array()) return InvalidArgument(what + ": must be a JSON array");
  std::vector<T> out;
  out.reserve(json.size());
  for (size_t i = 0; i < json.size(); ++i) {
    auto value = ReadListItem(i, json[i], what, read);
    if (!value.ok()) return value.status();
    out.push_back(std::move(value).value());
  }
  return out;
}

// ReadList straight from the array's text (ParseJsonArray within `limits`): no tree of the whole
// list is built, each item is read as soon as it is parsed. The same errors, with a syntax
// error or a limit named as ParseJson names them.
template <typename T>
Result<std::vector<T>> ReadListText(std::string_view text, const std::string& what,
                                    const JsonLimits& limits,
                                    const std::function<Result<T>(const FieldReader&)>& read) {
  std::vector<T> out;
  CORRAL_RETURN_IF_ERROR(
      ParseJsonArray(text, what, limits, [&](size_t i, nlohmann::json& item) -> Status {
        auto value = ReadListItem(i, item, what, read);
        if (!value.ok()) return value.status();
        out.push_back(std::move(value).value());
        return Status::Ok();
      }));
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
