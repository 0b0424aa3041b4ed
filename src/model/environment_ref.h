// How jobs, the API and the CLI name an environment asset (docs/environments.md): "NAME" (the
// latest version) or "NAME@VERSION".
#pragma once

#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace corral::model {

// 1..63 of [a-z0-9-], not starting with '-': safe in URL paths, file names and argv.
bool IsEnvironmentName(const std::string& name);

struct EnvironmentRef {
  std::string name;
  std::optional<int64_t> version;  // none: the latest
};

// Parses "NAME" or "NAME@VERSION" (VERSION >= 1); `field` names the field in errors
// ("field 'environment': must be NAME or NAME@VERSION ...").
Result<EnvironmentRef> ParseEnvironmentRef(const std::string& text, const std::string& field);

// "NAME@VERSION".
std::string ToString(const std::string& name, int64_t version);

}  // namespace corral::model
