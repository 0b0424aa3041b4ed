#include "common/json_parse.h"

namespace corral {

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                 const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status(StatusCode::kResourceExhausted, what + ": " + std::to_string(text.size()) +
                                                      " bytes, over the limit of " +
                                                      std::to_string(limits.max_bytes));
  }
  // The callback sees each value start with its depth (the top level is 0); a value deeper than
  // the limit is discarded before anything is built for it, and the document is refused.
  bool too_deep = false;
  auto check = [&](int depth, nlohmann::json::parse_event_t event, nlohmann::json&) {
    const bool opens = event == nlohmann::json::parse_event_t::object_start ||
                       event == nlohmann::json::parse_event_t::array_start;
    if (opens && depth >= limits.max_depth) too_deep = true;
    return !too_deep;
  };
  const auto deep = [&] {
    return InvalidArgument(what + ": nests deeper than the limit of " +
                           std::to_string(limits.max_depth) + " levels");
  };
  try {
    nlohmann::json value = nlohmann::json::parse(text, check, /*allow_exceptions=*/true);
    if (too_deep) return deep();
    return value;
  } catch (const nlohmann::json::parse_error& e) {
    if (too_deep) return deep();  // what made it too deep is the first thing wrong with it
    // Without the library's "[json.exception.parse_error.101] " prefix.
    std::string_view message = e.what();
    if (const size_t end = message.find("] "); message.starts_with("[") && end != message.npos) {
      message.remove_prefix(end + 2);
    }
    return InvalidArgument(what + ": not valid JSON: " + std::string(message));
  }
}

nlohmann::json ParseJsonOrNull(std::string_view text, const JsonLimits& limits) {
  auto value = ParseJson(text, "", limits);
  return value.ok() ? std::move(value).value() : nlohmann::json();
}

}  // namespace corral
