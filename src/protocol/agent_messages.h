// The messages between a node agent and the server (docs/control-plane.md, "Agent protocol"),
// one struct each, with one JSON codec each: ToJson() and Parse...() which checks types, ranges
// and required fields, naming the bad field in its InvalidArgument ("heartbeat: field
// 'tasks[3].state': unknown state 'done' ..."). Launch orders and task statuses are task.h's.
//
//   POST /api/v1/agent/register   Authorization: Bearer <join token>
//     RegisterRequest  -> RegisterAnswer
//   POST /api/v1/agent/heartbeat  Authorization: Bearer <node token>, X-Corral-Node: <name>
//     Report           -> ReportAnswer
//
// Credentials travel in headers, never in a body, so that the server authenticates a request
// before it reads its body. Versions: see kProtocolVersion.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "protocol/task.h"

namespace corral::protocol {

// The protocol's version. An agent sends it at registration; a server accepts agents of
// versions kOldestProtocolVersion..kProtocolVersion (its own and the one before: rolling
// upgrades, servers first) and refuses others, saying which side to upgrade
// (CheckAgentProtocolVersion). Agents of before versions (which sent none) are refused: they
// named their node in the heartbeat's body. docs/decisions.md, "Agent protocol versions".
inline constexpr int kProtocolVersion = 1;
inline constexpr int kOldestProtocolVersion = 1;
static_assert(kOldestProtocolVersion >= 1 && kOldestProtocolVersion <= kProtocolVersion &&
                  kProtocolVersion - kOldestProtocolVersion <= 1,
              "a server accepts its own protocol version and the previous one");

// The heartbeat's header naming the node whose node token is the bearer token.
inline constexpr char kNodeHeader[] = "X-Corral-Node";

// OK for an agent speaking `version` (nullopt: it sent none); else FailedPrecondition saying what
// to upgrade, to corral `server_release` (this server's corral version, "0.1.0"), and by when
// (`node_timeout`, after which the server declares the silent node lost): "this agent speaks no
// protocol version: upgrade corral on this node to 0.1.0 within 30 s of its last heartbeat: its
// tasks keep running and the upgraded agent adopts them (later, the node is lost and its jobs
// with it)", or, for a newer agent, "... upgrade the servers before their agents ...".
Status CheckAgentProtocolVersion(std::optional<int> version, std::string_view server_release,
                                 Seconds node_timeout);

// --- Registration ---------------------------------------------------------------------------

struct InventoryGpu {
  std::string uuid;       // kMaxInventoryText
  MemoryMib memory{0};    // 0..kMaxInventoryGpuMemoryMib
  int nvlink_domain = 0;  // GPUs of one domain share NVLink; 0..kMaxInventoryGpus-1
  bool operator==(const InventoryGpu&) const = default;
};

// What a node offers, as its agent found it (or was told: --cpus, --memory-mib). At most
// kMaxInventoryGpus GPUs (their index is their place in the list) and kMaxNodeRuntimes
// runtimes (names this server does not know are kept: they place nothing). ParseNodeInventory
// checks every field by type and range (docs/security.md, "Agent inventories"): the bounds below
// are far beyond any machine, and keep a hostile or broken agent's numbers from overflowing the
// scheduler's sums or its strings from reaching tables and terminals.
struct NodeInventory {
  std::string hostname;   // empty, or a node name (names.h)
  CpuMilli cpu{0};        // 0..kMaxInventoryCpuMilli
  MemoryMib memory{0};    // 0..kMaxInventoryMemoryMib
  std::string gpu_model;  // kMaxInventoryText
  std::vector<InventoryGpu> gpus;
  std::map<std::string, std::string> labels;  // at most kMaxInventoryLabels (model::ValidateLabel)
  std::vector<std::string> runtimes = {"process"};  // each kMaxInventoryText
  std::string address;           // how other nodes reach it; empty: the node name
  std::string container_engine;  // "podman 4.3.1"; empty: none (kMaxInventoryText)
  // What the process runtime finds on the node (docs/environments.md, "Runs here"): the known
  // tools (model::kHostTools) on the agent's PATH, and the folders under model::kEnvsRoot, as
  // absolute paths. At most kMaxInventoryTools and kMaxInventoryEnvPrefixes, each
  // kMaxInventoryText.
  std::vector<std::string> tools;
  std::vector<std::string> env_prefixes;
  bool operator==(const NodeInventory&) const = default;
};
inline constexpr size_t kMaxInventoryGpus = 64;
inline constexpr size_t kMaxNodeRuntimes = 8;
inline constexpr size_t kMaxInventoryLabels = 64;
inline constexpr size_t kMaxInventoryTools = 16;
inline constexpr size_t kMaxInventoryEnvPrefixes = 16;
inline constexpr int64_t kMaxInventoryCpuMilli = 100'000'000;           // 100,000 CPUs
inline constexpr int64_t kMaxInventoryMemoryMib = int64_t{1} << 30;     // 1 PiB
inline constexpr int64_t kMaxInventoryGpuMemoryMib = int64_t{1} << 24;  // 16 TiB
// A string of an inventory (GPU model, GPU UUID, runtime, container engine): at most this many
// bytes of printable ASCII.
inline constexpr size_t kMaxInventoryText = 128;

struct RegisterRequest {
  int protocol_version = kProtocolVersion;
  std::string name;     // the node's name (a node name: names.h)
  std::string node_id;  // the node's secret id: 16..128 characters
  NodeInventory inventory;
};

// How an agent cut off from the servers fences (docs/control-plane.md, "Fencing"): once it has
// reached no server for `fence_after`, it stops its requeue-able tasks (TaskLaunch::requeueable:
// SIGTERM, `kill_grace`, SIGKILL), so that they have stopped before the server declares the node
// lost (`node_timeout`) and runs their jobs elsewhere. The server keeps
// fence_after + kill_grace + kAgentRequestTimeout < node_timeout (reconcile::CheckNodeTimings).
struct FenceTimings {
  Seconds node_timeout{30};
  Seconds fence_after{10};
  Seconds kill_grace{10};
  bool operator==(const FenceTimings&) const = default;
};

// The longest an agent's request to a server may take once sent (its HTTP read timeout): the
// server saw the agent's last answered request at most this long before the agent did.
inline constexpr Seconds kAgentRequestTimeout{5};
// The longest long poll an agent asks for (Report::wait_ms): its answer comes well within
// kAgentRequestTimeout.
inline constexpr int kMaxAgentWaitMs = 2000;
// The shortest fence_after a server takes: a heard agent hears a server at least once per long
// poll (kMaxAgentWaitMs) and the answer's way back, so that it never fences for a long poll.
inline constexpr Seconds kMinFenceAfter{3};

struct RegisterAnswer {
  int protocol_version = kProtocolVersion;  // the server's
  std::string node_token;                   // the secret of the node's heartbeats
  std::string cluster_id;                   // model::ValidateClusterId
  int heartbeat_interval_s = 5;
  // "node_timeout_s", "fence_after_s", "kill_grace_s" (all or none); nullopt: a server older
  // than fencing, whose agents never fence.
  std::optional<FenceTimings> fence;
};

// --- Heartbeats and pushed reports ----------------------------------------------------------

// New output of a task's stream, written by the server at `offset` (so a chunk sent twice
// lands on the same bytes).
struct LogChunk {
  TaskKey key;
  LogStream stream = LogStream::kStdout;
  int64_t offset = 0;  // >= 0
  std::string data;
};

// One GPU's sample (docs/monitoring.md); a field the device did not report is nullopt.
struct GpuProcessReport {
  int pid = 0;
  std::optional<int64_t> memory_used_mib;
  std::optional<TaskKey> task;  // nullopt: a process corral did not start
};
struct GpuMetric {
  int index = 0;                                  // 0..kMaxInventoryGpus-1
  std::vector<TaskKey> tasks;                     // the tasks holding the GPU
  std::optional<int> utilization_percent;         // 0..100
  std::optional<int> memory_utilization_percent;  // 0..100
  std::optional<int64_t> memory_used_mib;         // >= 0
  std::optional<int64_t> power_mw;                // >= 0
  std::optional<int> temperature_c;               // -100..200
  std::vector<GpuProcessReport> processes;        // at most kMaxGpuProcesses
};
struct GpuMetrics {
  int64_t sampled_at_ms = 0;  // agent time, Unix ms
  std::vector<GpuMetric> gpus;
};
inline constexpr size_t kMaxGpuProcesses = 1024;

// What an agent reports: a heartbeat (the node's whole truth: every task it knows, and the
// launches it accepted and is starting) or, with `partial`, a push of the tasks that changed.
struct Report {
  // Grows with the agent's snapshot; the server takes a report only when it is newer than every
  // one it took from this registration. >= 1.
  int64_t seq = 1;
  bool partial = false;
  // How long the server may hold the report when it has nothing to answer: 0..kMaxWaitMs.
  int wait_ms = 0;
  std::vector<TaskStatus> tasks;
  std::vector<TaskKey> starting;
  std::vector<LogChunk> logs;
  std::optional<GpuMetrics> gpu_metrics;
  // Set by ParseReport when the report's "gpu_metrics" was malformed (why): GPU metrics are an
  // aside, so the rest of the report is taken all the same. Not sent.
  std::string gpu_metrics_error;
};
inline constexpr int kMaxWaitMs = 30000;
inline constexpr size_t kMaxReportTasks = 100000;

// An order to stop a task: SIGTERM, then SIGKILL after `grace`.
struct StopOrder {
  TaskKey key;
  Seconds grace{10};  // 0..3600
  std::string reason;
};

// The server's answer to a report.
struct ReportAnswer {
  std::vector<TaskLaunch> run;  // launches the agent does not run yet
  std::vector<StopOrder> kill;
  int heartbeat_interval_s = 5;
  int64_t taken_seq = 0;      // the newest report the server took from this registration
  bool stale_report = false;  // this report was older than one taken: nothing of it was applied
  // The server had no thread to spare for a long poll: pause this long before the next one.
  std::optional<int> retry_after_ms;  // 0..30000
  // Set by ParseReportAnswer for launches that failed the codec (each names its index and
  // field): left out of `run`, so that one bad launch stops no other order. Not sent.
  std::vector<Status> refused_run;
};

// --- Codecs ---------------------------------------------------------------------------------

nlohmann::json ToJson(const NodeInventory& inventory);
nlohmann::json ToJson(const RegisterRequest& request);
nlohmann::json ToJson(const RegisterAnswer& answer);
nlohmann::json ToJson(const GpuMetrics& metrics);
nlohmann::json ToJson(const Report& report);
nlohmann::json ToJson(const ReportAnswer& answer);

// The "protocol_version" of a registration body, before anything else of it is read (so that an
// agent of another version is told so, not what its body lacks): nullopt when absent;
// InvalidArgument when it is not an integer >= 1.
Result<std::optional<int>> ReadProtocolVersion(const nlohmann::json& body);
Result<NodeInventory> ParseNodeInventory(const nlohmann::json& json);
Result<RegisterRequest> ParseRegisterRequest(const nlohmann::json& json);
Result<RegisterAnswer> ParseRegisterAnswer(const nlohmann::json& json);
Result<GpuMetrics> ParseGpuMetrics(const nlohmann::json& json);
Result<Report> ParseReport(const nlohmann::json& json);
Result<ReportAnswer> ParseReportAnswer(const nlohmann::json& json);

}  // namespace corral::protocol
