#include "protocol/task.h"

#include <charconv>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "model/job.h"
#include "model/node.h"

namespace corral::protocol {
namespace {

using nlohmann::json;

// Counts and indices of tasks: far above any real job, low enough for an int.
constexpr int64_t kMaxTaskCount = 1000000;

Result<Distributed> ReadDistributed(const FieldReader& r) {
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
  CORRAL_RETURN_IF_ERROR(r.Strings("hosts", true, d.hosts));
  return d;
}

}  // namespace

// What is wrong with a Distributed on its own, or nullopt. One check for both the protocol
// (TaskLaunchFromJson) and Validate().
std::optional<FieldProblem> DistributedProblem(const Distributed& d) {
  if (d.procs_per_node < 1 || d.procs_per_node > model::kMaxProcsPerNode) {
    return FieldProblem{"distributed.procs_per_node",
                        "must be in 1.." + std::to_string(model::kMaxProcsPerNode) + ", got " +
                            std::to_string(d.procs_per_node)};
  }
  // Bounded as a launch's tasks are, so that the port block below (P x N) cannot overflow.
  if (d.nodes < 1 || d.nodes > kMaxTaskCount) {
    return FieldProblem{"distributed.nodes", "must be in 1.." + std::to_string(kMaxTaskCount) +
                                                 ", got " + std::to_string(d.nodes)};
  }
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

std::string ToString(const TaskKey& key) {
  return std::to_string(key.allocation.value()) + "-" + std::to_string(key.generation);
}

std::optional<TaskKey> ParseTaskKey(std::string_view text) {
  const size_t dash = text.find('-');
  if (dash == std::string_view::npos || text.size() > 41) return std::nullopt;
  int64_t allocation = -1, generation = -1;
  const char* begin = text.data();
  const char* end = begin + text.size();
  auto a = std::from_chars(begin, begin + dash, allocation);
  auto g = std::from_chars(begin + dash + 1, end, generation);
  if (a.ec != std::errc() || a.ptr != begin + dash || g.ec != std::errc() || g.ptr != end ||
      allocation < 0 || generation < 0) {
    return std::nullopt;
  }
  return TaskKey{AllocationId(allocation), generation};
}

const char* ProcessStateName(ProcessState state) {
  switch (state) {
    case ProcessState::kRunning:
      return "running";
    case ProcessState::kExited:
      return "exited";
    case ProcessState::kKilled:
      return "killed";
    case ProcessState::kFailedToStart:
      return "failed_to_start";
    case ProcessState::kLost:
      return "lost";
  }
  return "unknown";
}

const char* LogStreamName(LogStream stream) {
  return stream == LogStream::kStdout ? "stdout" : "stderr";
}

std::optional<LogStream> ParseLogStream(std::string_view name) {
  for (LogStream stream : {LogStream::kStdout, LogStream::kStderr}) {
    if (name == LogStreamName(stream)) return stream;
  }
  return std::nullopt;
}

bool IsTerminal(ProcessState state) { return state != ProcessState::kRunning; }

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
  if (!l.submit_dir.empty()) out["submit_dir"] = l.submit_dir;
  if (l.array_id) out["array_id"] = *l.array_id;
  for (const auto& [field, value] : {std::pair{"script", &l.script},
                                     {"job_name", &l.job_name},
                                     {"output_file", &l.output_file},
                                     {"error_file", &l.error_file},
                                     {"job_token", &l.job_token},
                                     {"checkpoint_dir", &l.checkpoint_dir}}) {
    if (!value->empty()) out[field] = *value;
  }
  if (l.warning_signal) {
    out["warning_signal"] =
        json{{"signal", l.warning_signal->signal}, {"before_s", l.warning_signal->before.value()}};
  }
  if (l.requeueable) out["requeueable"] = true;
  if (l.session) {
    out["session"] = json{{"port", l.session->port},
                          {"url_prefix", l.session->url_prefix},
                          {"token", l.session->token}};
    if (l.session->shell) out["session"]["shell"] = true;
  }
  if (l.environment) {
    const LaunchEnvironment& e = *l.environment;
    json environment{{"name", e.name}, {"version", e.version}, {"runtime", e.runtime}};
    // What the environment does not set up is left out.
    if (!e.image.empty()) environment["image"] = e.image;
    if (!e.venv.empty()) environment["venv"] = e.venv;
    if (!e.conda.empty()) environment["conda"] = e.conda;
    out["environment"] = std::move(environment);
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
      {"state", ProcessStateName(s.state)},
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

nlohmann::json ToJson(const TaskKey& key) {
  return json{{"allocation_id", key.allocation.value()}, {"generation", key.generation}};
}

Result<TaskKey> ReadTaskKey(const FieldReader& r) {
  int64_t allocation = -1;
  TaskKey key;
  CORRAL_RETURN_IF_ERROR(r.Int("allocation_id", true, allocation, 0));
  key.allocation = AllocationId(allocation);
  CORRAL_RETURN_IF_ERROR(r.Int("generation", true, key.generation, 0));
  return key;
}

Result<TaskLaunch> ReadTaskLaunch(const FieldReader& r) {
  TaskLaunch l;
  int64_t job_id = -1, v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("job_id", true, job_id, 0));
  l.job_id = JobId(job_id);
  Result<TaskKey> key = ReadTaskKey(r);
  if (!key.ok()) return key.status();
  l.key = *key;
  CORRAL_RETURN_IF_ERROR(r.Int("task_index", false, v, 0, kMaxTaskCount));
  l.task_index = static_cast<int>(v);
  v = 1;
  CORRAL_RETURN_IF_ERROR(r.Int("tasks", false, v, 1, kMaxTaskCount));
  l.tasks = static_cast<int>(v);
  CORRAL_RETURN_IF_ERROR(r.Strings("argv", true, l.argv));
  CORRAL_RETURN_IF_ERROR(r.Bool("shell", l.shell));
  CORRAL_RETURN_IF_ERROR(r.String("workdir", true, l.workdir));
  CORRAL_RETURN_IF_ERROR(r.String("submit_dir", false, l.submit_dir));
  CORRAL_RETURN_IF_ERROR(r.StringMap("env", l.env));
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
  CORRAL_RETURN_IF_ERROR(r.Int("gpu_milli", false, v, 0, kWholeGpu.value()));
  l.gpu_milli = MilliGpu(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("cpu_milli", false, v, 0));
  l.cpu = CpuMilli(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("memory_mib", false, v, 0));
  l.memory = MemoryMib(v);
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("time_limit_s", false, v, 0));
  l.time_limit = Seconds(v);
  CORRAL_RETURN_IF_ERROR(r.String("user", false, l.user));
  CORRAL_RETURN_IF_ERROR(r.String("project", false, l.project));
  CORRAL_RETURN_IF_ERROR(
      r.OptionalInt64("array_index", l.array_index, 0, std::numeric_limits<int32_t>::max()));
  CORRAL_RETURN_IF_ERROR(
      r.OptionalInt64("array_id", l.array_id, 1, std::numeric_limits<int64_t>::max()));
  for (const auto& [field, value] : {std::pair{"script", &l.script},
                                     {"job_name", &l.job_name},
                                     {"output_file", &l.output_file},
                                     {"error_file", &l.error_file},
                                     {"job_token", &l.job_token},
                                     {"checkpoint_dir", &l.checkpoint_dir}}) {
    CORRAL_RETURN_IF_ERROR(r.String(field, false, *value));
  }
  CORRAL_RETURN_IF_ERROR(r.Bool("requeueable", l.requeueable));
  CORRAL_RETURN_IF_ERROR(r.Object("warning_signal", false, [&](const FieldReader& w) {
    model::WarningSignal warning;
    CORRAL_RETURN_IF_ERROR(w.RequiredInt("signal", warning.signal));
    if (warning.signal < 1 || warning.signal > 64) return w.Bad("signal", "must be 1..64");
    int64_t before = 0;
    CORRAL_RETURN_IF_ERROR(w.Int("before_s", true, before, 0, model::kMaxWarningLead.value()));
    warning.before = Seconds(before);
    l.warning_signal = warning;
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Object("environment", false, [&](const FieldReader& e) {
    LaunchEnvironment env;
    CORRAL_RETURN_IF_ERROR(e.String("name", true, env.name));
    CORRAL_RETURN_IF_ERROR(e.Int("version", true, env.version, 1));
    CORRAL_RETURN_IF_ERROR(e.String("runtime", true, env.runtime));
    CORRAL_RETURN_IF_ERROR(e.String("image", false, env.image));
    CORRAL_RETURN_IF_ERROR(e.String("venv", false, env.venv));
    CORRAL_RETURN_IF_ERROR(e.String("conda", false, env.conda));
    l.environment = std::move(env);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Object("session", false, [&](const FieldReader& s) {
    LaunchSession session;
    CORRAL_RETURN_IF_ERROR(s.RequiredInt("port", session.port));
    if (session.port < 1024 || session.port > 65535) return s.Bad("port", "must be 1024..65535");
    CORRAL_RETURN_IF_ERROR(s.String("url_prefix", true, session.url_prefix));
    CORRAL_RETURN_IF_ERROR(s.String("token", true, session.token));
    CORRAL_RETURN_IF_ERROR(s.Bool("shell", session.shell));
    l.session = std::move(session);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r.Object("distributed", false, [&](const FieldReader& d) {
    Result<Distributed> distributed = ReadDistributed(d);
    if (!distributed.ok()) return distributed.status();
    if (auto problem = DistributedProblem(*distributed)) {
      // The problem's field is "distributed.<name>": the reader's own path says "distributed."
      return d.Bad(problem->field.substr(std::string("distributed.").size()), problem->why);
    }
    l.distributed = std::move(distributed).value();
    return Status::Ok();
  }));
  return l;
}

Result<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& j) {
  Result<FieldReader> r = ReadObject(j, "task launch");
  if (!r.ok()) return r.status();
  return ReadTaskLaunch(*r);
}

Result<TaskStatus> ReadTaskStatus(const FieldReader& r) {
  TaskStatus s;
  int64_t job_id = -1, v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("job_id", true, job_id, 0));
  s.job_id = JobId(job_id);
  Result<TaskKey> key = ReadTaskKey(r);
  if (!key.ok()) return key.status();
  s.key = *key;
  CORRAL_RETURN_IF_ERROR(r.Int("task_index", false, v, 0, kMaxTaskCount));
  s.task_index = static_cast<int>(v);
  std::string state;
  CORRAL_RETURN_IF_ERROR(r.String("state", true, state));
  bool known = false;
  for (ProcessState t : {ProcessState::kRunning, ProcessState::kExited, ProcessState::kKilled,
                         ProcessState::kFailedToStart, ProcessState::kLost}) {
    if (state == ProcessStateName(t)) {
      s.state = t;
      known = true;
    }
  }
  if (!known) {
    return r.Bad("state", "unknown state '" + state +
                              "' (running, exited, killed, failed_to_start or lost)");
  }
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("pid", false, v, 0, std::numeric_limits<int>::max()));
  s.pid = static_cast<int>(v);
  // An exit status (WEXITSTATUS) is 0..255; a signal number 1..127.
  CORRAL_RETURN_IF_ERROR(r.OptionalInt("exit_code", s.exit_code, 0, 255));
  CORRAL_RETURN_IF_ERROR(r.OptionalInt("signal", s.signal, 1, 127));
  v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("started_at", false, v, 0));
  s.started_at = Seconds(v);
  std::optional<int64_t> ended_at;
  CORRAL_RETURN_IF_ERROR(r.OptionalInt64("ended_at", ended_at, 0));
  if (ended_at) s.ended_at = Seconds(*ended_at);
  CORRAL_RETURN_IF_ERROR(r.String("message", false, s.message));
  // Every agent of protocol version 1 says why an exited or killed process ended, and only then.
  const bool ended = s.state == ProcessState::kExited || s.state == ProcessState::kKilled;
  if (r.Find("end_cause") == nullptr) {
    if (ended) return r.Bad("end_cause", "is required when 'state' is " + state);
  } else {
    if (!ended) return r.Bad("end_cause", "must be absent when 'state' is " + state);
    std::string cause;
    CORRAL_RETURN_IF_ERROR(r.String("end_cause", true, cause));
    auto parsed = model::ParseTaskEndCause(cause, r.Path("end_cause"));
    // "heartbeat: field 'tasks[0].end_cause': unknown end cause 'x' (one of exited, ...)"
    if (!parsed.ok()) return r.Within(parsed.status());
    s.end_cause = *parsed;
  }
  return s;
}

Result<TaskStatus> TaskStatusFromJson(const nlohmann::json& j) {
  Result<FieldReader> r = ReadObject(j, "task status");
  if (!r.ok()) return r.status();
  return ReadTaskStatus(*r);
}

}  // namespace corral::protocol
