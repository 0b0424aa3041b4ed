// The job listing's pages (Store::ListJobSummaries) on a SQLite store of 100,000 jobs: a
// 1000-job page for each sort, and a page deep in the listing (after 90,000 jobs, through the
// cursor's position), beside ListJobs' whole records by id (what GET /api/v1/jobs read before
// the listing had its own projection). docs/benchmarks.md, "Job listing".
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <memory>
#include <string>

#include "store/store.h"

namespace corral::store {
namespace {

constexpr int kJobs = 100000;
constexpr int kPage = 1000;

// One store for every benchmark: 100,000 jobs of 10 users, with a spec the size of a real one,
// a third of them started and a third ended.
Store& Jobs() {
  static std::unique_ptr<Store> store = [] {
    const std::string dir = "/tmp/corral-listing-bench-" + std::to_string(getpid());
    std::filesystem::create_directories(dir);
    auto opened = OpenStore("sqlite:" + dir + "/corral.db");
    if (!opened.ok()) std::abort();
    auto s = std::move(opened).value();
    (void)s->CreateProject("vision", "", Seconds(1));
    for (int u = 0; u < 10; ++u) (void)s->CreateUser("user" + std::to_string(u), false, Seconds(1));
    const std::string spec(600, 'x');
    std::vector<JobRecord> batch;
    for (int i = 0; i < kJobs; ++i) {
      JobRecord j;
      j.name = "job-" + std::to_string(i);
      j.user = "user" + std::to_string(i % 10);
      j.project = "vision";
      j.spec_json = "{\"pad\":\"" + spec + "\"}";
      j.submit_time = Seconds(1000000 + i / 3);
      j.total_gpu_milli = MilliGpu(1000 * (i % 9));
      batch.push_back(std::move(j));
      if (batch.size() == 5000) {
        if (!s->InsertJobs(batch).ok()) std::abort();
        batch.clear();
      }
    }
    std::vector<JobId> started, ended;
    for (int id = 1; id <= kJobs; ++id) {
      if (id % 3 != 0) started.push_back(JobId(id));
      if (id % 3 == 1) ended.push_back(JobId(id));
    }
    if (!s->TransitionJobs(started, model::JobState::kPending, model::JobState::kRunning, "go",
                           Seconds(2000000))
             .ok() ||
        !s->TransitionJobs(ended, model::JobState::kRunning, model::JobState::kSucceeded, "done",
                           Seconds(3000000))
             .ok()) {
      std::abort();
    }
    std::filesystem::remove_all(dir);  // the open file lives on
    return s;
  }();
  return *store;
}

// The position after `skip` jobs of the listing.
std::optional<JobListPosition> After(JobFilter filter, int skip) {
  if (skip == 0) return std::nullopt;
  filter.limit = skip;
  auto rows = Jobs().ListJobSummaries(filter);
  if (!rows.ok() || rows->empty()) std::abort();
  return PositionOf(rows->back(), filter.sort);
}

void BM_SummaryPage(benchmark::State& state) {
  Jobs();  // filled before the clock runs
  JobFilter filter{.sort = static_cast<JobSortKey>(state.range(0)),
                   .direction = SortDirection::kDescending};
  filter.after = After(filter, static_cast<int>(state.range(1)));
  filter.limit = kPage;
  for (auto _ : state) {
    auto page = Jobs().ListJobSummaries(filter);
    if (!page.ok() || page->size() != kPage) state.SkipWithError("short page");
    benchmark::DoNotOptimize(page);
  }
}
// sort (JobSortKey: 0 id, 1 submit_time, 2 start_time, 3 end_time, 4 gpus) x jobs skipped.
BENCHMARK(BM_SummaryPage)
    ->ArgsProduct({{0, 1, 2, 3, 4}, {0, 90000}})
    ->Unit(benchmark::kMillisecond);

// Whole records by id, newest first: the read GET /api/v1/jobs made before.
void BM_WholeRecordPage(benchmark::State& state) {
  JobFilter filter{.direction = SortDirection::kDescending, .limit = kPage};
  if (state.range(0) > 0)
    filter.after = JobListPosition{std::nullopt, JobId(kJobs - state.range(0))};
  for (auto _ : state) {
    auto page = Jobs().ListJobs(filter);
    if (!page.ok() || page->size() != kPage) state.SkipWithError("short page");
    benchmark::DoNotOptimize(page);
  }
}
BENCHMARK(BM_WholeRecordPage)->Arg(0)->Arg(90000)->Unit(benchmark::kMillisecond);

}  // namespace
}  // namespace corral::store

BENCHMARK_MAIN();
