#include "agent/container_engine.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <filesystem>
#include <set>
#include <thread>

#include "agent/executable.h"
#include "agent/file_io.h"
#include "agent/launch_defaults.h"
#include "agent/rendezvous.h"
#include "common/strings.h"
#include "protocol/environment_ref.h"

extern char** environ;

namespace corral::agent {
namespace {

constexpr size_t kMaxOutput = size_t{64} * 1024;
// podman and docker read env files with Go's bufio.Scanner: lines up to 64 KiB.
constexpr size_t kMaxEnvFileLine = size_t{64} * 1024 - 1;
constexpr Seconds kVersionTimeout{10};
// Removals run on the reconcile loop's thread: a hung engine must not hold it for long
// (ProcessRuntime also spaces out the retries of a failed one).
constexpr Seconds kRemoveTimeout{10};

// Variables of the agent that engine processes need (besides PATH): where the engine's
// configuration and daemon are.
constexpr const char* kEngineVariables[] = {
    "HOME",
    "TMPDIR",
    "XDG_RUNTIME_DIR",
    "XDG_CONFIG_HOME",
    "CONTAINERS_CONF",
    "CONTAINERS_STORAGE_CONF",
    "CONTAINERS_REGISTRIES_CONF",
    "CONTAINER_HOST",
    "CONTAINER_CONNECTION",
    "CONTAINER_SSHKEY",
    "REGISTRY_AUTH_FILE",
    "DOCKER_HOST",
    "DOCKER_CONFIG",
    "DOCKER_CONTEXT",
    "DOCKER_CERT_PATH",
    "DOCKER_TLS_VERIFY",
};

std::string JoinIndices(const std::vector<int>& values) {
  std::string out;
  for (int v : values) {
    if (!out.empty()) out += ',';
    out += std::to_string(v);
  }
  return out;
}

// An absolute path the engine's `-v SRC:DST[:OPTIONS]` syntax can carry.
bool IsMountablePath(const std::string& path) {
  return !path.empty() && path[0] == '/' && path.find_first_of(":,") == std::string::npos;
}

bool HasDotDot(const std::string& path) {
  size_t start = 0;
  while (start <= path.size()) {
    size_t slash = path.find('/', start);
    if (slash == std::string::npos) slash = path.size();
    if (path.compare(start, slash - start, "..") == 0) return true;
    start = slash + 1;
  }
  return false;
}

// "1500" milli-CPUs -> "1.5"; "250" -> "0.25"; "2000" -> "2".
std::string CpusText(CpuMilli cpu) {
  std::string out = std::to_string(cpu.value() / 1000);
  std::string fraction = std::to_string(1000 + cpu.value() % 1000).substr(1);
  while (!fraction.empty() && fraction.back() == '0') fraction.pop_back();
  if (!fraction.empty()) out += "." + fraction;
  return out;
}

bool CdiNamePart(const std::string& s, const char* extra) {
  if (s.empty() || !std::isalnum(static_cast<unsigned char>(s[0]))) return false;
  return std::all_of(s.begin(), s.end(), [extra](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) ||
           std::string_view(extra).find(c) != std::string_view::npos;
  });
}

// `path --version`, read as podman or docker.
Result<EngineCli> AskVersion(const std::string& path, const std::vector<std::string>& env) {
  if (!IsExecutableFile(path)) return NotFound(path + " is not an executable file");
  Result<EngineOutput> out = RunEngineCommand({path, "--version"}, env, kVersionTimeout);
  if (!out.ok()) return out.status();
  if (out->exit_code != 0) {
    const std::string said = Trim(out->output);
    return IoError(
        "`" + path + " --version` " +
        (out->exit_code < 0 ? "did not finish" : "exited " + std::to_string(out->exit_code)) +
        (said.empty() ? "" : ": " + said));
  }
  return ParseVersionOutput(path, out->output);
}

ContainerEngine Complete(EngineCli cli, const ContainerSettings& settings,
                         std::vector<std::string> env) {
  ContainerEngine engine;
  engine.gpu_passing = settings.gpu_passing.value_or(
      cli.kind == EngineKind::kPodman ? GpuPassing::kCdi : GpuPassing::kGpusFlag);
  engine.cli = std::move(cli);
  engine.cdi_kind = settings.cdi_kind;
  engine.mounts = settings.mounts;
  engine.env = std::move(env);
  return engine;
}

}  // namespace

const char* EngineKindName(EngineKind kind) {
  return kind == EngineKind::kPodman ? "podman" : "docker";
}

const char* GpuPassingName(GpuPassing passing) {
  return passing == GpuPassing::kCdi ? "cdi" : "gpus-flag";
}

Result<GpuPassing> ParseGpuPassing(const std::string& text) {
  if (text == "cdi") return GpuPassing::kCdi;
  if (text == "gpus-flag") return GpuPassing::kGpusFlag;
  return InvalidArgument("--container-gpus: must be cdi or gpus-flag, got '" + text + "'");
}

Status ValidateCdiKind(const std::string& kind) {
  const size_t slash = kind.find('/');
  if (slash == std::string::npos || !CdiNamePart(kind.substr(0, slash), ".-") ||
      !CdiNamePart(kind.substr(slash + 1), "-_")) {
    return InvalidArgument("--cdi-kind: must be VENDOR/CLASS (e.g. " +
                           std::string(kDefaultCdiKind) + "), got '" + kind + "'");
  }
  return Status::Ok();
}

Result<DataMount> ParseDataMount(const std::string& spec) {
  auto bad = [&](const std::string& why) {
    return InvalidArgument("--container-mount '" + spec + "': " + why);
  };
  std::vector<std::string> parts;
  size_t start = 0;
  while (true) {
    const size_t colon = spec.find(':', start);
    parts.push_back(spec.substr(start, colon == std::string::npos ? colon : colon - start));
    if (colon == std::string::npos) break;
    start = colon + 1;
  }
  if (parts.size() < 2 || parts.size() > 3) {
    return bad("expected SRC:DST or SRC:DST:ro (paths without ':')");
  }
  if (parts.size() == 3 && parts[2] != "ro") {
    return bad("the option must be ro, got '" + parts[2] + "'");
  }
  DataMount mount{parts[0], parts[1], parts.size() == 3};
  for (const auto& [what, path] :
       {std::pair<const char*, const std::string&>{"SRC", mount.source}, {"DST", mount.target}}) {
    if (path.empty() || path[0] != '/') return bad(std::string(what) + " must be an absolute path");
    if (path.find(',') != std::string::npos) {
      return bad(std::string(what) + " must not contain ','");
    }
    if (HasDotDot(path)) return bad(std::string(what) + " must not contain '..'");
  }
  if (mount.target.find_first_not_of('/') == std::string::npos) {
    return bad("DST must not be the container's root");
  }
  struct stat st;
  if (stat(mount.source.c_str(), &st) != 0) {
    return bad("SRC " + mount.source + ": " + ErrnoText(errno));
  }
  return mount;
}

std::string Describe(const EngineCli& cli) {
  return std::string(EngineKindName(cli.kind)) + " " + cli.version;
}

Result<EngineCli> ParseVersionOutput(const std::string& path, const std::string& output) {
  const std::string line = Trim(output.substr(0, output.find('\n')));
  EngineCli cli;
  cli.path = path;
  std::string rest;
  if (line.rfind("podman version ", 0) == 0) {
    cli.kind = EngineKind::kPodman;
    rest = line.substr(15);
  } else if (line.rfind("Docker version ", 0) == 0) {
    cli.kind = EngineKind::kDocker;
    rest = line.substr(15);
  } else {
    return InvalidArgument("`" + path + " --version` answered '" + line +
                           "': neither podman nor docker");
  }
  cli.version = rest.substr(0, rest.find_first_of(", "));
  if (cli.version.empty()) {
    return InvalidArgument("`" + path + " --version` answered '" + line + "': no version");
  }
  return cli;
}

std::vector<std::string> EngineEnvironment(const std::map<std::string, std::string>& agent_env) {
  std::map<std::string, std::string> env;
  auto path = agent_env.find("PATH");
  env["PATH"] = path != agent_env.end() && !path->second.empty() ? path->second : kDefaultPath;
  for (const char* name : kEngineVariables) {
    if (auto it = agent_env.find(name); it != agent_env.end()) env[name] = it->second;
  }
  std::vector<std::string> out;
  out.reserve(env.size());
  for (const auto& [name, value] : env) out.push_back(std::string(name).append("=").append(value));
  return out;
}

Result<EngineSearch> FindContainerEngine(const ContainerSettings& settings) {
  CORRAL_RETURN_IF_ERROR(ValidateCdiKind(settings.cdi_kind));
  if (settings.choice == "none") return EngineSearch{std::nullopt, "--container-engine none"};
  std::map<std::string, std::string> agent_env;
  for (char** e = environ; e != nullptr && *e != nullptr; ++e) {
    const std::string entry = *e;
    const size_t eq = entry.find('=');
    if (eq != std::string::npos) agent_env.emplace(entry.substr(0, eq), entry.substr(eq + 1));
  }
  std::vector<std::string> env = EngineEnvironment(agent_env);
  if (settings.choice == "auto") {
    // EngineEnvironment() always sets PATH.
    const std::string path_list = std::find_if(env.begin(), env.end(), [](const std::string& e) {
                                    return e.rfind("PATH=", 0) == 0;
                                  })->substr(5);
    std::vector<std::string> problems;
    for (const char* name : {"podman", "docker"}) {
      const std::string path = FindExecutable(name, path_list);
      if (path.empty()) continue;
      Result<EngineCli> cli = AskVersion(path, env);
      if (cli.ok()) return EngineSearch{Complete(*cli, settings, env), ""};
      problems.push_back(cli.status().message());
    }
    if (problems.empty()) {
      return EngineSearch{std::nullopt, "no podman or docker in PATH (" + path_list + ")"};
    }
    std::string why;
    for (const std::string& p : problems) why += (why.empty() ? "" : "; ") + p;
    return EngineSearch{std::nullopt, why};
  }
  if (settings.choice.empty() || settings.choice[0] != '/') {
    return InvalidArgument("--container-engine: must be auto, none or an absolute path, got '" +
                           settings.choice + "'");
  }
  Result<EngineCli> cli = AskVersion(settings.choice, env);
  if (!cli.ok()) return InvalidArgument("--container-engine: " + cli.status().message());
  return EngineSearch{Complete(*cli, settings, env), ""};
}

std::string ContainerName(const std::string& scope, const TaskKey& key) {
  return "corral-" + (scope.empty() ? "" : scope + "-") + ToString(key);
}

std::vector<std::string> ContainerEnvironment(const TaskLaunch& launch,
                                              const std::string& node_name,
                                              const std::string& hostfile,
                                              const TaskChannel& channel) {
  TaskLaunch in_image = launch;
  if (in_image.environment) {
    in_image.environment->venv.clear();
    in_image.environment->conda.clear();
  }
  std::vector<std::string> env = TaskEnvironment(in_image, node_name, {}, hostfile, channel);
  std::vector<int> ordinals(launch.gpus.size());
  for (size_t i = 0; i < ordinals.size(); ++i) ordinals[i] = static_cast<int>(i);
  const std::string indices = JoinIndices(launch.gpus);
  const std::map<std::string, std::string> gpu_env = {
      {"CUDA_VISIBLE_DEVICES", JoinIndices(ordinals)},
      {"NVIDIA_VISIBLE_DEVICES", launch.gpus.empty() ? "void" : indices},
      {"CORRAL_GPU_INDICES", indices},
  };
  std::vector<std::string> out;
  for (const std::string& e : env) {
    if (gpu_env.count(e.substr(0, e.find('='))) == 0) out.push_back(e);
  }
  for (const auto& [name, value] : gpu_env) {
    out.push_back(std::string(name).append("=").append(value));
  }
  std::sort(out.begin(), out.end());
  return out;
}

Result<ContainerRun> PlanContainerRun(const ContainerEngine& engine, const TaskLaunch& launch,
                                      const std::string& name, const ContainerUser& user,
                                      const std::string& node_name, const std::string& hostfile,
                                      const std::string& env_file_path,
                                      const std::string& workdir_source,
                                      const TaskChannel& channel) {
  const std::string task = "task " + ToString(launch.key);
  auto bad = [&](const std::string& field, const std::string& why) {
    return InvalidArgument(task + ": field '" + field + "': " + why);
  };
  const std::string image = launch.environment ? launch.environment->image : "";
  if (image.empty()) {
    const std::string which = launch.environment
                                  ? " (environment '" + launch.environment->name + "@" +
                                        std::to_string(launch.environment->version) + "' has none)"
                                  : "";
    return bad("environment.image", "the container runtime needs an image" + which);
  }
  if (!protocol::IsImageReference(image)) {
    return bad("environment.image", "'" + image + "' is not an image reference");
  }
  if (!launch.script.empty()) {
    return bad("script",
               "a batch script runs in the process runtime only, not in a container yet (run "
               "the image's command with corral submit, or use a host environment)");
  }
  if (!launch.output_file.empty()) {
    return bad("output_file",
               "output files are written by `corral launch`, which the container runtime does "
               "not run yet (read the output with corral logs)");
  }
  if (!IsMountablePath(launch.workdir)) {
    return bad("workdir", "'" + launch.workdir +
                              "' contains ':' or ',', which a container bind mount cannot carry");
  }
  if (!hostfile.empty() && !IsMountablePath(hostfile)) {
    return InvalidArgument(task + ": the hostfile path '" + hostfile +
                           "' (under the agent's --work-dir) contains ':' or ','");
  }
  const std::string stop_dir =
      channel.stop_file.empty() ? "" : std::filesystem::path(channel.stop_file).parent_path();
  if (!stop_dir.empty() && !IsMountablePath(stop_dir)) {
    return InvalidArgument(task + ": the stop file's folder '" + stop_dir +
                           "' (under the agent's --work-dir) contains ':' or ','");
  }
  if (!channel.ca_cert.empty() && !IsMountablePath(channel.ca_cert)) {
    return InvalidArgument(task + ": the agent's --ca-cert '" + channel.ca_cert +
                           "' contains ':' or ',', which a container bind mount cannot carry");
  }
  if (!launch.checkpoint_dir.empty() && !IsMountablePath(launch.checkpoint_dir)) {
    return bad("checkpoint_dir", "'" + launch.checkpoint_dir +
                                     "' contains ':' or ',', which a container bind mount "
                                     "cannot carry");
  }
  for (const DataMount& m : engine.mounts) {
    if (m.target == launch.workdir || m.target == hostfile) {
      return bad(m.target == hostfile ? "distributed" : "workdir",
                 "'" + m.target + "' is also where --container-mount " + m.source + ":" + m.target +
                     " mounts");
    }
  }

  std::vector<std::string> command;
  if (launch.shell) command = {kShell, "-c"};
  command.insert(command.end(), launch.argv.begin(), launch.argv.end());
  // Without a corral binary (none is in the image) LaunchArgv() leaves argv[0] empty where it
  // would run `corral launch`.
  command = LaunchArgv(launch, command, /*self_exe=*/"");
  if (command[0].empty()) {
    const Distributed& d = *launch.distributed;
    return bad("distributed",
               "launcher " + std::string(model::LauncherName(d.launcher)) +
                   (d.launcher == model::Launcher::kMpi
                        ? " on part " + std::to_string(d.node_rank)
                        : " with procs_per_node " + std::to_string(d.procs_per_node)) +
                   " runs `corral launch`, which the container runtime does not run yet (use "
                   "procs_per_node 1 or torchrun, or the process runtime)");
  }

  ContainerRun run;
  for (const std::string& e : ContainerEnvironment(launch, node_name, hostfile, channel)) {
    const std::string name = e.substr(0, e.find('='));
    if (e.find_first_of("\n\r") != std::string::npos) {
      return bad("env." + name,
                 "has a line break, which the container engine's env file cannot "
                 "carry");
    }
    if (e.size() > kMaxEnvFileLine) {
      return bad("env." + name, "is longer than the container engine's env file takes (" +
                                    std::to_string(kMaxEnvFileLine) + " bytes with its name)");
    }
    run.env_file += e + "\n";
  }

  std::vector<std::string>& a = run.argv;
  // no-new-privileges and no capabilities: the engine runs as root and the image is the user's,
  // so a setuid binary in it must not make its processes root (or give them capabilities) over
  // the host directories mounted in (the workdir is the user's too). The container's processes
  // keep the task user's rights whatever the image holds (docs/container-runtime.md).
  a = {engine.cli.path,
       "run",
       "--rm",
       "--init",
       "--name",
       name,
       "--log-driver=none",
       "--network=host",
       "--security-opt=no-new-privileges",
       "--cap-drop=all",
       "--user",
       std::to_string(user.uid) + ":" + std::to_string(user.gid)};
  std::set<gid_t> added;
  for (gid_t g : user.groups) {
    if (g != user.gid && added.insert(g).second) {
      a.insert(a.end(), {"--group-add", std::to_string(g)});
    }
  }
  const std::string& source = workdir_source.empty() ? launch.workdir : workdir_source;
  a.insert(a.end(), {"-w", launch.workdir, "-v", source + ":" + launch.workdir});
  if (!hostfile.empty()) a.insert(a.end(), {"-v", hostfile + ":" + hostfile + ":ro"});
  if (!stop_dir.empty()) a.insert(a.end(), {"-v", stop_dir + ":" + stop_dir + ":ro"});
  if (!channel.ca_cert.empty()) {
    a.insert(a.end(), {"-v", channel.ca_cert + ":" + channel.ca_cert + ":ro"});
  }
  if (!launch.checkpoint_dir.empty()) {
    a.insert(a.end(), {"-v", launch.checkpoint_dir + ":" + launch.checkpoint_dir});
  }
  for (const DataMount& m : engine.mounts) {
    a.insert(a.end(), {"-v", m.source + ":" + m.target + (m.read_only ? ":ro" : "")});
  }
  if (launch.memory.value() > 0) {
    // Swap limited to the same as memory: none, as the process runtime's cgroups do.
    const std::string mib = std::to_string(launch.memory.value()) + "m";
    a.insert(a.end(), {"--memory=" + mib, "--memory-swap=" + mib});
  }
  if (launch.cpu.value() > 0) a.push_back("--cpus=" + CpusText(launch.cpu));
  if (!launch.gpus.empty()) {
    if (engine.gpu_passing == GpuPassing::kCdi) {
      for (int g : launch.gpus) {
        a.insert(a.end(), {"--device", engine.cdi_kind + "=" + std::to_string(g)});
      }
    } else {
      // The value is CSV to docker: the quotes keep "device=1,3" one field.
      a.insert(a.end(), {"--gpus", "\"device=" + JoinIndices(launch.gpus) + "\""});
    }
  }
  a.insert(a.end(), {"--env-file", env_file_path, "--", image});
  a.insert(a.end(), command.begin(), command.end());
  return run;
}

Status RemoveContainer(const ContainerEngine& engine, const std::string& name) {
  std::vector<std::string> argv = {engine.cli.path, "rm", "-f"};
  if (engine.cli.kind == EngineKind::kPodman) argv.insert(argv.end(), {"--time", "0"});
  argv.push_back(name);
  Result<EngineOutput> out = RunEngineCommand(argv, engine.env, kRemoveTimeout);
  if (!out.ok()) return out.status();
  if (out->exit_code == 0 || Lower(out->output).find("no such container") != std::string::npos) {
    return Status::Ok();
  }
  return IoError(
      "`" + std::string(EngineKindName(engine.cli.kind)) + " rm -f " + name + "` " +
      (out->exit_code < 0 ? "did not finish" : "exited " + std::to_string(out->exit_code)) + ": " +
      Trim(out->output));
}

Result<EngineOutput> RunEngineCommand(const std::vector<std::string>& argv,
                                      const std::vector<std::string>& env, Seconds timeout) {
  int fds[2];
  if (pipe2(fds, O_CLOEXEC) != 0) return IoError("pipe: " + ErrnoText(errno));
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, STDIN_FILENO, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDOUT_FILENO);
  posix_spawn_file_actions_adddup2(&actions, fds[1], STDERR_FILENO);
  // The agent's other descriptors (sockets, task files) stay with the agent.
  posix_spawn_file_actions_addclosefrom_np(&actions, 3);
  std::vector<char*> args, envp;
  for (const std::string& s : argv) args.push_back(const_cast<char*>(s.c_str()));
  args.push_back(nullptr);
  for (const std::string& s : env) envp.push_back(const_cast<char*>(s.c_str()));
  envp.push_back(nullptr);
  pid_t pid = 0;
  const int spawned = posix_spawn(&pid, args[0], &actions, nullptr, args.data(), envp.data());
  posix_spawn_file_actions_destroy(&actions);
  close(fds[1]);
  if (spawned != 0) {
    close(fds[0]);
    return IoError("cannot run " + argv[0] + ": " + ErrnoText(spawned));
  }
  // Read until the command exits (or the deadline): a process it left behind may hold the pipe
  // open after it has gone, and a command may close its output before it is done.
  EngineOutput result;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(timeout.value());
  int status = 0;
  bool exited = false;
  bool eof = false;
  auto read_some = [&](int wait_ms) {
    pollfd p{fds[0], POLLIN, 0};
    if (eof || poll(&p, 1, wait_ms) <= 0) return false;
    char buffer[4096];
    const ssize_t n = read(fds[0], buffer, sizeof(buffer));
    if (n <= 0) {
      eof = n == 0 || errno != EINTR;
      return false;
    }
    const size_t room = kMaxOutput - std::min(kMaxOutput, result.output.size());
    result.output.append(buffer, std::min(static_cast<size_t>(n), room));
    return true;
  };
  while (!exited && std::chrono::steady_clock::now() < deadline) {
    if (eof) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    } else {
      read_some(10);
    }
    exited = waitpid(pid, &status, WNOHANG) == pid;
  }
  while (exited && read_some(0)) {
  }
  close(fds[0]);
  if (!exited) {
    kill(pid, SIGKILL);
    while (waitpid(pid, &status, 0) < 0 && errno == EINTR) {
    }
  }
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace corral::agent
