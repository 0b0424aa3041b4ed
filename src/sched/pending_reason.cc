#include "sched/pending_reason.h"

#include <algorithm>
#include <functional>

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

}  // namespace

PendingReason ExplainUnplaced(const ClusterState& state, const TaskRequest& t, int tasks,
                              int placed) {
  if (state.LiveNodes() == 0) return {kReasonNoNodes, "the cluster has no nodes"};
  if (!t.any_model && t.models.empty()) {
    return {kReasonUnknownModel, "needs GPU model " + ModelPhrase(t) + "but no node has it"};
  }
  if (!t.any_runtime) {
    // The cluster-wide statistics below count nodes without the runtime too: explain in terms
    // of the nodes that offer it.
    std::string names;
    for (const std::string& r : t.runtime_names) names += (names.empty() ? "" : " or ") + r;
    const int offering = state.NodesOffering(t.runtimes);
    if (offering == 0) {
      return {kReasonNoRuntime, "needs a node with runtime " + names +
                                    " (its environment's; docs/environments.md), but no node "
                                    "offers it"};
    }
    return {kReasonRuntimeNodesFull,
            "needs a node with runtime " + names + "; the " + Plural(offering, "node") +
                (offering == 1 ? " offering it has" : " offering it have") + " no room for it now"};
  }
  const std::vector<int> models = AcceptedModels(state, t);

  // Could it ever fit on an empty node of an accepted model?
  int64_t max_gpus = 0, max_cpu = 0, max_memory = 0;
  for (int m : models) {
    max_gpus = std::max<int64_t>(max_gpus, state.model_stats(m).nodes_by_full_free.size() - 1);
    for (int id : state.ActiveClasses(m)) {
      max_cpu = std::max(max_cpu, state.node_class(id).cpu_total);
      max_memory = std::max(max_memory, state.node_class(id).memory_total);
    }
  }
  if (t.gpus > max_gpus) {
    return {kReasonNeverFits, "needs " + Plural(t.gpus, ModelPhrase(t) + "GPU") +
                                  " on one node; the largest node has " + std::to_string(max_gpus)};
  }
  if (t.cpu > max_cpu || t.memory > max_memory) {
    return {kReasonNeverFits, "needs " + std::to_string(t.cpu) + " CPU milli and " +
                                  std::to_string(t.memory) +
                                  " MiB per task; the largest node has " + std::to_string(max_cpu) +
                                  " CPU milli and " + std::to_string(max_memory) + " MiB"};
  }

  if (tasks > 1 && placed > 0) {
    return {kReasonGangPartial, "needs " + std::to_string(tasks) +
                                    " tasks started together; only " + std::to_string(placed) +
                                    " fit now"};
  }
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
  // GPUs fit somewhere; CPU or memory does not, on those nodes.
  int64_t best_cpu = 0;
  std::string node = BestNode(
      state, models,
      [&](const NodeClass& c) {
        TaskRequest gpus_only = t;
        gpus_only.cpu = gpus_only.memory = 0;
        return Fits(c, gpus_only) ? std::min(c.cpu_free * 1000 / std::max<int64_t>(t.cpu, 1),
                                             c.memory_free * 1000 / std::max<int64_t>(t.memory, 1))
                                  : -1;
      },
      &best_cpu);
  return {kReasonInsufficientCpuMemory,
          "needs " + std::to_string(t.cpu) + " CPU milli and " + std::to_string(t.memory) +
              " MiB free next to its GPUs; no node with the GPUs has both" +
              (node.empty() ? "" : " (closest: node " + node + ")")};
}

}  // namespace corral::sched
