#include "protocol/api_environment.h"

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_lists.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

Result<EnvironmentView> ReadEnvironment(const FieldReader& r) {
  EnvironmentView e;
  CORRAL_RETURN_IF_ERROR(r.String("name", true, e.name));
  CORRAL_RETURN_IF_ERROR(r.Int("version", true, e.version, 1));
  CORRAL_RETURN_IF_ERROR(r.String("owner", true, e.owner));
  bool builtin = false;
  CORRAL_RETURN_IF_ERROR(r.Bool("builtin", builtin));
  if (builtin != e.Builtin()) return r.Bad("builtin", "must be true exactly when 'owner' is \"\"");
  CORRAL_RETURN_IF_ERROR(r.Strings("projects", true, e.projects));
  int64_t created = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("created_at", true, created, 0));
  e.created_at = Seconds(created);
  CORRAL_RETURN_IF_ERROR(r.Object("runs_here", false, [&](const FieldReader& h) {
    EnvironmentRunsHere here;
    int64_t v = 0;
    CORRAL_RETURN_IF_ERROR(h.Int("nodes", true, v, 0));
    here.nodes = static_cast<int>(v);
    CORRAL_RETURN_IF_ERROR(h.Int("of", true, v, 0));
    here.of = static_cast<int>(v);
    CORRAL_RETURN_IF_ERROR(h.String("why_not", false, here.why_not));
    e.runs_here = here;
    return Status::Ok();
  }));
  const json* spec = r.Find("spec");
  if (spec == nullptr) return r.Bad("spec", "is required");
  auto parsed = ParseEnvironmentSpec(*spec);
  if (!parsed.ok()) return r.Bad("spec", parsed.status().message());
  e.spec = std::move(parsed).value();
  if (e.spec.name != e.name) return r.Bad("spec", "names '" + e.spec.name + "', not " + e.name);
  return e;
}

}  // namespace

json ToJson(const EnvironmentView& e) {
  json out = {{"name", e.name},
              {"version", e.version},
              {"owner", e.owner},
              {"builtin", e.Builtin()},
              {"projects", e.projects},
              {"created_at", e.created_at.value()},
              {"runtimes", e.spec.Runtimes()},
              {"spec", ToJson(e.spec)}};
  if (e.runs_here) {
    out["runs_here"] = {{"nodes", e.runs_here->nodes}, {"of", e.runs_here->of}};
    if (!e.runs_here->why_not.empty()) out["runs_here"]["why_not"] = e.runs_here->why_not;
  }
  return out;
}

json ToJson(const std::vector<EnvironmentView>& envs) {
  return {{"environments", ListJson(envs, [](const EnvironmentView& e) { return ToJson(e); })}};
}

Result<EnvironmentView> ParseEnvironmentView(const json& json) {
  auto r = ReadObject(json, "environment");
  if (!r.ok()) return r.status();
  return ReadEnvironment(*r);
}

Result<std::vector<EnvironmentView>> ParseEnvironmentViews(const json& json) {
  if (!json.is_object() || !json.contains("environments")) {
    return InvalidArgument("environments: must be an object with \"environments\"");
  }
  return ReadList<EnvironmentView>(json["environments"], "environments", ReadEnvironment);
}

Result<EnvironmentSpec> CloneEnvironmentSpec(const EnvironmentSpec& source, const json& request) {
  if (!request.is_object()) return InvalidArgument("clone request: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(request, {"name", "set"}, ""));
  if (!request.contains("name")) return FieldError("name", "is required");
  auto name = GetName(request["name"], "name", NameKind::kEnvironment);
  if (!name.ok()) return name.status();
  json spec = ToJson(source);
  if (request.contains("set")) {
    const json& set = request["set"];
    if (!set.is_object()) return FieldError("set", "must be an object of spec fields");
    if (set.contains("name")) return FieldError("set.name", "the new name is the request's 'name'");
    spec.merge_patch(set);
  }
  spec["name"] = *name;
  return ParseEnvironmentSpec(spec);
}

}  // namespace corral::protocol
