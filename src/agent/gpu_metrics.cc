#include "agent/gpu_metrics.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>

namespace corral::agent {

namespace {

constexpr int kMaxAncestors = 64;

}  // namespace

std::optional<int> ProcParentOf(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat;
  if (!in || !std::getline(in, stat)) return std::nullopt;
  // "pid (comm) state ppid ...": comm may hold spaces and parentheses; the last ')' ends it.
  const size_t close = stat.rfind(')');
  if (close == std::string::npos) return std::nullopt;
  std::istringstream rest(stat.substr(close + 1));
  std::string state;
  int ppid = 0;
  if (!(rest >> state >> ppid)) return std::nullopt;
  return ppid;
}

std::vector<AttributedGpu> Attribute(const std::vector<GpuSample>& samples,
                                     const std::vector<RunningTask>& running,
                                     const ParentOf& parent_of) {
  std::map<int, const RunningTask*> task_of_pid;
  for (const RunningTask& t : running) {
    if (t.pid > 0) task_of_pid[t.pid] = &t;
  }
  auto owner_by_ancestry = [&](int pid) -> const RunningTask* {
    for (int step = 0; step < kMaxAncestors && pid > 1; ++step) {
      if (auto it = task_of_pid.find(pid); it != task_of_pid.end()) return it->second;
      std::optional<int> parent = parent_of(pid);
      if (!parent) return nullptr;
      pid = *parent;
    }
    return nullptr;
  };

  std::vector<AttributedGpu> out;
  out.reserve(samples.size());
  for (const GpuSample& sample : samples) {
    AttributedGpu gpu;
    gpu.sample = sample;
    gpu.sample.processes.clear();
    std::vector<const RunningTask*> holders;
    for (const RunningTask& t : running) {
      const std::vector<int>& g = t.launch.gpus;
      if (std::find(g.begin(), g.end(), sample.index) != g.end()) {
        holders.push_back(&t);
        gpu.tasks.push_back(t.launch.key);
      }
    }
    const RunningTask* container_holder = nullptr;
    if (holders.size() == 1 && holders[0]->in_container) container_holder = holders[0];
    for (const GpuProcess& p : sample.processes) {
      AttributedProcess ap{p, std::nullopt};
      const RunningTask* owner = owner_by_ancestry(p.pid);
      if (owner == nullptr) owner = container_holder;
      if (owner != nullptr) ap.task = owner->launch.key;
      gpu.processes.push_back(ap);
    }
    out.push_back(std::move(gpu));
  }
  return out;
}

nlohmann::json GpuMetricsJson(const std::vector<AttributedGpu>& gpus, int64_t sampled_at_ms) {
  nlohmann::json list = nlohmann::json::array();
  for (const AttributedGpu& g : gpus) {
    nlohmann::json tasks = nlohmann::json::array();
    for (const TaskKey& k : g.tasks) tasks.push_back(ToString(k));
    nlohmann::json j = {{"index", g.sample.index}, {"tasks", tasks}};
    const GpuSample& s = g.sample;
    if (s.gpu_utilization_percent) j["utilization_percent"] = *s.gpu_utilization_percent;
    if (s.memory_utilization_percent) {
      j["memory_utilization_percent"] = *s.memory_utilization_percent;
    }
    if (s.memory_used) j["memory_used_mib"] = s.memory_used->value();
    if (s.power_milliwatts) j["power_mw"] = *s.power_milliwatts;
    if (s.temperature_celsius) j["temperature_c"] = *s.temperature_celsius;
    nlohmann::json processes = nlohmann::json::array();
    for (const AttributedProcess& p : g.processes) {
      nlohmann::json pj = {{"pid", p.process.pid}};
      if (p.process.memory_used) pj["memory_used_mib"] = p.process.memory_used->value();
      if (p.task) pj["task"] = ToString(*p.task);
      processes.push_back(pj);
    }
    j["processes"] = processes;
    list.push_back(j);
  }
  return {{"sampled_at_ms", sampled_at_ms}, {"gpus", list}};
}

}  // namespace corral::agent
