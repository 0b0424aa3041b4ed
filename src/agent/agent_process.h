// One node agent from start to stop: what `corral agent` and `corral dev` both run. It takes the
// work dir (one agent per work dir: WorkDirLock), reads the node's id, opens the GPU probe, joins
// the cluster (registers, retrying while the server cannot be reached) to learn the cluster's id,
// creates the ProcessRuntime in that cluster's and this node's namespace (adopting the tasks a
// previous agent left there, or in the layout before cluster ids), and runs the reconcile loop.
//
// Why the runtime comes after the registration: everything the runtime creates on the host is
// namespaced by cluster and node (process_runtime.h), and only the server knows the cluster's id
// (the store's). Tasks keep running while no agent runs, so nothing is lost by adopting them a
// registration later; an agent that cannot reach its server supervises nothing, as before.
//
// Not thread-safe: Run() on one thread; Create() and the accessors before it.
#pragma once

#include <atomic>
#include <filesystem>
#include <memory>
#include <string>

#include "agent/agent_loop.h"
#include "agent/fake_probe.h"
#include "agent/gpu_probe.h"
#include "agent/node_identity.h"
#include "agent/process_runtime.h"
#include "common/clock.h"
#include "common/status.h"

namespace corral::agent {

struct AgentProcessOptions {
  // The loop's options: server, join token, name (empty: the hostname), labels, address,
  // runtimes, metrics interval. node_id, cluster_id and node_token are AgentProcess's to set.
  AgentOptions agent;
  std::string work_dir;  // absolute; created when missing; node.id, agent.lock, clusters/
  // The GPUs: fakes of this inventory (FakeProbe: "8xA100-80GB") when set; else NVML, or, when
  // NVML is unusable and `fake_gpus_without_nvml` is set, fakes of that inventory.
  std::string fake_gpus;
  std::string fake_gpus_without_nvml;
  int fake_gpu_utilization = 80;  // with fakes: a task's load unless it declares its own
  // --cpus and --memory-mib: what the node offers in place of the detected CPUs and memory
  // (0: detected; fakes offer at least kCpusPerFakeGpu CPUs per GPU). AgentProcess sets
  // agent.declared from them (DeclareResources).
  int64_t cpus = 0;
  int64_t memory_mib = 0;
  // How tasks run (task user, running as submitters, uid range, container engine, ...);
  // work_dir, cluster_id and node_name are AgentProcess's to set.
  ProcessRuntimeOptions runtime;
};

// This process's own binary, even after it was replaced on disk.
inline constexpr char kAgentBinary[] = "/proc/self/exe";

// The task supervisor the agent starts for each task (ProcessRuntimeOptions::supervisor_exe,
// unless set), given `self`, the agent's binary as a path (empty: unknown): corral-supervise
// beside it when that is an executable file, which loads nothing of the agent's; else
// kAgentBinary (`corral-daemon __supervise`). The agent falls back to kAgentBinary when
// corral-supervise cannot be started or is of another build (ShimPlan::build): replace the
// binaries by renaming new files over them (a running supervisor makes `cp` over it fail with
// "Text file busy"), then restart the agent.
std::string TaskSupervisor(const std::filesystem::path& self);

class AgentProcess {
 public:
  // Everything that needs no server: checks the options (InvalidArgument naming the flag, or
  // ProcessRuntime::CheckOptions' errors), creates and takes the work dir (FailedPrecondition
  // while another agent holds it), reads or makes its node id, opens the GPU probe (NVML's error
  // when it is unusable and no fakes stand in).
  static Result<std::unique_ptr<AgentProcess>> Create(AgentProcessOptions options);

  // Joins the cluster, creates the runtime and runs the reconcile loop until `stop`. Returns OK
  // when stopped; an error when the agent cannot go on: a fatal registration error
  // (IsFatalRegistrationError), or a runtime that cannot be created (ProcessRuntime::Create: for
  // instance another namespace of the work dir still holding tasks).
  Status Run(const std::atomic<bool>& stop);

  // The node's name (given, or the hostname).
  const std::string& name() const { return options_.agent.name; }
  // The fake GPUs' inventory ("8xA100-80GB"); empty when the GPUs are NVML's.
  const std::string& fake_gpus() const { return fake_gpus_; }

 private:
  AgentProcess(AgentProcessOptions options, WorkDirLock lock, std::unique_ptr<GpuProbe> probe,
               FakeProbe* fake_probe, std::string fake_gpus)
      : options_(std::move(options)),
        lock_(std::move(lock)),
        probe_(std::move(probe)),
        fake_probe_(fake_probe),
        fake_gpus_(std::move(fake_gpus)) {}

  // A registration and the server that answered it.
  struct Joined {
    Registration registration;
    std::string url;
  };
  // Registers until it succeeds (OK), `stop` is set (OK, nothing), or the error is fatal: at
  // the servers in turn while they cannot be reached or are not the leader (LeaderSearch), at
  // the one that answered while it answers other errors (a back-off up to 5 s).
  Result<Joined> Join(const std::atomic<bool>& stop);

  AgentProcessOptions options_;
  WorkDirLock lock_;  // held for the process's life
  std::unique_ptr<GpuProbe> probe_;
  FakeProbe* fake_probe_;  // probe_ when the GPUs are fakes (they follow the tasks), else null
  std::string fake_gpus_;
  SystemClock clock_;
};

}  // namespace corral::agent
