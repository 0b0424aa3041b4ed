// The environments of the API (docs/environments.md), with their JSON codecs: a stored version
// as GET /api/v1/environments[/NAME] and the create, clone and share routes answer it, and the
// clone request. The server builds the views (EnvironmentCatalog's versions), the HTTP API and
// the CLI encode and decode them with these codecs.
//
//   view:  {"name": "pytorch", "version": 3, "owner": "alice" ("" for a built-in),
//           "builtin": false, "projects": ["vision"], "created_at": 1700000000,
//           "runtimes": ["container"], "spec": {...},   (protocol/environment_spec.h)
//           "runs_here": {"nodes": 0, "of": 3, "why_not": "needs ..."}}
//   list:  {"environments": [view, ...]}
//   clone: {"name": "mine", "set": {"image": "ubuntu:24.04", "host": null}}: "set" (optional)
//          is a JSON merge patch (RFC 7396: objects merge, null removes a field) of the
//          source's spec; the new name is "name", never "set.name".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "protocol/environment_spec.h"

namespace corral::protocol {

// On how many registered nodes an environment runs (server/control/environment_runnable.h), and
// why on none: "runs_here": {"nodes": 3, "of": 3} or {"nodes": 0, "of": 3, "why_not": "..."}.
struct EnvironmentRunsHere {
  int nodes = 0;        // nodes that can run it
  int of = 0;           // registered nodes
  std::string why_not;  // when nodes == 0: why
  bool operator==(const EnvironmentRunsHere&) const = default;
};

struct EnvironmentView {
  std::string name;
  int64_t version = 1;                // 1 the first
  std::string owner;                  // "" for a built-in
  std::vector<std::string> projects;  // whose members may use it besides its owner
  Seconds created_at{0};
  EnvironmentSpec spec;  // its runtimes ("runtimes") are the spec's: shown, not read back
  std::optional<EnvironmentRunsHere> runs_here;  // set by the server's list and show
  bool Builtin() const { return owner.empty(); }
  bool operator==(const EnvironmentView&) const = default;
};

nlohmann::json ToJson(const EnvironmentView& env);
nlohmann::json ToJson(const std::vector<EnvironmentView>& envs);
// Errors name the field: "environment: field 'spec': field 'image': ...", "environments: field
// '[0].version': must be >= 1, got 0".
Result<EnvironmentView> ParseEnvironmentView(const nlohmann::json& json);
Result<std::vector<EnvironmentView>> ParseEnvironmentViews(const nlohmann::json& json);

// The spec a clone request `request` makes of its source's `source` spec: the patch applied,
// the request's name given, the result validated as a spec. Errors name the field ("field
// 'set.name': the new name is the request's 'name'", "field 'colour': unknown field").
Result<EnvironmentSpec> CloneEnvironmentSpec(const EnvironmentSpec& source,
                                             const nlohmann::json& request);

}  // namespace corral::protocol
