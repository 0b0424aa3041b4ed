// Reading configuration and spec files written by people: JSON, or YAML (a superset people find
// easier to write), into one nlohmann::json value.
#pragma once

#include <cstddef>
#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace corral {

// Limits of a file people give (a spec, a sweep, a policy), beside ParseJson's depth limit: its
// size, and what YAML aliases may expand to.
inline constexpr size_t kMaxConfigFileBytes = size_t{16} << 20;
// A YAML file's size: yaml-cpp builds its tree whole, at a few hundred bytes per byte of text.
inline constexpr size_t kMaxYamlFileBytes = size_t{256} << 10;
inline constexpr size_t kMaxYamlValues = 1'000'000;

// Parses `text` as JSON, else as YAML. YAML scalars become booleans (true/false), integers,
// numbers (decimal, with a fraction or exponent) or strings; a quoted scalar is always a string.
// InvalidArgument naming `what` (e.g. the file) when it is neither (text that is not UTF-8 is
// neither), or nests deeper than kMaxJsonDepth; ResourceExhausted naming the limit when it is over
// kMaxConfigFileBytes, YAML over kMaxYamlFileBytes, or YAML that expands to more than
// kMaxYamlValues values (keys included) or kMaxConfigFileBytes bytes of text (keys included).
Result<nlohmann::json> ParseJsonOrYaml(const std::string& text, const std::string& what);

// Reads `path` (at most kMaxConfigFileBytes of it) and parses it as above. IoError naming the
// path when it cannot be read.
Result<nlohmann::json> ReadJsonOrYamlFile(const std::string& path);

}  // namespace corral
