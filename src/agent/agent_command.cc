#include "agent/agent_command.h"

#include <iostream>

#include "agent/agent_loop.h"
#include "agent/fake_probe.h"
#include "agent/host_resources.h"
#include "agent/nvml_probe.h"
#include "agent/process_runtime.h"
#include "common/shutdown_signal.h"

namespace corral::agent {

namespace {

struct AgentFlags {
  AgentOptions options;
  std::string fake_gpus;
};

int RunAgentCommand(AgentFlags& f) {
  BlockShutdownSignals();
  std::unique_ptr<GpuProbe> probe;
  if (!f.fake_gpus.empty()) {
    auto fake = FakeProbe::Create(f.fake_gpus, f.options.name.empty() ? "node" : f.options.name);
    if (!fake.ok()) {
      std::cerr << "corral agent: --fake-gpus: " << fake.status().message() << "\n";
      return 2;
    }
    probe = std::make_unique<FakeProbe>(std::move(fake).value());
  } else {
    auto nvml = NvmlProbe::Create();
    if (!nvml.ok()) {
      std::cerr << "corral agent: " << nvml.status().message() << "\n";
      return 1;
    }
    probe = std::move(nvml).value();
  }
  if (f.options.name.empty()) {
    auto host = DetectHostResources();
    if (host.ok()) f.options.name = host->hostname;
  }
  SystemClock clock;
  ProcessRuntimeOptions runtime_options;
  runtime_options.work_dir = f.options.work_dir;
  runtime_options.node_name = f.options.name;
  auto runtime = ProcessRuntime::Create(runtime_options, &clock);
  if (!runtime.ok()) {
    std::cerr << "corral agent: " << runtime.status().message() << "\n";
    return 2;
  }
  AgentLoop loop(f.options, *probe, **runtime);
  std::atomic<bool> stop{false};
  StopOnShutdownSignal(stop);
  std::cout << "corral agent " << f.options.name << " joining " << f.options.server_url << "\n"
            << std::flush;
  Status s = loop.Run(stop);
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
  c->add_option("--server", f->options.server_url, "http(s)://host:port of the server")->required();
  c->add_option("--join-token", f->options.join_token, "The cluster's join token")->required();
  c->add_option("--name", f->options.name, "Node name (default: hostname)");
  c->add_option("--fake-gpus", f->fake_gpus, "Fake GPU inventory, e.g. 8xA100-80GB");
  c->add_option("--work-dir", f->options.work_dir, "Absolute directory for task files and logs")
      ->required();
  c->add_option("--ca-cert", f->options.ca_cert, "PEM bundle to verify an https server");
  c->callback([f, exit_code] { *exit_code = RunAgentCommand(*f); });
}

}  // namespace corral::agent
