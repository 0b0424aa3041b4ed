#include "sim/fill.h"

#include <atomic>
#include <chrono>
#include <cmath>
#include <thread>

#include "common/rng.h"
#include "sched/cluster_state.h"
#include "sched/fragmentation.h"
#include "sched/placement_policy.h"
#include "sched/placer.h"

namespace corral::sim {

namespace {

int64_t RequestMilli(const model::TaskResources& t) { return t.TotalMilli().value(); }

}  // namespace

std::vector<model::TaskResources> TuneWorkload(const std::vector<model::TaskResources>& original,
                                               int64_t capacity_milli, double tune, Rng& rng) {
  std::vector<model::TaskResources> tasks = original;
  rng.Shuffle(tasks);
  const auto target = static_cast<int64_t>(tune * static_cast<double>(capacity_milli));
  int64_t total = 0;
  for (const auto& t : tasks) total += RequestMilli(t);
  if (total > target) {
    while (total > target && !tasks.empty()) {
      size_t drop = rng.Uniform(tasks.size());
      total -= RequestMilli(tasks[drop]);
      tasks.erase(tasks.begin() + static_cast<std::ptrdiff_t>(drop));
    }
    return tasks;
  }
  while (!original.empty()) {
    const model::TaskResources& copy = original[rng.Uniform(original.size())];
    if (total + RequestMilli(copy) > target) break;
    total += RequestMilli(copy);
    tasks.push_back(copy);
  }
  return tasks;
}

FillPoint FillResult::At(int x) const {
  auto mean = [&](auto&& selected) {
    FillPoint p;
    int n = 0;
    for (const FillStep& s : steps) {
      if (!selected(s)) continue;
      p.unallocated_pct += s.unallocated_pct;
      p.frag_pct_of_capacity += s.frag_pct_of_capacity;
      p.frag_pct_of_idle += s.frag_pct_of_idle;
      ++n;
    }
    if (n > 0) {
      p.unallocated_pct /= n;
      p.frag_pct_of_capacity /= n;
      p.frag_pct_of_idle /= n;
    }
    return std::make_pair(p, n);
  };
  // std::nearbyint rounds half to even in the default rounding mode.
  auto [exact, n] = mean([&](const FillStep& s) { return std::nearbyint(s.arrived_pct) == x; });
  if (n > 0) return exact;
  auto [near, m] = mean([&](const FillStep& s) { return std::fabs(s.arrived_pct - x) <= 1.0; });
  if (m > 0 || steps.empty()) return near;
  // Coarse workloads (a few large tasks) may have no step near x: use the closest step.
  const FillStep* closest = &steps.front();
  for (const FillStep& s : steps) {
    if (std::fabs(s.arrived_pct - x) < std::fabs(closest->arrived_pct - x)) closest = &s;
  }
  return FillPoint{closest->unallocated_pct, closest->frag_pct_of_capacity,
                   closest->frag_pct_of_idle};
}

Result<int64_t> LoadFillCluster(const std::vector<model::Node>& nodes, sched::ClusterState& state) {
  for (const auto& node : nodes) {
    auto added = state.AddNode(node);
    if (!added.ok()) return added.status();
  }
  const int64_t capacity = state.TotalGpuMilli();
  if (capacity == 0) return InvalidArgument("--nodes: the cluster has no GPUs");
  return capacity;
}

Result<FillTaskList> FillTasks(const std::vector<model::Node>& nodes,
                               const std::vector<model::TaskResources>& original, uint64_t seed,
                               double tune, sched::ClusterState& state) {
  auto capacity = LoadFillCluster(nodes, state);
  if (!capacity.ok()) return capacity.status();
  FillTaskList out{*capacity, {}, SeededRng(seed)};
  out.tasks = TuneWorkload(original, *capacity, tune, out.rng);
  if (out.tasks.empty()) {
    return InvalidArgument("fill: no tasks to present (empty workload, or --tune too small)");
  }
  return out;
}

Result<FillResult> RunFill(const std::vector<model::Node>& nodes,
                           const std::vector<model::TaskResources>& original,
                           const FillConfig& config) {
  const auto start = std::chrono::steady_clock::now();
  sched::PolicyContext context{sched::ComputeTypicalTasks(original), config.best};
  auto policy = sched::CreatePolicy(config.policy, context);
  if (!policy.ok()) return policy.status();

  sched::ClusterState state(sched::ClusterStateOptions{config.seed, (*policy)->NeedsTaskKinds()});
  auto list = FillTasks(nodes, original, config.seed, config.tune, state);
  if (!list.ok()) return list.status();
  const int64_t capacity = list->capacity_milli;
  const std::vector<model::TaskResources>& tasks = list->tasks;
  sched::Placer placer(state, **policy, list->rng);
  sched::FragmentationMeter meter(context.typical_tasks);
  meter.Resolve(state);

  // Fragmentation is kept per node and summed incrementally: only the placed-on node changes.
  std::vector<int64_t> node_frag(state.NodeSlots(), 0);
  int64_t frag_weighted = 0;
  for (sched::NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    node_frag[n] = meter.Weighted(sched::ViewOf(state.node(n), state));
    frag_weighted += node_frag[n];
  }
  const double total_count = meter.total_count() > 0 ? meter.total_count() : 1;

  FillResult result;
  result.policy = config.policy;
  result.seed = config.seed;
  result.steps.reserve(tasks.size());
  int64_t arrived = 0;
  for (const auto& task : tasks) {
    arrived += RequestMilli(task);
    std::optional<sched::Allocation> a = placer.Place(placer.Resolve(task));
    if (a) {
      ++result.tasks_placed;
      int64_t now = meter.Weighted(sched::ViewOf(state.node(a->node), state));
      frag_weighted += now - node_frag[a->node];
      node_frag[a->node] = now;
    }
    if (config.keep_placements) {
      if (a) {
        result.placements.push_back(FillPlacement{static_cast<size_t>(a->node), a->gpus});
      } else {
        result.placements.push_back(std::nullopt);
      }
    }
    FillStep step;
    step.placed = a.has_value();
    step.arrived_pct = 100.0 * static_cast<double>(arrived) / static_cast<double>(capacity);
    const int64_t free = state.FreeGpuMilli();
    step.unallocated_pct = 100.0 * static_cast<double>(free) / static_cast<double>(capacity);
    const double frag_milli = static_cast<double>(frag_weighted) / total_count;
    step.frag_pct_of_capacity = 100.0 * frag_milli / static_cast<double>(capacity);
    step.frag_pct_of_idle = free > 0 ? 100.0 * frag_milli / static_cast<double>(free) : 0.0;
    result.steps.push_back(step);
  }
  result.tasks_presented = static_cast<int>(tasks.size());
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

Result<std::vector<FillResult>> RunFillMatrix(const std::vector<model::Node>& nodes,
                                              const std::vector<model::TaskResources>& tasks,
                                              const std::vector<std::string>& policies,
                                              const std::vector<uint64_t>& seeds, double tune,
                                              int threads, const sched::BestParams& best) {
  std::vector<FillConfig> runs;
  for (const auto& p : policies) {
    for (uint64_t s : seeds) runs.push_back(FillConfig{p, s, tune, best});
  }
  std::vector<Result<FillResult>> out(runs.size(),
                                      Result<FillResult>(Status(StatusCode::kInternal, "not run")));
  std::atomic<size_t> next{0};
  auto worker = [&] {
    for (size_t i = next++; i < runs.size(); i = next++) out[i] = RunFill(nodes, tasks, runs[i]);
  };
  if (threads <= 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  threads = std::min<int>(threads, static_cast<int>(runs.size()));
  std::vector<std::thread> pool;
  for (int i = 1; i < threads; ++i) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();

  std::vector<FillResult> results;
  for (auto& r : out) {
    if (!r.ok()) return r.status();
    results.push_back(std::move(r).value());
  }
  return results;
}

}  // namespace corral::sim
