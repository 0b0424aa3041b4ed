#include "agent/agent_command.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <iostream>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "agent/agent_loop.h"
#include "agent/agent_process.h"
#include "agent/container_engine.h"
#include "agent/file_io.h"
#include "agent/host_setup.h"
#include "agent/task_user.h"
#include "common/shutdown_signal.h"
#include "model/node.h"

namespace corral::agent {

namespace {

constexpr char kJoinTokenEnv[] = "CORRAL_JOIN_TOKEN";

struct AgentFlags {
  AgentOptions options;
  std::string fake_gpus;
  int fake_gpu_utilization = 80;
  double metrics_interval_s = 5;
  std::string work_dir;
  std::string task_user;
  bool run_as_submitter = false;
  std::string task_user_map;  // a file; "" for none
  int64_t min_task_uid = 1000;
  int64_t max_task_uid = 60000;
  std::string join_token_file;
  std::vector<std::string> labels;   // KEY=VALUE
  int64_t cpus = 0, memory_mib = 0;  // --cpus, --memory-mib: 0 for the detected values
  ContainerSettings container;
  std::string container_gpus;                 // "" (the engine's default), cdi, gpus-flag
  std::vector<std::string> container_mounts;  // SRC:DST[:ro]
  std::string servers;                        // --server: one URL or several, comma-separated
  CLI::Option* join_token_flag = nullptr;     // counted: given or not
  CLI::Option* join_token_file_flag = nullptr;
};

// The --task-user-map file's map; empty without one. The map is for --run-as-submitter only.
// It says who becomes whom on this node, so, read as root, it must be root's and writable by
// no one else (as sudo asks of sudoers). Every user it names must exist here with a uid in the
// agent's range: a mistake shows at startup, not when someone's job fails.
Result<std::map<std::string, std::string>> UserMapOf(const AgentFlags& f) {
  if (f.task_user_map.empty()) return std::map<std::string, std::string>{};
  if (!f.run_as_submitter) return InvalidArgument("--task-user-map needs --run-as-submitter");
  const std::string what = "--task-user-map: " + f.task_user_map;
  struct stat st {};
  if (stat(f.task_user_map.c_str(), &st) != 0)
    return InvalidArgument(what + ": " + ErrnoText(errno));
  if (geteuid() == 0 && (st.st_uid != 0 || (st.st_mode & (S_IWGRP | S_IWOTH)) != 0)) {
    return InvalidArgument(what + ": must be owned by root and writable by no one else");
  }
  Result<std::string> text = ReadFile(f.task_user_map);
  if (!text.ok()) return InvalidArgument("--task-user-map: " + text.status().message());
  Result<std::map<std::string, std::string>> map = ParseUserMap(*text);
  if (!map.ok()) return InvalidArgument(what + ": " + map.status().message());
  for (const auto& [corral_user, unix_user] : *map) {
    Result<TaskUser> user = LookUpUser(unix_user);
    if (!user.ok()) return InvalidArgument(what + ": " + user.status().message());
    if (user->uid < f.min_task_uid || user->uid > f.max_task_uid) {
      return InvalidArgument(what + ": '" + corral_user + "' is mapped to uid " +
                             std::to_string(user->uid) + ", outside --min-task-uid " +
                             std::to_string(f.min_task_uid) + " .. --max-task-uid " +
                             std::to_string(f.max_task_uid));
    }
  }
  return map;
}

// The first line of `path` without surrounding blanks.
Result<std::string> ReadJoinTokenFile(const std::string& path) {
  Result<std::string> text = ReadFile(path);
  if (!text.ok()) return InvalidArgument("--join-token-file: " + text.status().message());
  std::string line = text->substr(0, text->find('\n'));
  const char* blanks = " \t\r";
  const size_t first = line.find_first_not_of(blanks);
  if (first == std::string::npos) {
    return InvalidArgument("--join-token-file: " + path + " is empty");
  }
  return line.substr(first, line.find_last_not_of(blanks) + 1 - first);
}

// The join token from exactly one of its sources. --join-token is the last resort: argv is
// visible to every local user (ps, /proc/PID/cmdline).
Result<std::string> JoinToken(const AgentFlags& f) {
  const char* env = std::getenv(kJoinTokenEnv);
  const bool from_env = env != nullptr && *env != '\0';
  std::vector<std::string> given;
  if (f.join_token_file_flag->count() > 0) given.push_back("--join-token-file");
  if (from_env) given.push_back(kJoinTokenEnv);
  if (f.join_token_flag->count() > 0) given.push_back("--join-token");
  if (given.empty()) {
    return InvalidArgument(
        "give the join token with --join-token-file, CORRAL_JOIN_TOKEN or --join-token");
  }
  if (given.size() > 1) {
    std::string names = given[0];
    for (size_t i = 1; i < given.size(); ++i) {
      names += (i + 1 == given.size() ? " and " : ", ") + given[i];
    }
    return InvalidArgument("the join token is given by " + names + ": give exactly one");
  }
  if (f.join_token_file_flag->count() > 0) return ReadJoinTokenFile(f.join_token_file);
  if (from_env) return std::string(env);
  if (f.options.join_token.empty()) return InvalidArgument("--join-token: empty");
  return f.options.join_token;
}

// --label KEY=VALUE items, validated as the server will (model::ValidateLabel).
Result<std::map<std::string, std::string>> ParseLabels(const std::vector<std::string>& items) {
  std::map<std::string, std::string> labels;
  for (const std::string& item : items) {
    const size_t eq = item.find('=');
    if (eq == std::string::npos)
      return InvalidArgument("--label '" + item + "': expected KEY=VALUE");
    const std::string key = item.substr(0, eq), value = item.substr(eq + 1);
    Status valid = model::ValidateLabel(key, value);
    if (!valid.ok()) return InvalidArgument("--label: " + valid.message());
    if (!labels.emplace(key, value).second) {
      return InvalidArgument("--label '" + key + "' given twice");
    }
  }
  return labels;
}

// The container engine of the node, or none (printed either way: operators should see which).
Result<std::optional<ContainerEngine>> ContainerEngineOf(AgentFlags& f) {
  if (!f.container_gpus.empty()) {
    Result<GpuPassing> passing = ParseGpuPassing(f.container_gpus);
    if (!passing.ok()) return passing.status();
    f.container.gpu_passing = *passing;
  }
  for (const std::string& spec : f.container_mounts) {
    Result<DataMount> mount = ParseDataMount(spec);
    if (!mount.ok()) return mount.status();
    f.container.mounts.push_back(*mount);
  }
  Result<EngineSearch> search = FindContainerEngine(f.container);
  if (!search.ok()) return search.status();
  if (!search->engine) {
    std::cout << "corral agent: no container engine: " << search->why_none << "\n";
    return std::optional<ContainerEngine>();
  }
  const ContainerEngine& e = *search->engine;
  std::cout << "corral agent: container engine " << Describe(e.cli) << " (" << e.cli.path
            << "), GPUs by " << GpuPassingName(e.gpu_passing)
            << (e.gpu_passing == GpuPassing::kCdi ? " " + e.cdi_kind : "") << "\n";
  return search->engine;
}

int RunAgentCommand(AgentFlags& f) {
  Result<ServerList> servers = ServerList::Parse(f.servers);
  if (!servers.ok()) {
    std::cerr << "corral agent: --server: " << servers.status().message() << "\n";
    return 2;
  }
  f.options.servers = *std::move(servers);
  auto labels = ParseLabels(f.labels);
  if (!labels.ok()) {
    std::cerr << "corral agent: " << labels.status().message() << "\n";
    return 2;
  }
  f.options.labels = *labels;
  if (Status valid = model::ValidateNodeAddress(f.options.address);
      !f.options.address.empty() && !valid.ok()) {
    std::cerr << "corral agent: --address: " << valid.message() << "\n";
    return 2;
  }
  Result<std::string> join_token = JoinToken(f);
  if (!join_token.ok()) {
    std::cerr << "corral agent: " << join_token.status().message() << "\n";
    return 2;
  }
  f.options.join_token = *join_token;
  if (geteuid() == 0 && f.task_user.empty() && !f.run_as_submitter) {
    std::cerr << "corral agent: running as root: give --task-user or --run-as-submitter (tasks "
                 "would otherwise run as root; --task-user root allows it explicitly)\n";
    return 2;
  }
  Result<std::map<std::string, std::string>> user_map = UserMapOf(f);
  if (!user_map.ok()) {
    std::cerr << "corral agent: " << user_map.status().message() << "\n";
    return 2;
  }
  Result<std::optional<ContainerEngine>> engine = ContainerEngineOf(f);
  if (!engine.ok()) {
    std::cerr << "corral agent: " << engine.status().message() << "\n";
    return 2;
  }
  if (*engine) {
    f.options.runtimes = {"process", "container"};
    f.options.container_engine = Describe((*engine)->cli);
  }
  HostSetup host = FindHostSetup();
  if (const std::string warning = DroppedPrefixesWarning(host); !warning.empty()) {
    std::cerr << "corral agent: " << warning << "\n";
  }
  f.options.tools = std::move(host.tools);
  f.options.env_prefixes = std::move(host.env_prefixes);
  Result<int> interval = MetricsIntervalMs(f.metrics_interval_s);
  if (!interval.ok()) {
    std::cerr << "corral agent: " << interval.status().message() << "\n";
    return 2;
  }
  f.options.metrics_interval_ms = *interval;
  BlockShutdownSignals();
  AgentProcessOptions options;
  options.agent = f.options;
  options.work_dir = f.work_dir;
  options.fake_gpus = f.fake_gpus;
  options.fake_gpu_utilization = f.fake_gpu_utilization;
  options.cpus = f.cpus;
  options.memory_mib = f.memory_mib;
  options.runtime.task_user = f.task_user;
  options.runtime.run_as_submitter = f.run_as_submitter;
  options.runtime.user_map = std::move(user_map).value();
  options.runtime.min_task_uid = static_cast<uid_t>(f.min_task_uid);
  options.runtime.max_task_uid = static_cast<uid_t>(f.max_task_uid);
  options.runtime.container_engine = std::move(engine).value();
  auto agent = AgentProcess::Create(std::move(options));
  if (!agent.ok()) {
    std::cerr << "corral agent: " << agent.status().message() << "\n";
    const StatusCode code = agent.status().code();
    return code == StatusCode::kInvalidArgument || code == StatusCode::kPermissionDenied ||
                   code == StatusCode::kNotFound
               ? 2
               : 1;
  }
  std::atomic<bool> stop{false};
  StopOnShutdownSignal(stop);
  std::cout << "corral agent " << (*agent)->name() << " joining " << f.options.servers.ToString()
            << "\n"
            << std::flush;
  Status s = (*agent)->Run(stop);
  if (!s.ok()) {
    std::cerr << "corral agent: " << s.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void AddAgentCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<AgentFlags>();
  CLI::App* c = app.add_subcommand("agent", "Run the node agent: join a server, run its tasks");
  c->add_option("--server", f->servers,
                "http(s)://host:port of the server, or of several servers comma-separated (at "
                "most 16): the agent talks to the one that serves (the leader), and looks for it "
                "among them when it fails, its tasks running meanwhile")
      ->required();
  f->join_token_file_flag =
      c->add_option("--join-token-file", f->join_token_file,
                    "File whose first line is the cluster's join token (or set CORRAL_JOIN_TOKEN)");
  f->join_token_flag =
      c->add_option("--join-token", f->options.join_token,
                    "The cluster's join token; visible to other local users through ps: prefer "
                    "--join-token-file or CORRAL_JOIN_TOKEN");
  c->add_option("--name", f->options.name, "Node name (default: hostname)");
  c->add_option("--fake-gpus", f->fake_gpus, "Fake GPU inventory, e.g. 8xA100-80GB");
  c->add_option("--fake-gpu-utilization", f->fake_gpu_utilization,
                "With --fake-gpus: the utilisation (0..100) of a task that does not declare "
                "FAKE_GPU_UTILIZATION in its environment")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  c->add_option("--cpus", f->cpus,
                "Whole CPUs the node offers to jobs (default: the online CPUs, or the agent's "
                "cgroup quota; with --fake-gpus at least 8 per GPU)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--memory-mib", f->memory_mib,
                "Memory the node offers to jobs, MiB (default: MemTotal, or the agent's cgroup "
                "limit)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  c->add_option("--metrics-interval", f->metrics_interval_s,
                "Seconds between GPU samples sent to the server: 0.1 to 15, or 0 for none")
      ->capture_default_str();
  c->add_option("--work-dir", f->work_dir,
                "Absolute directory for the node id, task files, logs and scratch directories; "
                "one agent per work dir")
      ->required();
  c->add_option("--task-user", f->task_user,
                "Unix user every task runs as (required as root; otherwise only the agent's "
                "own user)");
  c->add_flag("--run-as-submitter", f->run_as_submitter,
              "Run each task as the Unix user named like its submitter, instead of --task-user "
              "(root only)")
      ->excludes("--task-user");
  c->add_option("--task-user-map", f->task_user_map,
                "File of 'CORRAL_USER UNIX_USER' lines: the Unix user of each submitter whose "
                "names differ (with --run-as-submitter)");
  c->add_option("--min-task-uid", f->min_task_uid,
                "With --run-as-submitter, the lowest uid a task may run as (keeps root and "
                "system accounts out)")
      ->check(CLI::Range(int64_t{1}, int64_t{4294967294}))
      ->needs("--run-as-submitter")
      ->capture_default_str();
  c->add_option("--max-task-uid", f->max_task_uid,
                "With --run-as-submitter, the highest uid a task may run as (keeps nobody and "
                "other service ids out)")
      ->check(CLI::Range(int64_t{1}, int64_t{4294967294}))
      ->needs("--run-as-submitter")
      ->capture_default_str();
  c->add_option("--ca-cert", f->options.ca_cert, "PEM bundle to verify an https server");
  c->add_option("--address", f->options.address,
                "Address other nodes reach this one at (distributed jobs' MASTER_ADDR and "
                "hostfiles; default: the node name)");
  c->add_option("--label", f->labels,
                "Node label KEY=VALUE (repeatable); 'rack' and 'switch' place multi-node jobs "
                "under one rack or switch");
  c->add_option("--container-engine", f->container.choice,
                "Container engine CLI for tasks whose environment runs in a container: auto "
                "(podman, else docker, from PATH), none, or the CLI's absolute path")
      ->capture_default_str();
  c->add_option("--container-gpus", f->container_gpus,
                "How containers get their GPUs: cdi (--device KIND=INDEX; podman's default) or "
                "gpus-flag (--gpus device=...; docker's default)");
  c->add_option("--cdi-kind", f->container.cdi_kind,
                "CDI device kind of the node's GPUs, with --container-gpus cdi")
      ->capture_default_str();
  c->add_option("--container-mount", f->container_mounts,
                "Host path every container sees, SRC:DST or SRC:DST:ro (repeatable; absolute "
                "paths without ',' ':' or '..'; SRC must exist)");
  c->callback([f, exit_code] { *exit_code = RunAgentCommand(*f); });
}

}  // namespace corral::agent
