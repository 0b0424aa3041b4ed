#include "sim/fill_tightness.h"

#include <algorithm>
#include <map>
#include <optional>

#include "common/rng.h"
#include "sim/fill.h"

namespace corral::sim {

Result<std::vector<model::Node>> SampleFillNodes(const std::vector<model::Node>& nodes,
                                                 size_t count, uint64_t seed) {
  if (count == 0 || count > nodes.size()) {
    return InvalidArgument("--exact-nodes: must be in [1, " + std::to_string(nodes.size()) +
                           "] (the cluster's nodes), got " + std::to_string(count));
  }
  std::map<std::string, std::vector<size_t>> of_model;  // model → node indices, input order
  for (size_t i = 0; i < nodes.size(); ++i) of_model[nodes[i].gpu_model].push_back(i);
  // Largest remainder: floor shares first, then one more to the largest remainders.
  struct Quota {
    const std::string* model;
    size_t take;
    size_t remainder;  // of count × members / nodes
  };
  std::vector<Quota> quotas;
  size_t given = 0;
  for (const auto& [model, members] : of_model) {
    const size_t scaled = count * members.size();
    quotas.push_back({&model, scaled / nodes.size(), scaled % nodes.size()});
    given += quotas.back().take;
  }
  std::vector<size_t> by_remainder(quotas.size());
  for (size_t i = 0; i < by_remainder.size(); ++i) by_remainder[i] = i;
  std::stable_sort(by_remainder.begin(), by_remainder.end(),
                   [&](size_t a, size_t b) { return quotas[a].remainder > quotas[b].remainder; });
  for (size_t i = 0; given < count; ++i, ++given) ++quotas[by_remainder[i]].take;

  SeededRng rng(seed);
  std::vector<size_t> chosen;
  for (const Quota& q : quotas) {
    std::vector<size_t> members = of_model[*q.model];
    rng.Shuffle(members);
    chosen.insert(chosen.end(), members.begin(),
                  members.begin() + static_cast<std::ptrdiff_t>(q.take));
  }
  std::sort(chosen.begin(), chosen.end());
  std::vector<model::Node> out;
  out.reserve(chosen.size());
  for (size_t i : chosen) out.push_back(nodes[i]);
  return out;
}

Result<TightnessRow> RunFillTightness(const std::vector<model::Node>& nodes,
                                      const std::vector<model::TaskResources>& original,
                                      uint64_t seed, double tune, size_t node_count,
                                      double load_pct, double time_limit_s,
                                      const sched::BestParams& best) {
  auto sample = SampleFillNodes(nodes, node_count, seed);
  if (!sample.ok()) return sample.status();
  TightnessRow row;
  row.seed = seed;
  row.nodes = sample->size();
  std::optional<size_t> step;
  std::vector<TaskPlacements> starts;  // the policies' placements at the step
  for (const std::string& policy : kTightnessPolicies) {
    auto fill = RunFill(
        *sample, original,
        FillConfig{
            .policy = policy, .seed = seed, .tune = tune, .best = best, .keep_placements = true});
    if (!fill.ok()) return fill.status();
    if (!step) {
      step = 0;
      for (size_t t = 0; t < fill->steps.size(); ++t) {
        if (fill->steps[t].arrived_pct <= load_pct) step = t;
      }
      row.tasks = *step + 1;
      row.arrived_pct = fill->steps[*step].arrived_pct;
    }
    row.policy_pct.push_back(fill->steps[*step].unallocated_pct);
    fill->placements.resize(*step + 1);
    starts.push_back(std::move(fill->placements));
  }
  // The tasks the fills presented up to the step: RunFill's list for the seed.
  sched::ClusterState state(sched::ClusterStateOptions{});
  auto list = FillTasks(*sample, original, seed, tune, state);
  if (!list.ok()) return list.status();
  const int64_t capacity = list->capacity_milli;
  row.capacity_milli = capacity;
  std::vector<model::TaskResources> tasks = std::move(list->tasks);
  tasks.resize(row.tasks);
  int64_t arrived = 0;
  for (const auto& t : tasks) arrived += t.TotalMilli().value();

  auto unallocated = [&](double held) {
    return std::max(0.0, 100.0 - 100.0 * held / static_cast<double>(capacity));
  };
  auto lp = PlaceableMilliBound(*sample, tasks);
  if (!lp.ok()) return lp.status();
  row.lp_bound_pct = unallocated(std::min(static_cast<double>(arrived), *lp));
  auto config = ConfigurationMilliBound(*sample, tasks, {.time_limit_s = time_limit_s});
  if (!config.ok()) return config.status();
  // The smaller of the two sound bounds, as RunFillBounds takes it.
  row.config_bound_pct = unallocated(std::min({static_cast<double>(arrived), *lp, config->milli}));
  auto exact = ExactPlaceableMilli(*sample, tasks, time_limit_s, starts);
  if (!exact.ok()) return exact.status();
  row.exact = *exact;
  row.exact_pct = unallocated(static_cast<double>(exact->milli));
  row.exact_low_pct = unallocated(static_cast<double>(exact->upper_milli));
  return row;
}

}  // namespace corral::sim
