#include "protocol/spec_fields.h"

#include <limits>

#include "model/job.h"

namespace corral::protocol {

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument("field '" + field + "': " + what);
}

Status CheckKeys(const nlohmann::json& object, const std::set<std::string>& allowed,
                 const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    if (!allowed.count(key)) return FieldError(prefix + key, "unknown field");
  }
  return Status::Ok();
}

Result<std::string> GetString(const nlohmann::json& j, const std::string& field) {
  if (!j.is_string()) return FieldError(field, "must be a string");
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() > kMaxSpecString) return FieldError(field, "longer than 64 KiB");
  if (s.find('\0') != std::string::npos) return FieldError(field, "contains a NUL byte");
  return s;
}

Result<std::string> GetName(const nlohmann::json& j, const std::string& field, NameKind kind) {
  if (!j.is_string()) return FieldError(field, "must be a string");
  const std::string& name = j.get_ref<const std::string&>();
  // The rule bounds the length and refuses NUL itself: its error is the one to give.
  if (Status valid = CheckName(kind, name); !valid.ok()) return FieldError(field, valid.message());
  return name;
}

Result<int64_t> GetInt(const nlohmann::json& j, const std::string& field, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return FieldError(field, "must be an integer");
  // A uint64 above int64's range would read negative through get<int64_t>().
  if (j.is_number_unsigned() &&
      j.get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return FieldError(field, "must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + j.dump());
  }
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) {
    return FieldError(field, "must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + std::to_string(v));
  }
  return v;
}

Result<std::vector<std::string>> GetArgv(const nlohmann::json& j, const std::string& field,
                                         size_t max) {
  if (!j.is_array()) return FieldError(field, "must be a list of arguments");
  if (j.empty()) return FieldError(field, "must not be empty");
  if (j.size() > max) return FieldError(field, "has too many arguments");
  std::vector<std::string> argv;
  for (const auto& a : j) {
    auto v = GetString(a, field);
    if (!v.ok()) return v.status();
    argv.push_back(*v);
  }
  return argv;
}

Status ParseEnv(const nlohmann::json& j, const std::string& field,
                std::map<std::string, std::string>& out) {
  if (!j.is_object()) return FieldError(field, "must be an object of strings");
  if (j.size() > kMaxSpecEnv) return FieldError(field, "has too many entries");
  for (const auto& [key, value] : j.items()) {
    if (!model::IsEnvName(key))
      return FieldError(field + "." + key, "is not a valid variable name");
    auto v = GetString(value, field + "." + key);
    if (!v.ok()) return v.status();
    out[key] = *v;
  }
  return Status::Ok();
}

}  // namespace corral::protocol
