#include "protocol/array_spec.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <set>
#include <vector>

#include "model/job.h"

namespace corral::protocol {

namespace {

using nlohmann::json;

constexpr int64_t kMaxIndex = std::numeric_limits<int32_t>::max();

// Decimal digits as a number from 0 to `max`; nullopt for anything else.
std::optional<int64_t> ParseNumber(std::string_view text, int64_t max) {
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != text.npos) {
    return std::nullopt;
  }
  const int64_t v = std::stoll(std::string(text));
  if (v > max) return std::nullopt;
  return v;
}

Status ArrayError(const std::string& what) { return InvalidArgument("--array: " + what); }

// Appends the indices of one part ("N", "A-B" or "A-B:S") to `indices`.
Status AddPart(std::string_view part, std::vector<int>& indices, std::set<int>& seen) {
  const std::string quoted = "part '" + std::string(part) + "'";
  if (part.empty()) return ArrayError("an empty part (two commas, or a comma at an end)");
  const size_t dash = part.find('-');
  const size_t colon = part.find(':');
  if (colon != part.npos && (dash == part.npos || colon < dash)) {
    return ArrayError(quoted + ": a step needs a range (A-B:S)");
  }
  const std::string_view first = part.substr(0, dash);
  const std::string_view last =
      dash == part.npos ? first
                        : part.substr(dash + 1, colon == part.npos ? colon : colon - dash - 1);
  const std::string_view step = colon == part.npos ? "1" : part.substr(colon + 1);
  const auto a = ParseNumber(first, kMaxIndex);
  const auto b = ParseNumber(last, kMaxIndex);
  const auto s = ParseNumber(step, kMaxIndex);
  for (const auto& [value, text] : {std::pair{a, first}, {b, last}}) {
    if (!value) {
      return ArrayError(quoted + ": '" + std::string(text) + "' is not an index (0 to " +
                        std::to_string(kMaxIndex) + ")");
    }
  }
  if (!s || *s < 1)
    return ArrayError(quoted + ": the step '" + std::string(step) + "' must be >= 1");
  if (*a > *b) return ArrayError(quoted + ": the range ends before it starts");
  if (static_cast<int64_t>(indices.size()) + (*b - *a) / *s + 1 > model::kMaxArrayElements) {
    return ArrayError("more than " + std::to_string(model::kMaxArrayElements) + " indices");
  }
  for (int64_t i = *a; i <= *b; i += *s) {
    if (!seen.insert(static_cast<int>(i)).second) {
      return ArrayError(quoted + ": index " + std::to_string(i) + " is given twice");
    }
    indices.push_back(static_cast<int>(i));
  }
  return Status::Ok();
}

// A parameter's value as its environment variable holds it; nullopt for a value that is not a
// scalar.
std::optional<std::string> ScalarText(const json& value) {
  if (value.is_string()) return value.get<std::string>();
  if (value.is_boolean() || value.is_number()) return value.dump();
  return std::nullopt;
}

Status NotAScalar(const std::string& what, const std::string& field) {
  return InvalidArgument(what + ": field '" + field + "': must be a string, number or true/false");
}

Status CheckName(const std::string& name, const std::string& what) {
  if (model::IsEnvName(name)) return Status::Ok();
  return InvalidArgument(what + ": parameter '" + name +
                         "': not a valid environment variable name (letters, digits and _, not "
                         "starting with a digit)");
}

// Every combination of the grid's values: parameters by name, the last changing fastest.
Result<json> GridEnv(const json& grid, const std::string& what) {
  if (!grid.is_object() || grid.empty()) {
    return InvalidArgument(what + ": field 'grid': must map parameter names to lists of values");
  }
  std::vector<std::pair<std::string, std::vector<std::string>>> params;
  int64_t combinations = 1;
  for (const auto& [name, values] : grid.items()) {
    CORRAL_RETURN_IF_ERROR(CheckName(name, what));
    const std::string field = "grid." + name;
    if (!values.is_array() || values.empty()) {
      return InvalidArgument(what + ": field '" + field + "': must be a non-empty list of values");
    }
    std::vector<std::string> texts;
    for (size_t i = 0; i < values.size(); ++i) {
      auto text = ScalarText(values[i]);
      if (!text) return NotAScalar(what, field + "[" + std::to_string(i) + "]");
      texts.push_back(*text);
    }
    combinations *= static_cast<int64_t>(texts.size());
    if (combinations > model::kMaxArrayElements) {
      return InvalidArgument(what + ": the grid has more than " +
                             std::to_string(model::kMaxArrayElements) + " combinations");
    }
    params.emplace_back(name, std::move(texts));
  }
  json env = json::array();
  std::vector<size_t> at(params.size(), 0);  // an odometer over the parameters' values
  for (int64_t n = 0; n < combinations; ++n) {
    json vars = json::object();
    for (size_t p = 0; p < params.size(); ++p) vars[params[p].first] = params[p].second[at[p]];
    env.push_back(std::move(vars));
    for (size_t p = params.size(); p-- > 0;) {
      if (++at[p] < params[p].second.size()) break;
      at[p] = 0;
    }
  }
  return env;
}

// The runs listed, each a mapping of parameters.
Result<json> RunsEnv(const json& runs, const std::string& what) {
  if (!runs.is_array() || runs.empty() ||
      runs.size() > static_cast<size_t>(model::kMaxArrayElements)) {
    return InvalidArgument(what + ": field 'runs': must be a list of 1 to " +
                           std::to_string(model::kMaxArrayElements) + " runs");
  }
  json env = json::array();
  for (size_t i = 0; i < runs.size(); ++i) {
    const std::string field = "runs[" + std::to_string(i) + "]";
    if (!runs[i].is_object()) {
      return InvalidArgument(what + ": field '" + field + "': must map parameter names to values");
    }
    json vars = json::object();
    for (const auto& [name, value] : runs[i].items()) {
      CORRAL_RETURN_IF_ERROR(CheckName(name, what));
      auto text = ScalarText(value);
      if (!text) return NotAScalar(what, field + "." + name);
      vars[name] = *text;
    }
    env.push_back(std::move(vars));
  }
  return env;
}

}  // namespace

Result<json> ParseArrayFlag(std::string_view text) {
  if (text.empty()) return ArrayError("empty; expected indices such as 0-99%8 or 1,3,5-7");
  json array = json::object();
  const size_t percent = text.find('%');
  if (percent != text.npos) {
    const std::string_view limit = text.substr(percent + 1);
    const auto max_running = ParseNumber(limit, model::kMaxArrayElements);
    if (!max_running || *max_running < 1) {
      return ArrayError("the running limit '%" + std::string(limit) +
                        "' must be an integer from 1 to " +
                        std::to_string(model::kMaxArrayElements));
    }
    array["max_running"] = *max_running;
  }
  std::vector<int> indices;
  std::set<int> seen;
  const std::string_view list = text.substr(0, percent);
  for (size_t start = 0; start <= list.size();) {
    const size_t comma = std::min(list.find(',', start), list.size());
    CORRAL_RETURN_IF_ERROR(AddPart(list.substr(start, comma - start), indices, seen));
    start = comma + 1;
  }
  array["indices"] = indices;
  return array;
}

Result<json> ArrayFromSweep(const json& sweep, const std::string& what) {
  if (!sweep.is_object()) {
    return InvalidArgument(what + ": a sweep must be a mapping with 'grid' or 'runs'");
  }
  for (const auto& [key, value] : sweep.items()) {
    if (key != "grid" && key != "runs" && key != "max_running") {
      return InvalidArgument(what + ": field '" + key +
                             "': unknown (a sweep has grid or runs, and max_running)");
    }
  }
  if (sweep.contains("grid") == sweep.contains("runs")) {
    return InvalidArgument(what + ": a sweep needs exactly one of 'grid' and 'runs'");
  }
  auto env = sweep.contains("grid") ? GridEnv(sweep["grid"], what) : RunsEnv(sweep["runs"], what);
  if (!env.ok()) return env.status();
  json array = json::object();
  if (sweep.contains("max_running")) {
    const json& m = sweep["max_running"];
    if (!m.is_number_integer() || m.get<int64_t>() < 1 ||
        m.get<int64_t>() > model::kMaxArrayElements) {
      return InvalidArgument(what + ": field 'max_running': must be an integer from 1 to " +
                             std::to_string(model::kMaxArrayElements));
    }
    array["max_running"] = m;
  }
  std::vector<int> indices(env->size());
  for (size_t i = 0; i < indices.size(); ++i) indices[i] = static_cast<int>(i);
  array["indices"] = indices;
  array["env"] = std::move(env).value();
  return array;
}

}  // namespace corral::protocol
