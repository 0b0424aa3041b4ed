#include "agent/agent_process.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <iostream>
#include <optional>
#include <random>
#include <thread>

#include "agent/host_resources.h"
#include "agent/nvml_probe.h"
#include "model/node.h"
#include "protocol/names.h"

namespace corral::agent {
namespace {

// The GPU probe the options ask for, and the fake inventory when it is fakes ("" for NVML).
struct Probe {
  std::unique_ptr<GpuProbe> probe;
  FakeProbe* fake = nullptr;
  std::string fake_gpus;
};

Result<Probe> OpenProbe(const AgentProcessOptions& options) {
  std::string spec = options.fake_gpus;
  if (spec.empty()) {
    auto nvml = NvmlProbe::Create();
    if (nvml.ok()) return Probe{std::move(nvml).value(), nullptr, ""};
    // The machine's state, not the caller's input (whatever NVML's own code).
    if (options.fake_gpus_without_nvml.empty()) return FailedPrecondition(nvml.status().message());
    spec = options.fake_gpus_without_nvml;
  }
  const std::string& name = options.agent.name;
  auto fake = FakeProbe::Create(spec, name.empty() ? "node" : name);
  if (!fake.ok()) return InvalidArgument("--fake-gpus: " + fake.status().message());
  fake->SetDefaultUtilization(options.fake_gpu_utilization);
  auto owned = std::make_unique<FakeProbe>(std::move(fake).value());
  FakeProbe* raw = owned.get();
  return Probe{std::move(owned), raw, spec};
}

}  // namespace

Result<std::unique_ptr<AgentProcess>> AgentProcess::Create(AgentProcessOptions options) {
  options.runtime.work_dir = options.work_dir;
  CORRAL_RETURN_IF_ERROR(ProcessRuntime::CheckOptions(options.runtime));
  Result<Probe> probe = OpenProbe(options);
  if (!probe.ok()) return probe.status();
  const int fake_gpus =
      probe->fake == nullptr ? 0 : static_cast<int>(probe->fake->Discover()->gpus.size());
  options.agent.declared = DeclareResources(options.cpus, options.memory_mib, fake_gpus);
  if (options.agent.name.empty()) {
    auto host = DetectHostResources();
    if (host.ok()) options.agent.name = host->hostname;
  }
  if (Status valid = protocol::CheckName(protocol::NameKind::kNode, options.agent.name);
      !valid.ok()) {
    return InvalidArgument("--name: " + valid.message());
  }
  std::error_code ec;
  std::filesystem::create_directories(options.work_dir, ec);
  if (ec) return IoError("--work-dir: cannot create " + options.work_dir + ": " + ec.message());
  Result<WorkDirLock> lock = WorkDirLock::Acquire(options.work_dir);
  if (!lock.ok()) return lock.status();
  Result<std::string> node_id = LoadOrCreateNodeId(options.work_dir);
  if (!node_id.ok()) return node_id.status();
  options.agent.node_id = *node_id;
  return std::unique_ptr<AgentProcess>(new AgentProcess(std::move(options), std::move(lock).value(),
                                                        std::move(probe->probe), probe->fake,
                                                        std::move(probe->fake_gpus)));
}

Result<AgentProcess::Joined> AgentProcess::Join(const std::atomic<bool>& stop) {
  AnsweredErrorBackoff backoff(std::random_device{}());
  const auto start = std::chrono::steady_clock::now();
  LeaderSearch search(options_.agent.servers, "", Idempotency::kIdempotent, std::nullopt);
  while (true) {
    RegistrationAttempt sent = RegisterAgent(options_.agent, search.url(), *probe_);
    if (sent.registration.ok()) {
      std::cerr << "corral agent: registered with " << search.url() << "\n";
      return Joined{*std::move(sent.registration), search.url()};
    }
    if (IsFatalRegistrationError(sent.registration.status())) return sent.registration.status();
    int wait_ms;
    if (sent.attempt.outcome == Outcome::kAnswered) {
      // The server answered an error (or is busy): as the loop's heartbeats do.
      wait_ms = static_cast<int>(backoff.Next(sent.registration.status()).count());
    } else {  // not up yet, unreachable for now, or not the leader: the next server
      wait_ms = static_cast<int>(
          search
              .Next(sent.attempt, std::chrono::duration_cast<std::chrono::milliseconds>(
                                      std::chrono::steady_clock::now() - start))
              .wait.count());
    }
    for (int waited = 0; waited < wait_ms && !stop; waited += 50) {
      std::this_thread::sleep_for(std::chrono::milliseconds(std::min(50, wait_ms - waited)));
    }
    if (stop) return sent.registration.status();
  }
}

std::string TaskSupervisor(const std::filesystem::path& self) {
  const std::filesystem::path beside = self.parent_path() / "corral-supervise";
  std::error_code ec;
  if (!self.empty() && std::filesystem::is_regular_file(beside, ec) &&
      access(beside.c_str(), X_OK) == 0) {
    return beside.string();
  }
  return kAgentBinary;
}

Status AgentProcess::Run(const std::atomic<bool>& stop) {
  Result<Joined> joined = Join(stop);
  if (!joined.ok()) return stop ? Status::Ok() : joined.status();
  ProcessRuntimeOptions runtime_options = options_.runtime;
  runtime_options.cluster_id = joined->registration.cluster_id;
  runtime_options.node_name = options_.agent.name;
  runtime_options.task_server = options_.agent.servers.ToString();
  if (!options_.agent.ca_cert.empty()) {
    // Tasks run elsewhere (their workdir, a container): the path must not be relative.
    std::error_code ec;
    runtime_options.task_ca_cert = std::filesystem::absolute(options_.agent.ca_cert, ec).string();
  }
  if (runtime_options.supervisor_exe.empty()) {
    std::error_code ec;
    const std::filesystem::path self = std::filesystem::read_symlink(kAgentBinary, ec);
    runtime_options.supervisor_exe = TaskSupervisor(ec ? std::filesystem::path() : self);
    if (runtime_options.supervisor_exe != kAgentBinary) {
      runtime_options.fallback_supervisor_exe = kAgentBinary;
    }
    std::cerr << "corral agent: tasks start under "
              << (runtime_options.supervisor_exe == kAgentBinary
                      ? self.string() + " __supervise (no corral-supervise beside it)"
                      : runtime_options.supervisor_exe)
              << "\n";
  }
  auto runtime = ProcessRuntime::Create(std::move(runtime_options), &clock_);
  if (!runtime.ok()) return runtime.status();
  AgentOptions loop_options = options_.agent;
  loop_options.cluster_id = joined->registration.cluster_id;
  loop_options.node_token = joined->registration.node_token;
  loop_options.registered_at = joined->url;
  loop_options.fence = joined->registration.fence;
  AgentLoop loop(std::move(loop_options), *probe_, **runtime);
  // Fake GPUs follow the running tasks (their declared load) as the loop last saw them.
  if (fake_probe_ != nullptr) fake_probe_->SetTaskSource([&loop] { return loop.RunningTasks(); });
  Status s = loop.Run(stop);
  if (fake_probe_ != nullptr) fake_probe_->SetTaskSource(nullptr);  // the loop is going
  return s;
}

}  // namespace corral::agent
