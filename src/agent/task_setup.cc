#include "agent/task_setup.h"

#include <sys/stat.h>

#include <set>

#include "agent/rendezvous.h"
#include "model/job.h"
#include "model/node.h"
#include "model/session.h"

namespace corral::agent {
namespace {

bool HasNul(const std::string& s) { return s.find('\0') != std::string::npos; }

std::string JoinIndices(const std::vector<int>& gpus) {
  std::string out;
  for (int g : gpus) {
    if (!out.empty()) out += ',';
    out += std::to_string(g);
  }
  return out;
}

}  // namespace

bool IsReservedEnvName(const std::string& name, const TaskLaunch& launch) {
  return model::IsTaskEnvName(name) ||
         (launch.distributed && IsRendezvousEnvName(*launch.distributed, name));
}

Status ValidateSubmitDir(const TaskLaunch& l) {
  if (l.submit_dir.empty() || (l.submit_dir[0] == '/' && !HasNul(l.submit_dir))) {
    return Status::Ok();
  }
  return InvalidArgument("task " + ToString(l.key) +
                         ": field 'submit_dir': must be an absolute path without NUL bytes");
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
  // A batch task's argv are its script's arguments; an interactive shell without a command runs
  // the login shell (LaunchSession::shell).
  const bool login_shell = l.session && l.session->shell;
  if (l.script.empty()) {
    if (l.argv.empty() && !login_shell) return bad("argv", "must not be empty");
    if (!l.argv.empty() && l.argv[0].empty()) return bad("argv[0]", "must not be empty");
  } else if (l.script.rfind("#!", 0) != 0) {
    return bad("script", "must start with #! and its interpreter");
  } else if (l.shell) {
    return bad("shell", "must be false for a batch script");
  }
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
  CORRAL_RETURN_IF_ERROR(ValidateSubmitDir(l));
  if (!l.checkpoint_dir.empty() && (l.checkpoint_dir[0] != '/' || HasNul(l.checkpoint_dir))) {
    return bad("checkpoint_dir", "must be an absolute path without NUL bytes");
  }
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
    if (auto problem = protocol::DistributedProblem(d)) return bad(problem->field, problem->why);
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

std::map<std::string, std::string> SlurmEnvironment(const TaskLaunch& launch) {
  if (launch.distributed && launch.distributed->launcher == model::Launcher::kMpi) return {};
  const int procs = launch.distributed ? launch.distributed->procs_per_node : 1;
  const std::string job = std::to_string(launch.job_id.value());
  std::map<std::string, std::string> env = {
      {"SLURM_JOB_ID", job},
      {"SLURM_JOBID", job},
      {"SLURM_JOB_NAME", launch.job_name},
      {"SLURM_NTASKS", std::to_string(launch.tasks * procs)},
      {"SLURM_NPROCS", std::to_string(launch.tasks * procs)},
      {"SLURM_NTASKS_PER_NODE", std::to_string(procs)},
      {"SLURM_JOB_NUM_NODES", std::to_string(launch.tasks)},
      {"SLURM_NNODES", std::to_string(launch.tasks)},
      {"SLURM_NODEID", std::to_string(launch.task_index)},
      // The part's first rank; `corral launch` sets each process's (RankEnvironment).
      {"SLURM_PROCID", std::to_string(static_cast<int64_t>(launch.task_index) * procs)},
      {"SLURM_LOCALID", "0"},
      {"SLURM_SUBMIT_DIR", launch.submit_dir},
  };
  if (launch.array_index) {
    env["SLURM_ARRAY_TASK_ID"] = std::to_string(*launch.array_index);
    env["SLURM_ARRAY_JOB_ID"] = std::to_string(launch.array_id.value_or(launch.job_id.value()));
  }
  return env;
}

std::vector<std::string> TaskEnvironment(const TaskLaunch& launch, const std::string& node_name,
                                         const std::map<std::string, std::string>& base,
                                         const std::string& hostfile, const TaskChannel& channel) {
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
  env["CORRAL_GENERATION"] = std::to_string(launch.key.generation);
  env["CORRAL_NODE_NAME"] = node_name;
  env["CORRAL_GPU_MILLI"] = std::to_string(launch.gpu_milli.value());
  if (launch.array_index) env["CORRAL_ARRAY_INDEX"] = std::to_string(*launch.array_index);
  if (!launch.submit_dir.empty()) env["CORRAL_SUBMIT_DIR"] = launch.submit_dir;
  if (!launch.job_token.empty()) env["CORRAL_JOB_TOKEN"] = launch.job_token;
  if (!launch.checkpoint_dir.empty()) env["CORRAL_CHECKPOINT_DIR"] = launch.checkpoint_dir;
  if (!channel.server.empty()) env["CORRAL_SERVER"] = channel.server;
  if (!channel.stop_file.empty()) env["CORRAL_STOP_FILE"] = channel.stop_file;
  if (!channel.ca_cert.empty()) env["CORRAL_CA_CERT"] = channel.ca_cert;
  if (const auto& s = launch.session) {
    env[model::kSessionPortEnv] = std::to_string(s->port);
    env[model::kSessionUrlPrefixEnv] = s->url_prefix;
    env[model::kSessionTokenEnv] = s->token;
  }
  if (!launch.script.empty()) {
    for (const auto& [name, value] : SlurmEnvironment(launch)) env[name] = value;
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

}  // namespace corral::agent
