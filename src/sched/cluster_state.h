// The scheduler's incremental, indexed view of the cluster: free GPUs (per GPU, in milli), CPU
// and memory of every node, grouped so that a placement does not scan every node.
//
// Nodes whose state is identical (same GPU model, capacity, free CPU and memory and the same
// multiset of free GPU shares) form one NodeClass. Placement policies score a class once and
// the tie-break picks the class member that comes first in the seeded tie order, so scoring
// cost grows with the number of distinct states, not the number of nodes. Classes are grouped
// by GPU model, and each model keeps histograms (nodes by fully free GPUs, by largest free
// share) that answer "can anything fit at all?" and feed pending reasons in O(1).
//
// Pure data structure: no I/O, no clocks, no global state. Not thread-safe; the scheduler is
// single-threaded (conventions.md).
#pragma once

#include <algorithm>
#include <array>
#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <string_view>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/allocation.h"
#include "model/node.h"
#include "sched/task_request.h"

namespace corral::sched {

// Dense index of a node inside one ClusterState; stable while the node exists.
using NodeIndex = int32_t;
inline constexpr int kNoModel = -1;  // model id of a node without GPUs

// One GPU's part of an allocation: the same type the store keeps (model/allocation.h).
using GpuShare = model::GpuShare;

// What one task holds on one node. `kind` is the interned task kind (see TaskKindId) so that
// policies that group tasks of one kind together (clustering) can see what a node runs.
struct Allocation {
  NodeIndex node = -1;
  CpuMilli cpu{0};
  MemoryMib memory{0};
  std::vector<GpuShare> gpus;
  int kind = -1;
  bool operator==(const Allocation&) const = default;
};

// Levels of topology domains across nodes, narrowest first: nodes under one switch talk faster
// than nodes in one rack. A node's domain at a level comes from its label (model::kSwitchLabel,
// model::kRackLabel).
inline constexpr int kSwitchLevel = 0;
inline constexpr int kRackLevel = 1;
inline constexpr int kTopologyLevels = 2;
inline constexpr int kNoTopologyDomain = -1;

// The state of one live node, in the form policies read. Free GPU milli are listed by GPU index.
struct NodeState {
  std::string name;
  int model = kNoModel;
  int64_t cpu_total = 0, cpu_free = 0;        // CPU milli
  int64_t memory_total = 0, memory_free = 0;  // MiB
  std::vector<int32_t> gpu_free;              // milli free per GPU, by index
  std::vector<int> gpu_domain;                // NVLink/NVSwitch domain per GPU, by index
  std::vector<std::pair<int, int>> kinds;     // (task kind, count) of tasks on the node; kept
                                              // only with track_task_kinds (class identity)
  // Interned topology domain per level, kNoTopologyDomain when unlabelled.
  std::array<int, kTopologyLevels> topology{kNoTopologyDomain, kNoTopologyDomain};
  uint64_t runtimes = 0;    // mask of RuntimeBit()s it offers
  uint64_t tie_rank = 0;    // seeded; lower wins ties
  bool schedulable = true;  // false when cordoned or draining
  bool present = false;     // false after RemoveNode
  int class_id = -1;
};

// A set of nodes in identical state. `gpu_free` is sorted in descending order (a multiset:
// scores depend on which shares are free, not on which GPU index holds them).
struct NodeClass {
  int model = kNoModel;
  int gpu_count = 0;
  int64_t cpu_total = 0, cpu_free = 0;
  int64_t memory_total = 0, memory_free = 0;
  std::vector<int32_t> gpu_free;  // descending
  uint64_t kinds_mask = 0;        // bit k set when a task of kind k runs here (k < 64)
  int kinds_distinct = 0;         // number of distinct kinds (also those >= 64)
  uint64_t runtimes = 0;          // mask of ClusterState::RuntimeBit()s its nodes offer
  int full_free = 0;              // GPUs with 1000 milli free
  int max_free = 0;               // largest free share of one GPU
  int64_t gpu_free_total = 0;     // sum of gpu_free
  std::set<std::pair<uint64_t, NodeIndex>> members;  // (tie_rank, node), schedulable only
  int active_pos = -1;  // position in its model's active list, -1 when empty
  int bucket_pos = -1;  // position in its ActiveBucket while active
};

// What Fits reads of a class, 32 bytes, kept densely in the ActiveBuckets so that a walk over a
// model's classes reads contiguous memory instead of loading every NodeClass (most of which a
// task does not fit).
struct ClassCapacity {
  int64_t cpu_free = 0;     // CPU milli
  int64_t memory_free = 0;  // MiB
  uint64_t runtimes = 0;    // as NodeClass::runtimes
  int32_t full_free = 0;    // GPUs with 1000 milli free
  int32_t max_free = 0;     // largest free share of one GPU
  bool operator==(const ClassCapacity&) const = default;
};

inline ClassCapacity CapacityOf(const NodeClass& c) {
  return {c.cpu_free, c.memory_free, c.runtimes, c.full_free, c.max_free};
}

// True when a node with this capacity offers one of the task's runtimes and has the free CPU,
// memory and GPUs the task needs (Fits of a NodeClass asks this of its capacity).
inline bool Fits(const ClassCapacity& c, const TaskRequest& t) {
  if (c.cpu_free < t.cpu || c.memory_free < t.memory) return false;
  if (!t.any_runtime && (c.runtimes & t.runtimes) == 0) return false;
  if (t.gpus == 0) return true;
  if (t.IsShare()) return c.max_free >= t.gpu_milli;
  return c.full_free >= t.gpus;
}

// The active classes of one model with the same FitBucket, each id beside its capacity.
struct ActiveBucket {
  std::vector<ClassCapacity> capacities;
  std::vector<int> ids;  // class ids, position by position
};

// Buckets by what a task's GPUs can use: 0 when no GPU has anything free, 1 when only shares
// are free, k + 1 when k GPUs are fully free. Every class in a bucket from
// FirstFitBucket(task) up has room for the task's GPUs, except in bucket 1 (shares: the
// largest one decides); no class below it has.
inline int FitBucket(const ClassCapacity& c) {
  return c.full_free > 0 ? c.full_free + 1 : (c.max_free > 0 ? 1 : 0);
}
inline int FirstFitBucket(const TaskRequest& t) {
  return t.gpus == 0 ? 0 : t.IsShare() ? 1 : t.gpus + 1;
}

// Per GPU model aggregates over schedulable nodes.
struct ModelStats {
  int nodes = 0;
  int64_t gpus = 0;
  int64_t full_free_gpus = 0;
  int64_t free_milli = 0;
  std::vector<int> nodes_by_full_free;  // [k] = nodes with exactly k fully free GPUs
  std::vector<int> nodes_by_max_free;   // [m] = nodes whose largest free share is m (0..1000)
  // [b] = the nodes of nodes_by_max_free[b × kShareBlock .. (b + 1) × kShareBlock - 1], so that
  // LargestFreeShare skips empty ranges (it runs per placement, also on a full cluster).
  static constexpr int kShareBlock = 32;
  std::vector<int> nodes_by_max_free_block;
  int LargestFreeBlock() const;  // most fully free GPUs on one node
  int LargestFreeShare() const;  // largest free milli on one GPU
};

struct ClusterStateOptions {
  uint64_t seed = 0;                 // drives the tie order of nodes
  bool track_task_kinds = false;     // include task kinds in class identity (clustering policy)
  bool index_free_capacity = false;  // keep FreeCapacityIndex (policies that ask for it)
  // Allocate remembers (class, allocation) transitions in this many slots (rounded down to a
  // power of two; 0: none), each in the slot its hash picks, replacing the one there: a fixed
  // table, so a workload of endless distinct states (the _diverse benchmarks) costs no allocation
  // per placement. Tests set it small to exercise the replacement.
  size_t remembered_transitions = size_t{1} << 16;
};

// A group of a model's FreeCapacityIndex: (free GPU milli in all, fully free GPUs, largest free
// share). Whether a task's GPUs fit is the same for every class of a group.
struct FreeCapacityGroup {
  int64_t gpu_free_total = 0;
  int full_free = 0;
  int max_free = 0;
  auto operator<=>(const FreeCapacityGroup&) const = default;
};
// One class of a free-capacity group: its free CPU and id, ordered by (free CPU, id). Trivially
// copyable, so a group vector's insert and erase shift the later entries with one memmove
// (std::pair's assignment is user-provided: an element loop, 3x IndexFreeCapacity's cost in
// bestfit_diverse; docs/benchmarks.md, "sched_bench (session 43)").
struct FreeCapacityEntry {
  int32_t cpu_free = 0;  // CPU milli (checked to fit when indexed)
  int32_t id = -1;       // class id
  auto operator<=>(const FreeCapacityEntry&) const = default;
};
static_assert(std::is_trivially_copyable_v<FreeCapacityEntry>);
// A group of a model's FreeCapacityIndex and its classes, in ascending (free CPU, class id)
// order (a sorted vector: a set's node per class cost more to make and free than the rest of
// the index).
struct FreeCapacityGroupClasses {
  FreeCapacityGroup group;
  std::vector<FreeCapacityEntry> classes;  // never empty
};
// The active classes of a model, their groups in ascending FreeCapacityGroup order (a sorted
// vector: a map's node per group that comes and goes cost a third of the index in bestfit,
// docs/benchmarks.md, "sched_bench (session 44)"): the next group is one step away, and a group's
// search by CPU looks at that group only. No group is empty (empty groups left in place made the
// search walk them: 2.5x the instructions).
using FreeCapacityIndexMap = std::vector<FreeCapacityGroupClasses>;

// The first group of `index` (a FreeCapacityIndexMap, const or not) not below `key`.
template <typename Index>
auto FirstGroupFrom(Index& index, const FreeCapacityGroup& key) {
  return std::lower_bound(
      index.begin(), index.end(), key,
      [](const FreeCapacityGroupClasses& g, const FreeCapacityGroup& k) { return g.group < k; });
}

class ClusterState {
 public:
  explicit ClusterState(ClusterStateOptions options = {});

  // Adds a node (validated); names are unique. Its tie rank is a seeded hash of its name, so
  // the tie order does not depend on the order nodes join.
  Result<NodeIndex> AddNode(const model::Node& node);
  // Removes a node and forgets its allocations; the caller requeues whatever ran there.
  Status RemoveNode(NodeIndex node);
  // Cordoned or draining nodes keep their allocations but take no new tasks.
  Status SetSchedulable(NodeIndex node, bool schedulable);
  // Sets the CPU (milli) and memory (MiB) a node offers, keeping its allocations: an agent that
  // comes back declaring other amounts (corral agent --cpus/--memory-mib, or an upgrade that
  // declares more CPU for fake GPUs). Errors: unknown node, a negative amount (InvalidArgument),
  // less than its allocations hold (FailedPrecondition; nothing changes).
  Status ResizeNode(NodeIndex node, CpuMilli cpu, MemoryMib memory);
  // Looks a node up by name; -1 when unknown or removed.
  NodeIndex FindNode(std::string_view name) const;

  // Applies an allocation; fails (changing nothing) if it does not fit or names a bad GPU.
  Status Allocate(const Allocation& allocation);
  // Returns exactly what Allocate took. Fails (changing nothing) if it was not held.
  Status Release(const Allocation& allocation);
  // True when the allocation would fit on its node now.
  bool Fits(const Allocation& allocation) const;

  // Interned GPU model id, kNoModel when no node has ever had that model.
  int ModelId(std::string_view model) const;
  const std::string& ModelName(int model) const { return model_names_[model]; }
  int ModelCount() const { return static_cast<int>(model_names_.size()); }
  // Interned task kind: every share of one GPU is one kind, k whole GPUs another (as the FGD
  // paper's clustering baseline groups tasks).
  int TaskKindId(int gpus, bool share);

  // The mask bit of an agent runtime name (model::Node::runtimes), 0 when no node has ever
  // offered it. At most kMaxRuntimes names are interned; AddNode refuses more.
  static constexpr int kMaxRuntimes = 64;
  uint64_t RuntimeBit(std::string_view runtime) const;
  int RuntimeCount() const { return static_cast<int>(runtime_bits_.size()); }
  // Live nodes (schedulable or not) that offer one of the runtimes in `mask` (for pending
  // reasons of jobs that need a runtime); visits each distinct set of runtimes once.
  int NodesOffering(uint64_t mask) const;

  const NodeState& node(NodeIndex n) const { return nodes_[n]; }
  int NodeSlots() const { return static_cast<int>(nodes_.size()); }  // includes removed
  int LiveNodes() const { return live_nodes_; }
  const NodeClass& node_class(int id) const { return classes_[id]; }
  int ClassCount() const { return static_cast<int>(classes_.size()); }
  // Classes of a model (kNoModel included) that have at least one schedulable member.
  const std::vector<int>& ActiveClasses(int model) const;
  // The same classes by FitBucket (index = bucket; a model's list may end before its last
  // possible bucket): a placement walks only the buckets that may hold its GPUs.
  const std::vector<ActiveBucket>& ActiveBuckets(int model) const;
  const ModelStats& model_stats(int model) const;
  // The active classes of a model by FreeCapacityGroup, then free CPU (empty unless
  // options.index_free_capacity): a search by free GPUs, then free CPU, without visiting every
  // class.
  const FreeCapacityIndexMap& FreeCapacityIndex(int model) const;
  bool IndexesFreeCapacity() const { return options_.index_free_capacity; }

  // True when some node has ever carried a topology label (a switch or rack domain).
  bool HasTopology() const {
    return std::any_of(topology_ids_.begin(), topology_ids_.end(),
                       [](const auto& ids) { return !ids.empty(); });
  }

  // Transitions Allocate remembers now (at most options.remembered_transitions; none with
  // track_task_kinds), how many it has replaced by another with the same slot, and how many
  // allocations found theirs (a transition stays found until another takes its slot).
  size_t RememberedTransitions() const { return remembered_; }
  size_t ReplacedTransitions() const { return replaced_; }
  size_t FoundTransitions() const { return found_; }

  int64_t TotalGpuMilli() const { return total_gpu_milli_; }
  int64_t FreeGpuMilli() const { return free_gpu_milli_; }

 private:
  void Detach(NodeIndex n);  // takes the node out of its class and the model statistics
  // Puts it (back) in the class of its current state: `class_id` when the caller knows it
  // (a remembered transition), else found by ClassFor.
  void Attach(NodeIndex n, int class_id = -1);
  int ClassFor(const NodeState& node);

  // A class's change under one allocation, when the class it leads to follows from the class
  // and the allocation alone: no task kinds tracked (a class holds their set, not their counts)
  // and every GPU share takes `milli` from a GPU that had `before` free, on distinct GPUs (one
  // share, or whole GPUs). Equal keys lead to the same class, so the class found once by
  // ClassFor is remembered (classes are never removed, so an id stays right) in a slot of
  // `transitions_`.
  struct Transition {
    int from = -1;       // the node's class before
    int gpus = 0;        // GPU shares in the allocation
    int32_t before = 0;  // milli free on each of their GPUs before
    int32_t milli = 0;   // milli each takes
    int64_t cpu = 0;     // CPU milli taken
    int64_t memory = 0;  // MiB taken
    bool operator==(const Transition&) const = default;
  };
  struct TransitionHash {
    size_t operator()(const Transition& t) const;
  };
  struct RememberedTransition {
    Transition key;
    int to = -1;  // the class it leads to; -1: an empty slot
  };
  int ModelSlot(int model) const { return model + 1; }  // kNoModel lives in slot 0
  // Adds (sign +1) or takes away (-1) a node of class `c` to its model's statistics.
  void AddToStats(const NodeClass& c, int sign);
  void IndexFreeCapacity(const NodeClass& c, int id, int sign);

  ClusterStateOptions options_;
  std::vector<NodeState> nodes_;
  std::unordered_map<std::string, NodeIndex> by_name_;
  std::vector<std::string> model_names_;
  std::unordered_map<std::string, int> model_ids_;
  std::vector<NodeClass> classes_;
  // Hash of a state's signature -> the classes with that hash (ClassFor compares them).
  std::unordered_multimap<uint64_t, int> class_ids_;
  std::vector<int32_t> sorted_scratch_;  // ClassFor's sorted shares, reused
  // Allocate's slots, by hash (sized when it first remembers one); filled, replaced, found counts.
  std::vector<RememberedTransition> transitions_;
  size_t remembered_ = 0, replaced_ = 0, found_ = 0;
  std::vector<std::vector<int>> active_by_model_;            // slot -> class ids with members
  std::vector<std::vector<ActiveBucket>> buckets_by_model_;  // slot -> ActiveBuckets
  std::vector<ModelStats> stats_by_model_;                   // slot -> aggregates
  std::vector<FreeCapacityIndexMap> free_index_;             // slot -> FreeCapacityIndex
  std::unordered_map<int64_t, int> kind_ids_;
  std::array<std::unordered_map<std::string, int>, kTopologyLevels> topology_ids_;
  std::unordered_map<std::string, uint64_t> runtime_bits_;
  std::unordered_map<uint64_t, int> live_by_runtimes_;  // runtime mask -> live nodes with it
  int live_nodes_ = 0;
  int64_t total_gpu_milli_ = 0;
  int64_t free_gpu_milli_ = 0;
};

}  // namespace corral::sched
