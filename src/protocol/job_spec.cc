#include "protocol/job_spec.h"

#include <filesystem>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "model/session.h"
#include "model/warning_signal.h"
#include "protocol/batch_script.h"
#include "protocol/environment_ref.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {

namespace {

// The longest output_file / error_file pattern.
constexpr size_t kMaxOutputPath = 4096;

// CheckKeys, except for a spec a server shows: a newer server may show fields this corral
// does not know, and a CLI reading its answer must not fail on them (unknown fields are
// refused where a spec is given: submitted, and stored by this server).
Status CheckKnownKeys(SpecOrigin origin, const nlohmann::json& object,
                      const std::set<std::string>& allowed, const std::string& prefix) {
  return origin == SpecOrigin::kShown ? Status::Ok() : CheckKeys(object, allowed, prefix);
}

// `array` of a spec whose env is `spec_env`.
Result<ArraySpec> ParseArray(const nlohmann::json& a,
                             const std::map<std::string, std::string>& spec_env,
                             SpecOrigin origin) {
  if (!a.is_object()) return FieldError("array", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKnownKeys(origin, a, {"indices", "max_running", "env"}, "array."));
  ArraySpec array;
  if (!a.contains("indices")) return FieldError("array.indices", "is required");
  const nlohmann::json& indices = a["indices"];
  if (!indices.is_array() || indices.empty() ||
      indices.size() > static_cast<size_t>(model::kMaxArrayElements)) {
    return FieldError("array.indices", "must be a list of 1 to " +
                                           std::to_string(model::kMaxArrayElements) + " indices");
  }
  std::set<int> seen;
  for (size_t i = 0; i < indices.size(); ++i) {
    const std::string field = "array.indices[" + std::to_string(i) + "]";
    auto v = GetInt(indices[i], field, 0, std::numeric_limits<int32_t>::max());
    if (!v.ok()) return v.status();
    if (!seen.insert(static_cast<int>(*v)).second) {
      return FieldError(field, std::to_string(*v) + " is repeated");
    }
    array.indices.push_back(static_cast<int>(*v));
  }
  if (a.contains("max_running")) {
    auto v = GetInt(a["max_running"], "array.max_running", 1, model::kMaxArrayElements);
    if (!v.ok()) return v.status();
    array.max_running = static_cast<int>(*v);
  }
  if (a.contains("env")) {
    const nlohmann::json& env = a["env"];
    if (!env.is_array() || env.size() != indices.size()) {
      return FieldError("array.env", "must be a list of one object per index (" +
                                         std::to_string(indices.size()) + ")");
    }
    for (size_t i = 0; i < env.size(); ++i) {
      const std::string field = "array.env[" + std::to_string(i) + "]";
      std::map<std::string, std::string> merged = spec_env;
      CORRAL_RETURN_IF_ERROR(ParseEnv(env[i], field, merged));
      if (merged.size() > kMaxSpecEnv) {
        return FieldError(field, "has too many entries with the spec's env (at most " +
                                     std::to_string(kMaxSpecEnv) + " together)");
      }
      array.env.push_back(std::move(merged));
    }
  }
  return array;
}

// Refuses, in `env` (reported as `field`), the names corral sets in the spec's tasks.
Status CheckReservedNames(const JobSpec& spec, const std::map<std::string, std::string>& env,
                          const std::string& field) {
  for (const auto& [name, value] : env) {
    if (model::IsTaskEnvName(name)) {
      return FieldError(field + "." + name, "is set by corral in every task");
    }
    if (IsDistributed(spec) && model::IsRendezvousEnvName(spec.launcher, name)) {
      return FieldError(field + "." + name, "is set by corral in distributed jobs (launcher " +
                                                std::string(model::LauncherName(spec.launcher)) +
                                                "; docs/distributed.md)");
    }
  }
  return Status::Ok();
}

// Names corral sets itself are refused at submission, not by the agent at every launch: in the
// spec's env and in every array element's.
Status CheckAllReservedNames(const JobSpec& spec) {
  CORRAL_RETURN_IF_ERROR(CheckReservedNames(spec, spec.env, "env"));
  if (spec.array) {
    for (size_t i = 0; i < spec.array->env.size(); ++i) {
      CORRAL_RETURN_IF_ERROR(
          CheckReservedNames(spec, spec.array->env[i], "array.env[" + std::to_string(i) + "]"));
    }
  }
  return Status::Ok();
}

// Every element of an array stores a copy of the spec: bounds what one request can make the
// store hold.
Status CheckArrayBytes(const JobSpec& spec) {
  if (!spec.array) return Status::Ok();
  constexpr size_t kMaxArrayBytes = size_t{64} << 20;
  size_t bytes = ToJson(spec).dump().size() * spec.array->indices.size();
  for (const auto& env : spec.array->env) bytes += nlohmann::json(env).dump().size();
  if (bytes > kMaxArrayBytes) {
    return FieldError("array.indices", "this spec copied once per element is more than " +
                                           std::to_string(kMaxArrayBytes >> 20) +
                                           " MiB: fewer elements, or a smaller spec");
  }
  return Status::Ok();
}

bool IsLowerHex(const std::string& text) {
  return text.find_first_not_of("0123456789abcdef") == std::string::npos;
}

// {"name": "USR1", "before_s": 90}: the name as model::ParseSignal takes it (or a number),
// before_s 0..kMaxWarningLead (default kDefaultWarningLead).
Result<model::WarningSignal> ParseWarning(const nlohmann::json& s, SpecOrigin origin) {
  if (!s.is_object()) return FieldError("signal", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKnownKeys(origin, s, {"name", "before_s"}, "signal."));
  model::WarningSignal warning;
  if (!s.contains("name")) return FieldError("signal.name", "is required");
  const nlohmann::json& name = s["name"];
  if (!name.is_string() && !name.is_number_integer()) {
    return FieldError("signal.name", "must be a signal's name (USR1) or number");
  }
  auto signal = model::ParseSignal(name.is_string() ? name.get<std::string>() : name.dump(),
                                   "field 'signal.name'");
  if (!signal.ok()) return signal.status();
  warning.signal = *signal;
  if (s.contains("before_s")) {
    auto v = GetInt(s["before_s"], "signal.before_s", 0, model::kMaxWarningLead.value());
    if (!v.ok()) return v.status();
    warning.before = Seconds(*v);
  }
  return warning;
}

// The `script` of a spec: {"text": "#!...", "args": [...]}.
Result<BatchScript> ParseScript(const nlohmann::json& s) {
  if (!s.is_object()) return FieldError("script", "must be an object {\"text\", \"args\"}");
  for (const auto& [key, value] : s.items()) {
    if (key != "text" && key != "args" && key != "name") {
      return FieldError("script." + key, "unknown field");
    }
  }
  BatchScript script;
  if (!s.contains("text")) return FieldError("script.text", "is required");
  auto text = GetString(s["text"], "script.text");
  if (!text.ok()) return text.status();
  if (text->size() > kMaxScriptBytes) {
    return FieldError("script.text",
                      "must be at most " + std::to_string(kMaxScriptBytes) + " bytes");
  }
  if (text->rfind("#!", 0) != 0) {
    return FieldError("script.text", "must start with #! and its interpreter (#!/bin/bash)");
  }
  script.text = *text;
  if (s.contains("name")) {
    auto name = GetString(s["name"], "script.name");
    if (!name.ok()) return name.status();
    script.name = *name;
  }
  if (s.contains("args") && !(s["args"].is_array() && s["args"].empty())) {
    auto args = GetArgv(s["args"], "script.args", kMaxSpecArgv);
    if (!args.ok()) return args.status();
    script.args = std::move(args).value();
  }
  return script;
}

Result<SessionSpec> ParseSession(const nlohmann::json& s, SpecOrigin origin) {
  if (!s.is_object()) return FieldError("session", "must be an object");
  CORRAL_RETURN_IF_ERROR(
      CheckKnownKeys(origin, s, {"idle_timeout_s", "shell", "salt", "token"}, "session."));
  SessionSpec session;
  if (s.contains("shell")) {
    if (!s["shell"].is_boolean()) return FieldError("session.shell", "must be true or false");
    session.shell = s["shell"].get<bool>();
  }
  if (s.contains("idle_timeout_s")) {
    auto v = GetInt(s["idle_timeout_s"], "session.idle_timeout_s", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    if (*v != 0 && *v < model::kMinSessionIdleTimeoutS) {
      return FieldError("session.idle_timeout_s",
                        "must be 0 (never stopped when idle) or at least " +
                            std::to_string(model::kMinSessionIdleTimeoutS) + " seconds, got " +
                            std::to_string(*v));
    }
    session.idle_timeout_s = *v;
  }
  if (origin != SpecOrigin::kStored) {
    for (const char* field : {"salt", "token"}) {
      if (s.contains(field)) {
        return FieldError(std::string("session.") + field,
                          "is generated by the server; leave it out");
      }
    }
    return session;
  }
  // A stored spec: the salt, or (stored before secrets were derived) the secret itself.
  const char* field = s.contains("salt") ? "salt" : "token";
  auto value = s.contains(field) ? GetString(s[field], std::string("session.") + field)
                                 : Result<std::string>(FieldError("session.salt", "is required"));
  if (!value.ok()) return value.status();
  if (value->size() != 64 || !IsLowerHex(*value)) {
    return FieldError(std::string("session.") + field, "must be 64 lowercase hex characters");
  }
  (s.contains("salt") ? session.salt : session.stored_token) = *value;
  return session;
}

// A session runs one HTTP app: one task, one job, no launcher.
Status CheckSessionShape(const JobSpec& spec) {
  if (spec.tasks != 1) return FieldError("tasks", "must be 1 for a session");
  if (spec.array) return FieldError("array", "a session is one job, not an array");
  if (spec.launcher != model::Launcher::kNone) {
    return FieldError("launcher", "must be none for a session");
  }
  if (spec.procs_per_node != 1) return FieldError("procs_per_node", "must be 1 for a session");
  return Status::Ok();
}

// `resources` of a spec whose parts start `procs_per_node` processes each: resources.cpus
// (per process) becomes the part's cpu_milli.
Status ParseResources(const nlohmann::json& r, int procs_per_node, SpecOrigin origin,
                      JobSpec& spec) {
  if (!r.is_object()) return FieldError("resources", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKnownKeys(
      origin, r, {"gpus", "gpu_milli", "gpu_models", "cpus", "cpu_milli", "memory_mib"},
      "resources."));
  model::TaskResources& out = spec.resources;
  int64_t gpus = 0;
  if (r.contains("gpus")) {
    auto v = GetInt(r["gpus"], "resources.gpus", 0, 1024);
    if (!v.ok()) return v.status();
    gpus = *v;
  }
  out.gpus = GpuCount(gpus);
  out.gpu_milli = MilliGpu(gpus > 0 ? 1000 : 0);
  if (r.contains("gpu_milli")) {
    auto v = GetInt(r["gpu_milli"], "resources.gpu_milli", 0, 1000);
    if (!v.ok()) return v.status();
    out.gpu_milli = MilliGpu(*v);
  }
  if (r.contains("cpus") && r.contains("cpu_milli")) {
    return FieldError("resources.cpus",
                      "give resources.cpus (whole CPUs per process) or resources.cpu_milli "
                      "(milli-CPU per task), not both");
  }
  if (r.contains("cpus")) {
    auto v = GetInt(r["cpus"], "resources.cpus", 1, kMaxCpusPerProc);
    if (!v.ok()) return v.status();
    out.cpu = CpuMilli(*v * 1000 * procs_per_node);
    spec.cpu_given = true;
  }
  if (r.contains("cpu_milli")) {
    auto v = GetInt(r["cpu_milli"], "resources.cpu_milli", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    out.cpu = CpuMilli(*v);
    spec.cpu_given = true;
  }
  if (r.contains("memory_mib")) {
    auto v = GetInt(r["memory_mib"], "resources.memory_mib", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    out.memory = MemoryMib(*v);
    spec.memory_given = true;
  }
  if (r.contains("gpu_models")) {
    if (!r["gpu_models"].is_array()) return FieldError("resources.gpu_models", "must be a list");
    for (const auto& m : r["gpu_models"]) {
      auto s = GetString(m, "resources.gpu_models");
      if (!s.ok()) return s.status();
      out.gpu_models.push_back(*s);
    }
  }
  return model::Validate(out);
}

// The field that holds an elastic job's size now: resources.gpus (kGpus) or tasks (kNodes).
const char* ElasticSizeField(model::ElasticUnit unit) {
  return unit == model::ElasticUnit::kGpus ? "resources.gpus" : "tasks";
}

// `elastic` of a spec whose resources and tasks were read (`j` is the whole spec): the bounds,
// and the size field (resources.gpus or tasks) set to MIN when absent. A submitted spec that
// gives the size must give MIN (a pending elastic job asks for MIN); a stored or shown one may
// hold any size in the range.
Result<model::ElasticBounds> ParseElastic(const nlohmann::json& j, SpecOrigin origin,
                                          JobSpec& spec) {
  const nlohmann::json& e = j["elastic"];
  if (!e.is_object())
    return FieldError("elastic", "must be an object {\"unit\", \"min\", \"max\"}");
  CORRAL_RETURN_IF_ERROR(CheckKnownKeys(origin, e, {"unit", "min", "max", "step"}, "elastic."));
  model::ElasticBounds bounds;
  if (e.contains("unit")) {
    auto unit = GetString(e["unit"], "elastic.unit");
    if (!unit.ok()) return unit.status();
    if (*unit == "nodes") {
      bounds.unit = model::ElasticUnit::kNodes;
    } else if (*unit != "gpus") {
      return FieldError("elastic.unit", "must be gpus or nodes, got '" + *unit + "'");
    }
  }
  for (auto [field, target] : {std::pair{"min", &bounds.min}, {"max", &bounds.max}}) {
    const std::string name = std::string("elastic.") + field;
    if (!e.contains(field)) return FieldError(name, "is required");
    auto v = GetInt(e[field], name, 1, model::kMaxElasticSize);
    if (!v.ok()) return v.status();
    *target = static_cast<int>(*v);
  }
  if (bounds.min > bounds.max) {
    return FieldError("elastic.min", "must not exceed elastic.max (" + std::to_string(bounds.max) +
                                         "), got " + std::to_string(bounds.min));
  }
  if (e.contains("step")) {
    auto v = GetInt(e["step"], "elastic.step", 0, model::kMaxElasticSize);
    if (!v.ok()) return v.status();
    bounds.step = static_cast<int>(*v);
  }
  const bool by_gpus = bounds.unit == model::ElasticUnit::kGpus;
  const char* size_field = ElasticSizeField(bounds.unit);
  const bool size_given =
      by_gpus ? j.contains("resources") && j["resources"].contains("gpus") : j.contains("tasks");
  if (!size_given) {
    if (by_gpus) {
      spec.resources.gpus = GpuCount(bounds.min);
      spec.resources.gpu_milli = kWholeGpu;
    } else {
      spec.tasks = bounds.min;
    }
    return bounds;
  }
  const int size = by_gpus ? static_cast<int>(spec.resources.gpus.value()) : spec.tasks;
  if (origin == SpecOrigin::kSubmitted && size != bounds.min) {
    return FieldError(size_field, "must be elastic.min (" + std::to_string(bounds.min) +
                                      ") or left out for an elastic job, got " +
                                      std::to_string(size));
  }
  if (size < bounds.min || size > bounds.max) {
    return FieldError(size_field, "must lie in the elastic range " + std::to_string(bounds.min) +
                                      "-" + std::to_string(bounds.max) + ", got " +
                                      std::to_string(size));
  }
  return bounds;
}

// What an elastic job may be: whole GPUs, not a session; by GPUs, one task; by nodes, tasks of
// at least one GPU.
Status CheckElasticShape(const JobSpec& spec) {
  if (spec.resources.IsShare()) {
    return FieldError("resources.gpu_milli", "an elastic job uses whole GPUs, not a share");
  }
  if (spec.session) return FieldError("elastic", "a session is not elastic");
  if (spec.elastic->unit == model::ElasticUnit::kNodes && spec.resources.gpus.value() < 1) {
    return FieldError("resources.gpus",
                      "must be at least 1 for a job elastic by nodes: it grows by whole GPUs");
  }
  if (spec.elastic->unit == model::ElasticUnit::kGpus && spec.tasks != 1) {
    return FieldError("tasks",
                      "must be 1 for a range of GPUs (one task grows); a gang grows by nodes: "
                      "elastic.unit nodes (corral submit --nodes MIN-MAX)");
  }
  return Status::Ok();
}

}  // namespace

Result<JobSpec> ParseJobSpec(const nlohmann::json& j, SpecOrigin origin) {
  if (!j.is_object()) return InvalidArgument("job spec: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(CheckKnownKeys(origin, j,
                                        {"name",
                                         "project",
                                         "command",
                                         "shell",
                                         "workdir",
                                         "submit_dir",
                                         "env",
                                         "resources",
                                         "tasks",
                                         "priority",
                                         "time_limit_s",
                                         "max_restarts",
                                         "launcher",
                                         "procs_per_node",
                                         "array",
                                         "environment",
                                         "session",
                                         "signal",
                                         "dependency",
                                         "kill_on_invalid_dep",
                                         "script",
                                         "output_file",
                                         "error_file",
                                         "partition",
                                         "qos",
                                         "elastic",
                                         "checkpoint_grace_s"},
                                        ""));
  JobSpec spec;
  if (j.contains("name")) {
    // A job's name is checked when it is made; a stored or shown one is read as it is (a job
    // made before the rule still recovers and lists).
    auto v = origin == SpecOrigin::kSubmitted ? GetName(j["name"], "name", NameKind::kJob)
                                              : GetString(j["name"], "name");
    if (!v.ok()) return v.status();
    spec.name = *v;
  }
  if (j.contains("project")) {
    auto v = GetString(j["project"], "project");
    if (!v.ok()) return v.status();
    spec.project = *v;
  }
  if (j.contains("shell")) {
    if (!j["shell"].is_boolean()) return FieldError("shell", "must be true or false");
    spec.shell = j["shell"].get<bool>();
  }
  if (j.contains("environment")) {
    auto v = GetString(j["environment"], "environment");
    if (!v.ok()) return v.status();
    auto ref = ParseEnvironmentRef(*v, "environment");
    if (!ref.ok()) return ref.status();
    spec.environment = *v;
  }
  if (j.contains("script")) {
    auto script = ParseScript(j["script"]);
    if (!script.ok()) return script.status();
    spec.script = std::move(script).value();
    if (j.contains("command")) {
      return FieldError("command",
                        "a batch job runs its script: give its arguments as script.args");
    }
  }
  if (j.contains("command")) {
    auto argv = GetArgv(j["command"], "command", kMaxSpecArgv);
    if (!argv.ok()) return argv.status();
    spec.command = std::move(argv).value();
  }
  if (j.contains("workdir")) {
    auto v = GetString(j["workdir"], "workdir");
    if (!v.ok()) return v.status();
    if (!v->empty() && (*v)[0] != '/') return FieldError("workdir", "must be an absolute path");
    spec.workdir = *v;
  }
  if (j.contains("submit_dir")) {
    auto v = GetString(j["submit_dir"], "submit_dir");
    if (!v.ok()) return v.status();
    if (!v->empty() && (*v)[0] != '/') {
      return FieldError("submit_dir", "must be an absolute path");
    }
    spec.submit_dir = *v;
  }
  if (j.contains("env")) CORRAL_RETURN_IF_ERROR(ParseEnv(j["env"], "env", spec.env));
  if (j.contains("procs_per_node")) {
    auto v = GetInt(j["procs_per_node"], "procs_per_node", 1, model::kMaxProcsPerNode);
    if (!v.ok()) return v.status();
    spec.procs_per_node = static_cast<int>(*v);
  }
  // After procs_per_node: resources.cpus counts per process.
  if (j.contains("resources")) {
    // A share in an elastic job is said as such, before the resources' own check (whose size
    // the elastic range sets later) would call it a share of zero GPUs.
    const nlohmann::json& r = j["resources"];
    if (j.contains("elastic") && r.is_object() && r.contains("gpu_milli") &&
        r["gpu_milli"].is_number_integer() && r["gpu_milli"] != kWholeGpu.value()) {
      return FieldError("resources.gpu_milli", "an elastic job uses whole GPUs, not a share");
    }
    CORRAL_RETURN_IF_ERROR(ParseResources(r, spec.procs_per_node, origin, spec));
  }
  if (j.contains("tasks")) {
    auto v = GetInt(j["tasks"], "tasks", 1, 4096);
    if (!v.ok()) return v.status();
    spec.tasks = static_cast<int>(*v);
  }
  if (j.contains("priority")) {
    auto v = GetInt(j["priority"], "priority", -1000, 1000);
    if (!v.ok()) return v.status();
    spec.priority = static_cast<int>(*v);
  }
  if (j.contains("time_limit_s")) {
    auto v = GetInt(j["time_limit_s"], "time_limit_s", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    spec.time_limit_s = *v;
  }
  if (j.contains("max_restarts")) {
    auto v = GetInt(j["max_restarts"], "max_restarts", 0, 1000);
    if (!v.ok()) return v.status();
    spec.max_restarts = static_cast<int>(*v);
  }
  if (j.contains("checkpoint_grace_s")) {
    auto v = GetInt(j["checkpoint_grace_s"], "checkpoint_grace_s", 0, kMaxCheckpointGrace.value());
    if (!v.ok()) return v.status();
    spec.checkpoint_grace = Seconds(*v);
  }
  if (j.contains("launcher")) {
    auto v = GetString(j["launcher"], "launcher");
    if (!v.ok()) return v.status();
    auto launcher = model::ParseLauncher(*v);
    if (!launcher.ok()) return FieldError("launcher", launcher.status().message());
    spec.launcher = *launcher;
  }
  // After resources and tasks: it may set the size.
  if (j.contains("elastic")) {
    auto elastic = ParseElastic(j, origin, spec);
    if (!elastic.ok()) return elastic.status();
    spec.elastic = *elastic;
  }
  if (j.contains("array")) {
    auto array = ParseArray(j["array"], spec.env, origin);
    if (!array.ok()) return array.status();
    spec.array = std::move(array).value();
  }
  if (j.contains("session")) {
    auto session = ParseSession(j["session"], origin);
    if (!session.ok()) return session.status();
    spec.session = std::move(session).value();
  }
  for (auto [field, target] :
       {std::pair{"output_file", &spec.output_file}, {"error_file", &spec.error_file}}) {
    if (!j.contains(field)) continue;
    auto v = GetString(j[field], field);
    if (!v.ok()) return v.status();
    if (v->empty() || v->size() > kMaxOutputPath) {
      return FieldError(field, "must be a file name pattern of 1.." +
                                   std::to_string(kMaxOutputPath) + " characters");
    }
    *target = *v;
  }
  for (auto [field, target] : {std::pair{"partition", &spec.partition}, {"qos", &spec.qos}}) {
    if (!j.contains(field)) continue;
    auto v = GetString(j[field], field);
    if (!v.ok()) return v.status();
    *target = *v;
  }
  // A shell without a command runs the task user's login shell; a batch job runs its script.
  if (spec.command.empty() && spec.environment.empty() && !spec.script &&
      !(spec.session && spec.session->shell)) {
    return FieldError("command", "is required (or an environment with a default command)");
  }
  if (j.contains("signal")) {
    auto warning = ParseWarning(j["signal"], origin);
    if (!warning.ok()) return warning.status();
    spec.warning_signal = *warning;
  }
  if (j.contains("dependency")) {
    auto v = GetString(j["dependency"], "dependency");
    if (!v.ok()) return v.status();
    auto dependencies = model::ParseDependencies(*v, "field 'dependency'");
    if (!dependencies.ok()) return dependencies.status();
    spec.dependencies = std::move(dependencies).value();
  }
  if (j.contains("kill_on_invalid_dep")) {
    if (!j["kill_on_invalid_dep"].is_boolean()) {
      return FieldError("kill_on_invalid_dep", "must be true or false");
    }
    spec.kill_on_invalid_dep = j["kill_on_invalid_dep"].get<bool>();
  }
  CORRAL_RETURN_IF_ERROR(CheckJobSpec(spec));
  if (origin != SpecOrigin::kSubmitted) {
    // Stored before defaults existed, or with them applied: what it holds is the request.
    spec.cpu_given = spec.memory_given = true;
  }
  return spec;
}

Status CheckJobSpec(const JobSpec& spec) {
  if (spec.warning_signal && spec.time_limit_s <= 0) {
    return FieldError("signal",
                      "needs a time limit (time_limit_s): it is sent that long before it");
  }
  if (spec.warning_signal && spec.warning_signal->before.value() >= spec.time_limit_s) {
    return FieldError("signal.before_s", "must be less than time_limit_s (" +
                                             std::to_string(spec.time_limit_s) + "), got " +
                                             std::to_string(spec.warning_signal->before.value()) +
                                             ": it would be sent at the start");
  }
  if (spec.shell && !spec.command.empty() && spec.command.size() != 1) {
    return FieldError("command", "must be one string when shell is true");
  }
  if (spec.launcher == model::Launcher::kTorchrun && spec.shell) {
    return FieldError("shell",
                      "must be false with launcher torchrun (the command is the script "
                      "torchrun runs, and its arguments)");
  }
  if (IsDistributed(spec) && PortsOf(spec) > model::kRendezvousPortCount) {
    return FieldError("procs_per_node",
                      "tf needs a port per rank: " + std::to_string(PortsOf(spec)) +
                          " ranks are more than the " +
                          std::to_string(model::kRendezvousPortCount) + " ports corral hands out");
  }
  if (spec.session) CORRAL_RETURN_IF_ERROR(CheckSessionShape(spec));
  if (spec.elastic) CORRAL_RETURN_IF_ERROR(CheckElasticShape(spec));
  if (spec.script && spec.session) {
    return FieldError("script", "a session runs its environment's command, not a script");
  }
  if (spec.script && spec.shell) {
    return FieldError("shell", "must be false for a batch script (its #! line names its shell)");
  }
  if (spec.script && spec.launcher == model::Launcher::kTorchrun) {
    return FieldError("launcher",
                      "torchrun runs a Python script, not a batch script: run torchrun from the "
                      "script, or submit the Python script with --launcher torchrun");
  }
  CORRAL_RETURN_IF_ERROR(CheckAllReservedNames(spec));
  return CheckArrayBytes(spec);
}

std::string WorkdirFrom(const std::string& submit_dir, const std::string& workdir) {
  if (workdir.empty() || workdir[0] == '/' || submit_dir.empty() || submit_dir[0] != '/') {
    return workdir;
  }
  std::filesystem::path resolved = (std::filesystem::path(submit_dir) / workdir).lexically_normal();
  if (!resolved.has_filename() && resolved.has_parent_path()) resolved = resolved.parent_path();
  return resolved.string();
}

nlohmann::json SignalJson(const model::WarningSignal& warning) {
  return {{"name", model::SignalName(warning.signal)}, {"before_s", warning.before.value()}};
}

nlohmann::json ToJson(const JobSpec& s) {
  nlohmann::json resources = {{"gpus", s.resources.gpus.value()},
                              {"gpu_milli", s.resources.gpu_milli.value()},
                              {"cpu_milli", s.resources.cpu.value()},
                              {"memory_mib", s.resources.memory.value()}};
  if (!s.resources.gpu_models.empty()) resources["gpu_models"] = s.resources.gpu_models;
  nlohmann::json j = {{"name", s.name},
                      {"project", s.project},
                      {"shell", s.shell},
                      {"workdir", s.workdir},
                      {"env", s.env},
                      {"resources", resources},
                      {"tasks", s.tasks},
                      {"priority", s.priority},
                      {"time_limit_s", s.time_limit_s},
                      {"max_restarts", s.max_restarts},
                      {"launcher", std::string(model::LauncherName(s.launcher))},
                      {"procs_per_node", s.procs_per_node}};
  // Empty only when the environment gives it, as ParseJobSpec reads an absent command.
  if (!s.command.empty()) j["command"] = s.command;
  if (!s.environment.empty()) j["environment"] = s.environment;
  if (!s.submit_dir.empty()) j["submit_dir"] = s.submit_dir;
  if (s.warning_signal) {
    j["signal"] = SignalJson(*s.warning_signal);
  }
  if (s.script) {
    j["script"] = {{"text", s.script->text}, {"args", s.script->args}};
    if (!s.script->name.empty()) j["script"]["name"] = s.script->name;
  }
  for (const auto& [field, value] : {std::pair{"output_file", &s.output_file},
                                     {"error_file", &s.error_file},
                                     {"partition", &s.partition},
                                     {"qos", &s.qos}}) {
    if (!value->empty()) j[field] = *value;
  }
  if (!s.dependencies.empty()) j["dependency"] = model::ToString(s.dependencies);
  if (s.elastic) j["elastic"] = ElasticJson(*s.elastic);
  if (s.kill_on_invalid_dep) j["kill_on_invalid_dep"] = true;
  if (s.checkpoint_grace) j["checkpoint_grace_s"] = s.checkpoint_grace->value();
  if (s.session) {
    nlohmann::json session = nlohmann::json::object();
    if (s.session->idle_timeout_s) session["idle_timeout_s"] = *s.session->idle_timeout_s;
    if (s.session->shell) session["shell"] = true;
    if (!s.session->salt.empty()) session["salt"] = s.session->salt;
    if (!s.session->stored_token.empty()) session["token"] = s.session->stored_token;
    j["session"] = session;
  }
  return j;
}

nlohmann::json ElasticJson(const model::ElasticBounds& elastic) {
  return {{"unit", std::string(model::ElasticUnitName(elastic.unit))},
          {"min", elastic.min},
          {"max", elastic.max},
          {"step", elastic.step}};
}

int MaxTasks(const JobSpec& spec) {
  return spec.elastic && spec.elastic->unit == model::ElasticUnit::kNodes ? spec.elastic->max
                                                                          : spec.tasks;
}

int PortsOf(const JobSpec& spec) {
  return spec.launcher == model::Launcher::kTf ? MaxTasks(spec) * spec.procs_per_node : 1;
}

bool IsDistributed(const JobSpec& spec) {
  return MaxTasks(spec) > 1 || spec.launcher != model::Launcher::kNone || spec.procs_per_node > 1;
}

std::vector<ArrayElement> ArrayElements(const JobSpec& spec) {
  std::vector<ArrayElement> elements;
  if (!spec.array) return elements;
  JobSpec element = spec;
  element.array.reset();
  for (size_t i = 0; i < spec.array->indices.size(); ++i) {
    if (!spec.array->env.empty()) element.env = spec.array->env[i];  // merged when parsed
    elements.push_back({spec.array->indices[i], element});
  }
  return elements;
}

}  // namespace corral::protocol
