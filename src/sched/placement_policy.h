// Placement policies: given a node's state and a task, an integer score (higher is better) and, on
// the chosen node, which GPUs to use. Policies are plugins behind a name -> factory registry
// (policy_registry.cc); adding one is one file plus one line there.
//
// Hard constraints (model, CPU, memory, free GPUs) are checked by the Placer before a policy
// scores a node; policies only rank feasible nodes. Ties go to the node that comes first in
// the cluster's seeded tie order, never to a fresh random draw (fill-experiment.md).
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "common/rng.h"
#include "common/status.h"
#include "sched/cluster_state.h"
#include "sched/fragmentation.h"
#include "sched/policies/best_policy.h"
#include "sched/task_request.h"

namespace corral::sched {

// A node state as policies read it. For a NodeClass the GPU shares are sorted (descending);
// for a real node they are listed by GPU index.
struct NodeView {
  int model = kNoModel;
  int64_t cpu_total = 0, cpu_free = 0;
  int64_t memory_total = 0, memory_free = 0;
  const std::vector<int32_t>* gpu_free = nullptr;
  // NVLink domain per GPU index; null in class views (scores never depend on it).
  const std::vector<int>* gpu_domain = nullptr;
  int full_free = 0;
  int max_free = 0;
  int64_t gpu_free_total = 0;
  uint64_t kinds_mask = 0;
  int kinds_distinct = 0;

  int gpu_count() const { return static_cast<int>(gpu_free->size()); }
};

NodeView ViewOf(const NodeClass& c);
NodeView ViewOf(const NodeState& node, const ClusterState& state);

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual std::string_view name() const = 0;

  // Score of placing `task` on a node in state `node` (higher is better); the task fits there.
  // 0..100 on nodes up to the paper's size (128 cores, 8 GPUs); bestfit and dotprod go below 0
  // on larger nodes. Must be a function of the node state and the task's (gpus, gpu_milli, cpu,
  // memory) alone: the Placer caches it per node class and task shape.
  virtual int Score(const NodeView& node, const TaskRequest& task) const = 0;

  // GPU indices the task takes on the chosen node (`node` lists shares by index). The default
  // takes, for a share, the GPU with the least free milli that fits (lowest index on ties) and,
  // for whole GPUs, fully free ones in one NVLink domain when a domain has enough (the domain
  // with the fewest free GPUs that suffices: best fit, keeping large domains whole), else from
  // the fewest domains (most free first); lowest indices within a domain.
  virtual std::vector<int> ChooseGpus(const NodeView& node, const TaskRequest& task,
                                      Rng& rng) const;

  // True when Score depends on the node only through its free capacity
  // K = cpu_free × kGpuScale + gpu_free_total × kCpuScale (policies.h) and never rises with K
  // (bestfit): the Placer then searches ClusterState's FreeCapacityIndex, least free first,
  // instead of scoring every class.
  virtual bool ScoreFallsWithFreeCapacity() const { return false; }
  // True for policies that pick uniformly among feasible nodes instead of scoring.
  virtual bool PicksUniformly() const { return false; }
  // True when scores read the task kinds running on a node (ClusterState must track them).
  virtual bool NeedsTaskKinds() const { return false; }
  // Called before placing when the cluster's GPU model table has grown.
  virtual void OnModelsChanged(const ClusterState& /*state*/) {}
};

// What some policies need to know about the workload: FGD's typical tasks.
struct PolicyContext {
  std::vector<TypicalTask> typical_tasks;
  BestParams best;  // the `best` policy's tunables (compiled-in defaults unless researching)
};

// Looks a policy up by name ("fgd", "bestfit", ...); the error lists the known names.
Result<std::unique_ptr<PlacementPolicy>> CreatePolicy(std::string_view name,
                                                      const PolicyContext& context);
// True for the policies that score against PolicyContext::typical_tasks (fgd, best): only
// for them is a workload profile worth computing and handing over; false for unknown names.
// Kept in the registry beside each factory rather than as a PlacementPolicy virtual, so that
// it can be asked before a policy exists.
bool PolicyUsesWorkloadProfile(std::string_view name);
// The registered names, in registry order.
std::vector<std::string> PolicyNames();

// The policy corral recommends: `corral server` and `corral dev` place with it unless --policy
// names another (docs/decisions.md, "best is the server's default placement").
inline constexpr std::string_view kDefaultPolicy = "best";

// Default GPU choice, shared by policies that do not override ChooseGpus.
std::vector<int> TightestFitGpus(const NodeView& node, const TaskRequest& task);

}  // namespace corral::sched
