#include "protocol/agent_messages.h"

#include <algorithm>
#include <charconv>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "model/node.h"
#include "protocol/names.h"

namespace corral::protocol {
namespace {

using nlohmann::json;

constexpr int64_t kMaxMib = int64_t{1} << 40;
constexpr size_t kMaxReportLogs = 10000;
constexpr size_t kMaxStartingTasks = kMaxReportTasks;

// The task key in `field`, as GPU metrics name tasks ("12-1": ToString(TaskKey)); an error naming
// the field when it is not one.
Status ReadTaskKeyString(const FieldReader& r, const char* field, std::optional<TaskKey>& out) {
  std::string text;
  CORRAL_RETURN_IF_ERROR(r.String(field, false, text));
  if (r.Find(field) == nullptr) return Status::Ok();
  out = ParseTaskKey(text);
  if (!out) return r.Bad(field, "'" + text + "' is not a task key <alloc>-<gen>");
  return Status::Ok();
}

// Whether `text` is at most kMaxInventoryText bytes of printable ASCII.
bool IsInventoryText(const std::string& text) {
  return text.size() <= kMaxInventoryText &&
         std::all_of(text.begin(), text.end(), [](char c) { return c >= 0x20 && c < 0x7f; });
}

// An optional string of an inventory (IsInventoryText) in `field`.
Status ReadInventoryText(const FieldReader& r, const char* field, std::string& out) {
  CORRAL_RETURN_IF_ERROR(r.String(field, false, out));
  if (!IsInventoryText(out)) {
    return r.Bad(field, "must be at most " + std::to_string(kMaxInventoryText) +
                            " bytes of printable ASCII (no control characters)");
  }
  return Status::Ok();
}

// A list of at most `max` inventory texts (runtimes, tools, folders).
Status ReadInventoryTexts(const FieldReader& r, const char* field, size_t max,
                          std::vector<std::string>& out) {
  CORRAL_RETURN_IF_ERROR(r.Strings(field, false, out));
  if (out.size() > max) return r.Bad(field, "at most " + std::to_string(max) + " entries");
  for (size_t i = 0; i < out.size(); ++i) {
    if (!IsInventoryText(out[i])) {
      return r.Bad(field, "entry " + std::to_string(i) + " is not at most " +
                              std::to_string(kMaxInventoryText) + " bytes of printable ASCII");
    }
  }
  return Status::Ok();
}

Result<NodeInventory> ReadInventory(const FieldReader& r) {
  NodeInventory inv;
  CORRAL_RETURN_IF_ERROR(r.String("hostname", false, inv.hostname));
  if (!inv.hostname.empty()) {
    if (Status valid = CheckName(NameKind::kNode, inv.hostname); !valid.ok()) {
      return r.Bad("hostname", valid.message());
    }
  }
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("cpu_milli", true, v, 0, kMaxInventoryCpuMilli));
  inv.cpu = CpuMilli(v);
  CORRAL_RETURN_IF_ERROR(r.Int("memory_mib", true, v, 0, kMaxInventoryMemoryMib));
  inv.memory = MemoryMib(v);
  CORRAL_RETURN_IF_ERROR(ReadInventoryText(r, "gpu_model", inv.gpu_model));
  CORRAL_RETURN_IF_ERROR(
      r.Objects("gpus", false, kMaxInventoryGpus, [&](const FieldReader& g, size_t) {
        InventoryGpu gpu;
        CORRAL_RETURN_IF_ERROR(ReadInventoryText(g, "uuid", gpu.uuid));
        int64_t mib = 0;
        CORRAL_RETURN_IF_ERROR(g.Int("memory_mib", false, mib, 0, kMaxInventoryGpuMemoryMib));
        gpu.memory = MemoryMib(mib);
        int64_t domain = 0;
        CORRAL_RETURN_IF_ERROR(
            g.Int("nvlink_domain", false, domain, 0, static_cast<int64_t>(kMaxInventoryGpus) - 1));
        gpu.nvlink_domain = static_cast<int>(domain);
        inv.gpus.push_back(std::move(gpu));
        return Status::Ok();
      }));
  if (const json* labels = r.Find("labels");
      labels != nullptr && labels->is_object() && labels->size() > kMaxInventoryLabels) {
    return r.Bad("labels", "at most " + std::to_string(kMaxInventoryLabels) + " labels");
  }
  CORRAL_RETURN_IF_ERROR(r.StringMap("labels", inv.labels));
  for (const auto& [key, value] : inv.labels) {
    if (Status valid = model::ValidateLabel(key, value); !valid.ok()) {
      return r.Bad("labels", valid.message());
    }
  }
  CORRAL_RETURN_IF_ERROR(ReadInventoryTexts(r, "runtimes", kMaxNodeRuntimes, inv.runtimes));
  CORRAL_RETURN_IF_ERROR(r.String("address", false, inv.address));
  if (r.Find("address") != nullptr) {
    if (Status s = model::ValidateNodeAddress(inv.address); !s.ok()) {
      return r.Bad("address", s.message());
    }
  }
  CORRAL_RETURN_IF_ERROR(ReadInventoryText(r, "container_engine", inv.container_engine));
  CORRAL_RETURN_IF_ERROR(ReadInventoryTexts(r, "tools", kMaxInventoryTools, inv.tools));
  CORRAL_RETURN_IF_ERROR(
      ReadInventoryTexts(r, "env_prefixes", kMaxInventoryEnvPrefixes, inv.env_prefixes));
  return inv;
}

Result<GpuMetrics> ReadGpuMetrics(const FieldReader& r) {
  GpuMetrics m;
  CORRAL_RETURN_IF_ERROR(r.Int("sampled_at_ms", false, m.sampled_at_ms, 0));
  CORRAL_RETURN_IF_ERROR(
      r.Objects("gpus", true, kMaxInventoryGpus, [&](const FieldReader& g, size_t) {
        GpuMetric gpu;
        CORRAL_RETURN_IF_ERROR(g.RequiredInt("index", gpu.index));
        if (gpu.index < 0 || gpu.index >= static_cast<int>(kMaxInventoryGpus)) {
          return g.Bad("index", "must be in 0.." + std::to_string(kMaxInventoryGpus - 1));
        }
        CORRAL_RETURN_IF_ERROR(
            g.OptionalInt("utilization_percent", gpu.utilization_percent, 0, 100));
        CORRAL_RETURN_IF_ERROR(
            g.OptionalInt("memory_utilization_percent", gpu.memory_utilization_percent, 0, 100));
        CORRAL_RETURN_IF_ERROR(g.OptionalInt64("memory_used_mib", gpu.memory_used_mib, 0, kMaxMib));
        CORRAL_RETURN_IF_ERROR(g.OptionalInt64("power_mw", gpu.power_mw, 0, kMaxMib));
        CORRAL_RETURN_IF_ERROR(g.OptionalInt("temperature_c", gpu.temperature_c, -100, 200));
        std::vector<std::string> tasks;
        CORRAL_RETURN_IF_ERROR(g.Strings("tasks", false, tasks));
        if (tasks.size() > kMaxGpuProcesses) return g.Bad("tasks", "too many task keys");
        for (const std::string& t : tasks) {
          std::optional<TaskKey> key = ParseTaskKey(t);
          if (!key) return g.Bad("tasks", "'" + t + "' is not a task key <alloc>-<gen>");
          gpu.tasks.push_back(*key);
        }
        CORRAL_RETURN_IF_ERROR(
            g.Objects("processes", false, kMaxGpuProcesses, [&](const FieldReader& p, size_t) {
              GpuProcessReport process;
              CORRAL_RETURN_IF_ERROR(p.RequiredInt("pid", process.pid));
              CORRAL_RETURN_IF_ERROR(
                  p.OptionalInt64("memory_used_mib", process.memory_used_mib, 0, kMaxMib));
              CORRAL_RETURN_IF_ERROR(ReadTaskKeyString(p, "task", process.task));
              gpu.processes.push_back(std::move(process));
              return Status::Ok();
            }));
        m.gpus.push_back(std::move(gpu));
        return Status::Ok();
      }));
  return m;
}

template <typename T>
void SetIf(json& out, const char* field, const std::optional<T>& value) {
  if (value) out[field] = *value;
}

}  // namespace

Status CheckAgentProtocolVersion(std::optional<int> version, std::string_view server_release,
                                 Seconds node_timeout) {
  const std::string upgrade_node =
      "upgrade corral on this node to " + std::string(server_release) + " within " +
      std::to_string(node_timeout.value()) +
      " s of its last heartbeat: its tasks keep running and the upgraded agent adopts them (later, "
      "the node is lost and its jobs with it)";
  if (!version) return FailedPrecondition("this agent speaks no protocol version: " + upgrade_node);
  const std::string accepted =
      kOldestProtocolVersion == kProtocolVersion
          ? std::to_string(kProtocolVersion)
          : std::to_string(kOldestProtocolVersion) + ".." + std::to_string(kProtocolVersion);
  if (*version < kOldestProtocolVersion) {
    return FailedPrecondition("this agent speaks protocol version " + std::to_string(*version) +
                              ", too old for this server (which accepts " + accepted +
                              "): " + upgrade_node);
  }
  if (*version > kProtocolVersion) {
    return FailedPrecondition(
        "this agent speaks protocol version " + std::to_string(*version) +
        ", newer than this server's (which accepts " + accepted + ", corral " +
        std::string(server_release) +
        "): upgrade the servers before their agents; this agent's tasks keep running meanwhile");
  }
  return Status::Ok();
}

// --- Encoding -------------------------------------------------------------------------------

nlohmann::json ToJson(const NodeInventory& inv) {
  json gpus = json::array();
  for (size_t i = 0; i < inv.gpus.size(); ++i) {
    const InventoryGpu& g = inv.gpus[i];
    gpus.push_back({{"index", i},
                    {"uuid", g.uuid},
                    {"memory_mib", g.memory.value()},
                    {"nvlink_domain", g.nvlink_domain}});
  }
  json out{{"hostname", inv.hostname},
           {"cpu_milli", inv.cpu.value()},
           {"memory_mib", inv.memory.value()},
           {"gpu_model", inv.gpu_model},
           {"gpus", gpus},
           {"labels", inv.labels},
           {"runtimes", inv.runtimes}};
  if (!inv.address.empty()) out["address"] = inv.address;
  if (!inv.container_engine.empty()) out["container_engine"] = inv.container_engine;
  if (!inv.tools.empty()) out["tools"] = inv.tools;
  if (!inv.env_prefixes.empty()) out["env_prefixes"] = inv.env_prefixes;
  return out;
}

nlohmann::json ToJson(const RegisterRequest& r) {
  return json{{"protocol_version", r.protocol_version},
              {"name", r.name},
              {"node_id", r.node_id},
              {"inventory", ToJson(r.inventory)}};
}

nlohmann::json ToJson(const RegisterAnswer& a) {
  json out{{"protocol_version", a.protocol_version},
           {"node_token", a.node_token},
           {"cluster_id", a.cluster_id},
           {"heartbeat_interval_s", a.heartbeat_interval_s}};
  if (a.fence) {
    out["node_timeout_s"] = a.fence->node_timeout.value();
    out["fence_after_s"] = a.fence->fence_after.value();
    out["kill_grace_s"] = a.fence->kill_grace.value();
  }
  return out;
}

nlohmann::json ToJson(const GpuMetrics& m) {
  json gpus = json::array();
  for (const GpuMetric& g : m.gpus) {
    json tasks = json::array();
    for (const TaskKey& k : g.tasks) tasks.push_back(ToString(k));
    json processes = json::array();
    for (const GpuProcessReport& p : g.processes) {
      json pj = {{"pid", p.pid}};
      SetIf(pj, "memory_used_mib", p.memory_used_mib);
      if (p.task) pj["task"] = ToString(*p.task);
      processes.push_back(std::move(pj));
    }
    json j = {{"index", g.index}, {"tasks", tasks}, {"processes", processes}};
    SetIf(j, "utilization_percent", g.utilization_percent);
    SetIf(j, "memory_utilization_percent", g.memory_utilization_percent);
    SetIf(j, "memory_used_mib", g.memory_used_mib);
    SetIf(j, "power_mw", g.power_mw);
    SetIf(j, "temperature_c", g.temperature_c);
    gpus.push_back(std::move(j));
  }
  return json{{"sampled_at_ms", m.sampled_at_ms}, {"gpus", gpus}};
}

nlohmann::json ToJson(const Report& r) {
  json tasks = json::array(), starting = json::array(), logs = json::array();
  for (const TaskStatus& s : r.tasks) tasks.push_back(ToJson(s));
  for (const TaskKey& k : r.starting) starting.push_back(ToJson(k));
  for (const LogChunk& c : r.logs) {
    json chunk = ToJson(c.key);
    chunk["stream"] = LogStreamName(c.stream);
    chunk["offset"] = c.offset;
    chunk["data"] = c.data;
    logs.push_back(std::move(chunk));
  }
  json out{{"seq", r.seq},
           {"wait_ms", r.wait_ms},
           {"tasks", tasks},
           {"starting", starting},
           {"logs", logs}};
  if (r.partial) out["partial"] = true;
  if (r.gpu_metrics) out["gpu_metrics"] = ToJson(*r.gpu_metrics);
  return out;
}

nlohmann::json ToJson(const ReportAnswer& a) {
  json run = json::array(), kill = json::array();
  for (const TaskLaunch& l : a.run) run.push_back(ToJson(l));
  for (const StopOrder& k : a.kill) {
    json order = ToJson(k.key);
    order["grace_s"] = k.grace.value();
    order["reason"] = k.reason;
    kill.push_back(std::move(order));
  }
  json out{{"run", run},
           {"kill", kill},
           {"heartbeat_interval_s", a.heartbeat_interval_s},
           {"taken_seq", a.taken_seq}};
  if (a.stale_report) out["stale_report"] = true;
  SetIf(out, "retry_after_ms", a.retry_after_ms);
  return out;
}

// --- Decoding -------------------------------------------------------------------------------

Result<std::optional<int>> ReadProtocolVersion(const nlohmann::json& body) {
  Result<FieldReader> r = ReadObject(body, "registration");
  if (!r.ok()) return r.status();
  std::optional<int> version;
  CORRAL_RETURN_IF_ERROR(r->OptionalInt("protocol_version", version, 1));
  return version;
}

Result<NodeInventory> ParseNodeInventory(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "inventory");
  if (!r.ok()) return r.status();
  return ReadInventory(*r);
}

Result<RegisterRequest> ParseRegisterRequest(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "registration");
  if (!r.ok()) return r.status();
  RegisterRequest req;
  CORRAL_RETURN_IF_ERROR(r->RequiredInt("protocol_version", req.protocol_version));
  CORRAL_RETURN_IF_ERROR(r->String("name", true, req.name));
  // Agents use the name as a path component on their host: refused here too, so that no agent
  // of another version can register one that today's agents could not use.
  if (Status valid = CheckName(NameKind::kNode, req.name); !valid.ok()) {
    return r->Bad("name", valid.message());
  }
  CORRAL_RETURN_IF_ERROR(r->String("node_id", true, req.node_id));
  if (req.node_id.size() < 16 || req.node_id.size() > 128) {
    return r->Bad("node_id", "16..128 characters");
  }
  CORRAL_RETURN_IF_ERROR(r->Object("inventory", true, [&](const FieldReader& inv) {
    Result<NodeInventory> inventory = ReadInventory(inv);
    if (!inventory.ok()) return inventory.status();
    req.inventory = std::move(inventory).value();
    return Status::Ok();
  }));
  return req;
}

Result<RegisterAnswer> ParseRegisterAnswer(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "registration answer");
  if (!r.ok()) return r.status();
  RegisterAnswer a;
  CORRAL_RETURN_IF_ERROR(r->RequiredInt("protocol_version", a.protocol_version));
  CORRAL_RETURN_IF_ERROR(r->String("node_token", true, a.node_token));
  CORRAL_RETURN_IF_ERROR(r->String("cluster_id", true, a.cluster_id));
  if (Status s = model::ValidateClusterId(a.cluster_id); !s.ok()) {
    return r->Bad("cluster_id", s.message());
  }
  int64_t interval = a.heartbeat_interval_s;
  CORRAL_RETURN_IF_ERROR(r->Int("heartbeat_interval_s", false, interval, 1, 3600));
  a.heartbeat_interval_s = static_cast<int>(interval);
  if (r->Find("fence_after_s")) {
    int64_t node_timeout = 0, fence_after = 0, kill_grace = 0;
    CORRAL_RETURN_IF_ERROR(r->Int("node_timeout_s", true, node_timeout, 1, 86400));
    CORRAL_RETURN_IF_ERROR(r->Int("fence_after_s", true, fence_after, 1, 86400));
    CORRAL_RETURN_IF_ERROR(r->Int("kill_grace_s", true, kill_grace, 0, 3600));
    a.fence = FenceTimings{Seconds(node_timeout), Seconds(fence_after), Seconds(kill_grace)};
  }
  return a;
}

Result<GpuMetrics> ParseGpuMetrics(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "gpu_metrics");
  if (!r.ok()) return r.status();
  return ReadGpuMetrics(*r);
}

Result<Report> ParseReport(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "heartbeat");
  if (!r.ok()) return r.status();
  Report report;
  CORRAL_RETURN_IF_ERROR(r->Int("seq", true, report.seq, 1));
  CORRAL_RETURN_IF_ERROR(r->Bool("partial", report.partial));
  int64_t wait_ms = 0;
  CORRAL_RETURN_IF_ERROR(r->Int("wait_ms", false, wait_ms, 0, kMaxWaitMs));
  report.wait_ms = static_cast<int>(wait_ms);
  // The task list is the node's truth: a malformed one is refused whole, never read in part
  // (a task left out would look lost).
  CORRAL_RETURN_IF_ERROR(
      r->Objects("tasks", true, kMaxReportTasks, [&](const FieldReader& t, size_t) {
        Result<TaskStatus> status = ReadTaskStatus(t);
        if (!status.ok()) return status.status();
        report.tasks.push_back(std::move(status).value());
        return Status::Ok();
      }));
  CORRAL_RETURN_IF_ERROR(
      r->Objects("starting", false, kMaxStartingTasks, [&](const FieldReader& k, size_t) {
        Result<TaskKey> key = ReadTaskKey(k);
        if (!key.ok()) return key.status();
        report.starting.push_back(*key);
        return Status::Ok();
      }));
  CORRAL_RETURN_IF_ERROR(
      r->Objects("logs", false, kMaxReportLogs, [&](const FieldReader& c, size_t) {
        LogChunk chunk;
        Result<TaskKey> key = ReadTaskKey(c);
        if (!key.ok()) return key.status();
        chunk.key = *key;
        std::string stream;
        CORRAL_RETURN_IF_ERROR(c.String("stream", true, stream));
        std::optional<LogStream> parsed = ParseLogStream(stream);
        if (!parsed) return c.Bad("stream", "must be stdout or stderr, got '" + stream + "'");
        chunk.stream = *parsed;
        CORRAL_RETURN_IF_ERROR(c.Int("offset", true, chunk.offset, 0));
        CORRAL_RETURN_IF_ERROR(c.String("data", true, chunk.data));
        report.logs.push_back(std::move(chunk));
        return Status::Ok();
      }));
  if (const nlohmann::json* metrics = r->Find("gpu_metrics")) {
    Result<GpuMetrics> parsed = ParseGpuMetrics(*metrics);
    if (parsed.ok()) {
      report.gpu_metrics = std::move(parsed).value();
    } else {
      report.gpu_metrics_error = parsed.status().message();
    }
  }
  return report;
}

Result<ReportAnswer> ParseReportAnswer(const nlohmann::json& json) {
  Result<FieldReader> r = ReadObject(json, "heartbeat answer");
  if (!r.ok()) return r.status();
  ReportAnswer a;
  CORRAL_RETURN_IF_ERROR(r->Int("taken_seq", true, a.taken_seq, 0));
  CORRAL_RETURN_IF_ERROR(r->Bool("stale_report", a.stale_report));
  int64_t interval = a.heartbeat_interval_s;
  CORRAL_RETURN_IF_ERROR(r->Int("heartbeat_interval_s", false, interval, 1, 3600));
  a.heartbeat_interval_s = static_cast<int>(interval);
  CORRAL_RETURN_IF_ERROR(r->OptionalInt("retry_after_ms", a.retry_after_ms, 0, kMaxWaitMs));
  CORRAL_RETURN_IF_ERROR(
      r->Objects("kill", false, kMaxReportTasks, [&](const FieldReader& k, size_t) {
        StopOrder order;
        Result<TaskKey> key = ReadTaskKey(k);
        if (!key.ok()) return key.status();
        order.key = *key;
        int64_t grace = order.grace.value();
        CORRAL_RETURN_IF_ERROR(k.Int("grace_s", false, grace, 0, 3600));
        order.grace = Seconds(grace);
        order.reason = "stopped by the server";
        CORRAL_RETURN_IF_ERROR(k.String("reason", false, order.reason));
        a.kill.push_back(std::move(order));
        return Status::Ok();
      }));
  CORRAL_RETURN_IF_ERROR(
      r->Objects("run", false, kMaxReportTasks, [&](const FieldReader& l, size_t) {
        Result<TaskLaunch> launch = ReadTaskLaunch(l);
        if (launch.ok()) {
          a.run.push_back(std::move(launch).value());
        } else {
          a.refused_run.push_back(launch.status());
        }
        return Status::Ok();
      }));
  return a;
}

}  // namespace corral::protocol
