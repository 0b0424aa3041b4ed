#include "sched/placement_policy.h"

#include <algorithm>
#include <map>

namespace corral::sched {

NodeView ViewOf(const NodeClass& c) {
  NodeView v;
  v.model = c.model;
  v.cpu_total = c.cpu_total;
  v.cpu_free = c.cpu_free;
  v.memory_total = c.memory_total;
  v.memory_free = c.memory_free;
  v.gpu_free = &c.gpu_free;
  v.full_free = c.full_free;
  v.max_free = c.max_free;
  v.gpu_free_total = c.gpu_free_total;
  v.kinds_mask = c.kinds_mask;
  v.kinds_distinct = c.kinds_distinct;
  return v;
}

NodeView ViewOf(const NodeState& node, const ClusterState& state) {
  // A node's class holds the same numbers (it is the node's state), except that the class
  // lists shares sorted; the view of a node lists them by GPU index.
  NodeView v = node.class_id >= 0 ? ViewOf(state.node_class(node.class_id)) : NodeView{};
  if (node.class_id < 0) {
    v.model = node.model;
    v.cpu_total = node.cpu_total;
    v.cpu_free = node.cpu_free;
    v.memory_total = node.memory_total;
    v.memory_free = node.memory_free;
    for (int32_t f : node.gpu_free) {
      v.full_free += (f == 1000);
      v.max_free = std::max<int>(v.max_free, f);
      v.gpu_free_total += f;
    }
  }
  v.gpu_free = &node.gpu_free;
  v.gpu_domain = &node.gpu_domain;
  return v;
}

std::vector<int> TightestFitGpus(const NodeView& node, const TaskRequest& task) {
  const std::vector<int32_t>& free = *node.gpu_free;
  std::vector<int> out;
  if (task.gpus == 0) return out;
  if (task.IsShare()) {
    int best = -1;
    for (int i = 0; i < static_cast<int>(free.size()); ++i) {
      if (free[i] >= task.gpu_milli && (best < 0 || free[i] < free[best])) best = i;
    }
    if (best >= 0) out.push_back(best);
    return out;
  }
  // Fully free GPUs by NVLink domain (all in domain 0 when the node has no topology).
  const bool known = node.gpu_domain && node.gpu_domain->size() == free.size();
  auto domain_of = [&](int i) { return known ? (*node.gpu_domain)[i] : 0; };
  // The common case, one domain among the free GPUs (or none known): the rule below reduces to
  // the lowest-indexed free GPUs, found without grouping.
  int first_free = -1;
  bool one_domain = true;
  for (int i = 0; i < static_cast<int>(free.size()) && one_domain; ++i) {
    if (free[i] != 1000) continue;
    if (first_free < 0) first_free = i;
    one_domain = domain_of(i) == domain_of(first_free);
  }
  if (one_domain) {
    out.reserve(task.gpus);
    for (int i = 0; i < static_cast<int>(free.size()) && static_cast<int>(out.size()) < task.gpus;
         ++i) {
      if (free[i] == 1000) out.push_back(i);
    }
    return out;
  }
  std::map<int, std::vector<int>> by_domain;
  for (int i = 0; i < static_cast<int>(free.size()); ++i) {
    if (free[i] == 1000) by_domain[domain_of(i)].push_back(i);
  }
  const std::vector<int>* fit = nullptr;
  for (const auto& [domain, gpus] : by_domain) {
    if (static_cast<int>(gpus.size()) >= task.gpus && (!fit || gpus.size() < fit->size())) {
      fit = &gpus;
    }
  }
  if (fit) return std::vector<int>(fit->begin(), fit->begin() + task.gpus);
  // No domain suffices: span as few as possible, largest first.
  std::vector<const std::vector<int>*> domains;
  for (const auto& [domain, gpus] : by_domain) domains.push_back(&gpus);
  std::stable_sort(domains.begin(), domains.end(),
                   [](const auto* a, const auto* b) { return a->size() > b->size(); });
  for (const auto* gpus : domains) {
    for (int g : *gpus) {
      if (static_cast<int>(out.size()) == task.gpus) break;
      out.push_back(g);
    }
  }
  std::sort(out.begin(), out.end());
  return out;
}

std::vector<int> PlacementPolicy::ChooseGpus(const NodeView& node, const TaskRequest& task,
                                             Rng& /*rng*/) const {
  return TightestFitGpus(node, task);
}

}  // namespace corral::sched
