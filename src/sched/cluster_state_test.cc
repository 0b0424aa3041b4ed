#include "sched/cluster_state.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <tuple>

#include "common/rng.h"
#include "sched/fragmentation.h"
#include "sched/fragmentation_index.h"
#include "sched/placement_policy.h"
#include "sched/placer.h"

namespace corral::sched {
namespace {

model::Node T4Node(const std::string& name, int gpus = 4) {
  return model::MakeNode(name, "T4", gpus, CpuMilli(32000), MemoryMib(65536));
}

Allocation Take(NodeIndex node, std::vector<GpuShare> gpus, int64_t cpu = 0) {
  Allocation a;
  a.node = node;
  a.gpus = std::move(gpus);
  a.cpu = CpuMilli(cpu);
  return a;
}

TEST(ClusterState, RejectsDuplicateAndInvalidNodes) {
  ClusterState s;
  ASSERT_TRUE(s.AddNode(T4Node("n1")).ok());
  EXPECT_EQ(s.AddNode(T4Node("n1")).status().code(), StatusCode::kAlreadyExists);
  model::Node bad = T4Node("n2");
  bad.cpu = CpuMilli(0);
  auto r = s.AddNode(bad);
  ASSERT_FALSE(r.ok());
  EXPECT_NE(r.status().message().find("cpu_milli"), std::string::npos);
  EXPECT_EQ(s.LiveNodes(), 1);
}

TEST(ClusterState, AllocationThatDoesNotFitChangesNothing) {
  ClusterState s;
  NodeIndex n = *s.AddNode(T4Node("n1", 2));
  ASSERT_TRUE(s.Allocate(Take(n, {{0, MilliGpu(700)}})).ok());
  EXPECT_FALSE(s.Allocate(Take(n, {{0, MilliGpu(400)}})).ok());
  EXPECT_FALSE(s.Allocate(Take(n, {{2, MilliGpu(1)}})).ok());
  EXPECT_FALSE(s.Allocate(Take(n, {{1, MilliGpu(100)}}, 40000)).ok());
  EXPECT_EQ(s.node(n).gpu_free, (std::vector<int32_t>{300, 1000}));
  EXPECT_EQ(s.node(n).cpu_free, 32000);
  // Releasing more than was taken is refused too.
  EXPECT_FALSE(s.Release(Take(n, {{1, MilliGpu(100)}})).ok());
  EXPECT_EQ(s.FreeGpuMilli(), 1300);
}

TEST(ClusterState, ResizingANodeKeepsWhatItsAllocationsHold) {
  ClusterState s;
  NodeIndex n = *s.AddNode(T4Node("n1", 2));
  Allocation take = Take(n, {{0, MilliGpu(1000)}}, 20000);
  take.memory = MemoryMib(1024);
  ASSERT_TRUE(s.Allocate(take).ok());
  ASSERT_TRUE(s.ResizeNode(n, CpuMilli(64000), MemoryMib(4096)).ok());
  EXPECT_EQ(s.node(n).cpu_total, 64000);
  EXPECT_EQ(s.node(n).cpu_free, 44000);
  EXPECT_EQ(s.node(n).memory_free, 3072);
  // Less than the allocations hold is refused, changing nothing.
  EXPECT_EQ(s.ResizeNode(n, CpuMilli(10000), MemoryMib(4096)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.ResizeNode(n, CpuMilli(64000), MemoryMib(512)).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.node(n).cpu_free, 44000);
  // The allocation is released against the new totals.
  ASSERT_TRUE(s.Release(take).ok());
  EXPECT_EQ(s.node(n).cpu_free, 64000);
  EXPECT_EQ(s.node(n).memory_free, 4096);
  EXPECT_EQ(s.ResizeNode(n + 1, CpuMilli(1), MemoryMib(1)).code(), StatusCode::kNotFound);
  // More CPU than the free-capacity index holds (32 bits) is refused, not a crash.
  EXPECT_EQ(s.ResizeNode(n, CpuMilli(model::kMaxNodeCpuMilli + 1), MemoryMib(4096)).code(),
            StatusCode::kInvalidArgument);
  model::Node huge = T4Node("huge");
  huge.cpu = CpuMilli(model::kMaxNodeCpuMilli + 1);
  EXPECT_EQ(s.AddNode(huge).status().code(), StatusCode::kInvalidArgument);
  ClusterState indexed(ClusterStateOptions{.index_free_capacity = true});
  huge.cpu = CpuMilli(model::kMaxNodeCpuMilli);
  ASSERT_TRUE(indexed.AddNode(huge).ok()) << "the most a node may have is indexed";
}

TEST(ClusterState, IdenticalNodesShareAClassUntilTheyDiffer) {
  ClusterState s;
  NodeIndex a = *s.AddNode(T4Node("a"));
  NodeIndex b = *s.AddNode(T4Node("b"));
  EXPECT_EQ(s.node(a).class_id, s.node(b).class_id);
  EXPECT_EQ(s.ActiveClasses(s.ModelId("T4")).size(), 1u);
  Allocation take = Take(a, {{2, MilliGpu(500)}});
  ASSERT_TRUE(s.Allocate(take).ok());
  EXPECT_NE(s.node(a).class_id, s.node(b).class_id);
  EXPECT_EQ(s.ActiveClasses(s.ModelId("T4")).size(), 2u);
  // The same multiset of free shares on other GPU indices is the same class.
  ASSERT_TRUE(s.Allocate(Take(b, {{0, MilliGpu(500)}})).ok());
  EXPECT_EQ(s.node(a).class_id, s.node(b).class_id);
  ASSERT_TRUE(s.Release(take).ok());
  EXPECT_EQ(s.node_class(s.node(a).class_id).gpu_free,
            (std::vector<int32_t>{1000, 1000, 1000, 1000}));
}

// Allocate remembers which class a (class, allocation) transition leads to. Over random
// allocations and releases (one share, whole GPUs, CPU only, and two shares listed on one GPU or
// on two: keys a careless rule would confuse; CPU and memory varying), every node stays in the
// class of its own state, and nodes in equal states share one class; with a cordon between,
// whose class is not kept. With index_free_capacity, the FreeCapacityIndex holds exactly the
// active classes, each under its own group and free CPU. Returns how many remembered
// transitions were replaced by another with the same slot (-1 on a failure).
int CheckRememberedTransitions(const ClusterStateOptions& options) {
  ClusterState s(options);
  std::vector<model::Node> nodes;
  for (int i = 0; i < 16; ++i) {
    nodes.push_back(model::MakeNode("n" + std::to_string(i), "T4", 4 + 4 * (i % 2), CpuMilli(32000),
                                    MemoryMib(65536)));
    EXPECT_TRUE(s.AddNode(nodes.back()).ok());
  }
  const int t4 = s.ModelId("T4");
  SeededRng rng(11);
  std::vector<Allocation> held;
  const int64_t sizes[] = {250, 500, 1000};
  size_t most_remembered = 0;
  for (int step = 0; step < 4000; ++step) {
    const NodeIndex n = static_cast<NodeIndex>(rng.Uniform(nodes.size()));
    const int gpus = static_cast<int>(s.node(n).gpu_free.size());
    if (rng.Uniform(40) == 0) {
      EXPECT_TRUE(s.SetSchedulable(n, !s.node(n).schedulable).ok());
    } else if (!held.empty() && rng.Uniform(3) == 0) {
      const size_t i = rng.Uniform(held.size());
      EXPECT_TRUE(s.Release(held[i]).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
    } else {
      Allocation a;
      a.node = n;
      a.cpu = CpuMilli(1000 * static_cast<int64_t>(rng.Uniform(3)));
      a.memory = MemoryMib(1024 * static_cast<int64_t>(rng.Uniform(3)));
      const int first = static_cast<int>(rng.Uniform(gpus));
      switch (rng.Uniform(4)) {
        case 0:  // one share
          a.gpus.push_back({first, MilliGpu(sizes[rng.Uniform(3)])});
          break;
        case 1:  // up to two whole GPUs (CPU only when none is free)
          for (int g = 0; g < gpus && static_cast<int>(a.gpus.size()) < 2; ++g) {
            if (s.node(n).gpu_free[g] == 1000) a.gpus.push_back({g, MilliGpu(1000)});
          }
          break;
        case 2:  // two shares on one GPU, listed apart
          a.gpus = {{first, MilliGpu(250)}, {first, MilliGpu(250)}};
          break;
        default:  // two shares on two GPUs
          a.gpus = {{first, MilliGpu(250)}, {(first + 1) % gpus, MilliGpu(250)}};
          break;
      }
      const bool share = a.gpus.size() == 1 && a.gpus.front().milli.value() < 1000;
      a.kind = s.TaskKindId(static_cast<int>(a.gpus.size()), share);
      if (s.Allocate(a).ok()) held.push_back(a);
    }
    most_remembered = std::max(most_remembered, s.RememberedTransitions());
    // Every schedulable node sits in the class of its state; equal states share a class.
    using State = std::tuple<int64_t, int64_t, std::vector<int32_t>, std::vector<int>>;
    std::map<State, int> class_of_state;
    for (NodeIndex m = 0; m < s.NodeSlots(); ++m) {
      const NodeState& node = s.node(m);
      if (!node.schedulable) continue;
      std::vector<int32_t> sorted = node.gpu_free;
      std::sort(sorted.begin(), sorted.end(), std::greater<>());
      std::vector<int> kinds;  // the set of kinds (class identity with track_task_kinds)
      if (options.track_task_kinds) {
        for (const auto& [kind, count] : node.kinds) kinds.push_back(kind);
      }
      const NodeClass& c = s.node_class(node.class_id);
      EXPECT_EQ(c.gpu_free, sorted) << "step " << step << ", node " << m;
      EXPECT_EQ(c.cpu_free, node.cpu_free) << "step " << step;
      EXPECT_EQ(c.memory_free, node.memory_free) << "step " << step;
      EXPECT_EQ(c.cpu_total, node.cpu_total) << "step " << step;
      EXPECT_EQ(c.kinds_distinct, static_cast<int>(kinds.size())) << "step " << step;
      const auto [it, inserted] = class_of_state.try_emplace(
          State{node.cpu_free, node.memory_free, sorted, kinds}, node.class_id);
      EXPECT_EQ(it->second, node.class_id) << "step " << step << ", node " << m;
    }
    // The FreeCapacityIndex: exactly the active classes, each under its group and free CPU.
    std::vector<int> indexed;
    // Groups in strictly ascending order (PickLeastFree's search and walk rely on it).
    const FreeCapacityIndexMap& index = s.FreeCapacityIndex(t4);
    EXPECT_EQ(
        std::adjacent_find(index.begin(), index.end(),
                           [](const FreeCapacityGroupClasses& a,
                              const FreeCapacityGroupClasses& b) { return !(a.group < b.group); }),
        index.end())
        << "step " << step;
    for (const auto& [group, classes] : index) {
      EXPECT_FALSE(classes.empty()) << "step " << step;
      EXPECT_TRUE(std::is_sorted(classes.begin(), classes.end())) << "step " << step;
      for (const auto& [cpu_free, id] : classes) {
        const NodeClass& c = s.node_class(id);
        EXPECT_EQ(group, (FreeCapacityGroup{c.gpu_free_total, c.full_free, c.max_free}))
            << "step " << step << ", class " << id;
        EXPECT_EQ(cpu_free, c.cpu_free) << "step " << step << ", class " << id;
        indexed.push_back(id);
      }
    }
    std::vector<int> active =
        options.index_free_capacity ? s.ActiveClasses(t4) : std::vector<int>{};
    std::sort(active.begin(), active.end());
    std::sort(indexed.begin(), indexed.end());
    EXPECT_EQ(indexed, active) << "step " << step;
    if (::testing::Test::HasFailure()) return -1;  // one step's failures, not 4000
  }
  EXPECT_GT(held.size(), 10u);
  EXPECT_LE(most_remembered, options.remembered_transitions);
  // Task kinds in the class (a set, not counts) keep the rule off: nothing is remembered.
  if (options.track_task_kinds) {
    EXPECT_EQ(most_remembered, 0u);
  } else {
    EXPECT_GT(most_remembered, 0u);
    // Remembered transitions are found again (else every class above came from ClassFor and
    // the table would be dead weight).
    EXPECT_GT(s.FoundTransitions(), 0u);
  }
  return static_cast<int>(s.ReplacedTransitions());
}

TEST(ClusterState, RememberedTransitionsLeadToTheClassOfTheNewState) {
  // The default 65,536 slots (slots shared by hash may replace a few).
  CheckRememberedTransitions({.seed = 5});
}

TEST(ClusterState, ARememberedTransitionIsFoundUntilAnotherTakesItsSlot) {
  auto fill = [](ClusterState& s) {
    std::vector<NodeIndex> nodes;
    for (int i = 0; i < 8; ++i) nodes.push_back(*s.AddNode(T4Node("n" + std::to_string(i))));
    return nodes;
  };
  {  // Identical nodes, the same allocation on each: remembered once, found on the other 7.
    ClusterState s;
    for (NodeIndex n : fill(s)) ASSERT_TRUE(s.Allocate(Take(n, {{1, MilliGpu(500)}})).ok());
    EXPECT_EQ(s.RememberedTransitions(), 1u);
    EXPECT_EQ(s.FoundTransitions(), 7u);
    EXPECT_EQ(s.ReplacedTransitions(), 0u);
  }
  {  // One slot, two transitions taking turns: each replaces the other, none is found.
    ClusterState s({.remembered_transitions = 1});
    const std::vector<NodeIndex> nodes = fill(s);
    for (size_t i = 0; i < nodes.size(); ++i) {
      ASSERT_TRUE(s.Allocate(Take(nodes[i], {{0, MilliGpu(i % 2 == 0 ? 500 : 250)}})).ok());
    }
    EXPECT_EQ(s.FoundTransitions(), 0u);
    EXPECT_EQ(s.ReplacedTransitions(), 7u);
    // Every node still sits in the class of its state: equal states, one class.
    EXPECT_EQ(s.node(nodes[0]).class_id, s.node(nodes[2]).class_id);
    EXPECT_EQ(s.node(nodes[1]).class_id, s.node(nodes[3]).class_id);
    EXPECT_NE(s.node(nodes[0]).class_id, s.node(nodes[1]).class_id);
  }
  {  // No slots: nothing remembered.
    ClusterState s({.remembered_transitions = 0});
    for (NodeIndex n : fill(s)) ASSERT_TRUE(s.Allocate(Take(n, {{1, MilliGpu(500)}})).ok());
    EXPECT_EQ(s.RememberedTransitions(), 0u);
    EXPECT_EQ(s.FoundTransitions(), 0u);
  }
}

TEST(ClusterState, RememberedTransitionsAreReplacedInTheirSlots) {
  EXPECT_GT(CheckRememberedTransitions({.seed = 5, .remembered_transitions = 16}), 10);
}

TEST(ClusterState, RememberedTransitionsIndexTheNewClassByFreeCapacity) {
  CheckRememberedTransitions({.seed = 5, .index_free_capacity = true});
  EXPECT_GT(CheckRememberedTransitions(
                {.seed = 5, .index_free_capacity = true, .remembered_transitions = 16}),
            10);
}

TEST(ClusterState, TrackedTaskKindsRememberNoTransition) {
  EXPECT_EQ(CheckRememberedTransitions(
                {.seed = 5, .track_task_kinds = true, .index_free_capacity = true}),
            0);
}

TEST(ClusterState, ModelStatsTrackBlocksAndShares) {
  ClusterState s;
  NodeIndex a = *s.AddNode(T4Node("a", 8));
  *s.AddNode(T4Node("b", 2));
  const ModelStats& st = s.model_stats(s.ModelId("T4"));
  EXPECT_EQ(st.LargestFreeBlock(), 8);
  ASSERT_TRUE(s.Allocate(Take(a, {{0, MilliGpu(1000)},
                                  {1, MilliGpu(1000)},
                                  {2, MilliGpu(1000)},
                                  {3, MilliGpu(1000)},
                                  {4, MilliGpu(1000)},
                                  {5, MilliGpu(1000)},
                                  {6, MilliGpu(1000)},
                                  {7, MilliGpu(400)}}))
                  .ok());
  EXPECT_EQ(st.LargestFreeBlock(), 2);
  EXPECT_EQ(st.full_free_gpus, 2);
  EXPECT_EQ(st.free_milli, 2600);
  ASSERT_TRUE(s.SetSchedulable(s.FindNode("b"), false).ok());
  EXPECT_EQ(st.LargestFreeBlock(), 0);
  EXPECT_EQ(st.LargestFreeShare(), 600);
}

TEST(ClusterState, TieOrderDoesNotDependOnJoinOrder) {
  ClusterState s1(ClusterStateOptions{7, false}), s2(ClusterStateOptions{7, false});
  for (const char* n : {"x", "y", "z"}) ASSERT_TRUE(s1.AddNode(T4Node(n)).ok());
  for (const char* n : {"z", "x", "y"}) ASSERT_TRUE(s2.AddNode(T4Node(n)).ok());
  for (const char* n : {"x", "y", "z"}) {
    EXPECT_EQ(s1.node(s1.FindNode(n)).tie_rank, s2.node(s2.FindNode(n)).tie_rank);
  }
  ClusterState s3(ClusterStateOptions{8, false});
  ASSERT_TRUE(s3.AddNode(T4Node("x")).ok());
  EXPECT_NE(s3.node(0).tie_rank, s1.node(s1.FindNode("x")).tie_rank);
}

// The ActiveBuckets hold exactly the active classes, each in its FitBucket beside its
// capacity, and every class's bucket position points at it.
void ExpectBucketsAreActiveClasses(const ClusterState& s) {
  for (int m = kNoModel; m < s.ModelCount(); ++m) {
    std::multiset<int> bucketed;
    const std::vector<ActiveBucket>& buckets = s.ActiveBuckets(m);
    for (size_t b = 0; b < buckets.size(); ++b) {
      ASSERT_EQ(buckets[b].capacities.size(), buckets[b].ids.size()) << "model " << m;
      for (size_t i = 0; i < buckets[b].ids.size(); ++i) {
        const NodeClass& c = s.node_class(buckets[b].ids[i]);
        ASSERT_EQ(buckets[b].capacities[i], CapacityOf(c)) << "model " << m << " bucket " << b;
        ASSERT_EQ(FitBucket(CapacityOf(c)), static_cast<int>(b)) << "model " << m;
        ASSERT_EQ(c.bucket_pos, static_cast<int>(i)) << "model " << m << " bucket " << b;
        bucketed.insert(buckets[b].ids[i]);
      }
    }
    const std::vector<int>& active = s.ActiveClasses(m);
    ASSERT_EQ(bucketed, std::multiset<int>(active.begin(), active.end())) << "model " << m;
  }
}

// Recomputes every node's free resources from the allocations held and compares them, and the
// per-model statistics, with the incremental state.
void ExpectConsistent(const ClusterState& s, const std::vector<model::Node>& nodes,
                      const std::vector<Allocation>& held) {
  std::map<NodeIndex, std::vector<int64_t>> gpu_used;
  std::map<NodeIndex, int64_t> cpu_used, memory_used;
  for (const Allocation& a : held) {
    auto& used = gpu_used[a.node];
    used.resize(s.node(a.node).gpu_free.size(), 0);
    for (const GpuShare& g : a.gpus) used[g.index] += g.milli.value();
    cpu_used[a.node] += a.cpu.value();
    memory_used[a.node] += a.memory.value();
  }
  int64_t free_total = 0;
  std::map<int, int64_t> full_by_model;
  for (NodeIndex n = 0; n < s.NodeSlots(); ++n) {
    const NodeState& node = s.node(n);
    ASSERT_EQ(node.cpu_free, nodes[n].cpu.value() - cpu_used[n]) << node.name;
    ASSERT_EQ(node.memory_free, nodes[n].memory.value() - memory_used[n]) << node.name;
    for (size_t g = 0; g < node.gpu_free.size(); ++g) {
      int64_t used = gpu_used.count(n) ? gpu_used[n][g] : 0;
      ASSERT_EQ(node.gpu_free[g], 1000 - used) << node.name << " gpu " << g;
      ASSERT_GE(node.gpu_free[g], 0);
      free_total += node.gpu_free[g];
      full_by_model[node.model] += node.gpu_free[g] == 1000;
    }
    const NodeClass& c = s.node_class(node.class_id);
    ASSERT_EQ(c.cpu_free, node.cpu_free);
    ASSERT_TRUE(c.members.count({node.tie_rank, n}));
  }
  ASSERT_EQ(s.FreeGpuMilli(), free_total);
  for (int m = 0; m < s.ModelCount(); ++m) {
    ASSERT_EQ(s.model_stats(m).full_free_gpus, full_by_model[m]);
  }
  ExpectBucketsAreActiveClasses(s);
}

// The Placer skips the buckets below FirstFitBucket(task): no capacity there fits the task, and
// from bucket 2 up every capacity with the CPU, memory and runtime fits its GPUs.
TEST(ClusterState, FitBucketsBelowTheFirstHoldNothingTheTaskFits) {
  SeededRng rng(3);
  int fits = 0;
  for (int i = 0; i < 20000; ++i) {
    ClassCapacity c;
    c.cpu_free = 1000 * static_cast<int64_t>(rng.Uniform(9));
    c.memory_free = 1024 * static_cast<int64_t>(rng.Uniform(9));
    c.runtimes = 1 + rng.Uniform(3);
    c.full_free = static_cast<int32_t>(rng.Uniform(9));
    c.max_free = c.full_free > 0 ? 1000 : static_cast<int32_t>(rng.Uniform(2) * rng.Uniform(1000));
    TaskRequest t;
    t.gpus = static_cast<int>(rng.Uniform(9));
    t.gpu_milli = t.gpus == 0 ? 0 : 1000;
    if (t.gpus == 1 && rng.Uniform(2) == 0) t.gpu_milli = 1 + static_cast<int>(rng.Uniform(999));
    t.cpu = 1000 * static_cast<int64_t>(rng.Uniform(9));
    t.memory = 1024 * static_cast<int64_t>(rng.Uniform(9));
    t.any_runtime = rng.Uniform(2) == 0;
    t.runtimes = t.any_runtime ? 0 : 1 + rng.Uniform(3);
    const bool fit = Fits(c, t);
    fits += fit ? 1 : 0;
    if (FitBucket(c) < FirstFitBucket(t)) {
      ASSERT_FALSE(fit) << "step " << i;
    } else if (FitBucket(c) >= 2) {
      TaskRequest no_gpus = t;
      no_gpus.gpus = 0;
      ASSERT_EQ(fit, Fits(c, no_gpus)) << "step " << i;
    }
  }
  EXPECT_GT(fits, 1000);
}

// Random clusters and random place/release sequences never over-allocate, keep every index
// consistent, and releasing everything restores the empty cluster exactly.
TEST(ClusterStateProperty, RandomEventSequencesStayConsistent) {
  const char* models[] = {"T4", "V100M32", "A100"};
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SCOPED_TRACE("seed " + std::to_string(seed));
    SeededRng rng(seed);
    std::vector<model::Node> nodes;
    for (int i = 0; i < 12; ++i) {
      const int gpus[] = {1, 2, 4, 8};
      nodes.push_back(model::MakeNode("n" + std::to_string(i), models[rng.Uniform(3)],
                                      gpus[rng.Uniform(4)],
                                      CpuMilli(16000 + 16000 * rng.Uniform(4)), MemoryMib(65536)));
    }
    for (const std::string& policy_name : PolicyNames()) {
      auto policy = CreatePolicy(policy_name, PolicyContext{{TypicalTask{1, 1000, 0, {}, 1}}});
      ASSERT_TRUE(policy.ok());
      ClusterState s(ClusterStateOptions{seed, (*policy)->NeedsTaskKinds()});
      for (const auto& n : nodes) ASSERT_TRUE(s.AddNode(n).ok());
      const int initial_classes = static_cast<int>(s.ClassCount());
      Placer placer(s, **policy, rng);
      std::vector<Allocation> held;
      for (int step = 0; step < 300; ++step) {
        if (!held.empty() && rng.Uniform(3) == 0) {
          size_t i = rng.Uniform(held.size());
          ASSERT_TRUE(s.Release(held[i]).ok());
          held.erase(held.begin() + static_cast<std::ptrdiff_t>(i));
        } else {
          int gpus = static_cast<int>(rng.Uniform(5));
          int milli = gpus == 1 && rng.Uniform(2) ? 1 + static_cast<int>(rng.Uniform(999)) : 1000;
          if (gpus == 0) milli = 0;
          TaskRequest t = placer.Resolve(
              model::MakeResources(gpus, milli, static_cast<int64_t>(rng.Uniform(8)) * 1000, 1024));
          if (auto a = placer.Place(t)) held.push_back(*a);
        }
        ExpectConsistent(s, nodes, held);
        if (HasFatalFailure()) return;
      }
      for (const Allocation& a : held) ASSERT_TRUE(s.Release(a).ok());
      ExpectConsistent(s, nodes, {});
      EXPECT_EQ(s.FreeGpuMilli(), s.TotalGpuMilli());
      int active = 0;
      for (int m = -1; m < s.ModelCount(); ++m) active += s.ActiveClasses(m).size();
      EXPECT_LE(active, initial_classes);
    }
  }
}

TEST(ClusterState, CountsTheNodesOfferingARuntimeAsNodesComeAndGo) {
  ClusterState s;
  model::Node plain = model::MakeNode("plain", "T4", 2, CpuMilli(1000), MemoryMib(1024));
  model::Node engine = model::MakeNode("engine", "T4", 2, CpuMilli(1000), MemoryMib(1024));
  engine.runtimes = {"process", "container"};
  ASSERT_TRUE(s.AddNode(plain).ok());
  EXPECT_EQ(s.RuntimeBit("container"), 0u);
  auto e = s.AddNode(engine);
  ASSERT_TRUE(e.ok());
  const uint64_t container = s.RuntimeBit("container");
  const uint64_t process = s.RuntimeBit("process");
  EXPECT_EQ(s.NodesOffering(container), 1);
  EXPECT_EQ(s.NodesOffering(process), 2);
  EXPECT_EQ(s.NodesOffering(process | container), 2);  // each node once
  ASSERT_TRUE(s.RemoveNode(*e).ok());
  EXPECT_EQ(s.NodesOffering(container), 0);
  EXPECT_EQ(s.NodesOffering(process), 1);
}

// A typical task's memory is the mean over the tasks of its shape; memory does not split shapes.
TEST(TypicalTasks, MemoryIsTheShapesMeanNotPartOfTheShape) {
  const std::vector<model::TaskResources> tasks = {model::MakeResources(1, 1000, 8000, 1000),
                                                   model::MakeResources(1, 1000, 8000, 3000),
                                                   model::MakeResources(1, 500, 4000, 7000)};
  const std::vector<TypicalTask> typical = ComputeTypicalTasks(tasks, 1.0);
  ASSERT_EQ(typical.size(), 2u);
  EXPECT_EQ(typical[0].gpu_milli, 1000);
  EXPECT_EQ(typical[0].count, 2);
  EXPECT_EQ(typical[0].memory, 2000);
  EXPECT_EQ(typical[1].memory, 7000);
}

// The meter's one sweep over shapes sorted by gpu_milli gives F(node) as the definition does
// (fill-experiment.md: per typical task, the free milli of the GPUs too small for one unit when
// enough GPUs fit it, else all the free milli), on random nodes and on the states SortedFree
// derives for a share and for whole GPUs.
TEST(FragmentationMeter, SweepMatchesTheDefinitionOnRandomNodes) {
  std::vector<TypicalTask> typical = {{1, 1000, 8000, {}, 50}, {1, 500, 4000, {"T4"}, 20},
                                      {2, 1000, 16000, {}, 9}, {1, 250, 0, {"V100"}, 7},
                                      {4, 1000, 32000, {}, 5}, {0, 0, 2000, {}, 3},
                                      {1, 700, 60000, {}, 2},  {8, 1000, 0, {"T4"}, 1}};
  ClusterState state;
  ASSERT_TRUE(state.AddNode(T4Node("t4")).ok());
  ASSERT_TRUE(state.AddNode(model::MakeNode("v", "V100", 8, CpuMilli(1), MemoryMib(1))).ok());
  FragmentationMeter meter(typical);
  meter.Resolve(state);
  auto definition = [&](const std::vector<int32_t>& free, int64_t cpu_free, int model) {
    int64_t total = 0;
    for (int32_t f : free) total += f;
    if (total == 0) return int64_t{0};
    int64_t sum = 0;
    for (const TypicalTask& t : typical) {
      bool model_ok = t.gpu_models.empty();
      for (const auto& m : t.gpu_models) model_ok |= state.ModelId(m) == model;
      int64_t fragment = total;
      if (t.gpus > 0 && cpu_free >= t.cpu && model != kNoModel && model_ok) {
        int fitting = 0;
        int64_t too_small = 0;
        for (int32_t f : free) {
          if (f >= t.gpu_milli) {
            ++fitting;
          } else {
            too_small += f;
          }
        }
        if (fitting >= t.gpus) fragment = too_small;
      }
      sum += t.count * fragment;
    }
    return sum;
  };
  SeededRng rng(7);
  const int32_t amounts[] = {0, 100, 250, 300, 500, 699, 700, 1000};
  for (int trial = 0; trial < 500; ++trial) {
    std::vector<int32_t> free(1 + rng.Uniform(20));  // beyond SortedFree's 16 inline values too
    for (int32_t& f : free) f = amounts[rng.Uniform(std::size(amounts))];
    const int64_t cpu = static_cast<int64_t>(rng.Uniform(70000));
    const int model = static_cast<int>(rng.Uniform(3)) - 1;  // kNoModel, T4 or V100
    int64_t total = 0;
    for (int32_t f : free) total += f;
    const SortedFree sorted(free);
    ASSERT_EQ(meter.Weighted(sorted, total, cpu, model), definition(free, cpu, model));

    const int32_t from = free[rng.Uniform(free.size())];
    const int32_t milli = static_cast<int32_t>(rng.Uniform(static_cast<uint64_t>(from) + 1));
    std::vector<int32_t> shared = free;
    *std::find(shared.begin(), shared.end(), from) -= milli;
    ASSERT_EQ(
        meter.Weighted(SortedFree::AfterShare(sorted, from, milli), total - milli, cpu, model),
        definition(shared, cpu, model));

    const int gpus = static_cast<int>(rng.Uniform(4));
    std::vector<int32_t> whole = free;
    int64_t taken = 0;
    for (int32_t& f : whole) {
      if (f == 1000 && taken < gpus * 1000) {
        f = 0;
        taken += 1000;
      }
    }
    ASSERT_EQ(meter.Weighted(SortedFree::AfterWhole(sorted, gpus), total - taken, cpu, model),
              definition(whole, cpu, model));
  }
}

// The FragmentationIndex's tables give the meter's sweep exactly, over random typical tasks
// (many CPU thresholds, some tied, some shapes CPU-only or pinned), random GPU states met again
// and again with other free CPU (below, between and above every threshold), after Clear, and
// when a small bound on entries makes it start over.
TEST(FragmentationIndex, LooksUpWhatTheMeterSweeps) {
  ClusterState state;
  ASSERT_TRUE(state.AddNode(T4Node("t4")).ok());
  ASSERT_TRUE(state.AddNode(model::MakeNode("v", "V100", 8, CpuMilli(1), MemoryMib(1))).ok());
  SeededRng rng(11);
  const int32_t amounts[] = {0, 100, 250, 300, 500, 699, 700, 1000};
  const char* const models[] = {"T4", "V100", "A100"};  // A100: no node has it
  std::vector<TypicalTask> typical;
  for (int i = 0; i < 300; ++i) {
    TypicalTask t;
    t.gpus = static_cast<int>(rng.Uniform(5));
    t.gpu_milli = t.gpus == 0 ? 0 : (rng.Uniform(3) == 0 ? amounts[1 + rng.Uniform(6)] : 1000);
    t.cpu = 500 * static_cast<int64_t>(rng.Uniform(120));
    if (rng.Uniform(4) == 0) t.gpu_models.push_back(models[rng.Uniform(3)]);
    t.count = 1 + static_cast<int64_t>(rng.Uniform(1000));
    typical.push_back(t);
  }
  FragmentationMeter meter(typical);
  meter.Resolve(state);
  FragmentationIndex index(meter);
  constexpr size_t kSmallCap = 1000;
  FragmentationIndex small(meter, kSmallCap);
  int start_overs = 0;
  std::vector<std::vector<int32_t>> gpu_states;
  for (int i = 0; i < 40; ++i) {
    std::vector<int32_t> free(1 + rng.Uniform(20));
    for (int32_t& f : free) f = amounts[rng.Uniform(std::size(amounts))];
    gpu_states.push_back(free);
  }
  for (int trial = 0; trial < 4000; ++trial) {
    if (trial == 2000) index.Clear();
    const std::vector<int32_t>& free = gpu_states[rng.Uniform(gpu_states.size())];
    int64_t total = 0;
    for (int32_t f : free) total += f;
    const int64_t cpu = static_cast<int64_t>(rng.Uniform(62000)) - 1000;
    const int model = static_cast<int>(rng.Uniform(3)) - 1;  // kNoModel, T4 or V100
    const SortedFree sorted(free);
    const int64_t expected = meter.Weighted(sorted, total, cpu, model);
    ASSERT_EQ(index.Weighted(sorted, total, cpu, model), expected) << "trial " << trial;
    const size_t small_before = small.entries();
    ASSERT_EQ(small.Weighted(sorted, total, cpu, model), expected) << "trial " << trial;
    if (small.entries() < small_before) ++start_overs;
    ASSERT_LE(small.entries(), kSmallCap);
  }
  EXPECT_GT(index.entries(), 0u);
  EXPECT_LE(index.entries(), FragmentationIndex::kMaxEntries);
  EXPECT_GT(start_overs, 10);
}

// bestfit through the FreeCapacityIndex (the Scheduler's path) chooses exactly what scoring
// every class chooses, over random tasks of diverse CPU and memory, with releases, cordons,
// node removals and resizes between; after each of those the index holds the active classes.
TEST(ClusterState, FreeCapacityIndexChoosesAsScoringEveryClass) {
  ClusterState scanned(ClusterStateOptions{7, false, false});
  ClusterState indexed(ClusterStateOptions{7, false, true});
  auto scan_policy = CreatePolicy("bestfit", {});
  auto index_policy = CreatePolicy("bestfit", {});
  ASSERT_TRUE(scan_policy.ok() && index_policy.ok());
  SeededRng scan_rng(1), index_rng(1), draw(42);
  Placer scan_placer(scanned, **scan_policy, scan_rng);
  Placer index_placer(indexed, **index_policy, index_rng);
  const char* const kModels[] = {"T4", "A100"};
  for (int i = 0; i < 40; ++i) {
    model::Node n = model::MakeNode("n" + std::to_string(i), kModels[i % 2], 4 + 4 * (i % 2),
                                    CpuMilli(32000 + 8000 * (i % 3)), MemoryMib(65536));
    ASSERT_TRUE(scanned.AddNode(n).ok());
    ASSERT_TRUE(indexed.AddNode(n).ok());
  }
  // The index holds exactly the active classes, each under its current free capacity, in
  // ascending (free CPU, id) order within a group, and no empty group.
  auto expect_index_is_active_classes = [&](int step) {
    for (int m = kNoModel; m < indexed.ModelCount(); ++m) {
      std::set<int> active(indexed.ActiveClasses(m).begin(), indexed.ActiveClasses(m).end());
      std::set<int> in_index;
      for (const auto& [group, classes] : indexed.FreeCapacityIndex(m)) {
        EXPECT_FALSE(classes.empty()) << "model " << m << ", step " << step;
        EXPECT_TRUE(std::is_sorted(classes.begin(), classes.end()))
            << "model " << m << ", step " << step;
        for (const auto& [cpu_free, class_id] : classes) {
          const NodeClass& c = indexed.node_class(class_id);
          EXPECT_EQ(group, (FreeCapacityGroup{c.gpu_free_total, c.full_free, c.max_free}));
          EXPECT_EQ(cpu_free, c.cpu_free);
          in_index.insert(class_id);
        }
      }
      EXPECT_EQ(in_index, active) << "model " << m << ", step " << step;
    }
    ExpectBucketsAreActiveClasses(indexed);
    ExpectBucketsAreActiveClasses(scanned);
  };
  std::vector<Allocation> held;
  int placed = 0, cordons = 0, removals = 0, resizes = 0;
  for (int step = 0; step < 3000; ++step) {
    if (draw.Uniform(50) == 0) {
      // A node event, the same on both states: cordon or uncordon, remove (its allocations are
      // forgotten), or resize (refused, on both, below what it holds).
      const NodeIndex n = static_cast<NodeIndex>(draw.Uniform(scanned.NodeSlots()));
      if (!scanned.node(n).present) continue;
      switch (draw.Uniform(3)) {
        case 0: {
          const bool schedulable = !scanned.node(n).schedulable;
          ASSERT_TRUE(scanned.SetSchedulable(n, schedulable).ok());
          ASSERT_TRUE(indexed.SetSchedulable(n, schedulable).ok());
          ++cordons;
          break;
        }
        case 1:
          if (removals >= 6) continue;
          ASSERT_TRUE(scanned.RemoveNode(n).ok());
          ASSERT_TRUE(indexed.RemoveNode(n).ok());
          std::erase_if(held, [&](const Allocation& a) { return a.node == n; });
          ++removals;
          break;
        default: {
          const CpuMilli cpu(16000 + 8000 * static_cast<int64_t>(draw.Uniform(5)));
          const MemoryMib memory(16384 * static_cast<int64_t>(1 + draw.Uniform(5)));
          const bool ok = scanned.ResizeNode(n, cpu, memory).ok();
          ASSERT_EQ(indexed.ResizeNode(n, cpu, memory).ok(), ok) << "step " << step;
          resizes += ok ? 1 : 0;
          break;
        }
      }
      expect_index_is_active_classes(step);
      continue;
    }
    if (!held.empty() && draw.Uniform(3) == 0) {
      const size_t k = draw.Uniform(held.size());
      ASSERT_TRUE(scanned.Release(held[k]).ok());
      ASSERT_TRUE(indexed.Release(held[k]).ok());
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    const int gpus = draw.Uniform(4) == 0 ? 0 : static_cast<int>(1 + draw.Uniform(4));
    const int milli =
        gpus == 1 && draw.Uniform(2) == 0 ? static_cast<int>(100 * (1 + draw.Uniform(9))) : 1000;
    std::vector<std::string> models;
    if (draw.Uniform(4) == 0) models.push_back(kModels[draw.Uniform(2)]);
    const model::TaskResources r = model::MakeResources(
        gpus, gpus == 0 ? 0 : milli, 500 * static_cast<int64_t>(1 + draw.Uniform(40)),
        1024 * static_cast<int64_t>(1 + draw.Uniform(24)), models);
    std::optional<Allocation> a = scan_placer.Place(scan_placer.Resolve(r));
    std::optional<Allocation> b = index_placer.Place(index_placer.Resolve(r));
    ASSERT_EQ(a.has_value(), b.has_value()) << "step " << step;
    if (!a) continue;
    ASSERT_EQ(*a, *b) << "step " << step;
    held.push_back(*a);
    ++placed;
  }
  EXPECT_GT(placed, 500);
  EXPECT_GT(cordons, 0);
  EXPECT_GT(removals, 0);
  EXPECT_GT(resizes, 0);
  expect_index_is_active_classes(3000);
}

// Scores the task by its CPU, counting the calls.
class CpuScorePolicy final : public PlacementPolicy {
 public:
  std::string_view name() const override { return "cpu-score"; }
  int Score(const NodeView& /*node*/, const TaskRequest& task) const override {
    ++scored;
    return static_cast<int>(task.cpu);
  }
  std::vector<int> ChooseGpus(const NodeView& /*node*/, const TaskRequest& /*task*/,
                              Rng& /*rng*/) const override {
    return {};
  }
  mutable int scored = 0;
};

// Shapes met after the first Placer::kCachedShapes are cached too: the shape interning starts
// over with fresh ids, each shape is scored once per node class however often asked, and a
// request resolved before a start-over still gets its own score.
TEST(Placer, CachesTheScoresOfShapesBeyondTheFirstCachedOnes) {
  ClusterState state;
  auto node = state.AddNode(T4Node("t4"));
  ASSERT_TRUE(node.ok());
  CpuScorePolicy policy;
  SeededRng rng(1);
  Placer placer(state, policy, rng);
  const int class_id = state.node(*node).class_id;
  const int shapes = 3 * Placer::kCachedShapes + 7;
  std::vector<TaskRequest> requests;
  for (int i = 0; i < shapes; ++i) {
    requests.push_back(placer.Resolve(model::MakeResources(0, 0, 1 + i, 1024)));
    ASSERT_EQ(placer.Score(class_id, requests.back()), 1 + i);
    ASSERT_EQ(placer.Score(class_id, requests.back()), 1 + i);
    ASSERT_EQ(policy.scored, i + 1) << "shape " << i << " was scored again";
  }
  EXPECT_EQ(placer.Resolve(model::MakeResources(0, 0, shapes, 1024)).shape, requests.back().shape);
  EXPECT_EQ(placer.Score(class_id, requests.front()), 1);
  EXPECT_EQ(placer.Score(class_id, requests[Placer::kCachedShapes]), 1 + Placer::kCachedShapes);
}

}  // namespace
}  // namespace corral::sched
