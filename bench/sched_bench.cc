// Placement throughput of the scheduling core: one Schedule() pass over 100,000 mixed pending
// jobs on a synthetic cluster of N 8-GPU nodes (N = 1k, 10k, 50k), per placement policy.
// Reported: placements per second (jobs started / pass time) and the jobs started. The
// `_diverse` variants draw CPU and memory per job from wide ranges, so that node states rarely
// coincide and node classes cannot be shared: the worst case for the class index. The `_quotas`
// variants spread the jobs over 10 projects of 4 users, half of them with a quota of a tenth of
// the GPUs, and order the queue by fair share: the sharing rules' cost on top of placement.
//
//   build/bench/sched_bench --benchmark_filter='Schedule/(bestfit|fgd)'
#include <benchmark/benchmark.h>

#include "common/rng.h"
#include "sched/fragmentation.h"
#include "sched/scheduler.h"

namespace corral::sched {
namespace {

constexpr int kPendingJobs = 100'000;
const char* const kModels[] = {"A100-80GB", "H100", "V100M32"};

std::vector<model::Node> MakeCluster(int nodes) {
  std::vector<model::Node> out;
  out.reserve(nodes);
  for (int i = 0; i < nodes; ++i) {
    out.push_back(model::MakeNode("node-" + std::to_string(i), kModels[i % 3], 8, CpuMilli(128000),
                                  MemoryMib(1048576)));
  }
  return out;
}

// How CPU and memory requests vary between jobs.
enum class CpuShape {
  kPerGpu,   // in proportion to GPUs (12 cores, 64 GiB per GPU), as most clusters set them
  kDiverse,  // any of 150 CPU sizes and 64 memory sizes per job: few nodes share a state
};

// Who the jobs belong to and how the queue is ordered.
enum class Sharing {
  kNone,    // one project, FIFO
  kQuotas,  // 10 projects (4 users each), 5 with quotas; fair-share order
};
constexpr int kProjects = 10;
constexpr int kUsersPerProject = 4;

// A mix like a research cluster's: many 1-GPU jobs, some shares, fewer large jobs; a fifth
// pinned to one GPU model.
std::vector<model::Job> MakeJobs(uint64_t seed, CpuShape cpu_shape, Sharing sharing) {
  SeededRng rng(seed);
  std::vector<model::Job> jobs;
  jobs.reserve(kPendingJobs);
  for (int i = 0; i < kPendingJobs; ++i) {
    model::Job j;
    j.id = JobId(i);
    j.submit_time = Seconds(i);
    const uint64_t pick = rng.Uniform(100);
    int gpus = 1, milli = 1000;
    if (pick < 15) {
      milli = 250 * static_cast<int>(1 + rng.Uniform(3));
    } else if (pick < 55) {
      gpus = 1;
    } else if (pick < 75) {
      gpus = 2;
    } else if (pick < 90) {
      gpus = 4;
    } else {
      gpus = 8;
    }
    std::vector<std::string> models;
    if (rng.Uniform(5) == 0) models.push_back(kModels[rng.Uniform(3)]);
    int64_t cpu = milli < 1000 ? 4000 : 12000 * gpus;
    int64_t memory = 65536 * gpus;
    if (cpu_shape == CpuShape::kDiverse) {
      cpu = gpus * (1000 + 100 * static_cast<int64_t>(rng.Uniform(150)));
      memory = gpus * 1024 * (1 + static_cast<int64_t>(rng.Uniform(64)));
    }
    j.resources = model::MakeResources(gpus, milli, cpu, memory, models);
    if (sharing == Sharing::kQuotas) {
      const uint64_t project = rng.Uniform(kProjects);
      j.project = "project-" + std::to_string(project);
      j.user = j.project + "-user-" + std::to_string(rng.Uniform(kUsersPerProject));
    }
    jobs.push_back(std::move(j));
  }
  return jobs;
}

SchedulerConfig ConfigFor(const char* policy, Sharing sharing, int nodes) {
  SchedulerConfig config{policy};
  if (sharing == Sharing::kQuotas) {
    config.order = QueueOrder::kFairShare;
    for (int p = 0; p < kProjects; p += 2) {
      config.sharing.projects["project-" + std::to_string(p)].quota_milli =
          int64_t{nodes} * 8 * 1000 / kProjects;
    }
  }
  return config;
}

void BM_Schedule(benchmark::State& state, const char* policy, CpuShape cpu_shape, Sharing sharing) {
  const int nodes = static_cast<int>(state.range(0));
  const std::vector<model::Node> cluster = MakeCluster(nodes);
  const std::vector<model::Job> jobs = MakeJobs(1, cpu_shape, sharing);
  const SchedulerConfig config = ConfigFor(policy, sharing, nodes);
  std::vector<model::TaskResources> tasks;
  for (const auto& j : jobs) tasks.push_back(j.resources);
  const PolicyContext context{ComputeTypicalTasks(tasks)};

  int64_t placed_total = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto scheduler = Scheduler::Create(config, context);
    for (const auto& n : cluster) (void)(*scheduler)->AddNode(n);
    for (const auto& j : jobs) (void)(*scheduler)->Submit(j);
    state.ResumeTiming();
    std::vector<JobStart> started = (*scheduler)->Schedule(Seconds(0)).starts;
    benchmark::DoNotOptimize(started.data());
    placed_total += static_cast<int64_t>(started.size());
    state.PauseTiming();
    scheduler->reset();  // free outside the timed region
    state.ResumeTiming();
  }
  state.counters["placements_per_s"] =
      benchmark::Counter(static_cast<double>(placed_total), benchmark::Counter::kIsRate);
  state.counters["placed_per_pass"] =
      static_cast<double>(placed_total) / static_cast<double>(state.iterations());
}

void Sizes(benchmark::internal::Benchmark* b) {
  b->Arg(1000)->Arg(10000)->Arg(50000)->Unit(benchmark::kMillisecond)->Iterations(2);
}

BENCHMARK_CAPTURE(BM_Schedule, bestfit, "bestfit", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, fgd, "fgd", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, best, "best", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, packing, "packing", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, spread, "spread", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, random, "random", CpuShape::kPerGpu, Sharing::kNone)->Apply(Sizes);
// The worst case for class sharing: nearly every used node is in a state of its own.
BENCHMARK_CAPTURE(BM_Schedule, bestfit_diverse, "bestfit", CpuShape::kDiverse, Sharing::kNone)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, fgd_diverse, "fgd", CpuShape::kDiverse, Sharing::kNone)
    ->Apply(Sizes);

// The sharing rules on: quotas, fair-share order (issue 21: within 1.5x of the plain case).
BENCHMARK_CAPTURE(BM_Schedule, bestfit_quotas, "bestfit", CpuShape::kPerGpu, Sharing::kQuotas)
    ->Apply(Sizes);
BENCHMARK_CAPTURE(BM_Schedule, fgd_quotas, "fgd", CpuShape::kPerGpu, Sharing::kQuotas)
    ->Apply(Sizes);

}  // namespace
}  // namespace corral::sched

BENCHMARK_MAIN();
