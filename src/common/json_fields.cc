#include "common/json_fields.h"

namespace corral {

Status FieldReader::Bad(const std::string& field, const std::string& why) const {
  return InvalidArgument(what_ + ": field '" + prefix_ + field + "': " + why);
}

Status FieldReader::Within(const Status& error) const {
  if (error.ok()) return error;
  return Status(error.code(), what_ + ": " + error.message());
}

const nlohmann::json* FieldReader::Find(const char* field) const {
  auto it = object_.find(field);
  return it == object_.end() || it->is_null() ? nullptr : &*it;
}

Status FieldReader::Int(const char* field, bool required, int64_t& out, int64_t min,
                        int64_t max) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_number_integer()) return Bad(field, "must be an integer");
  // A uint64 above int64's range reads negative through get<int64_t>(): refuse it as such.
  if (v->is_number_unsigned() &&
      v->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return Bad(field, "out of range");
  }
  const int64_t value = v->get<int64_t>();
  if (value < min || value > max) {
    // "must be >= 0" when only the minimum binds (no 19-digit maximum in an error).
    const std::string range = max == std::numeric_limits<int64_t>::max()
                                  ? ">= " + std::to_string(min)
                                  : "in " + std::to_string(min) + ".." + std::to_string(max);
    return Bad(field, "must be " + range + ", got " + std::to_string(value));
  }
  out = value;
  return Status::Ok();
}

Status FieldReader::RequiredInt(const char* field, int& out) const {
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(Int(field, true, v));
  if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
    return Bad(field, "out of range");
  }
  out = static_cast<int>(v);
  return Status::Ok();
}

Status FieldReader::OptionalInt(const char* field, std::optional<int>& out, int64_t min,
                                int64_t max) const {
  std::optional<int64_t> v;
  CORRAL_RETURN_IF_ERROR(OptionalInt64(field, v, min, max));
  if (v) out = static_cast<int>(*v);
  return Status::Ok();
}

Status FieldReader::OptionalInt64(const char* field, std::optional<int64_t>& out, int64_t min,
                                  int64_t max) const {
  if (Find(field) == nullptr) return Status::Ok();
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(Int(field, true, v, min, max));
  out = v;
  return Status::Ok();
}

Status FieldReader::Secs(const char* field, bool required, Seconds& out) const {
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(Int(field, required, v, 0));
  if (Find(field) != nullptr) out = Seconds(v);
  return Status::Ok();
}

Status FieldReader::OptionalSecs(const char* field, std::optional<Seconds>& out) const {
  std::optional<int64_t> v;
  CORRAL_RETURN_IF_ERROR(OptionalInt64(field, v, 0));
  if (v) out = Seconds(*v);
  return Status::Ok();
}

Status FieldReader::Bool(const char* field, bool& out) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return Status::Ok();
  if (!v->is_boolean()) return Bad(field, "must be true or false");
  out = v->get<bool>();
  return Status::Ok();
}

Status FieldReader::Number(const char* field, bool required, double& out, double min) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_number()) return Bad(field, "must be a number");
  const double value = v->get<double>();
  if (value < min) {
    return Bad(field, "must be >= " + nlohmann::json(min).dump() + ", got " + v->dump());
  }
  out = value;
  return Status::Ok();
}

Status FieldReader::String(const char* field, bool required, std::string& out) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_string()) return Bad(field, "must be a string");
  out = v->get<std::string>();
  return Status::Ok();
}

Status FieldReader::Strings(const char* field, bool required, std::vector<std::string>& out) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_array()) return Bad(field, "must be an array of strings");
  std::vector<std::string> strings;
  for (const nlohmann::json& s : *v) {
    if (!s.is_string()) return Bad(field, "must be an array of strings");
    strings.push_back(s.get<std::string>());
  }
  out = std::move(strings);
  return Status::Ok();
}

Status FieldReader::StringMap(const char* field, std::map<std::string, std::string>& out) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return Status::Ok();
  if (!v->is_object()) return Bad(field, "must be an object of strings");
  for (const auto& [name, value] : v->items()) {
    if (!value.is_string()) return Bad(std::string(field) + "." + name, "must be a string");
    out[name] = value.get<std::string>();
  }
  return Status::Ok();
}

Status FieldReader::Object(const char* field, bool required,
                           const std::function<Status(const FieldReader&)>& read) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_object()) return Bad(field, "must be an object");
  return read(FieldReader(*v, what_, prefix_ + field + "."));
}

Status FieldReader::Objects(const char* field, bool required, size_t max_items,
                            const std::function<Status(const FieldReader&, size_t)>& read) const {
  const nlohmann::json* v = Find(field);
  if (v == nullptr) return required ? Bad(field, "is required") : Status::Ok();
  if (!v->is_array()) return Bad(field, "must be an array");
  if (v->size() > max_items) {
    return Bad(field,
               "at most " + std::to_string(max_items) + " items, got " + std::to_string(v->size()));
  }
  for (size_t i = 0; i < v->size(); ++i) {
    const std::string item = std::string(field) + "[" + std::to_string(i) + "]";
    if (!(*v)[i].is_object()) return Bad(item, "must be an object");
    CORRAL_RETURN_IF_ERROR(read(FieldReader((*v)[i], what_, prefix_ + item + "."), i));
  }
  return Status::Ok();
}

Result<FieldReader> ReadObject(const nlohmann::json& json, const std::string& what) {
  if (!json.is_object()) return InvalidArgument(what + ": must be a JSON object");
  return FieldReader(json, what);
}

}  // namespace corral
