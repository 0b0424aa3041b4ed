#include "common/json_parse.h"

#include <optional>

namespace corral {

namespace {

// The offset of the first byte that opens an object or array deeper than `max_depth` (the top
// level is depth 1), outside strings; nullopt when none does. One pass, no allocation: a text
// too deep is refused before the parser builds anything, and the parser then never recurses
// past the limit when the value is copied or dumped. Exact for JSON; for a text that is not
// JSON the parser refuses it anyway.
std::optional<size_t> FirstTooDeep(std::string_view text, int max_depth) {
  int depth = 0;
  bool in_string = false, escaped = false;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (in_string) {
      if (escaped) {
        escaped = false;
      } else if (c == '\\') {
        escaped = true;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > max_depth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

// The limits ParseJson checks before parsing.
Status CheckLimits(std::string_view text, const std::string& what, const JsonLimits& limits) {
  if (text.size() > limits.max_bytes) {
    return Status(StatusCode::kResourceExhausted, what + ": " + std::to_string(text.size()) +
                                                      " bytes, over the limit of " +
                                                      std::to_string(limits.max_bytes));
  }
  return CheckJsonDepth(text, what, limits.max_depth);
}

// A parse error of the library, without its "[json.exception.parse_error.101] " prefix.
Status NotJson(const std::string& what, const nlohmann::json::exception& e) {
  std::string_view message = e.what();
  if (const size_t end = message.find("] "); message.starts_with("[") && end != message.npos) {
    message.remove_prefix(end + 2);
  }
  return InvalidArgument(what + ": not valid JSON: " + std::string(message));
}

}  // namespace

Status CheckJsonDepth(std::string_view text, const std::string& what, int max_depth) {
  if (auto at = FirstTooDeep(text, max_depth)) {
    return InvalidArgument(what + ": nests deeper than the limit of " + std::to_string(max_depth) +
                           " levels (at byte " + std::to_string(*at) + ")");
  }
  return Status::Ok();
}

Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                 const JsonLimits& limits) {
  CORRAL_RETURN_IF_ERROR(CheckLimits(text, what, limits));
  try {
    return nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {  // syntax, and numbers out of range (1e500)
    return NotJson(what, e);
  }
}

Status ParseJsonArray(std::string_view text, const std::string& what, const JsonLimits& limits,
                      const std::function<Status(size_t, nlohmann::json&)>& each) {
  CORRAL_RETURN_IF_ERROR(CheckLimits(text, what, limits));
  using Event = nlohmann::json::parse_event_t;
  bool array = false;  // the document opened with an array
  size_t index = 0;
  Status first_error;
  // Depth 1 is an element of the top-level array: an object or array ends there, or a scalar is
  // read there. The element is handed over and dropped from the array (false).
  auto element = [&](int depth, Event event, nlohmann::json& parsed) {
    if (depth == 0 && event == Event::array_start) array = true;
    if (depth != 1 || !array ||
        (event != Event::object_end && event != Event::array_end && event != Event::value)) {
      return true;
    }
    if (first_error.ok()) first_error = each(index, parsed);
    ++index;
    return false;
  };
  try {
    const nlohmann::json rest = nlohmann::json::parse(text, element);
    if (!array || !rest.is_array()) return InvalidArgument(what + ": must be a JSON array");
  } catch (const nlohmann::json::exception& e) {
    return NotJson(what, e);
  }
  return first_error;
}

nlohmann::json ParseJsonOrNull(std::string_view text, const JsonLimits& limits) {
  auto value = ParseJson(text, "", limits);
  return value.ok() ? std::move(value).value() : nlohmann::json();
}

}  // namespace corral
