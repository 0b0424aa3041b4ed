// The Placer chooses a node and GPUs for one task with a placement policy: hard filters first
// (model, CPU, memory, free GPUs), then the policy's score, highest wins, ties to the node first
// in the seeded tie order. Scores are cached per (node class, task shape), so a node state is
// scored once per shape however many nodes share it and however many tasks ask. The cache is
// bounded to kCachedShapes shapes: when a new shape would pass that, the cache and the shape
// interning start over (new ids, never reused), so a server that meets shapes without end keeps
// caching the current ones; a request resolved before the start-over is scored uncached.
#pragma once

#include <optional>
#include <vector>

#include "common/rng.h"
#include "model/job.h"
#include "sched/cluster_state.h"
#include "sched/placement_policy.h"
#include "sched/task_request.h"

namespace corral::sched {

class Placer {
 public:
  // Borrows all three; they must outlive the Placer. The policy must not be shared by two
  // Placers (it caches model ids of one ClusterState).
  Placer(ClusterState& state, PlacementPolicy& policy, Rng& rng);

  // The task's needs in scheduler terms (models resolved, shape and kind interned).
  TaskRequest Resolve(const model::TaskResources& resources);

  // The allocation the policy would choose now, or nullopt when no node fits. Changes nothing
  // but the random draw of the `random` policy.
  std::optional<Allocation> Choose(const TaskRequest& task);
  // Choose and apply.
  std::optional<Allocation> Place(const TaskRequest& task);

  // The task on a node the caller chose (it fits there): the policy chooses the GPUs, and the
  // allocation is applied. Nullopt (nothing changed) when it does not fit.
  std::optional<Allocation> PlaceOn(NodeIndex node, const TaskRequest& task);
  // The policy's score of the task on nodes of class `class_id` (cached; the task fits there).
  int Score(int class_id, const TaskRequest& task);

  // True when some node of an acceptable model could hold the task's GPUs (ignoring CPU and
  // memory); answered from per-model statistics without looking at nodes.
  bool GpusCouldFit(const TaskRequest& task) const;

  ClusterState& state() { return state_; }
  const PlacementPolicy& policy() const { return *policy_; }
  // Places with `policy` from now on (borrowed, as in the constructor) and drops every cached
  // score. Its NeedsTaskKinds and ScoreFallsWithFreeCapacity must equal the old policy's (the
  // ClusterState was built for them): the Scheduler swaps only a policy of the same name.
  void SetPolicy(PlacementPolicy& policy);

  static constexpr int kCachedShapes = 256;

 private:
  // GpusCouldFit, given the task's AcceptedModels.
  bool GpusCouldFitOn(const TaskRequest& task, const std::vector<int>& models) const;
  // Tells the policy about new GPU models and drops scores that may depend on them.
  void SyncModels();
  int CachedScore(int class_id, const NodeClass& c, const TaskRequest& task);
  // The allocation of the task on `node` with the GPUs the policy chooses; nullopt if the
  // policy chose too few.
  std::optional<Allocation> AllocationOn(NodeIndex node, const TaskRequest& task);
  std::optional<NodeIndex> PickUniformly(const TaskRequest& task);
  std::optional<NodeIndex> PickBestScore(const TaskRequest& task);
  // PickBestScore's answer for a policy whose score falls with free capacity, from the state's
  // FreeCapacityIndex.
  std::optional<NodeIndex> PickLeastFree(const TaskRequest& task);

  ClusterState& state_;
  PlacementPolicy* policy_;  // never null
  Rng& rng_;
  int models_seen_ = -1;
  // A shape: everything a score may depend on.
  struct ShapeKey {
    int gpus = 0;
    int gpu_milli = 0;
    int64_t cpu = 0;
    int64_t memory = 0;
    bool operator==(const ShapeKey&) const = default;
  };
  struct ShapeSlot {
    ShapeKey key;
    int id = -1;  // -1: an empty slot
  };
  // The shape id of `key`, interned if new (starting the cache over when full).
  int ShapeId(const ShapeKey& key);
  // Shape -> id, open addressing with linear probing in 2 * kCachedShapes slots (a flat table:
  // a workload of a shape per task, the _diverse benchmarks, allocates nothing per task). At most
  // kCachedShapes entries (shapes_interned_), with ids from first_cached_shape_ up; ids come from
  // next_shape_id_, so a TaskRequest resolved before a start-over keeps an id no later shape gets
  // (int: 2^31 shapes met in one Placer's life).
  std::vector<ShapeSlot> shape_slots_ = std::vector<ShapeSlot>(2 * kCachedShapes);
  int shapes_interned_ = 0;
  int next_shape_id_ = 0;
  int first_cached_shape_ = 0;
  // [class id][shape id - first_cached_shape_], kNotScored if not scored yet.
  std::vector<std::vector<int32_t>> score_cache_;

  std::vector<int> models_scratch_;
};

}  // namespace corral::sched
