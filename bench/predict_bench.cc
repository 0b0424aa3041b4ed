// Cost of the run-time predictor (predict::RuntimePredictor) as the scheduler would use it: one
// Predict per pending job per pass and one Observe per finished job, with the predictor holding
// `range` keys' worth of history (1,000 users × 8 experiments, up to the 100,000-key cap).
//
//   build/bench/predict_bench
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include "common/rng.h"
#include "predict/runtime_predictor.h"

namespace corral::predict {
namespace {

constexpr int kUsers = 1000;
constexpr int kExperiments = 8;
constexpr int kGpuCounts[] = {0, 1, 2, 4, 8, 16};

// `prefix` followed by `n` (operator+ on a literal trips a GCC 12 -Wrestrict false positive).
std::string Numbered(const char* prefix, uint64_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

// A job of a random user's random experiment: "u<user>-exp<e>-lr0.<k>-seed<s>".
JobFeatures RandomJob(Rng& rng) {
  const auto user = rng.Uniform(kUsers);
  const auto experiment = rng.Uniform(kExperiments);
  JobFeatures f;
  f.user = Numbered("u", user);
  f.project = Numbered("p", user % 50);
  f.name = f.user + Numbered("-exp", experiment) + Numbered("-lr0.", rng.Uniform(4)) +
           Numbered("-seed", rng.Uniform(10));
  f.gpus = kGpuCounts[(user + experiment) % std::size(kGpuCounts)];
  return f;
}

// A predictor that has observed `observed` random jobs, and jobs to query.
struct Fixture {
  explicit Fixture(int observed) {
    SeededRng rng(7);
    for (int i = 0; i < observed; ++i) {
      predictor.Observe(RandomJob(rng), Seconds(60 + static_cast<int64_t>(rng.Uniform(36000))));
    }
    for (int i = 0; i < 4096; ++i) queries.push_back(RandomJob(rng));
  }
  RuntimePredictor predictor;
  std::vector<JobFeatures> queries;
};

void BM_Predict(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    benchmark::DoNotOptimize(f.predictor.Predict(f.queries[i++ % f.queries.size()]));
  }
  state.counters["keys"] = static_cast<double>(f.predictor.KeyCount());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Predict)->Arg(1'000)->Arg(100'000)->Arg(1'000'000);

void BM_Observe(benchmark::State& state) {
  Fixture f(static_cast<int>(state.range(0)));
  size_t i = 0;
  for (auto _ : state) {
    f.predictor.Observe(f.queries[i++ % f.queries.size()], Seconds(3600));
  }
  state.counters["keys"] = static_cast<double>(f.predictor.KeyCount());
  state.SetItemsProcessed(state.iterations());
}
BENCHMARK(BM_Observe)->Arg(1'000)->Arg(100'000)->Arg(1'000'000);

}  // namespace
}  // namespace corral::predict

BENCHMARK_MAIN();
