// The server's cost of GPU metrics (docs/monitoring.md) at cluster scale: recording one round of
// heartbeat samples from every node (GpuMonitor::Record, what every heartbeat with metrics
// costs the server), the controller's once-a-second idle check over every running job, and
// rendering GET /metrics (RenderMetrics) for every GPU. Arguments: nodes (8 GPUs each).
#include <benchmark/benchmark.h>

#include <map>
#include <string>
#include <vector>

#include "server/gpu_monitor.h"
#include "server/metrics_exposition.h"

namespace corral::server {
namespace {

constexpr int kGpusPerNode = 8;

struct Cluster {
  std::vector<std::string> names;
  GpuMonitor::NodeGpus identity;
  std::map<int64_t, GpuHolder> holders;
};

Cluster MakeCluster(int nodes) {
  Cluster c;
  c.identity.model = "A100-80GB";
  for (int g = 0; g < kGpusPerNode; ++g) {
    c.identity.gpus.push_back({"GPU-" + std::to_string(g), 81920});
  }
  for (int n = 0; n < nodes; ++n) {
    c.names.push_back("node-" + std::to_string(n));
    // Every GPU held by a job of its own: the most holders the exposition labels.
    for (int g = 0; g < kGpusPerNode; ++g) {
      const int64_t alloc = int64_t{n} * kGpusPerNode + g + 1;
      c.holders[alloc] = {JobId(alloc), "user-" + std::to_string(n % 50),
                          "project-" + std::to_string(n % 10), 1.0, false};
    }
  }
  return c;
}

std::vector<ReportedGpu> Report(int node, int round) {
  std::vector<ReportedGpu> gpus;
  for (int g = 0; g < kGpusPerNode; ++g) {
    ReportedGpu r;
    r.index = g;
    r.reading.utilization_percent = (node + g + round) % 101;
    r.reading.memory_utilization_percent = 30;
    r.reading.memory_used_mib = 40'000;
    r.reading.power_mw = 300'000;
    r.reading.temperature_c = 60;
    r.allocations = {int64_t{node} * kGpusPerNode + g + 1};
    r.processes = 1;
    gpus.push_back(r);
  }
  return gpus;
}

// One round: every node's report, 5 s after the previous round (intervals close as they do).
void BM_RecordRound(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const Cluster c = MakeCluster(nodes);
  GpuMonitor monitor(GpuMonitor::Options{});
  std::vector<std::vector<ReportedGpu>> reports;
  for (int n = 0; n < nodes; ++n) reports.push_back(Report(n, 0));
  int64_t now_ms = 1'800'000'000'000;
  for (auto _ : state) {
    now_ms += 5000;
    for (int n = 0; n < nodes; ++n)
      monitor.Record(c.names[n], c.identity, reports[n], c.holders, now_ms);
    state.PauseTiming();
    benchmark::DoNotOptimize(monitor.TakeClosedIntervals());
    benchmark::DoNotOptimize(monitor.TakeUsage());
    state.ResumeTiming();
  }
  state.counters["gpus"] = nodes * kGpusPerNode;
}
BENCHMARK(BM_RecordRound)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

// The controller's idle check over every running job (one job per GPU here): asking the monitor
// job by job (JobLastBusyMs, a scan of every GPU each) against one pass (LastBusyByJob).
void BM_IdleCheck(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool one_pass = state.range(1) == 1;
  const Cluster c = MakeCluster(nodes);
  GpuMonitor monitor(GpuMonitor::Options{});
  for (int n = 0; n < nodes; ++n) {
    monitor.Record(c.names[n], c.identity, Report(n, 0), c.holders, 1'800'000'000'000);
  }
  const int64_t now_ms = 1'800'000'001'000;
  for (auto _ : state) {
    int64_t sum = 0;
    if (one_pass) {
      const std::map<JobId, GpuMonitor::JobBusy> last = monitor.LastBusyByJob(now_ms);
      for (const auto& [alloc, holder] : c.holders) {
        if (auto it = last.find(holder.job); it != last.end()) sum += it->second.last_busy_ms;
      }
    } else {
      for (const auto& [alloc, holder] : c.holders) {
        sum += monitor.JobLastBusyMs(holder.job, now_ms).value_or(0);
      }
    }
    benchmark::DoNotOptimize(sum);
  }
  state.counters["jobs"] = static_cast<double>(c.holders.size());
}
BENCHMARK(BM_IdleCheck)
    ->ArgNames({"nodes", "one_pass"})
    ->Args({100, 0})
    ->Args({100, 1})
    ->Args({1000, 1})
    ->Unit(benchmark::kMillisecond);

void BM_RenderMetrics(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const Cluster c = MakeCluster(nodes);
  GpuMonitor monitor(GpuMonitor::Options{});
  for (int n = 0; n < nodes; ++n) {
    monitor.Record(c.names[n], c.identity, Report(n, 0), c.holders, 1'800'000'000'000);
  }
  MetricsSnapshot s;
  s.summary = {{"gpus", nodes * kGpusPerNode}, {"gpus_allocated", nodes * kGpusPerNode}};
  s.nodes = nlohmann::json::array();
  s.projects = nlohmann::json::array();
  s.gpus = monitor.Gpus();
  s.now_ms = 1'800'000'005'000;
  size_t bytes = 0;
  for (auto _ : state) {
    const std::string text = RenderMetrics(s);
    bytes = text.size();
    benchmark::DoNotOptimize(text.data());
  }
  state.counters["bytes"] = static_cast<double>(bytes);
}
BENCHMARK(BM_RenderMetrics)->Arg(100)->Arg(1000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace corral::server

BENCHMARK_MAIN();
