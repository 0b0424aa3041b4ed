// Reading configuration and spec files written by people: JSON, or YAML (a superset people find
// easier to write), into one nlohmann::json value.
#pragma once

#include <nlohmann/json.hpp>
#include <string>

#include "common/status.h"

namespace corral {

// Parses `text` as JSON, else as YAML. YAML scalars become booleans (true/false), integers,
// numbers (decimal, with a fraction or exponent) or strings; a quoted scalar is always a string.
// InvalidArgument naming `what` (e.g. the file) when it is neither.
Result<nlohmann::json> ParseJsonOrYaml(const std::string& text, const std::string& what);

// Reads `path` and parses it as above. IoError naming the path when it cannot be read.
Result<nlohmann::json> ReadJsonOrYamlFile(const std::string& path);

}  // namespace corral
