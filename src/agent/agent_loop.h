// The node agent's reconcile loop: registers the node with the server (join token, node name
// and the node's secret id from node_identity.h), then heartbeats: it reports what its Runtime
// says runs (and new log output), and converges to the server's answer — starting the launches it
// does not run yet, killing what it is told to. A lost message is repaired by the next heartbeat; a
// server that forgot the node (restart) is answered by registering again. Every few seconds a
// heartbeat also carries the GPUs' metrics, mapped to the tasks that hold them (gpu_metrics.h).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/host_resources.h"
#include "agent/runtime.h"
#include "common/status.h"

namespace httplib {
class Client;
}

namespace corral::agent {

struct AgentOptions {
  std::string server_url;  // http(s)://host:port
  std::string join_token;
  std::string name;     // node name; default: the hostname
  std::string node_id;  // secret, stable per node (LoadOrCreateNodeId); proves a re-registration
  std::string ca_cert;  // PEM bundle to verify an https server with (default: system CAs)
  int wait_ms = 1000;   // heartbeat long-poll; also bounds how late an exit is reported
  std::map<std::string, std::string> labels;  // sent in the inventory (validated)
  // How other nodes reach this one (MASTER_ADDR, hostfiles); empty: not sent, and the server
  // uses the node name.
  std::string address;
  // The runtimes the node offers (inventory "runtimes"): "process", and "container" when it has
  // a container engine, described (Describe(), "podman 4.3.1") in the inventory's
  // "container_engine" when not empty.
  std::vector<std::string> runtimes = {"process"};
  std::string container_engine;
  // How often the GPUs are sampled (gpu_metrics.h); the latest sample goes with the next
  // heartbeat. 0: never.
  int metrics_interval_ms = 5000;
  // The CPU and memory the node offers in place of the detected ones (host_resources.h).
  DeclaredResources declared;
  // The cluster whose tasks the runtime holds (AgentProcess: learned at its first
  // registration). A registration answered with another cluster id fails, fatally: the agent
  // stops rather than report (and so have killed) tasks to a cluster they are not from.
  // Empty: any cluster (tests).
  std::string cluster_id;
  // The node token of a registration already made (RegisterAgent); empty: the loop registers
  // before its first heartbeat.
  std::string node_token;
};

// What the server answers a registration.
struct Registration {
  std::string node_token;  // the secret of the node's heartbeats
  std::string cluster_id;  // the cluster's id (model::ValidateClusterId)
};

// Registers the node once (POST /api/v1/agent/register with NodeInventory()). Errors: those of
// AgentLoop::Run that IsFatalRegistrationError() calls fatal, plus FailedPrecondition when the
// server sends no cluster id (a corral older than this agent: upgrade servers first) or another
// one than options.cluster_id; other errors (the server unreachable, HTTP 5xx) may pass.
Result<Registration> RegisterAgent(const AgentOptions& options, GpuProbe& probe);
// True for registration errors that retrying cannot mend: an invalid join token, the node name
// held by a live node with another node id, another cluster (FailedPrecondition).
bool IsFatalRegistrationError(const Status& status);
// The inventory sent at registration: host resources plus the probe's GPUs.
Result<nlohmann::json> NodeInventory(const AgentOptions& options, GpuProbe& probe);

// --metrics-interval in seconds as AgentOptions::metrics_interval_ms: 0 (no metrics) or 0.1 to
// 15 s. Longer is refused: the server counts at most 30 s of a gap between two samples towards
// GPU-hours (docs/monitoring.md), so sparser samples would undercount.
Result<int> MetricsIntervalMs(double seconds);

class AgentLoop {
 public:
  // Borrows the probe and runtime (they must outlive the loop).
  AgentLoop(AgentOptions options, GpuProbe& probe, Runtime& runtime);
  ~AgentLoop();

  // NodeInventory() of this loop's node.
  Result<nlohmann::json> Inventory();
  // Runs until `stop` becomes true, with a sampler thread probing the GPUs every metrics
  // interval (Step sends its newest sample). Connection errors are retried with a back-off. Fatal
  // (returned) while not registered: IsFatalRegistrationError() — an invalid join token
  // (kUnauthenticated), the node name held by a live node with another node id (kAlreadyExists,
  // HTTP 409), a server of another cluster than options.cluster_id or without cluster ids
  // (kFailedPrecondition).
  Status Run(const std::atomic<bool>& stop);
  // One heartbeat round (registering first if needed). Exposed for tests.
  Status Step();
  // The tasks the runtime ran as of the last heartbeat round. Thread-safe: a FakeProbe follows
  // them (SetTaskSource) from the sampler thread.
  std::vector<RunningTask> RunningTasks();

 private:
  Status Register();
  nlohmann::json LogChunks(const std::vector<TaskStatus>& tasks,
                           std::map<std::string, int64_t>& next_offsets);
  void Apply(const nlohmann::json& answer);
  // The "gpu_metrics" object of the sampler's newest sample not yet sent, else null.
  nlohmann::json DueGpuMetrics();
  // Heartbeat rounds until `stop` (Run without the sampler).
  Status Beat(const std::atomic<bool>& stop);
  void StopSampler();
  // The sampler thread (started by Run): probes the GPUs every metrics interval until Run ends.
  // A driver call that hangs (a GPU fallen off the bus) stalls only this thread, never the
  // heartbeats.
  void SampleLoop();

  AgentOptions options_;
  GpuProbe& probe_;
  Runtime& runtime_;
  std::unique_ptr<httplib::Client> http_;
  std::string node_token_;
  int pause_ms_ = 0;  // the server's retry_after_ms from the last heartbeat answer
  std::map<std::string, int64_t> log_offsets_;  // "<alloc>-<gen>.<stream>" -> bytes sent
  // The sampler's state, guarded by sample_mu_: its newest sample (and when it was taken),
  // whether Step sent it, the running tasks as of the last Step (what FakeProbe's loads follow,
  // RunningTasks), and the stop flag.
  std::mutex sample_mu_;
  std::condition_variable sample_cv_;
  std::optional<std::vector<GpuSample>> sample_;
  int64_t sampled_at_ms_ = 0;
  bool sample_sent_ = true;
  std::vector<RunningTask> running_;
  bool stopping_ = false;
  std::thread sampler_;
};

}  // namespace corral::agent
