#include "server/job_spec.h"

#include <limits>
#include <set>

namespace corral::server {

namespace {

constexpr size_t kMaxArgs = 4096;
constexpr size_t kMaxEnv = 256;
constexpr size_t kMaxString = 64 * 1024;

Status FieldError(const std::string& field, const std::string& what) {
  return InvalidArgument("field '" + field + "': " + what);
}

Status CheckKeys(const nlohmann::json& object, const std::set<std::string>& allowed,
                 const std::string& prefix) {
  for (const auto& [key, value] : object.items()) {
    if (!allowed.count(key)) return FieldError(prefix + key, "unknown field");
  }
  return Status::Ok();
}

Result<std::string> GetString(const nlohmann::json& j, const std::string& field) {
  if (!j.is_string()) return FieldError(field, "must be a string");
  const std::string& s = j.get_ref<const std::string&>();
  if (s.size() > kMaxString) return FieldError(field, "longer than 64 KiB");
  if (s.find('\0') != std::string::npos) return FieldError(field, "contains a NUL byte");
  return s;
}

Result<int64_t> GetInt(const nlohmann::json& j, const std::string& field, int64_t lo, int64_t hi) {
  if (!j.is_number_integer()) return FieldError(field, "must be an integer");
  const int64_t v = j.get<int64_t>();
  if (v < lo || v > hi) {
    return FieldError(field, "must be between " + std::to_string(lo) + " and " +
                                 std::to_string(hi) + ", got " + std::to_string(v));
  }
  return v;
}

// Variables of `field` (an object of strings) into `out`, whose entries they replace.
Status ParseEnv(const nlohmann::json& j, const std::string& field,
                std::map<std::string, std::string>& out) {
  if (!j.is_object()) return FieldError(field, "must be an object of strings");
  if (j.size() > kMaxEnv) return FieldError(field, "has too many entries");
  for (const auto& [key, value] : j.items()) {
    if (!model::IsEnvName(key))
      return FieldError(field + "." + key, "is not a valid variable name");
    auto v = GetString(value, field + "." + key);
    if (!v.ok()) return v.status();
    out[key] = *v;
  }
  return Status::Ok();
}

// `array` of a spec whose env is `spec_env`.
Result<ArraySpec> ParseArray(const nlohmann::json& a,
                             const std::map<std::string, std::string>& spec_env) {
  if (!a.is_object()) return FieldError("array", "must be an object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(a, {"indices", "max_running", "env"}, "array."));
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
      if (merged.size() > kMaxEnv) {
        return FieldError(field, "has too many entries with the spec's env (at most " +
                                     std::to_string(kMaxEnv) + " together)");
      }
      array.env.push_back(std::move(merged));
    }
  }
  return array;
}

Status ParseResources(const nlohmann::json& r, model::TaskResources& out) {
  if (!r.is_object()) return FieldError("resources", "must be an object");
  CORRAL_RETURN_IF_ERROR(
      CheckKeys(r, {"gpus", "gpu_milli", "gpu_models", "cpu_milli", "memory_mib"}, "resources."));
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
  if (r.contains("cpu_milli")) {
    auto v = GetInt(r["cpu_milli"], "resources.cpu_milli", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    out.cpu = CpuMilli(*v);
  }
  if (r.contains("memory_mib")) {
    auto v = GetInt(r["memory_mib"], "resources.memory_mib", 0, int64_t{1} << 40);
    if (!v.ok()) return v.status();
    out.memory = MemoryMib(*v);
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

}  // namespace

Result<JobSpec> ParseJobSpec(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("job spec: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(
      CheckKeys(j,
                {"name", "project", "command", "shell", "workdir", "env", "resources", "tasks",
                 "priority", "time_limit_s", "max_restarts", "launcher", "procs_per_node", "array"},
                ""));
  JobSpec spec;
  if (j.contains("name")) {
    auto v = GetString(j["name"], "name");
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
  if (!j.contains("command")) return FieldError("command", "is required");
  if (!j["command"].is_array()) return FieldError("command", "must be a list of arguments");
  if (j["command"].empty()) return FieldError("command", "must not be empty");
  if (j["command"].size() > kMaxArgs) return FieldError("command", "has too many arguments");
  for (const auto& a : j["command"]) {
    auto v = GetString(a, "command");
    if (!v.ok()) return v.status();
    spec.command.push_back(*v);
  }
  if (spec.shell && spec.command.size() != 1) {
    return FieldError("command", "must be one string when shell is true");
  }
  if (j.contains("workdir")) {
    auto v = GetString(j["workdir"], "workdir");
    if (!v.ok()) return v.status();
    if (!v->empty() && (*v)[0] != '/') return FieldError("workdir", "must be an absolute path");
    spec.workdir = *v;
  }
  if (j.contains("env")) CORRAL_RETURN_IF_ERROR(ParseEnv(j["env"], "env", spec.env));
  if (j.contains("resources"))
    CORRAL_RETURN_IF_ERROR(ParseResources(j["resources"], spec.resources));
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
  if (j.contains("launcher")) {
    auto v = GetString(j["launcher"], "launcher");
    if (!v.ok()) return v.status();
    auto launcher = model::ParseLauncher(*v);
    if (!launcher.ok()) return FieldError("launcher", launcher.status().message());
    spec.launcher = *launcher;
  }
  if (j.contains("procs_per_node")) {
    auto v = GetInt(j["procs_per_node"], "procs_per_node", 1, model::kMaxProcsPerNode);
    if (!v.ok()) return v.status();
    spec.procs_per_node = static_cast<int>(*v);
  }
  if (spec.launcher == model::Launcher::kTorchrun && spec.shell) {
    return FieldError("shell",
                      "must be false with launcher torchrun (the command is the script "
                      "torchrun runs, and its arguments)");
  }
  if (j.contains("array")) {
    auto array = ParseArray(j["array"], spec.env);
    if (!array.ok()) return array.status();
    spec.array = std::move(array).value();
  }
  return spec;
}

nlohmann::json ToJson(const JobSpec& s) {
  nlohmann::json resources = {{"gpus", s.resources.gpus.value()},
                              {"gpu_milli", s.resources.gpu_milli.value()},
                              {"cpu_milli", s.resources.cpu.value()},
                              {"memory_mib", s.resources.memory.value()}};
  if (!s.resources.gpu_models.empty()) resources["gpu_models"] = s.resources.gpu_models;
  return {{"name", s.name},
          {"project", s.project},
          {"command", s.command},
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
}

int PortsOf(const JobSpec& spec) {
  return spec.launcher == model::Launcher::kTf ? spec.tasks * spec.procs_per_node : 1;
}

bool IsDistributed(const JobSpec& spec) {
  return spec.tasks > 1 || spec.launcher != model::Launcher::kNone || spec.procs_per_node > 1;
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

model::Job ToModelJob(const JobSpec& spec, const store::JobRecord& record) {
  model::Job job;
  job.id = record.id;
  job.name = spec.name;
  job.user = record.user;
  job.project = spec.project;
  job.priority = spec.priority;
  job.submit_time = record.submit_time;
  job.array_id = record.array_id;
  job.array_max_running = record.array_max_running;
  job.tasks = spec.tasks;
  job.resources = spec.resources;
  if (spec.time_limit_s > 0) job.time_limit = Seconds(spec.time_limit_s);
  return job;
}

}  // namespace corral::server
