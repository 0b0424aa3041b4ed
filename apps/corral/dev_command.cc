#include "dev_command.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <thread>

#include "agent/agent_loop.h"
#include "agent/agent_process.h"
#include "agent/host_setup.h"
#include "agent/task_user.h"
#include "common/shutdown_signal.h"
#include "server/checkpoint_flags.h"
#include "server/elastic_flags.h"
#include "server/server_process.h"

namespace corral {

namespace {

struct DevFlags {
  std::string data_dir = ".corral/dev";
  std::string listen = "127.0.0.1:8080";
  std::string fake_gpus;
  std::string policy{sched::kDefaultPolicy};
  std::string web_dir = server::DefaultWebDir();  // the source tree's web/dist when built
  // GPU metrics (docs/monitoring.md): how often the agent samples, what fake GPUs read for a
  // task that declares no FAKE_GPU_UTILIZATION, and the server's idle rule. Short values let a
  // test see samples and idle flags in seconds (tests/web/dashboard_e2e.mjs).
  double metrics_interval_s = 5;
  int fake_gpu_utilization = 80;
  int gpu_idle_threshold_percent = 10;
  int gpu_idle_after_s = 1800;
  int64_t cpus = 0, memory_mib = 0;   // what the node offers; 0: detected (fake GPUs: >= 8 each)
  bool show_all_work = false;         // server::ServerOptions::show_all_work
  std::string keep_finished = "90d";  // server::ServerOptions::keep_finished
  std::string partitions_file;        // server::ServerOptions::partitions_file
  server::ElasticFlags elastic;
  server::CheckpointFlags checkpoints;
};

int RunDev(const DevFlags& f) {
  BlockShutdownSignals();
  std::error_code ec;
  const std::string data_dir = std::filesystem::absolute(f.data_dir, ec).string();
  std::filesystem::create_directories(data_dir, ec);
  if (ec) {
    std::cerr << "corral dev: cannot create " << data_dir << ": " << ec.message() << "\n";
    return 1;
  }
  server::ServerOptions options;
  options.listen = f.listen;
  options.next_free_port = true;
  options.store_url = "sqlite:" + data_dir + "/corral.db";
  options.data_dir = data_dir;
  // Checkpoints in the data folder: the one node is the agent beside the server (docs/in-job.md).
  options.checkpoint_root = data_dir + "/checkpoints";
  std::filesystem::create_directories(options.checkpoint_root, ec);
  if (ec) {
    std::cerr << "corral dev: cannot create " << options.checkpoint_root << ": " << ec.message()
              << "\n";
    return 1;
  }
  options.policy = f.policy;
  options.web_dir = f.web_dir;
  options.gpu_idle_threshold_percent = f.gpu_idle_threshold_percent;
  options.gpu_idle_after_s = f.gpu_idle_after_s;
  options.show_all_work = f.show_all_work;
  options.partitions_file = f.partitions_file;
  auto keep = server::ParseKeepFinished(f.keep_finished, "--keep-finished");
  if (!keep.ok()) {
    std::cerr << "corral dev: " << keep.status().message() << "\n";
    return 2;
  }
  options.keep_finished = *keep;
  for (Status s : {server::ApplyElasticFlags(f.elastic, options),
                   server::ApplyCheckpointFlags(f.checkpoints, options)}) {
    if (!s.ok()) {
      std::cerr << "corral dev: " << s.message() << "\n";
      return 2;
    }
  }
  auto server = server::ServerProcess::Create(options);
  if (!server.ok()) {
    std::cerr << "corral dev: " << server.status().message() << "\n";
    return 1;
  }
  if (Status started = (*server)->Start(); !started.ok()) {
    std::cerr << "corral dev: " << started.message() << "\n";
    (*server)->Stop();
    return 1;
  }

  // GPUs: NVML when the machine has a driver (unless fakes are asked for), else 8 fake A100s.
  agent::AgentProcessOptions agent_options;
  Result<ServerList> servers = ServerList::Parse((*server)->url());
  if (!servers.ok()) {  // the server's own URL: a bug
    std::cerr << "corral dev: " << servers.status().message() << "\n";
    (*server)->Stop();
    return 1;
  }
  agent_options.agent.servers = *std::move(servers);
  agent_options.agent.join_token = (*server)->join_token();
  agent_options.agent.name = "dev";
  Result<int> interval = agent::MetricsIntervalMs(f.metrics_interval_s);
  if (!interval.ok()) {
    std::cerr << "corral dev: " << interval.status().message() << "\n";
    return 2;
  }
  agent_options.agent.metrics_interval_ms = *interval;
  // How the server reaches the node's sessions (docs/sessions.md): the name "dev" resolves
  // nowhere, and both run here.
  agent_options.agent.address = "127.0.0.1";
  // What the host offers environments (the built-in host and python ones need nothing else).
  agent::HostSetup host = agent::FindHostSetup();
  if (const std::string warning = agent::DroppedPrefixesWarning(host); !warning.empty()) {
    std::cerr << "corral dev: " << warning << "\n";
  }
  agent_options.agent.tools = std::move(host.tools);
  agent_options.agent.env_prefixes = std::move(host.env_prefixes);
  agent_options.work_dir = data_dir + "/agent";
  agent_options.fake_gpus = f.fake_gpus;
  agent_options.fake_gpus_without_nvml = "8xA100-80GB";
  agent_options.fake_gpu_utilization = f.fake_gpu_utilization;
  agent_options.cpus = f.cpus;
  agent_options.memory_mib = f.memory_mib;
  // Tasks run as the user running corral dev; without a user database entry for it (a container
  // started with an arbitrary uid), as that uid all the same, with HOME from the environment.
  if (auto user = agent::CurrentUserName(); user.ok()) agent_options.runtime.task_user = *user;
  auto agent = agent::AgentProcess::Create(std::move(agent_options));
  if (!agent.ok()) {
    std::cerr << "corral dev: " << agent.status().message() << "\n";
    return agent.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
  }
  const std::string gpus_note =
      (*agent)->fake_gpus().empty() ? "" : " (fake GPUs: " + (*agent)->fake_gpus() + ")";
  std::atomic<bool> stop{false};
  std::thread agent_thread([&] {
    // Only an error the agent cannot go on after ends it early (a fatal registration error, a
    // runtime that cannot be created); the server keeps serving.
    if (Status s = (*agent)->Run(stop); !s.ok()) {
      std::cerr << "corral dev: agent: " << s.message() << "\n";
    }
  });

  std::string token;
  std::ifstream(data_dir + "/admin.token") >> token;
  const std::string url = (*server)->url();
  std::cout << "corral dev: a one-machine cluster" << gpus_note << "\n"
            << (f.web_dir.empty() ? "  status page:        " : "  dashboard:          ") << url
            << "/" << (f.web_dir.empty() ? "  (no dashboard: `make web` builds it)" : "") << "\n"
            << "  sessions:           " << (*server)->session_url()
            << "/sessions/<id>/  (the session gateway)\n"
            << "  admin token:        " << token << "  (also in " << data_dir << "/admin.token)\n"
            << "  data:               " << data_dir << "\n"
            << "  placement policy:   " << f.policy << "  (--policy; docs/placement.md)\n\n"
            << "Try, in another terminal:\n"
            << "  export CORRAL_SERVER=" << url << " CORRAL_TOKEN=$(cat " << data_dir
            << "/admin.token)\n"
            << "  build/corral submit --gpus 2 -- nvidia-smi || build/corral submit --gpus 2 "
               "--shell -- 'echo GPUs: $CUDA_VISIBLE_DEVICES; sleep 5'\n"
            << "  build/corral jobs --all\n"
            << "  build/corral logs 1\n"
            << "  build/corral nodes\n"
            << "Stop with Ctrl-C.\n"
            << std::flush;
  WaitForShutdownSignal();
  stop = true;
  agent_thread.join();
  (*server)->Stop();
  return 0;
}

}  // namespace

void AddDevCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<DevFlags>();
  CLI::App* c = app.add_subcommand("dev", "Run a one-machine cluster: server and agent together");
  c->add_option("--data-dir", f->data_dir, "Where the SQLite store, logs and tokens live");
  c->add_option("--listen", f->listen, "HOST:PORT (the next free port if taken)");
  c->add_option("--fake-gpus", f->fake_gpus, "Fake GPUs, e.g. 8xA100-80GB (default when no NVML)");
  c->add_option("--policy", f->policy, "Placement policy (docs/placement.md)")
      ->check(CLI::IsMember(sched::PolicyNames()))
      ->capture_default_str();
  c->add_option("--web-dir", f->web_dir,
                "The built dashboard served at / (default: this source tree's web/dist when "
                "`make web` built it; \"\": the plain status page)");
  c->add_option("--cpus", f->cpus,
                "Whole CPUs the node offers to jobs (default: the online CPUs; with fake GPUs at "
                "least 8 per GPU)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 20));
  c->add_option("--memory-mib", f->memory_mib,
                "Memory the node offers to jobs, MiB (default: MemTotal)")
      ->check(CLI::Range(int64_t{1}, int64_t{1} << 40));
  c->add_option("--metrics-interval", f->metrics_interval_s,
                "Seconds between the agent's GPU samples: 0.1 to 15, or 0 for none")
      ->capture_default_str();
  c->add_option("--fake-gpu-utilization", f->fake_gpu_utilization,
                "With fake GPUs: the utilisation (0..100) of a task that does not declare "
                "FAKE_GPU_UTILIZATION in its environment")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  c->add_option("--gpu-idle-threshold", f->gpu_idle_threshold_percent,
                "An allocated GPU under this utilisation (percent) is idle")
      ->check(CLI::Range(0, 100))
      ->capture_default_str();
  c->add_option("--gpu-idle-after", f->gpu_idle_after_s,
                "Seconds an allocated GPU must stay idle before it is flagged")
      ->check(CLI::Range(0, 365 * 24 * 3600))
      ->capture_default_str();
  c->add_flag("--show-all-work", f->show_all_work,
              "Show every user the jobs, users and projects on every GPU (default: other "
              "projects' work is only \"in use\")");
  c->add_option("--keep-finished", f->keep_finished,
                "How long finished jobs stay in the store after they ended, with their logs, as "
                "90d, 12h (0 or forever: keep every job)")
      ->capture_default_str();
  c->add_option("--partitions-file", f->partitions_file,
                "Partitions and QoS (YAML/JSON), as corral server's (docs/batch.md)");
  server::AddElasticFlags(*c, f->elastic);
  server::AddCheckpointFlags(*c, f->checkpoints);
  c->callback([f, exit_code] { *exit_code = RunDev(*f); });
}

}  // namespace corral
