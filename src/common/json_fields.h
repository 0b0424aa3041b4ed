// The one reader of JSON fields for corral's codecs (the agent protocol's, typed allocations'):
// every check of a field's presence, type and range goes through it, so every codec's errors
// read alike and name the field by its full path: "heartbeat: field 'tasks[3].state': unknown
// state 'done'".
#pragma once

#include <cstdint>
#include <functional>
#include <limits>
#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral {

// Reads the fields of one JSON object. `what` names the message ("heartbeat", "task launch"),
// `prefix` the object's path inside it ("tasks[3].", "distributed."); both go into every error.
// A field that is absent or null counts as absent. The reader borrows `object`: it must outlive
// the reader. Not thread-safe (a value type over a const object: use one per thread).
class FieldReader {
 public:
  FieldReader(const nlohmann::json& object, std::string what, std::string prefix = "")
      : object_(object), what_(std::move(what)), prefix_(std::move(prefix)) {}

  // InvalidArgument "<what>: field '<prefix><field>': <why>".
  Status Bad(const std::string& field, const std::string& why) const;
  // A field's full path ("tasks[3].end_cause"), for a parser that names the field itself
  // (model::ParseTaskEndCause); `Within` then prefixes its error with "<what>: " (OK stays OK).
  std::string Path(const char* field) const { return prefix_ + field; }
  Status Within(const Status& error) const;

  // An integer in [min, max]; left as is when absent and not required.
  Status Int(const char* field, bool required, int64_t& out,
             int64_t min = std::numeric_limits<int64_t>::min(),
             int64_t max = std::numeric_limits<int64_t>::max()) const;
  // A required integer that fits an int.
  Status RequiredInt(const char* field, int& out) const;
  // An optional integer in [min, max] (absent: nullopt), as int.
  Status OptionalInt(const char* field, std::optional<int>& out,
                     int64_t min = std::numeric_limits<int>::min(),
                     int64_t max = std::numeric_limits<int>::max()) const;
  Status OptionalInt64(const char* field, std::optional<int64_t>& out,
                       int64_t min = std::numeric_limits<int64_t>::min(),
                       int64_t max = std::numeric_limits<int64_t>::max()) const;
  // Whole seconds >= 0 (a duration or a clock time): left as is when absent and not required;
  // the optional form leaves `out` as is when absent.
  Status Secs(const char* field, bool required, Seconds& out) const;
  Status OptionalSecs(const char* field, std::optional<Seconds>& out) const;
  Status Bool(const char* field, bool& out) const;
  // A number (integer or not) >= min; left as is when absent and not required.
  Status Number(const char* field, bool required, double& out,
                double min = std::numeric_limits<double>::lowest()) const;
  Status String(const char* field, bool required, std::string& out) const;
  // An array of strings (absent and not required: `out` left as is).
  Status Strings(const char* field, bool required, std::vector<std::string>& out) const;
  // An object of strings ("labels", "env").
  Status StringMap(const char* field, std::map<std::string, std::string>& out) const;
  // The field's value; nullptr when absent or null.
  const nlohmann::json* Find(const char* field) const;

  // The object in `field` (required: an error when absent): `read` gets a reader whose errors
  // say "<prefix><field>.". Absent and not required: `read` is not called.
  Status Object(const char* field, bool required,
                const std::function<Status(const FieldReader&)>& read) const;
  // The objects of the array in `field`, at most `max_items`: `read` gets each with its index
  // and a reader whose errors say "<prefix><field>[i].".
  Status Objects(const char* field, bool required, size_t max_items,
                 const std::function<Status(const FieldReader&, size_t)>& read) const;

 private:
  const nlohmann::json& object_;
  std::string what_;
  std::string prefix_;
};

// The reader of a message's top-level object; InvalidArgument "<what>: must be a JSON object"
// when `json` is not one.
Result<FieldReader> ReadObject(const nlohmann::json& json, const std::string& what);

}  // namespace corral
