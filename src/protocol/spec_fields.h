// Field readers shared by the documents people write (job and environment specs, the API's
// requests that make a user, project or token): each checks one JSON value and names the field
// in its error ("field 'resources.gpus': must be an integer"). Unlike json_fields.h's
// FieldReader, which reads agent messages (fields it does not know are ignored, for rolling
// upgrades; null reads as absent; strings are unbounded, log chunks included), these serve
// documents people type: callers refuse unknown fields (CheckKeys), and strings, argv and env
// are bounded.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <nlohmann/json.hpp>
#include <set>
#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/names.h"

namespace corral::protocol {

inline constexpr size_t kMaxSpecEnv = 256;           // variables of one env object
inline constexpr size_t kMaxSpecArgv = 4096;         // entries of one command
inline constexpr size_t kMaxSpecString = 64 * 1024;  // bytes of one string

// InvalidArgument("field 'FIELD': WHAT").
Status FieldError(const std::string& field, const std::string& what);
// Every key of `object` must be in `allowed`; an unknown one is named as prefix + key.
Status CheckKeys(const nlohmann::json& object, const std::set<std::string>& allowed,
                 const std::string& prefix);
// A string of at most kMaxSpecString bytes without NUL.
Result<std::string> GetString(const nlohmann::json& j, const std::string& field);
// A string that follows the rule of `kind` (names.h): "field 'name': a user name must be ...".
Result<std::string> GetName(const nlohmann::json& j, const std::string& field, NameKind kind);
// An integer in [lo, hi].
Result<int64_t> GetInt(const nlohmann::json& j, const std::string& field, int64_t lo, int64_t hi);
// A non-empty list of at most `max` strings (an argv).
Result<std::vector<std::string>> GetArgv(const nlohmann::json& j, const std::string& field,
                                         size_t max);
// Variables of `field` (an object of strings, at most kMaxSpecEnv, valid names) into `out`,
// whose entries they replace.
Status ParseEnv(const nlohmann::json& j, const std::string& field,
                std::map<std::string, std::string>& out);

}  // namespace corral::protocol
