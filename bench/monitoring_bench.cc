// The server's cost of GPU metrics (docs/monitoring.md) at cluster scale: recording one round of
// heartbeat samples from every node (GpuMonitor::Record, what every heartbeat with metrics
// costs the server), the controller's once-a-second idle check over every running job, and
// rendering GET /metrics (RenderMetrics) for every GPU. Arguments: nodes (8 GPUs each). And the
// hourly prune of stored 10 s intervals (SQLite): in one statement or in batches.
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include "server/monitoring/gpu_history.h"
#include "server/monitoring/gpu_monitor.h"
#include "server/monitoring/metrics_exposition.h"
#include "store/store.h"

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
  s.summary.gpus = int64_t{nodes} * kGpusPerNode;
  s.summary.allocated = MilliGpu(s.summary.gpus * 1000);
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

// The hour of 10 s intervals the hourly prune deletes at 1,000 nodes (8,000 GPUs x 360 = 2.9
// million rows; args: nodes, batch rows, 0 for one statement). Batches end at start times (one
// start time is 8 rows per node), and each is a SELECT and a DELETE under one hold of the store's
// lock: "ms_per_batch" (the prune's wall time over its batches) is how long submissions may wait.
// The time is the prune's alone (manual time), not the filling of the table.
void BM_PruneHour(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int64_t batch =
      state.range(1) > 0 ? state.range(1) : std::numeric_limits<int64_t>::max() / 2;
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("corral-prune-bench-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  auto store = store::OpenStore("sqlite:" + (dir / "corral.db").string());
  if (!store.ok()) {
    state.SkipWithError(store.status().ToString().c_str());
    return;
  }
  store::PruneResult pruned;
  double total_ms = 0;
  for (auto _ : state) {
    // In time order, as the server's flushes write them (every GPU's closed interval each 10 s):
    // the table's rows of one start time are then together.
    std::vector<store::GpuMetricRow> hour;
    for (int64_t t = 0; t < 3600; t += kFineResolutionS) {
      for (int n = 0; n < nodes; ++n) {
        for (int g = 0; g < kGpusPerNode; ++g) {
          hour.push_back({kFineResolutionS, 1'800'000'000 + t, "node-" + std::to_string(n), g, 500,
                          4096, 250000, 60, 2, JobId(n + 1)});
        }
      }
    }
    if (Status s = (*store)->AddGpuMetrics(hour); !s.ok()) {
      state.SkipWithError(s.ToString().c_str());
      break;
    }
    const auto start = std::chrono::steady_clock::now();
    auto result = (*store)->PruneGpuMetrics(kFineResolutionS, 1'800'003'600, batch);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    state.SetIterationTime(took.count());
    if (!result.ok() || result->rows != static_cast<int64_t>(hour.size())) {
      state.SkipWithError("prune did not delete the hour");
      break;
    }
    pruned = *result;
    total_ms += took.count() * 1e3;
  }
  store->reset();
  std::filesystem::remove_all(dir);
  state.counters["rows"] = static_cast<double>(pruned.rows);
  state.counters["batches"] = static_cast<double>(pruned.batches);
  if (pruned.batches > 0 && state.iterations() > 0) {
    state.counters["ms_per_batch"] =
        total_ms / static_cast<double>(state.iterations()) / static_cast<double>(pruned.batches);
  }
}
BENCHMARK(BM_PruneHour)
    ->ArgNames({"nodes", "batch"})
    ->Args({100, 0})
    ->Args({100, 10'000})
    ->Args({1000, 0})
    ->Args({1000, 10'000})
    ->Iterations(2)
    ->UseManualTime()
    ->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace corral::server

BENCHMARK_MAIN();
