#include "sched/elastic_plan.h"

#include <algorithm>
#include <limits>

namespace corral::sched {

namespace {

// The run of `job` in `runs` (which holds it).
template <typename Runs>
auto& RunOf(Runs& runs, JobId job) {
  return *std::find_if(runs.begin(), runs.end(), [&](const ElasticRun& r) { return r.job == job; });
}

// What a pending job needs to start: `tasks` tasks of `gpus` whole GPUs each; an elastic job
// its MIN.
struct Ask {
  int gpus = 0;
  int tasks = 1;
};
Ask AskOf(const model::Job& job) {
  Ask ask{static_cast<int>(job.resources.gpus.value()), job.tasks};
  if (job.elastic) {
    (job.elastic->unit == model::ElasticUnit::kGpus ? ask.gpus : ask.tasks) = job.elastic->min;
  }
  return ask;
}

}  // namespace

std::vector<int> WholeFreeGpus(const ClusterState& state) {
  std::vector<int> free(static_cast<size_t>(state.NodeSlots()), 0);
  for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    const NodeState& node = state.node(n);
    if (!node.present || !node.schedulable) continue;
    for (int32_t f : node.gpu_free) free[n] += f == kWholeGpu.value() ? 1 : 0;
  }
  return free;
}

std::vector<bool> NodesAccepting(const ClusterState& state, const model::Job& job) {
  std::vector<bool> accepts(static_cast<size_t>(state.NodeSlots()), false);
  const auto& models = job.resources.gpu_models;
  for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    const NodeState& node = state.node(n);
    accepts[n] = node.present && node.schedulable && node.model != kNoModel &&
                 node.cpu_free >= job.resources.cpu.value() &&
                 node.memory_free >= job.resources.memory.value() &&
                 (models.empty() || std::find(models.begin(), models.end(),
                                              state.ModelName(node.model)) != models.end());
  }
  return accepts;
}

bool AnyBorrowed(const std::vector<ElasticRun>& runs) {
  return std::any_of(runs.begin(), runs.end(),
                     [](const ElasticRun& r) { return r.size > r.range.min(); });
}

std::vector<Resize> PlanRoom(const ClusterState& state, std::vector<ElasticRun> runs,
                             const std::vector<model::Job>& pending) {
  std::vector<Resize> out;
  if (!AnyBorrowed(runs)) return out;
  std::vector<int> free = WholeFreeGpus(state);
  int looked = 0;
  for (const model::Job& job : pending) {
    if (++looked > kShrinkLookahead) break;
    if (job.resources.gpus.value() < 1) continue;
    const Ask ask = AskOf(job);
    auto plan = PlanShrink(runs, free, NodesAccepting(state, job), ask.gpus, ask.tasks);
    if (!plan) continue;
    for (const Resize& z : plan->resizes) {
      ElasticRun& run = RunOf(runs, z.job);
      free[run.nodes.front()] += z.from - z.to;
      run.size = z.to;
      out.push_back(z);
    }
    for (NodeIndex n : plan->nodes) free[n] -= ask.gpus;
  }
  return out;
}

GrowthPlan PlanAfterPass(const ClusterState& state, const std::vector<ElasticRun>& fresh,
                         const std::vector<ElasticRun>& others, const ResizeRules& rules,
                         Seconds now) {
  GrowthPlan plan;
  std::vector<int> free = WholeFreeGpus(state);
  ResizeRules at_start = rules;
  at_start.min_interval = Seconds(0);
  at_start.restart_cost = Seconds(0);
  at_start.budget = std::numeric_limits<int>::max();
  plan.at_start = PlanGrowth(fresh, free, at_start, now);
  for (const Resize& z : plan.at_start) free[RunOf(fresh, z.job).nodes.front()] -= z.to - z.from;
  plan.grown = PlanGrowth(others, free, rules, now);
  return plan;
}

}  // namespace corral::sched
