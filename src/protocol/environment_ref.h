// How jobs, the API and the CLI name an environment asset (docs/environments.md): "NAME" (the
// latest version) or "NAME@VERSION"; and the container image an environment names.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

#include "common/status.h"

namespace corral::protocol {

struct EnvironmentRef {
  std::string name;
  std::optional<int64_t> version;  // none: the latest
};

// Parses "NAME" or "NAME@VERSION" (NAME: an environment name, names.h; VERSION >= 1); `field`
// names the field in errors ("field 'environment': must be NAME or NAME@VERSION, where an
// environment name must be ...").
Result<EnvironmentRef> ParseEnvironmentRef(const std::string& text, const std::string& field);

// "NAME@VERSION".
std::string ToString(const std::string& name, int64_t version);

// The longest container image reference IsImageReference() accepts, in bytes.
inline constexpr size_t kMaxImageReferenceLength = 512;

// Whether `image` is a container image reference corral passes to an engine, e.g.
// "registry:5000/team/name:tag@sha256:...": 1..kMaxImageReferenceLength bytes of letters, digits
// and "._-/:@", starting with a letter or digit. This is a charset check, not a parse of the
// reference grammar (the engine judges the rest); what it guarantees is that the image is one argv
// word that no engine reads as an option (no leading '-') and that holds no blanks or control
// characters. The server checks environment specs with it, the agent every container launch.
bool IsImageReference(const std::string& image);

}  // namespace corral::protocol
