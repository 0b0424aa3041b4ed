#include "sched/pending_reason.h"

#include <algorithm>
#include <functional>

#include "sched/gang_placement.h"

namespace corral::sched {

namespace {

// "V100M16 or V100M32 " for a task that names models; "" for any model.
std::string ModelPhrase(const TaskRequest& t) {
  if (t.any_model) return "";
  std::string names;
  for (size_t i = 0; i < t.model_names.size(); ++i) {
    names += (i == 0 ? "" : (i + 1 == t.model_names.size() ? " or " : ", ")) + t.model_names[i];
  }
  return names + " ";
}

std::string Plural(int64_t n, const std::string& word) {
  return std::to_string(n) + " " + word + (n == 1 ? "" : "s");
}

// "a, b and c".
std::string Enumerate(const std::vector<std::string>& items) {
  std::string out;
  for (size_t i = 0; i < items.size(); ++i) {
    out += (i == 0 ? "" : (i + 1 == items.size() ? " and " : ", ")) + items[i];
  }
  return out;
}

// What one task asks, only what it asks: "8 A100 GPUs, 4000 CPU milli and 16384 MiB", "a
// 500-milli share of one GPU".
std::string TaskPhrase(const TaskRequest& t) {
  std::vector<std::string> parts;
  if (t.IsShare()) {
    parts.push_back("a " + std::to_string(t.gpu_milli) + "-milli share of one " + ModelPhrase(t) +
                    "GPU");
  } else if (t.gpus > 0) {
    parts.push_back(Plural(t.gpus, ModelPhrase(t) + "GPU"));
  }
  if (t.cpu > 0) parts.push_back(std::to_string(t.cpu) + " CPU milli");
  if (t.memory > 0) parts.push_back(std::to_string(t.memory) + " MiB");
  return parts.empty() ? "nothing" : Enumerate(parts);
}

// The first node (in tie order) of the class that maximises `key` among accepted models.
std::string BestNode(const ClusterState& state, const std::vector<int>& models,
                     const std::function<int64_t(const NodeClass&)>& key, int64_t* best_value) {
  int64_t best = -1;
  uint64_t best_rank = 0;
  NodeIndex node = -1;
  for (int m : models) {
    for (int id : state.ActiveClasses(m)) {
      const NodeClass& c = state.node_class(id);
      int64_t v = key(c);
      const auto& [rank, n] = *c.members.begin();
      if (v > best || (v == best && rank < best_rank)) {
        best = v;
        best_rank = rank;
        node = n;
      }
    }
  }
  if (best_value) *best_value = best;
  return node < 0 ? "" : state.node(node).name;
}

// Copies of a task the schedulable nodes hold: now (free capacity, as gang placement counts it)
// or when idle; and how many nodes hold at least one.
struct Room {
  int64_t tasks = 0;
  int64_t nodes = 0;
};

Room FreeRoom(const ClusterState& state, const TaskRequest& t, const std::vector<int>& models,
              int tasks) {
  Room room;
  for (int m : models) {
    for (int id : state.ActiveClasses(m)) {
      const NodeClass& c = state.node_class(id);
      if (!Fits(c, t)) continue;
      const int64_t members = static_cast<int64_t>(c.members.size());
      room.tasks += std::min(tasks, TasksThatFit(c, t)) * members;
      room.nodes += members;
    }
  }
  return room;
}

Room IdleRoom(const ClusterState& state, const TaskRequest& t, const std::vector<int>& models,
              int tasks) {
  Room room;
  for (int m : models) {
    for (int id : state.ActiveClasses(m)) {
      const NodeClass& c = state.node_class(id);
      int64_t fit = tasks;
      if (t.cpu > 0) fit = std::min(fit, c.cpu_total / t.cpu);
      if (t.memory > 0) fit = std::min(fit, c.memory_total / t.memory);
      if (t.IsShare()) {
        fit = std::min<int64_t>(fit, int64_t{c.gpu_count} * (1000 / t.gpu_milli));
      } else if (t.gpus > 0) {
        fit = std::min<int64_t>(fit, c.gpu_count / t.gpus);
      }
      if (fit <= 0) continue;
      const int64_t members = static_cast<int64_t>(c.members.size());
      room.tasks += fit * members;
      room.nodes += members;
    }
  }
  return room;
}

PendingReason ExplainWholeGpus(const ClusterState& state, const TaskRequest& t,
                               const std::vector<int>& models) {
  int64_t free_gpus = 0, nodes_with_free = 0;
  for (int m : models) {
    const ModelStats& s = state.model_stats(m);
    free_gpus += s.full_free_gpus;
    for (size_t k = 1; k < s.nodes_by_full_free.size(); ++k)
      nodes_with_free += s.nodes_by_full_free[k];
  }
  const std::string what = Plural(t.gpus, "free " + ModelPhrase(t) + "GPU");
  if (free_gpus < t.gpus) {
    return {kReasonInsufficientGpus, "needs " + what + " on one node; only " +
                                         std::to_string(free_gpus) + " free in the cluster"};
  }
  int64_t block = 0;
  std::string node = BestNode(
      state, models, [](const NodeClass& c) { return c.full_free; }, &block);
  if (block < t.gpus && nodes_with_free > 1) {
    return {kReasonFragmented,
            "needs " + what + " on one node; " + std::to_string(free_gpus) +
                " GPUs free in total but split over " + Plural(nodes_with_free, "node") +
                ", the largest free block is " + std::to_string(block) + " (node " + node + ")"};
  }
  return {kReasonNoFreeBlock, "needs " + what + " on one node; the largest free block is " +
                                  std::to_string(block) +
                                  (node.empty() ? "" : " (node " + node + ")")};
}

// The task's GPUs are free on some node but its CPU or memory is not: names which of the two
// (only what the task asks for) and the most the nodes with its GPUs free have.
PendingReason ExplainCpuMemory(const ClusterState& state, const TaskRequest& t,
                               const std::vector<int>& models) {
  TaskRequest gpus_only = t;
  gpus_only.cpu = gpus_only.memory = 0;
  auto most = [&](const std::function<int64_t(const NodeClass&)>& free, int64_t* value) {
    return BestNode(
        state, models, [&](const NodeClass& c) { return Fits(c, gpus_only) ? free(c) : -1; },
        value);
  };
  int64_t cpu = 0, memory = 0;
  const std::string cpu_node = most([](const NodeClass& c) { return c.cpu_free; }, &cpu);
  const std::string memory_node = most([](const NodeClass& c) { return c.memory_free; }, &memory);
  const bool cpu_short = t.cpu > cpu, memory_short = t.memory > memory;
  const std::string where = t.gpus > 0 ? "on a node with its GPUs free" : "on one node";
  const std::string those = t.gpus > 0 ? "those" : "nodes";
  const std::string cpu_need = std::to_string(t.cpu) + " CPU milli";
  const std::string memory_need = std::to_string(t.memory) + " MiB";
  if (cpu_short && !memory_short) {
    return {kReasonInsufficientCpuMemory, "needs " + cpu_need + " free " + where + "; " + those +
                                              " have at most " + std::to_string(cpu) + " (node " +
                                              cpu_node + ")"};
  }
  if (memory_short && !cpu_short) {
    return {kReasonInsufficientCpuMemory, "needs " + memory_need + " free " + where + "; " + those +
                                              " have at most " + std::to_string(memory) +
                                              " (node " + memory_node + ")"};
  }
  if (cpu_short && memory_short) {
    return {kReasonInsufficientCpuMemory,
            "needs " + cpu_need + " and " + memory_need + " free " + where + "; " + those +
                " have at most " + std::to_string(cpu) + " CPU milli (node " + cpu_node + ") and " +
                std::to_string(memory) + " MiB (node " + memory_node + ")"};
  }
  return {kReasonInsufficientCpuMemory, "needs " + cpu_need + " and " + memory_need + " free " +
                                            where + "; none has both (most CPU: node " + cpu_node +
                                            ", most memory: node " + memory_node + ")"};
}

// Why one task does not fit the free capacity now (no node holds it).
PendingReason ExplainTask(const ClusterState& state, const TaskRequest& t,
                          const std::vector<int>& models) {
  if (t.gpus > 0 && !t.IsShare()) {
    bool block_exists = false;
    for (int m : models) block_exists |= state.model_stats(m).LargestFreeBlock() >= t.gpus;
    if (!block_exists) return ExplainWholeGpus(state, t, models);
  }
  if (t.IsShare()) {
    int64_t share = 0;
    std::string node = BestNode(
        state, models, [](const NodeClass& c) { return c.max_free; }, &share);
    if (share < t.gpu_milli) {
      return {kReasonNoGpuShare, "needs a " + std::to_string(t.gpu_milli) + "-milli share of one " +
                                     ModelPhrase(t) + "GPU; the largest free share is " +
                                     std::to_string(std::max<int64_t>(share, 0)) +
                                     (node.empty() ? "" : " (node " + node + ")")};
    }
  }
  return ExplainCpuMemory(state, t, models);
}

// Up to three names of the present nodes that take no new work (cordoned, drained, unreachable)
// and could hold one task of `t` idle ("n1, n2, n3 and 3 more"); "" when none could.
std::string OutOfServiceHolders(const ClusterState& state, const TaskRequest& t,
                                const std::vector<int>& models) {
  std::vector<std::string> names;
  int more = 0;
  for (NodeIndex n = 0; n < state.NodeSlots(); ++n) {
    const NodeState& node = state.node(n);
    if (!node.present || node.schedulable) continue;
    if (std::find(models.begin(), models.end(), node.model) == models.end()) continue;
    if (static_cast<int64_t>(node.gpu_free.size()) < t.gpus || node.cpu_total < t.cpu ||
        node.memory_total < t.memory || (!t.any_runtime && (node.runtimes & t.runtimes) == 0)) {
      continue;
    }
    if (names.size() < 3) {
      names.push_back(node.name);
    } else {
      ++more;
    }
  }
  if (more > 0) names.push_back(std::to_string(more) + " more");
  return Enumerate(names);
}

// "; the nodes taking work have A100-80GB, H100 and 2 more" (at most kShown names, sorted), so
// that a misspelt model pin shows the spelling the cluster uses; "" when no node with GPUs takes
// work.
std::string ModelsInService(const ClusterState& state) {
  constexpr size_t kShown = 4;
  std::vector<std::string> names;
  for (int m = 0; m < state.ModelCount(); ++m) {
    if (state.model_stats(m).nodes > 0) names.push_back(state.ModelName(m));
  }
  if (names.empty()) return "";
  std::sort(names.begin(), names.end());
  if (names.size() > kShown) {
    const size_t more = names.size() - kShown;
    names.resize(kShown);
    names.push_back(std::to_string(more) + " more");
  }
  return "; the nodes taking work have " + Enumerate(names);
}

// "each of its 4 tasks needs ..." for a gang, "needs ..." for one task.
PendingReason PerTask(PendingReason reason, int tasks) {
  if (tasks > 1)
    reason.message = "each of its " + std::to_string(tasks) + " tasks " + reason.message;
  return reason;
}

}  // namespace

PendingReason ExplainUnplaced(const ClusterState& state, const TaskRequest& t, int tasks) {
  if (state.LiveNodes() == 0) return {kReasonNoNodes, "the cluster has no nodes"};
  if (!t.any_model && t.models.empty()) {
    return {kReasonUnknownModel,
            "needs GPU model " + ModelPhrase(t) + "but no node has it" + ModelsInService(state)};
  }
  const std::vector<int> models = AcceptedModels(state, t);
  const Room free = FreeRoom(state, t, models, tasks);
  if (free.tasks >= tasks) {
    return {kReasonFitsNow,
            "fits now: capacity was freed after the scheduler last tried it, and its next pass "
            "tries it again"};
  }
  if (!t.any_runtime) {
    // The cluster-wide statistics below count nodes without the runtime too: explain in terms
    // of the nodes that offer it.
    std::string names;
    for (const std::string& r : t.runtime_names) names += (names.empty() ? "" : " or ") + r;
    const int offering = state.NodesOffering(t.runtimes);
    if (offering == 0) {
      return {kReasonNoRuntime, "needs a node offering " + names +
                                    " (its environment's; docs/environments.md), but no node "
                                    "offers it"};
    }
    return {kReasonRuntimeNodesFull,
            "needs a node offering " + names + "; the " + Plural(offering, "node") +
                (offering == 1 ? " offering it has" : " offering it have") + " no room for it now"};
  }

  // No schedulable node could hold a task even idle, but one taking no new work could: the job
  // waits for that node to be back in service, not for a bigger one.
  if (IdleRoom(state, t, models, 1).tasks == 0) {
    if (const std::string held = OutOfServiceHolders(state, t, models); !held.empty()) {
      return PerTask({kReasonOutOfService,
                      "only nodes taking no new work (cordoned, drained or unreachable) could run "
                      "it (" +
                          held + "): it waits until one is back in service"},
                     tasks);
    }
  }
  // Could one task ever fit on an empty node of an accepted model?
  int64_t max_gpus = 0, max_cpu = 0, max_memory = 0;
  for (int m : models) {
    max_gpus = std::max<int64_t>(max_gpus, state.model_stats(m).nodes_by_full_free.size() - 1);
    for (int id : state.ActiveClasses(m)) {
      max_cpu = std::max(max_cpu, state.node_class(id).cpu_total);
      max_memory = std::max(max_memory, state.node_class(id).memory_total);
    }
  }
  if (t.gpus > max_gpus) {
    return PerTask(
        {kReasonNeverFits, "needs " + Plural(t.gpus, ModelPhrase(t) + "GPU") +
                               " on one node; the largest node has " + std::to_string(max_gpus)},
        tasks);
  }
  if (t.cpu > max_cpu || t.memory > max_memory) {
    std::vector<std::string> need, have;
    if (t.cpu > max_cpu) {
      need.push_back(std::to_string(t.cpu) + " CPU milli");
      have.push_back(std::to_string(max_cpu) + " CPU milli");
    }
    if (t.memory > max_memory) {
      need.push_back(std::to_string(t.memory) + " MiB");
      have.push_back(std::to_string(max_memory) + " MiB");
    }
    return PerTask({kReasonNeverFits, "needs " + Enumerate(need) +
                                          " on one node; the largest node has " + Enumerate(have)},
                   tasks);
  }
  if (tasks > 1) {
    // A gang: every task fits some idle node, but do enough nodes exist for all of them?
    const std::string gang =
        "needs " + std::to_string(tasks) + " tasks of " + TaskPhrase(t) + " each, started together";
    const Room idle = IdleRoom(state, t, models, tasks);
    if (idle.tasks < tasks) {
      return {kReasonNeverFits, gang + "; the whole cluster holds " + std::to_string(idle.tasks) +
                                    " of them (" + Plural(idle.nodes, "node") + " big enough)"};
    }
    if (free.tasks > 0) {
      return {kReasonGangPartial, gang + "; the free capacity holds only " +
                                      std::to_string(free.tasks) + " now, on " +
                                      Plural(free.nodes, "node")};
    }
  }
  return PerTask(ExplainTask(state, t, models), tasks);
}

}  // namespace corral::sched
