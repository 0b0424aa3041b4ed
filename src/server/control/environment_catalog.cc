#include "server/control/environment_catalog.h"

#include <algorithm>

#include "protocol/spec_fields.h"

namespace corral::server {

using protocol::FieldError;

protocol::EnvironmentView ViewOf(const EnvironmentVersion& env) {
  return {.name = env.record.name,
          .version = env.record.version,
          .owner = env.record.owner,
          .projects = env.record.projects,
          .created_at = env.record.created_at,
          .spec = env.spec};
}

bool EnvironmentCatalog::MaySee(const Principal& who, const store::EnvironmentRecord& record) {
  if (who.admin || record.owner.empty() || record.owner == who.name) return true;
  return std::any_of(record.projects.begin(), record.projects.end(), [&](const std::string& p) {
    return std::find(who.projects.begin(), who.projects.end(), p) != who.projects.end();
  });
}

Result<EnvironmentVersion> EnvironmentCatalog::Parsed(store::EnvironmentRecord record) {
  auto spec = ParseEnvironmentSpec(nlohmann::json::parse(record.spec_json, nullptr, false));
  if (!spec.ok()) {
    return Status(StatusCode::kInternal, "stored environment '" +
                                             ToString(record.name, record.version) +
                                             "' is invalid: " + spec.status().message());
  }
  return EnvironmentVersion{std::move(record), std::move(spec).value()};
}

Result<EnvironmentCatalog::BuiltinsLoaded> EnvironmentCatalog::LoadBuiltins(
    const std::vector<EnvironmentSpec>& specs) {
  BuiltinsLoaded loaded;
  for (const EnvironmentSpec& spec : specs) {
    const std::string json = ToJson(spec).dump();
    auto latest = store_.GetEnvironment(spec.name, std::nullopt);
    if (!latest.ok() && latest.status().code() != StatusCode::kNotFound) return latest.status();
    if (latest.ok() && !latest->owner.empty()) {
      loaded.skipped.push_back("built-in environment '" + spec.name + "' not loaded: user '" +
                               latest->owner + "' owns that name");
      continue;
    }
    if (latest.ok() && latest->spec_json == json) continue;
    auto stored = store_.AddEnvironmentVersion(spec.name, "", json, clock_.Now());
    if (!stored.ok()) return stored.status();
    loaded.added.push_back(ToString(stored->name, stored->version));
  }
  return loaded;
}

Result<std::vector<EnvironmentVersion>> EnvironmentCatalog::List(const Principal& who) {
  auto records = store_.ListEnvironments();
  if (!records.ok()) return records.status();
  std::vector<EnvironmentVersion> out;
  for (store::EnvironmentRecord& r : *records) {
    if (!MaySee(who, r)) continue;
    auto env = Parsed(std::move(r));
    if (!env.ok()) return env.status();
    out.push_back(std::move(env).value());
  }
  return out;
}

Result<EnvironmentVersion> EnvironmentCatalog::Get(const Principal& who, const std::string& name,
                                                   std::optional<int64_t> version) {
  auto record = store_.GetEnvironment(name, version);
  if (!record.ok()) return record.status();
  if (!MaySee(who, *record)) return NotFound("environment '" + name + "' not found");
  return Parsed(std::move(record).value());
}

Result<EnvironmentVersion> EnvironmentCatalog::Resolve(const Principal& who, const std::string& ref,
                                                       const std::string& field) {
  auto parsed = ParseEnvironmentRef(ref, field);
  if (!parsed.ok()) return parsed.status();
  auto env = Get(who, parsed->name, parsed->version);
  if (!env.ok() && env.status().code() == StatusCode::kNotFound) {
    return FieldError(field, env.status().message());
  }
  return env;
}

Result<EnvironmentVersion> EnvironmentCatalog::Pinned(const std::string& name, int64_t version) {
  auto record = store_.GetEnvironment(name, version);
  if (!record.ok()) return record.status();
  return Parsed(std::move(record).value());
}

Result<EnvironmentVersion> EnvironmentCatalog::Create(const Principal& who,
                                                      const EnvironmentSpec& spec) {
  const std::string json = ToJson(spec).dump();
  if (json.size() > kMaxEnvironmentSpecBytes) {
    return InvalidArgument("environment spec: " + std::to_string(json.size()) +
                           " bytes as stored, over the limit of " +
                           std::to_string(kMaxEnvironmentSpecBytes) +
                           " bytes (every job that runs in it carries its command and variables)");
  }
  auto record = store_.AddEnvironmentVersion(spec.name, who.name, json, clock_.Now());
  if (!record.ok()) return record.status();
  return EnvironmentVersion{std::move(record).value(), spec};
}

Status EnvironmentCatalog::Share(const Principal& who, const std::string& name,
                                 const std::string& project) {
  auto env = Get(who, name, std::nullopt);
  if (!env.ok()) return env.status();
  if (env->record.owner.empty()) {
    return FailedPrecondition("environment '" + name + "' is a built-in: everyone may use it");
  }
  if (!who.admin && env->record.owner != who.name) {
    return PermissionDenied("only its owner '" + env->record.owner +
                            "' or an admin may share environment '" + name + "'");
  }
  if (!who.CanAccessProject(project)) {
    return PermissionDenied("user '" + who.name + "' is not a member of project '" + project + "'");
  }
  return store_.ShareEnvironment(name, project);
}

}  // namespace corral::server
