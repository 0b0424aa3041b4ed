#include "sched/elastic_plan.h"

#include <algorithm>
#include <limits>
#include <tuple>

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

// What each node has left for growth: wholly free GPUs (WholeFreeGpus), CPU, memory; none on
// the nodes `reserved` marks.
struct Room {
  std::vector<int> gpus;
  std::vector<int64_t> cpu, memory;
};
Room RoomOf(const ClusterState& state, const std::vector<bool>& reserved) {
  Room room{WholeFreeGpus(state), std::vector<int64_t>(state.NodeSlots(), 0),
            std::vector<int64_t>(state.NodeSlots(), 0)};
  for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    if (static_cast<size_t>(n) < reserved.size() && reserved[n]) {
      room.gpus[n] = 0;
      continue;
    }
    room.cpu[n] = state.node(n).cpu_free;
    room.memory[n] = state.node(n).memory_free;
  }
  return room;
}

// Growth of `runs` into `room` (which it uses up): the kGpus runs on their nodes (PlanGrowth),
// then the kNodes runs, smallest first, ties by id, each once, by whole tasks on nodes holding
// no task of the job, with GPUs of the model its first task's node has, and room for a task's
// GPUs, CPU and memory; to the largest size of its ladder that those nodes allow and
// GrowthAllowed accepts.
std::vector<Resize> Grow(const ClusterState& state, const std::vector<ElasticRun>& runs,
                         const ResizeRules& rules, Seconds now, Room& room) {
  std::vector<Resize> out = PlanGrowth(runs, room.gpus, rules, now);
  for (const Resize& z : out) room.gpus[RunOf(runs, z.job).nodes.front()] -= z.to - z.from;
  std::vector<const ElasticRun*> gangs;
  for (const ElasticRun& r : runs) {
    if (r.unit == model::ElasticUnit::kNodes && !r.nodes.empty()) gangs.push_back(&r);
  }
  std::sort(gangs.begin(), gangs.end(), [](const ElasticRun* a, const ElasticRun* b) {
    return std::make_tuple(a->size, a->job) < std::make_tuple(b->size, b->job);
  });
  for (const ElasticRun* r : gangs) {
    const int model = state.node(r->nodes.front()).model;
    const auto held_end = r->nodes.begin() + std::min<size_t>(r->nodes.size(), r->size);
    std::vector<NodeIndex> hosts;
    for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
      const NodeState& node = state.node(n);
      if (!node.present || !node.schedulable || node.model != model ||
          std::find(r->nodes.begin(), held_end, n) != held_end) {
        continue;
      }
      if (room.gpus[n] >= r->task_gpus && room.cpu[n] >= r->task_cpu.value() &&
          room.memory[n] >= r->task_memory.value()) {
        hosts.push_back(n);
      }
    }
    const int to = r->range.AtMost(r->size + static_cast<int>(hosts.size()));
    if (!GrowthAllowed(*r, to, rules, now)) continue;
    for (int k = 0; k < to - r->size; ++k) {
      room.gpus[hosts[k]] -= r->task_gpus;
      room.cpu[hosts[k]] -= r->task_cpu.value();
      room.memory[hosts[k]] -= r->task_memory.value();
    }
    out.push_back({r->job, r->size, to, ResizeReason::kIdleGpus});
  }
  return out;
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
      for (const auto& [node, gpus] : Freed(run, z.to)) free[node] += gpus;
      run.size = z.to;
      out.push_back(z);
    }
    for (NodeIndex n : plan->nodes) free[n] -= ask.gpus;
  }
  return out;
}

GrowthPlan PlanAfterPass(const ClusterState& state, const std::vector<ElasticRun>& fresh,
                         const std::vector<ElasticRun>& others, const ResizeRules& rules,
                         Seconds now, const std::vector<bool>& reserved) {
  GrowthPlan plan;
  Room room = RoomOf(state, reserved);
  ResizeRules at_start = rules;
  at_start.min_interval = Seconds(0);
  at_start.restart_cost = Seconds(0);
  at_start.budget = std::numeric_limits<int>::max();
  plan.at_start = Grow(state, fresh, at_start, now, room);
  plan.grown = Grow(state, others, rules, now, room);
  return plan;
}

}  // namespace corral::sched
