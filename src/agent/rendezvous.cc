#include "agent/rendezvous.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "common/json_parse.h"

namespace corral::agent {
namespace {

using model::Launcher;

constexpr char kNodeRank[] = "NODE_RANK";
constexpr char kLocalWorldSize[] = "LOCAL_WORLD_SIZE";
constexpr char kTfConfig[] = "TF_CONFIG";
constexpr char kJaxCoordinator[] = "JAX_COORDINATOR_ADDRESS";

// "host:port", with an IPv6 address in brackets.
std::string HostPort(const std::string& host, int port) {
  const std::string p = std::to_string(port);
  return host.find(':') == std::string::npos ? host + ":" + p : "[" + host + "]:" + p;
}

// The integer value of `name` in `env`, or `fallback` when it is missing or not an integer.
int64_t IntValue(const std::map<std::string, std::string>& env, const char* name,
                 int64_t fallback) {
  auto it = env.find(name);
  if (it == env.end()) return fallback;
  int64_t value = 0;
  const char* end = it->second.data() + it->second.size();
  auto [ptr, ec] = std::from_chars(it->second.data(), end, value);
  return ec == std::errc() && ptr == end ? value : fallback;
}

}  // namespace

std::map<std::string, std::string> DistributedEnvironment(const TaskLaunch& launch) {
  if (!launch.distributed) return {};
  const Distributed& d = *launch.distributed;
  const int world = d.nodes * d.procs_per_node;
  std::map<std::string, std::string> env = {
      {"MASTER_ADDR", d.master_addr},
      {"MASTER_PORT", std::to_string(d.port)},
      {"NNODES", std::to_string(d.nodes)},
      {kNodeRank, std::to_string(d.node_rank)},
      {"GROUP_RANK", std::to_string(d.node_rank)},
      {kLocalWorldSize, std::to_string(d.procs_per_node)},
      {"WORLD_SIZE", std::to_string(world)},
      {"CORRAL_LAUNCHER", std::string(model::LauncherName(d.launcher))},
  };
  switch (d.launcher) {
    case Launcher::kDeepspeed:
      env["CROSS_RANK"] = std::to_string(d.node_rank);
      env["CROSS_SIZE"] = std::to_string(d.nodes);
      env["LOCAL_SIZE"] = std::to_string(d.procs_per_node);
      break;
    case Launcher::kTf: {
      // One port per rank (the server reserves N × P for tf), so that two parts sharing a
      // host never list the same one.
      nlohmann::json workers = nlohmann::json::array();
      int rank = 0;
      for (const std::string& host : d.hosts) {
        for (int local = 0; local < d.procs_per_node; ++local) {
          workers.push_back(HostPort(host, d.port + rank++));
        }
      }
      nlohmann::json config = {
          {"cluster", {{"worker", workers}}},
          {"task", {{"type", "worker"}, {"index", d.node_rank * d.procs_per_node}}}};
      env[kTfConfig] = config.dump();
      break;
    }
    case Launcher::kJax:
      env[kJaxCoordinator] = HostPort(d.master_addr, d.port);
      env["JAX_NUM_PROCESSES"] = std::to_string(world);
      break;
    case Launcher::kNone:
    case Launcher::kTorchrun:
    case Launcher::kMpi:
      break;
  }
  return env;
}

std::map<std::string, std::string> RankEnvironment(
    const std::map<std::string, std::string>& node_env, int local_rank) {
  const int64_t rank =
      IntValue(node_env, kNodeRank, 0) * IntValue(node_env, kLocalWorldSize, 1) + local_rank;
  std::map<std::string, std::string> env = {{"RANK", std::to_string(rank)},
                                            {"LOCAL_RANK", std::to_string(local_rank)}};
  if (auto it = node_env.find(kTfConfig); it != node_env.end()) {
    nlohmann::json config = ParseJsonOrNull(it->second);
    if (config.is_object() && config.contains("task") && config["task"].is_object()) {
      config["task"]["index"] = rank;
      env[kTfConfig] = config.dump();
    }
  }
  if (node_env.count(kJaxCoordinator) != 0) env["JAX_PROCESS_ID"] = std::to_string(rank);
  if (node_env.count("SLURM_PROCID") != 0) {  // a batch task (SlurmEnvironment)
    env["SLURM_PROCID"] = std::to_string(rank);
    env["SLURM_LOCALID"] = std::to_string(local_rank);
  }
  // TensorFlow and JAX take memory on every GPU they see: with several processes per part,
  // each gets its own equal slice of the part's GPUs (torch-style code picks by LOCAL_RANK).
  auto launcher = node_env.find("CORRAL_LAUNCHER");
  auto visible = node_env.find("CUDA_VISIBLE_DEVICES");
  const int64_t procs = IntValue(node_env, kLocalWorldSize, 1);
  if (launcher != node_env.end() && (launcher->second == "tf" || launcher->second == "jax") &&
      visible != node_env.end() && procs > 1) {
    std::vector<std::string> gpus;
    for (size_t start = 0; start < visible->second.size();) {
      size_t comma = visible->second.find(',', start);
      if (comma == std::string::npos) comma = visible->second.size();
      if (comma > start) gpus.push_back(visible->second.substr(start, comma - start));
      start = comma + 1;
    }
    if (!gpus.empty() && static_cast<int64_t>(gpus.size()) % procs == 0) {
      const size_t per = gpus.size() / static_cast<size_t>(procs);
      std::string slice;
      for (size_t g = static_cast<size_t>(local_rank) * per; g < (local_rank + 1) * per; ++g) {
        slice += (slice.empty() ? "" : ",") + gpus[g];
      }
      env["CUDA_VISIBLE_DEVICES"] = slice;
    }
  }
  return env;
}

bool SetsRankVariables(Launcher launcher) {
  return launcher == Launcher::kNone || launcher == Launcher::kDeepspeed ||
         launcher == Launcher::kTf || launcher == Launcher::kJax;
}

std::string Hostfile(const Distributed& d) {
  std::vector<std::pair<std::string, int>> parts;  // host, parts on it; first-appearance order
  for (const std::string& host : d.hosts) {
    auto it = std::find_if(parts.begin(), parts.end(),
                           [&](const auto& entry) { return entry.first == host; });
    if (it == parts.end()) {
      parts.emplace_back(host, 1);
    } else {
      ++it->second;
    }
  }
  std::string out;
  for (const auto& [host, count] : parts) {
    out += host + " slots=" + std::to_string(count * d.procs_per_node) + "\n";
  }
  return out;
}

std::map<std::string, std::string> HostfileEnvironment(const Distributed& d,
                                                       const std::string& path) {
  std::map<std::string, std::string> env = {{"CORRAL_HOSTFILE", path}};
  if (d.launcher == Launcher::kMpi) env["OMPI_MCA_orte_default_hostfile"] = path;
  return env;
}

bool IsRendezvousEnvName(const Distributed& d, const std::string& name) {
  // Derived from the functions that set the variables, so that the two cannot disagree.
  TaskLaunch launch;
  launch.distributed = d;
  const std::map<std::string, std::string> node = DistributedEnvironment(launch);
  if (node.count(name) != 0 || HostfileEnvironment(d, "").count(name) != 0) return true;
  return SetsRankVariables(d.launcher) && RankEnvironment(node, 0).count(name) != 0;
}

namespace {

// Whether the torchrun options leading `argv` (the words before its script) set `option`
// ("--redirects"), as "--redirects=3" or "--redirects 3". The short forms are -r and -t.
bool GivesTorchrunOption(const std::vector<std::string>& argv, const std::string& option) {
  const std::string short_form = option == "--redirects" ? "-r" : "-t";
  for (const std::string& word : argv) {
    if (word.empty() || word[0] != '-') return false;  // the script: its own options follow
    if (word == option || word.rfind(option + "=", 0) == 0 || word == short_form ||
        word.rfind(short_form + "=", 0) == 0) {
      return true;
    }
  }
  return false;
}

}  // namespace

namespace {

// LaunchArgv without the output files.
std::vector<std::string> PartArgv(const TaskLaunch& launch, const std::vector<std::string>& argv,
                                  const std::string& self_exe) {
  if (!launch.distributed) return argv;
  const Distributed& d = *launch.distributed;
  std::vector<std::string> out;
  if (d.launcher == Launcher::kTorchrun) {
    out = {"torchrun",
           "--nnodes=" + std::to_string(d.nodes),
           "--nproc_per_node=" + std::to_string(d.procs_per_node),
           "--node_rank=" + std::to_string(d.node_rank),
           "--master_addr=" + d.master_addr,
           "--master_port=" + std::to_string(d.port)};
    // Debian 12's torch 1.13 under Python 3.11 crashes in torchrun with its default
    // --redirects=0 --tee=0; 2 (stderr to a file, still teed to the log) works everywhere.
    // Options the job gives itself (before its script) win.
    for (const char* option : {"--redirects", "--tee"}) {
      if (!GivesTorchrunOption(argv, option)) out.push_back(option + std::string("=2"));
    }
  } else if (d.launcher == Launcher::kMpi) {
    if (d.node_rank != 0) return {self_exe, "launch", "--hold"};
  } else if (d.procs_per_node > 1) {
    out = {self_exe, "launch", "--procs", std::to_string(d.procs_per_node), "--"};
  }
  out.insert(out.end(), argv.begin(), argv.end());
  return out;
}

}  // namespace

std::vector<std::string> LaunchArgv(const TaskLaunch& launch, const std::vector<std::string>& argv,
                                    const std::string& self_exe) {
  std::vector<std::string> out = PartArgv(launch, argv, self_exe);
  if (launch.output_file.empty() && launch.error_file.empty()) return out;
  const std::vector<std::string> launch_procs = {self_exe, "launch", "--procs"};
  if (out == std::vector<std::string>{self_exe, "launch", "--hold"}) {
    return out;  // an mpi part that only holds its node: it writes nothing
  }
  std::vector<std::string> tee;
  if (!launch.output_file.empty()) tee.insert(tee.end(), {"--output", launch.output_file});
  if (!launch.error_file.empty()) tee.insert(tee.end(), {"--error", launch.error_file});
  // One part alone owns its files, which start empty as Slurm's do; parts that may share them
  // append.
  if (launch.tasks == 1) tee.emplace_back("--truncate");
  if (out.size() >= 3 && std::equal(launch_procs.begin(), launch_procs.end(), out.begin())) {
    out.insert(out.begin() + 2, tee.begin(), tee.end());
    return out;
  }
  std::vector<std::string> wrapped = {self_exe, "launch", "--procs", "1"};
  wrapped.insert(wrapped.end(), tee.begin(), tee.end());
  wrapped.emplace_back("--");
  wrapped.insert(wrapped.end(), out.begin(), out.end());
  return wrapped;
}

}  // namespace corral::agent
