#include "agent/task.h"

#include <sys/stat.h>

#include <algorithm>
#include <cctype>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/rendezvous.h"
#include "model/job.h"
#include "model/node.h"
#include "model/session.h"

namespace corral::agent {
namespace {

using nlohmann::json;

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string JoinIndices(const std::vector<int>& gpus) {
  std::string out;
  for (int g : gpus) {
    if (!out.empty()) out += ',';
    out += std::to_string(g);
  }
  return out;
}

// Reads optional/required fields with errors naming them; `prefix` names a nested object's
// fields ("distributed.").
class FieldReader {
 public:
  FieldReader(const json& object, std::string what, std::string prefix = "")
      : object_(object), what_(std::move(what)), prefix_(std::move(prefix)) {}

  Status Bad(const std::string& field, const std::string& why) const {
    return InvalidArgument(what_ + ": field '" + prefix_ + field + "': " + why);
  }

  Status Int(const char* field, bool required, int64_t& out) const {
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null()) {
      return required ? Bad(field, "is required") : Status::Ok();
    }
    if (!it->is_number_integer()) return Bad(field, "must be an integer");
    out = it->get<int64_t>();
    return Status::Ok();
  }

  Status Bool(const char* field, bool& out) const {
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null()) return Status::Ok();
    if (!it->is_boolean()) return Bad(field, "must be true or false");
    out = it->get<bool>();
    return Status::Ok();
  }

  Status String(const char* field, bool required, std::string& out) const {
    auto it = object_.find(field);
    if (it == object_.end() || it->is_null()) {
      return required ? Bad(field, "is required") : Status::Ok();
    }
    if (!it->is_string()) return Bad(field, "must be a string");
    out = it->get<std::string>();
    return Status::Ok();
  }

  // A required integer that fits an int; DistributedProblem() checks the finer ranges.
  Status RequiredInt(const char* field, int& out) const {
    int64_t v = 0;
    CORRAL_RETURN_IF_ERROR(Int(field, true, v));
    if (v < std::numeric_limits<int>::min() || v > std::numeric_limits<int>::max()) {
      return Bad(field, "out of range");
    }
    out = static_cast<int>(v);
    return Status::Ok();
  }

  const json* Find(const char* field) const {
    auto it = object_.find(field);
    return it == object_.end() || it->is_null() ? nullptr : &*it;
  }

 private:
  const json& object_;
  std::string what_;
  std::string prefix_;
};

struct FieldProblem {
  std::string field;  // "distributed.port"
  std::string why;
};

// What is wrong with a Distributed on its own, or nullopt. One check for both the protocol
// (TaskLaunchFromJson) and Validate().
std::optional<FieldProblem> DistributedProblem(const Distributed& d) {
  if (d.procs_per_node < 1 || d.procs_per_node > model::kMaxProcsPerNode) {
    return FieldProblem{"distributed.procs_per_node",
                        "must be in 1.." + std::to_string(model::kMaxProcsPerNode) + ", got " +
                            std::to_string(d.procs_per_node)};
  }
  if (d.nodes < 1) return FieldProblem{"distributed.nodes", "must be >= 1"};
  if (d.node_rank < 0 || d.node_rank >= d.nodes) {
    return FieldProblem{"distributed.node_rank", "must be in 0.." + std::to_string(d.nodes - 1) +
                                                     ", got " + std::to_string(d.node_rank)};
  }
  if (Status s = model::ValidateNodeAddress(d.master_addr); !s.ok()) {
    return FieldProblem{"distributed.master_addr", s.message()};
  }
  const int max_port = 65535 - d.procs_per_node * d.nodes;
  if (d.port < 1024 || d.port > max_port) {
    return FieldProblem{"distributed.port", "must be in 1024.." + std::to_string(max_port) +
                                                " (a block of up to one port per rank), got " +
                                                std::to_string(d.port)};
  }
  if (d.hosts.size() != static_cast<size_t>(d.nodes)) {
    return FieldProblem{"distributed.hosts", "must have one address per node (" +
                                                 std::to_string(d.nodes) + "), got " +
                                                 std::to_string(d.hosts.size())};
  }
  for (size_t i = 0; i < d.hosts.size(); ++i) {
    if (Status s = model::ValidateNodeAddress(d.hosts[i]); !s.ok()) {
      return FieldProblem{"distributed.hosts[" + std::to_string(i) + "]", s.message()};
    }
  }
  return std::nullopt;
}

Result<Distributed> DistributedFromJson(const json& j) {
  if (!j.is_object()) return InvalidArgument("task launch: field 'distributed': must be an object");
  FieldReader r(j, "task launch", "distributed.");
  Distributed d;
  std::string launcher;
  CORRAL_RETURN_IF_ERROR(r.String("launcher", true, launcher));
  Result<model::Launcher> parsed = model::ParseLauncher(launcher);
  if (!parsed.ok()) return r.Bad("launcher", parsed.status().message());
  d.launcher = *parsed;
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("procs_per_node", d.procs_per_node));
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("node_rank", d.node_rank));
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("nodes", d.nodes));
  CORRAL_RETURN_IF_ERROR(r.String("master_addr", true, d.master_addr));
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("port", d.port));
  const json* hosts = r.Find("hosts");
  if (hosts == nullptr) return r.Bad("hosts", "is required");
  if (!hosts->is_array()) return r.Bad("hosts", "must be an array of addresses");
  for (const json& h : *hosts) {
    if (!h.is_string()) return r.Bad("hosts", "must be an array of addresses");
    d.hosts.push_back(h.get<std::string>());
  }
  if (auto problem = DistributedProblem(d)) {
    return InvalidArgument("task launch: field '" + problem->field + "': " + problem->why);
  }
  return d;
}

}  // namespace

std::string ToString(const TaskKey& key) {
  return std::to_string(key.allocation.value()) + "-" + std::to_string(key.generation);
}

const char* TaskStateName(TaskState state) {
  switch (state) {
    case TaskState::kRunning:
      return "running";
    case TaskState::kExited:
      return "exited";
    case TaskState::kKilled:
      return "killed";
    case TaskState::kFailedToStart:
      return "failed_to_start";
    case TaskState::kLost:
      return "lost";
  }
  return "unknown";
}

bool IsTerminal(TaskState state) { return state != TaskState::kRunning; }

bool IsReservedEnvName(const std::string& name, const TaskLaunch& launch) {
  return model::IsTaskEnvName(name) ||
         (launch.distributed && IsRendezvousEnvName(*launch.distributed, name));
}

Status Validate(const TaskLaunch& l) {
  const std::string task = "task " + ToString(l.key);
  auto bad = [&](const std::string& field, const std::string& why) {
    return InvalidArgument(task + ": field '" + field + "': " + why);
  };
  if (l.key.allocation.value() < 0) return bad("allocation_id", "must be >= 0");
  if (l.key.generation < 0) return bad("generation", "must be >= 0");
  if (l.job_id.value() < 0) return bad("job_id", "must be >= 0");
  if (l.tasks < 1) return bad("tasks", "must be >= 1");
  if (l.task_index < 0 || l.task_index >= l.tasks) {
    return bad("task_index", "must be in 0.." + std::to_string(l.tasks - 1) + ", got " +
                                 std::to_string(l.task_index));
  }
  if (l.argv.empty()) return bad("argv", "must not be empty");
  if (l.argv[0].empty()) return bad("argv[0]", "must not be empty");
  for (size_t i = 0; i < l.argv.size(); ++i) {
    if (HasNul(l.argv[i])) return bad("argv[" + std::to_string(i) + "]", "contains a NUL byte");
  }
  if (l.workdir.empty() || l.workdir[0] != '/') {
    return bad("workdir", "must be an absolute path, got '" + l.workdir + "'");
  }
  if (HasNul(l.workdir)) return bad("workdir", "contains a NUL byte");
  struct stat st;
  if (stat(l.workdir.c_str(), &st) != 0) {
    return bad("workdir", "'" + l.workdir + "' does not exist on this node");
  }
  if (!S_ISDIR(st.st_mode)) return bad("workdir", "'" + l.workdir + "' is not a directory");
  for (const auto& [name, value] : l.env) {
    if (!model::IsEnvName(name)) {
      return bad("env", "'" + name + "' is not a valid variable name ([A-Za-z_][A-Za-z0-9_]*)");
    }
    if (IsReservedEnvName(name, l)) {
      return bad("env", "'" + name + "' is set by corral and may not be overridden");
    }
    if (HasNul(value)) return bad("env." + name, "contains a NUL byte");
  }
  std::set<int> seen;
  for (size_t i = 0; i < l.gpus.size(); ++i) {
    if (l.gpus[i] < 0) return bad("gpus[" + std::to_string(i) + "]", "must be >= 0");
    if (!seen.insert(l.gpus[i]).second) {
      return bad("gpus", "GPU " + std::to_string(l.gpus[i]) + " is listed twice");
    }
  }
  if (l.gpu_milli.value() < 0 || l.gpu_milli > kWholeGpu)
    return bad("gpu_milli", "must be 0..1000");
  if (l.cpu.value() < 0) return bad("cpu_milli", "must be >= 0");
  if (l.memory.value() < 0) return bad("memory_mib", "must be >= 0");
  if (l.time_limit.value() < 0) return bad("time_limit_s", "must be >= 0");
  if (l.environment) {
    const LaunchEnvironment& e = *l.environment;
    if (e.runtime != "process" && e.runtime != "container") {
      return bad("environment.runtime", "must be process or container, got '" + e.runtime + "'");
    }
    for (const auto& [field, path] : {std::pair<std::string, std::string>{"venv", e.venv},
                                      std::pair<std::string, std::string>{"conda", e.conda}}) {
      if (path.empty()) continue;
      if (path[0] != '/' || HasNul(path)) {
        return bad("environment." + field, "must be an absolute path, got '" + path + "'");
      }
      // A container ignores the host setup (ContainerEnvironment()): it need not exist here.
      if (e.runtime != "process") continue;
      struct stat prefix;
      if (stat(path.c_str(), &prefix) != 0 || !S_ISDIR(prefix.st_mode)) {
        return bad("environment." + field, "'" + path + "' (environment '" + e.name + "@" +
                                               std::to_string(e.version) +
                                               "') does not exist on this node");
      }
    }
  }
  if (l.session) {
    const std::string prefix = model::SessionUrlPrefix(l.job_id.value());
    if (l.session->url_prefix != prefix) {
      return bad("session.url_prefix",
                 "must be '" + prefix + "', got '" + l.session->url_prefix + "'");
    }
    const std::string& token = l.session->token;
    if (token.size() != 64 || token.find_first_not_of("0123456789abcdef") != std::string::npos) {
      return bad("session.token", "must be 64 lowercase hex characters");
    }
  }
  if (l.distributed) {
    const Distributed& d = *l.distributed;
    if (auto problem = DistributedProblem(d)) return bad(problem->field, problem->why);
    if (d.node_rank != l.task_index) {
      return bad("distributed.node_rank", "must equal task_index (" + std::to_string(l.task_index) +
                                              "), got " + std::to_string(d.node_rank));
    }
    if (d.nodes != l.tasks) {
      return bad("distributed.nodes", "must equal tasks (" + std::to_string(l.tasks) + "), got " +
                                          std::to_string(d.nodes));
    }
    if (d.launcher == model::Launcher::kTorchrun && l.shell) {
      return bad("shell", "must be false with launcher torchrun (argv is the script it runs)");
    }
  }
  return Status::Ok();
}

std::vector<std::string> TaskEnvironment(const TaskLaunch& launch, const std::string& node_name,
                                         const std::map<std::string, std::string>& base,
                                         const std::string& hostfile) {
  std::map<std::string, std::string> env = base;
  for (const auto& [name, value] : launch.env) {
    if (!IsReservedEnvName(name, launch)) env[name] = value;
  }
  if (const auto& e = launch.environment) {
    env["CORRAL_ENVIRONMENT"] = e->name + "@" + std::to_string(e->version);
    const std::string& prefix = e->venv.empty() ? e->conda : e->venv;
    if (!prefix.empty()) {
      const std::string path = env["PATH"];
      env["PATH"] = prefix + "/bin" + (path.empty() ? "" : ":" + path);
      env[e->venv.empty() ? "CONDA_PREFIX" : "VIRTUAL_ENV"] = prefix;
    }
  }
  const std::string gpus = JoinIndices(launch.gpus);
  env["CUDA_VISIBLE_DEVICES"] = gpus;
  env["NVIDIA_VISIBLE_DEVICES"] = launch.gpus.empty() ? "void" : gpus;
  env["CORRAL_JOB_ID"] = std::to_string(launch.job_id.value());
  env["CORRAL_TASK_INDEX"] = std::to_string(launch.task_index);
  env["CORRAL_NUM_TASKS"] = std::to_string(launch.tasks);
  env["CORRAL_ALLOCATION_ID"] = std::to_string(launch.key.allocation.value());
  env["CORRAL_NODE_NAME"] = node_name;
  env["CORRAL_GPU_MILLI"] = std::to_string(launch.gpu_milli.value());
  if (launch.array_index) env["CORRAL_ARRAY_INDEX"] = std::to_string(*launch.array_index);
  if (const auto& s = launch.session) {
    env[model::kSessionPortEnv] = std::to_string(s->port);
    env[model::kSessionUrlPrefixEnv] = s->url_prefix;
    env[model::kSessionTokenEnv] = s->token;
  }
  if (launch.distributed) {
    const Distributed& d = *launch.distributed;
    const std::map<std::string, std::string> node = DistributedEnvironment(launch);
    for (const auto& [name, value] : node) env[name] = value;
    // With one process per part the task is rank node_rank; with more, `corral launch` sets
    // each process's rank (LaunchArgv).
    if (d.procs_per_node == 1 && SetsRankVariables(d.launcher)) {
      for (const auto& [name, value] : RankEnvironment(node, 0)) env[name] = value;
    }
    if (!hostfile.empty()) {
      for (const auto& [name, value] : HostfileEnvironment(d, hostfile)) env[name] = value;
    }
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(std::string(name).append("=").append(value));
  return out;
}

nlohmann::json ToJson(const TaskLaunch& l) {
  json out{
      {"job_id", l.job_id.value()},
      {"task_index", l.task_index},
      {"tasks", l.tasks},
      {"allocation_id", l.key.allocation.value()},
      {"generation", l.key.generation},
      {"argv", l.argv},
      {"shell", l.shell},
      {"workdir", l.workdir},
      {"env", l.env},
      {"gpus", l.gpus},
      {"gpu_milli", l.gpu_milli.value()},
      {"cpu_milli", l.cpu.value()},
      {"memory_mib", l.memory.value()},
      {"time_limit_s", l.time_limit.value()},
      {"user", l.user},
      {"project", l.project},
  };
  if (l.array_index) out["array_index"] = *l.array_index;
  if (l.session) {
    out["session"] = json{{"port", l.session->port},
                          {"url_prefix", l.session->url_prefix},
                          {"token", l.session->token}};
  }
  if (l.environment) {
    const LaunchEnvironment& e = *l.environment;
    out["environment"] = json{{"name", e.name},   {"version", e.version}, {"runtime", e.runtime},
                              {"image", e.image}, {"venv", e.venv},       {"conda", e.conda}};
  }
  if (l.distributed) {
    const Distributed& d = *l.distributed;
    out["distributed"] = json{
        {"launcher", std::string(model::LauncherName(d.launcher))},
        {"procs_per_node", d.procs_per_node},
        {"node_rank", d.node_rank},
        {"nodes", d.nodes},
        {"master_addr", d.master_addr},
        {"port", d.port},
        {"hosts", d.hosts},
    };
  }
  return out;
}

nlohmann::json ToJson(const TaskStatus& s) {
  json out{
      {"job_id", s.job_id.value()},
      {"task_index", s.task_index},
      {"allocation_id", s.key.allocation.value()},
      {"generation", s.key.generation},
      {"state", TaskStateName(s.state)},
      {"pid", s.pid},
      {"started_at", s.started_at.value()},
      {"message", s.message},
  };
  if (s.exit_code) out["exit_code"] = *s.exit_code;
  if (s.signal) out["signal"] = *s.signal;
  if (s.ended_at) out["ended_at"] = s.ended_at->value();
  if (s.end_cause) out["end_cause"] = model::ToString(*s.end_cause);
  return out;
}

Result<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("task launch: must be a JSON object");
  FieldReader r(j, "task launch");
  TaskLaunch l;
  int64_t job_id = -1, allocation = -1, v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("job_id", true, job_id));
  l.job_id = JobId(job_id);
  CORRAL_RETURN_IF_ERROR(r.Int("allocation_id", true, allocation));
  l.key.allocation = AllocationId(allocation);
  CORRAL_RETURN_IF_ERROR(r.Int("generation", true, l.key.generation));
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("task_index", false, v));
  if (v < 0 || v > 1000000) return r.Bad("task_index", "out of range");
  l.task_index = static_cast<int>(v);
  v = 1;
  CORRAL_RETURN_IF_ERROR(r.Int("tasks", false, v));
  if (v < 0 || v > 1000000) return r.Bad("tasks", "out of range");
  l.tasks = static_cast<int>(v);
  const json* argv = r.Find("argv");
  if (argv == nullptr) return r.Bad("argv", "is required");
  if (!argv->is_array()) return r.Bad("argv", "must be an array of strings");
  for (const json& a : *argv) {
    if (!a.is_string()) return r.Bad("argv", "must be an array of strings");
    l.argv.push_back(a.get<std::string>());
  }
  CORRAL_RETURN_IF_ERROR(r.Bool("shell", l.shell));
  CORRAL_RETURN_IF_ERROR(r.String("workdir", true, l.workdir));
  if (const json* env = r.Find("env")) {
    if (!env->is_object()) return r.Bad("env", "must be an object of strings");
    for (const auto& [name, value] : env->items()) {
      if (!value.is_string()) return r.Bad("env." + name, "must be a string");
      l.env[name] = value.get<std::string>();
    }
  }
  if (const json* gpus = r.Find("gpus")) {
    if (!gpus->is_array()) return r.Bad("gpus", "must be an array of GPU indices");
    for (const json& g : *gpus) {
      if (!g.is_number_integer() || g.get<int64_t>() < 0 || g.get<int64_t>() > 1024) {
        return r.Bad("gpus", "must be an array of GPU indices");
      }
      l.gpus.push_back(g.get<int>());
    }
  }
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("gpu_milli", false, v));
  l.gpu_milli = MilliGpu(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("cpu_milli", false, v));
  l.cpu = CpuMilli(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("memory_mib", false, v));
  l.memory = MemoryMib(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("time_limit_s", false, v));
  l.time_limit = Seconds(v);
  CORRAL_RETURN_IF_ERROR(r.String("user", false, l.user));
  CORRAL_RETURN_IF_ERROR(r.String("project", false, l.project));
  if (r.Find("array_index") != nullptr) {
    int64_t index = -1;
    CORRAL_RETURN_IF_ERROR(r.Int("array_index", true, index));
    if (index < 0 || index > std::numeric_limits<int32_t>::max()) {
      return r.Bad("array_index", "must be 0..2147483647");
    }
    l.array_index = index;
  }
  if (const json* environment = r.Find("environment")) {
    if (!environment->is_object()) return r.Bad("environment", "must be an object");
    FieldReader e(*environment, "task launch", "environment.");
    LaunchEnvironment env;
    CORRAL_RETURN_IF_ERROR(e.String("name", true, env.name));
    CORRAL_RETURN_IF_ERROR(e.Int("version", true, env.version));
    CORRAL_RETURN_IF_ERROR(e.String("runtime", true, env.runtime));
    CORRAL_RETURN_IF_ERROR(e.String("image", false, env.image));
    CORRAL_RETURN_IF_ERROR(e.String("venv", false, env.venv));
    CORRAL_RETURN_IF_ERROR(e.String("conda", false, env.conda));
    l.environment = std::move(env);
  }
  if (const json* session = r.Find("session")) {
    if (!session->is_object()) return r.Bad("session", "must be an object");
    FieldReader s(*session, "task launch", "session.");
    LaunchSession out;
    int64_t port = 0;
    CORRAL_RETURN_IF_ERROR(s.Int("port", true, port));
    if (port < 1024 || port > 65535) return r.Bad("session.port", "must be 1024..65535");
    out.port = static_cast<int>(port);
    CORRAL_RETURN_IF_ERROR(s.String("url_prefix", true, out.url_prefix));
    CORRAL_RETURN_IF_ERROR(s.String("token", true, out.token));
    l.session = std::move(out);
  }
  if (const json* distributed = r.Find("distributed")) {
    Result<Distributed> d = DistributedFromJson(*distributed);
    if (!d.ok()) return d.status();
    l.distributed = std::move(d).value();
  }
  return l;
}

Result<TaskStatus> TaskStatusFromJson(const nlohmann::json& j) {
  if (!j.is_object()) return InvalidArgument("task status: must be a JSON object");
  FieldReader r(j, "task status");
  TaskStatus s;
  int64_t job_id = -1, allocation = -1, v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("job_id", true, job_id));
  s.job_id = JobId(job_id);
  CORRAL_RETURN_IF_ERROR(r.Int("allocation_id", true, allocation));
  s.key.allocation = AllocationId(allocation);
  CORRAL_RETURN_IF_ERROR(r.Int("generation", true, s.key.generation));
  CORRAL_RETURN_IF_ERROR(r.Int("task_index", false, v));
  s.task_index = static_cast<int>(v);
  std::string state;
  CORRAL_RETURN_IF_ERROR(r.String("state", true, state));
  bool known = false;
  for (TaskState t : {TaskState::kRunning, TaskState::kExited, TaskState::kKilled,
                      TaskState::kFailedToStart, TaskState::kLost}) {
    if (state == TaskStateName(t)) {
      s.state = t;
      known = true;
    }
  }
  if (!known) return r.Bad("state", "unknown state '" + state + "'");
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("pid", false, v));
  s.pid = static_cast<int>(v);
  if (r.Find("exit_code") != nullptr) {
    CORRAL_RETURN_IF_ERROR(r.Int("exit_code", true, v));
    s.exit_code = static_cast<int>(v);
  }
  if (r.Find("signal") != nullptr) {
    CORRAL_RETURN_IF_ERROR(r.Int("signal", true, v));
    s.signal = static_cast<int>(v);
  }
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("started_at", false, v));
  s.started_at = Seconds(v);
  if (r.Find("ended_at") != nullptr) {
    CORRAL_RETURN_IF_ERROR(r.Int("ended_at", true, v));
    s.ended_at = Seconds(v);
  }
  CORRAL_RETURN_IF_ERROR(r.String("message", false, s.message));
  if (r.Find("end_cause") != nullptr) {
    std::string cause;
    CORRAL_RETURN_IF_ERROR(r.String("end_cause", true, cause));
    auto parsed = model::ParseTaskEndCause(cause);
    // "task status: field 'end_cause': unknown end cause 'x' (one of exited, ...)"
    if (!parsed.ok()) return InvalidArgument("task status: " + parsed.status().message());
    s.end_cause = *parsed;
  }
  return s;
}

}  // namespace corral::agent
