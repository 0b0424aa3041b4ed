// The node agent's reconcile loop: registers the node with the server (join token, node name
// and the node's secret id from node_identity.h), then reports what its Runtime runs (and new log
// output) and converges to the server's answers: starting the launches it does not run yet,
// killing what it is told to. A lost message is repaired by the next report; a server that forgot
// the node (restart) is answered by registering again. Every few seconds a heartbeat also carries
// the GPUs' metrics, mapped to the tasks that hold them (gpu_metrics.h). Cut off from the servers
// for the fence_after the server gave at registration, it stops its requeue-able tasks
// (RuntimeThread::SetFence): every report the server answers restarts that clock.
//
// Threads (Run()), none of which waits for another's work:
//  - the runtime thread (runtime_thread.h) owns the Runtime: it applies the launches and kills
//    the answers carry, polls, and publishes snapshots;
//  - the heartbeat thread (Run()'s caller) registers, then sends the node's whole truth (every
//    task of the last snapshot, and the launches accepted and not started yet) as a long poll
//    of wait_ms, whose answer comes early when the server has orders for the node. However long
//    launches take, it goes on beating, so the node is never declared lost for them;
//  - the push thread sends a partial report (the tasks that changed since the server last
//    took a report, and every ended task) on a second connection as soon as the runtime thread
//    publishes a task's start or end, while a long poll may be waiting: an exit reaches the
//    server within milliseconds, not at the next heartbeat;
//  - the sampler thread probes the GPUs every metrics interval.
//
// Servers: the agent takes a list of URLs (server_list.h). Both connections talk to the server
// that answered last; when a request to it finds no connection, is lost, or is answered 503 (a
// server that is not the leader), the heartbeat thread looks for the leader (LeaderSearch: the
// URL the 503 names, else the next one; a new round after 100 ms doubling to 1 s, for ever)
// while the runtime goes on running the tasks, and logs the server it talks to when it changes.
// A busy server's answer (a 503 with Corral-Busy, a 429: busy_retry.h) is not a search: the
// thread that got it waits at least its Retry-After (BusyWait), and the other waits as long,
// before either sends again. It is no answer to the fence clock either (docs/control-plane.md,
// "Back-pressure"): the server did not take the report.
//
// Reports carry a sequence number that grows with the snapshot they were made of; the server
// takes the task states of a report only when it is newer than every report it took from this
// registration (docs/control-plane.md, "Agent protocol"), so a heartbeat overtaken by a push
// cannot undo what the push said. Both connections acknowledge log output; an ended task is
// forgotten once a report the server took had its end and found no output left to send.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/host_resources.h"
#include "agent/runtime.h"
#include "agent/runtime_thread.h"
#include "common/rng.h"
#include "common/server_list.h"
#include "common/status.h"
#include "protocol/agent_messages.h"

namespace httplib {
class Client;
}

namespace corral::agent {

struct AgentOptions {
  ServerList servers;  // http(s)://host:port of each server, one or more
  // The server that answered the registration already made (node_token); empty: the first.
  std::string registered_at;
  std::string join_token;
  std::string name;     // node name; default: the hostname
  std::string node_id;  // secret, stable per node (LoadOrCreateNodeId); proves a re-registration
  std::string ca_cert;  // PEM bundle to verify an https server with (default: system CAs)
  // Heartbeat long poll: how long the server may hold a heartbeat that has nothing to answer
  // (at most protocol::kMaxAgentWaitMs: the agent's requests time out after
  // protocol::kAgentRequestTimeout, which the server's fencing rule counts on).
  // Ends no longer wait for it (they are pushed); log output of running tasks and GPU metrics
  // arrive at least this often.
  int wait_ms = 1000;
  std::map<std::string, std::string> labels;  // sent in the inventory (validated)
  // How other nodes reach this one (MASTER_ADDR, hostfiles); empty: not sent, and the server
  // uses the node name.
  std::string address;
  // The runtimes the node offers (inventory "runtimes"): "process", and "container" when it has
  // a container engine, described (Describe(), "podman 4.3.1") in the inventory's
  // "container_engine" when not empty.
  std::vector<std::string> runtimes = {"process"};
  std::string container_engine;
  // What its process runtime finds for environments (host_setup.h): inventory "tools" and
  // "env_prefixes".
  std::vector<std::string> tools;
  std::vector<std::string> env_prefixes;
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
  // The fence timings of the registration already made (RegisterAgent) when node_token is
  // set; nullopt: none (a server older than fencing), or learned at the loop's registration.
  std::optional<protocol::FenceTimings> fence;
  // How the runtime thread polls and batches ends (runtime_thread.h).
  RuntimeThread::Options runtime_thread;
};

// What the server answers a registration.
struct Registration {
  std::string node_token;  // the secret of the node's heartbeats
  std::string cluster_id;  // the cluster's id (model::ValidateClusterId)
  // When the agent fences (docs/control-plane.md, "Fencing"); nullopt: a server older than
  // fencing, whose agents never fence.
  std::optional<protocol::FenceTimings> fence;
};

// The runtime thread's fence from the server's timings (nullopt: none).
std::optional<RuntimeThread::Fence> FenceOf(const std::optional<protocol::FenceTimings>& timings);

// A registration sent to one server: how the request went (for the leader search) and what
// came of it: the registration, or the error (the server's answer, or why there was none).
struct RegistrationAttempt {
  Attempt attempt;
  Result<Registration> registration;
};

// Registers the node once at the server `url` (POST /api/v1/agent/register:
// protocol::RegisterRequest with this agent's protocol version and NodeInventory()). Errors:
// those of AgentLoop::Run that IsFatalRegistrationError() calls fatal, plus FailedPrecondition
// when the server refuses this agent's protocol version (its message says what to upgrade),
// sends no protocol version (a corral older than this agent: upgrade servers first), or another
// cluster id than options.cluster_id; other errors (the server unreachable, not the leader,
// HTTP 5xx) may pass.
RegistrationAttempt RegisterAgent(const AgentOptions& options, const std::string& url,
                                  GpuProbe& probe);
// The most of a busy server's Retry-After the agent honours (docs/control-plane.md,
// "Back-pressure"): a server that sheds heartbeats for longer than --fence-after makes the agent
// fence (a refusal is not an answer), so the agent tries again at least this often.
inline constexpr Seconds kMaxHonouredRetryAfter{5};
// How much later than asked an agent comes back, at most (a fraction of the Retry-After), so
// that nodes refused together do not come back together.
inline constexpr double kBusyJitterSpread = 0.25;
// The wait before the next try of a call a busy server refused with `retry_after` (1 s to
// kMaxHonouredRetryAfter, spread by `jitter` in [0, 1): Jittered()).
std::chrono::milliseconds BusyWait(Seconds retry_after, double jitter);

// The wait before the agent tries a call again after its server answered an error (a 5xx, a
// broken answer; not a search for the leader): a busy answer's (the error's retry_after:
// BusyWait), else 100 ms doubling to 5 s. Not thread-safe: one per calling thread.
class AnsweredErrorBackoff {
 public:
  explicit AnsweredErrorBackoff(uint64_t seed) : rng_(seed) {}
  std::chrono::milliseconds Next(const Status& error);
  // An answer came: the next error starts from 100 ms again.
  void Reset() { backoff_ms_ = kMinBackoffMs; }

 private:
  static constexpr int kMinBackoffMs = 100;
  static constexpr int kMaxBackoffMs = 5000;
  int backoff_ms_ = kMinBackoffMs;
  SeededRng rng_;
};

// True for registration errors that retrying cannot mend: an invalid join token, the node name
// held by a live node with another node id, another cluster or protocol version
// (FailedPrecondition).
bool IsFatalRegistrationError(const Status& status);
// The inventory sent at registration: host resources plus the probe's GPUs.
Result<protocol::NodeInventory> NodeInventory(const AgentOptions& options, GpuProbe& probe);

// --metrics-interval in seconds as AgentOptions::metrics_interval_ms: 0 (no metrics) or 0.1 to
// 15 s. Longer is refused: the server counts at most 30 s of a gap between two samples towards
// GPU-hours (docs/monitoring.md), so sparser samples would undercount.
Result<int> MetricsIntervalMs(double seconds);

class AgentLoop {
 public:
  // Borrows the probe and runtime (they must outlive the loop). From Run() on, the runtime is
  // used by the loop's runtime thread only (but for Runtime::ReadLog).
  AgentLoop(AgentOptions options, GpuProbe& probe, Runtime& runtime);
  ~AgentLoop();

  // NodeInventory() of this loop's node.
  Result<protocol::NodeInventory> Inventory();
  // Runs until `stop` becomes true (see the threads above). Connection errors are retried with
  // a back-off. Fatal (returned) while not registered: IsFatalRegistrationError() — an invalid
  // join token (kUnauthenticated), the node name held by a live node with another node id
  // (kAlreadyExists, HTTP 409), a server of another cluster than options.cluster_id, one that
  // refuses this agent's protocol version or speaks none (kFailedPrecondition). Once per loop.
  Status Run(const std::atomic<bool>& stop);
  // The tasks the runtime ran as of its last snapshot. Thread-safe: a FakeProbe follows them
  // (SetTaskSource) from the sampler thread.
  std::vector<RunningTask> RunningTasks();

 private:
  // A report as sent, and what its acknowledgement settles.
  struct Report {
    protocol::Report body;
    int64_t version = 0;  // the snapshot's
    // "<alloc>-<gen>.<stream>" -> the offset the report's output reaches.
    std::map<std::string, int64_t> log_ends;
    // Ended tasks in the report with no output left to send: forgotten once the server took it.
    std::vector<TaskKey> finished;
  };
  enum class ReportKind { kFull, kPartial };

  // Registers at server_url_ (heartbeat thread).
  Status Register();
  // The next report from the runtime thread's snapshot: every task (kFull), or the tasks
  // changed since the last report the server took plus every ended one (kPartial; nullopt when
  // there are none). Takes the next sequence number.
  std::optional<Report> BuildReport(ReportKind kind);
  // A 200 answer to `report`: advances log offsets; unless the server says the report was
  // stale, counts it as taken and forgets its finished tasks; hands the orders to the runtime
  // thread.
  void Acknowledge(const Report& report, const protocol::ReportAnswer& answer);
  // A report sent: how the request went and the server's parsed answer (on 200) or error.
  struct Sent {
    Attempt attempt;
    Result<protocol::ReportAnswer> answer;
  };
  // POSTs `report` with the node token `token` (and the node's name in protocol::kNodeHeader)
  // over `http`. On 200 a server was reached (RuntimeThread::Reached). A 401 forgets the node
  // token, so that the heartbeat registers again.
  Sent Send(httplib::Client& http, const std::string& token, const Report& report);
  // The GPU metrics of the sampler's newest sample not yet sent, else nullopt.
  std::optional<protocol::GpuMetrics> DueGpuMetrics(const std::vector<RunningTask>& running);
  // One heartbeat (registering first if needed); sets last_attempt_.
  Status Beat();
  // Heartbeats until `stop`.
  Status BeatUntil(const std::atomic<bool>& stop);
  // A busy server asked for a pause of `wait` from now: neither thread sends before it ends
  // (the later of the pauses asked). Thread-safe.
  void HoldOff(std::chrono::milliseconds wait);
  // When the pause ends (the steady clock's epoch: none). Thread-safe.
  std::chrono::steady_clock::time_point BusyUntil() const;
  // Points the heartbeat thread's requests (and, from its next push, the push thread's) at `url`.
  void TalkTo(const std::string& url);
  // The push thread: a partial report whenever the runtime thread published a change.
  void PushLoop();
  void WakePusher();
  void StopPusher();
  void StopSampler();
  // The sampler thread (started by Run): probes the GPUs every metrics interval until Run ends.
  // A driver call that hangs (a GPU fallen off the bus) stalls only this thread, never the
  // heartbeats.
  void SampleLoop();

  AgentOptions options_;
  GpuProbe& probe_;
  Runtime& runtime_;
  RuntimeThread runtime_thread_;
  // The heartbeat thread's: its connection, the server it last had an answer from (logged when
  // it changes), how its last request went.
  std::unique_ptr<httplib::Client> http_;
  std::string answered_url_;
  Attempt last_attempt_;
  // The push thread's connection, to push_url_.
  std::unique_ptr<httplib::Client> push_http_;
  std::string push_url_;
  int pause_ms_ = 0;  // the server's retry_after_ms from the last heartbeat answer
  // The end of the pause a busy server asked for (HoldOff), in steady-clock nanoseconds.
  std::atomic<int64_t> busy_until_ns_{0};
  SeededRng push_rng_{std::random_device{}()};  // the push thread's jitter

  // Shared by the heartbeat and push threads, guarded by report_mu_: the server requests go to
  // (set by the heartbeat thread), the node token (empty: not registered), the last sequence
  // number, the output the server has of each stream, and the newest snapshot version whose
  // report the server took.
  std::mutex report_mu_;
  std::string server_url_;
  std::string node_token_;
  int64_t seq_ = 0;
  std::map<std::string, int64_t> log_offsets_;  // "<alloc>-<gen>.<stream>" -> bytes taken
  int64_t taken_version_ = 0;

  // The push thread's wake-up, guarded by push_mu_.
  std::mutex push_mu_;
  std::condition_variable push_cv_;
  bool push_wanted_ = false;
  bool push_stopping_ = false;
  std::thread pusher_;

  // The sampler's state, guarded by sample_mu_: its newest sample (and when it was taken),
  // whether a heartbeat sent it, and the stop flag.
  std::mutex sample_mu_;
  std::condition_variable sample_cv_;
  std::optional<std::vector<GpuSample>> sample_;
  int64_t sampled_at_ms_ = 0;
  bool sample_sent_ = true;
  bool stopping_ = false;
  std::thread sampler_;
};

}  // namespace corral::agent
