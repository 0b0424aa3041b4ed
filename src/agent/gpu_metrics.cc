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

protocol::GpuMetrics GpuMetricsReport(const std::vector<AttributedGpu>& gpus,
                                      int64_t sampled_at_ms) {
  protocol::GpuMetrics out;
  out.sampled_at_ms = sampled_at_ms;
  for (const AttributedGpu& g : gpus) {
    const GpuSample& s = g.sample;
    protocol::GpuMetric gpu;
    gpu.index = s.index;
    gpu.tasks = g.tasks;
    gpu.utilization_percent = s.gpu_utilization_percent;
    gpu.memory_utilization_percent = s.memory_utilization_percent;
    if (s.memory_used) gpu.memory_used_mib = s.memory_used->value();
    gpu.power_mw = s.power_milliwatts;
    gpu.temperature_c = s.temperature_celsius;
    for (const AttributedProcess& p : g.processes) {
      protocol::GpuProcessReport process{p.process.pid, std::nullopt, p.task};
      if (p.process.memory_used) process.memory_used_mib = p.process.memory_used->value();
      gpu.processes.push_back(std::move(process));
    }
    out.gpus.push_back(std::move(gpu));
  }
  return out;
}

}  // namespace corral::agent
