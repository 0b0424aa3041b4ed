#include "protocol/api_node.h"

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/agent_messages.h"
#include "protocol/api_lists.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

json GpuTaskJson(const GpuTask& t) {
  if (!t.owner) return {{"milli", t.milli.value()}};
  return {{"job", t.owner->job.value()},
          {"task", t.owner->task},
          {"user", t.owner->user},
          {"project", t.owner->project},
          {"milli", t.milli.value()}};
}

// A task with "job" has its owner's four fields; one without has none of them ("in use").
Result<GpuTask> ReadGpuTask(const FieldReader& r) {
  GpuTask t;
  int64_t v = 0;
  if (r.Find("job") != nullptr) {
    TaskOwner owner;
    CORRAL_RETURN_IF_ERROR(r.Int("job", true, v, 1));
    owner.job = JobId(v);
    CORRAL_RETURN_IF_ERROR(r.Int("task", true, v, 0, 1000000));
    owner.task = static_cast<int>(v);
    CORRAL_RETURN_IF_ERROR(r.String("user", true, owner.user));
    CORRAL_RETURN_IF_ERROR(r.String("project", true, owner.project));
    t.owner = std::move(owner);
  } else {
    for (const char* field : {"task", "user", "project"}) {
      if (r.Find(field) != nullptr) return r.Bad(field, "is given without 'job'");
    }
  }
  CORRAL_RETURN_IF_ERROR(r.Int("milli", true, v, 1, kWholeGpu.value()));
  t.milli = MilliGpu(v);
  return t;
}

// "gpu_tasks": an array (one per GPU) of arrays of tasks; each task's errors name both indices.
Status ReadGpuTasks(const FieldReader& r, const std::string& what, NodeView& node) {
  const json* all = r.Find("gpu_tasks");
  if (all == nullptr) return r.Bad("gpu_tasks", "is required");
  if (!all->is_array() || all->size() != static_cast<size_t>(node.gpus)) {
    return r.Bad("gpu_tasks",
                 "must be an array of one array per GPU (" + std::to_string(node.gpus) + ")");
  }
  for (size_t g = 0; g < all->size(); ++g) {
    const std::string gpu = "gpu_tasks[" + std::to_string(g) + "]";
    if (!(*all)[g].is_array()) return r.Bad(gpu, "must be an array");
    std::vector<GpuTask> tasks;
    for (size_t i = 0; i < (*all)[g].size(); ++i) {
      const std::string item = gpu + "[" + std::to_string(i) + "]";
      if (!(*all)[g][i].is_object()) return r.Bad(item, "must be an object");
      auto task = ReadGpuTask(FieldReader((*all)[g][i], what, r.Path(item.c_str()) + "."));
      if (!task.ok()) return task.status();
      tasks.push_back(std::move(task).value());
    }
    node.gpu_tasks.push_back(std::move(tasks));
  }
  return Status::Ok();
}

Result<NodeView> ReadNode(const FieldReader& r, const std::string& what) {
  NodeView n;
  CORRAL_RETURN_IF_ERROR(r.String("name", true, n.name));
  std::string state;
  CORRAL_RETURN_IF_ERROR(r.String("state", true, state));
  auto parsed = model::ParseNodeState(state, r.Path("state"));
  CORRAL_RETURN_IF_ERROR(r.Within(parsed.status()));
  n.state = *parsed;
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("last_heartbeat", true, v, 0));
  n.last_heartbeat = Seconds(v);
  CORRAL_RETURN_IF_ERROR(r.String("gpu_model", true, n.gpu_model));
  CORRAL_RETURN_IF_ERROR(r.Int("gpus", true, v, 0, static_cast<int64_t>(kMaxInventoryGpus)));
  n.gpus = static_cast<int>(v);
  CORRAL_RETURN_IF_ERROR(r.Int("cpu_milli", true, v, 0));
  n.cpu = CpuMilli(v);
  CORRAL_RETURN_IF_ERROR(r.Int("memory_mib", true, v, 0));
  n.memory = MemoryMib(v);
  CORRAL_RETURN_IF_ERROR(r.StringMap("labels", n.labels));
  CORRAL_RETURN_IF_ERROR(r.Strings("runtimes", true, n.runtimes));
  CORRAL_RETURN_IF_ERROR(r.String("container_engine", false, n.container_engine));
  CORRAL_RETURN_IF_ERROR(r.Strings("tools", false, n.tools));
  CORRAL_RETURN_IF_ERROR(r.Strings("env_prefixes", false, n.env_prefixes));
  CORRAL_RETURN_IF_ERROR(r.String("gpu_metrics_error", false, n.gpu_metrics_error));
  CORRAL_RETURN_IF_ERROR(r.Bool("unreachable", n.unreachable));
  if (const json* gpu_free = r.Find("gpu_free_milli")) {
    NodeFree free;
    if (!gpu_free->is_array()) return r.Bad("gpu_free_milli", "must be an array of integers");
    for (const json& milli : *gpu_free) {
      if (!milli.is_number_integer() || milli.get<int64_t>() < 0 ||
          milli.get<int64_t>() > kWholeGpu.value()) {
        return r.Bad("gpu_free_milli", "must be an array of integers in 0..1000");
      }
      free.gpu_milli.push_back(milli.get<int64_t>());
    }
    CORRAL_RETURN_IF_ERROR(r.Int("cpu_free_milli", true, v));
    free.cpu = CpuMilli(v);
    CORRAL_RETURN_IF_ERROR(r.Int("memory_free_mib", true, v));
    free.memory = MemoryMib(v);
    n.free = std::move(free);
  }
  CORRAL_RETURN_IF_ERROR(ReadGpuTasks(r, what, n));
  return n;
}

}  // namespace

json ToJson(const NodeView& n) {
  json out = {{"name", n.name},
              {"state", model::ToString(n.state)},
              {"last_heartbeat", n.last_heartbeat.value()},
              {"gpu_model", n.gpu_model},
              {"gpus", n.gpus},
              {"cpu_milli", n.cpu.value()},
              {"memory_mib", n.memory.value()},
              {"labels", n.labels},
              {"runtimes", n.runtimes}};
  if (!n.container_engine.empty()) out["container_engine"] = n.container_engine;
  if (!n.tools.empty()) out["tools"] = n.tools;
  if (!n.env_prefixes.empty()) out["env_prefixes"] = n.env_prefixes;
  if (!n.gpu_metrics_error.empty()) out["gpu_metrics_error"] = n.gpu_metrics_error;
  if (n.unreachable) out["unreachable"] = true;
  if (n.free) {
    out["gpu_free_milli"] = n.free->gpu_milli;
    out["cpu_free_milli"] = n.free->cpu.value();
    out["memory_free_mib"] = n.free->memory.value();
  }
  json gpu_tasks = json::array();
  for (const auto& tasks : n.gpu_tasks) gpu_tasks.push_back(ListJson(tasks, GpuTaskJson));
  out["gpu_tasks"] = std::move(gpu_tasks);
  return out;
}

json ToJson(const std::vector<NodeView>& nodes) {
  return ListJson(nodes, [](const NodeView& n) { return ToJson(n); });
}

Result<NodeView> ParseNodeView(const json& json) {
  auto r = ReadObject(json, "node");
  if (!r.ok()) return r.status();
  return ReadNode(*r, "node");
}

Result<std::vector<NodeView>> ParseNodeViews(const json& json) {
  return ReadList<NodeView>(json, "nodes",
                            [](const FieldReader& r) { return ReadNode(r, "nodes"); });
}

}  // namespace corral::protocol
