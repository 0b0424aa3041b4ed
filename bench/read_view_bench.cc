// What a publication of the controller's read view costs (server/control/read_view.h): with
// 10,000 and 100,000 pending jobs on 64 nodes, the whole view (Controller::Publish: every
// pending job's reason, the queue's first 1,000 rows with their estimates, the nodes) and a
// scheduling round with it (Tick); and what a read of it costs: a job-list page of 100 rows
// (ListJobs: the store's page plus the view's reasons) and the nodes. docs/benchmarks.md,
// "Read view".
#include <benchmark/benchmark.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "common/clock.h"
#include "protocol/agent_messages.h"
#include "protocol/job_spec.h"
#include "server/control/controller.h"
#include "store/store.h"

namespace corral::server {
namespace {

constexpr int kNodes = 64;

// A controller over a store of `pending` pending jobs of 1, 2, 4 or 8 GPUs (recovered as queued,
// as after a restart) and kNodes nodes of 8 GPUs, none of them free enough for the 8-GPU jobs:
// the reasons vary. One per size, kept for every benchmark of that size.
struct Cluster {
  FakeClock clock{Seconds(1000000)};
  std::unique_ptr<store::Store> store;
  std::unique_ptr<Controller> controller;
  Principal admin{1, "admin", true, {"vision"}};
};

// The stores' folders: this run's, removed when it ends (main).
std::string DirPrefix() { return "/tmp/corral-read-view-bench-" + std::to_string(getpid()) + "-"; }

Cluster& ClusterOf(int pending) {
  static std::map<int, std::unique_ptr<Cluster>> clusters;
  auto& slot = clusters[pending];
  if (slot) return *slot;
  slot = std::make_unique<Cluster>();
  Cluster& c = *slot;
  const std::string dir = DirPrefix() + std::to_string(pending);
  std::filesystem::create_directories(dir);
  auto opened = store::OpenStore("sqlite:" + dir + "/corral.db");
  if (!opened.ok()) std::abort();
  c.store = std::move(opened).value();
  (void)c.store->CreateProject("vision", "", Seconds(1));
  (void)c.store->CreateUser("admin", true, Seconds(1));
  std::vector<store::JobRecord> batch;
  for (int i = 0; i < pending; ++i) {
    const int gpus = 1 << (i % 4);
    auto spec = protocol::ParseJobSpec({{"name", "job-" + std::to_string(i)},
                                        {"project", "vision"},
                                        {"command", {"sleep", "60"}},
                                        {"resources", {{"gpus", gpus}}},
                                        {"time_limit_s", 3600}});
    if (!spec.ok()) std::abort();
    store::JobRecord j;
    j.name = spec->name;
    j.user = "admin";
    j.project = "vision";
    j.spec_json = protocol::ToJson(*spec).dump();
    j.total_gpu_milli = MilliGpu(1000 * gpus);
    j.submit_time = Seconds(1000000 - pending + i);
    batch.push_back(std::move(j));
    if (batch.size() == 5000) {
      if (!c.store->InsertJobs(batch).ok()) std::abort();
      batch.clear();
    }
  }
  if (!batch.empty() && !c.store->InsertJobs(batch).ok()) std::abort();
  ControllerConfig config;
  config.default_project = "vision";
  config.max_pending_jobs = 1000000;
  auto controller = Controller::Create(config, *c.store, c.clock);
  if (!controller.ok()) std::abort();
  c.controller = std::move(controller).value();
  for (int n = 0; n < kNodes; ++n) {
    nlohmann::json gpus = nlohmann::json::array();
    for (int g = 0; g < 8; ++g) {
      gpus.push_back({{"index", g},
                      {"uuid", "GPU-" + std::to_string(n) + "-" + std::to_string(g)},
                      {"memory_mib", 81920}});
    }
    auto request =
        protocol::ParseRegisterRequest({{"protocol_version", protocol::kProtocolVersion},
                                        {"name", "node-" + std::to_string(n)},
                                        {"node_id", "node-id-0123456789-" + std::to_string(n)},
                                        {"inventory",
                                         {{"hostname", "h"},
                                          {"cpu_milli", 64000},
                                          {"memory_mib", 512 * 1024},
                                          {"gpu_model", "A100"},
                                          {"gpus", gpus},
                                          {"labels", nlohmann::json::object()}}}});
    if (!request.ok() || !c.controller->RegisterNode(*request).ok()) std::abort();
  }
  c.controller->Tick();  // starts what fits: the rest waits, with reasons
  return c;
}

void BM_Publish(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  for (auto _ : state) c.controller->Publish(/*with_pending=*/true);
}
BENCHMARK(BM_Publish)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// What a cancel or an admin's node action publishes: the pending part kept.
void BM_PublishKeepingPending(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  for (auto _ : state) c.controller->Publish(/*with_pending=*/false);
}
BENCHMARK(BM_PublishKeepingPending)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

// A round with nothing to start (every GPU is held), then its publication.
void BM_Tick(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  for (auto _ : state) c.controller->Tick();
}
BENCHMARK(BM_Tick)->Arg(10000)->Arg(100000)->Unit(benchmark::kMillisecond);

void BM_ListJobsPage(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  store::JobFilter listing;
  listing.limit = 100;
  listing.states = {model::JobState::kPending};
  for (auto _ : state) {
    auto page = c.controller->ListJobs(c.admin, listing, /*all_projects=*/true);
    if (!page.ok() || page->jobs.size() != 100) std::abort();
    benchmark::DoNotOptimize(page);
  }
}
BENCHMARK(BM_ListJobsPage)->Arg(10000)->Arg(100000)->Unit(benchmark::kMicrosecond);

void BM_Nodes(benchmark::State& state) {
  Cluster& c = ClusterOf(static_cast<int>(state.range(0)));
  for (auto _ : state) benchmark::DoNotOptimize(c.controller->Nodes(c.admin));
}
BENCHMARK(BM_Nodes)->Arg(10000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace corral::server

int main(int argc, char** argv) {
  benchmark::Initialize(&argc, argv);
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  for (const auto& entry : std::filesystem::directory_iterator("/tmp")) {
    if (entry.path().string().starts_with(corral::server::DirPrefix()))
      std::filesystem::remove_all(entry.path());
  }
  return 0;
}
