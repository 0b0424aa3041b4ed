// Gang placement: fewest nodes, one switch or rack when there is room, all or nothing.
#include "sched/gang_placement.h"

#include <gtest/gtest.h>

#include <map>
#include <memory>
#include <set>
#include <string>

#include "common/rng.h"
#include "sched/placement_policy.h"

namespace corral::sched {
namespace {

constexpr GangPlacement kTogether = GangPlacement::kTogether;

// A cluster of 4-GPU nodes with optional rack and switch labels, and a Placer with the policy
// named (fgd and best score against a profile of shares, single GPUs and pairs).
class GangFixture : public ::testing::Test {
 protected:
  explicit GangFixture(const std::string& policy)
      : policy_(Create(policy)), placer_(state_, *policy_, rng_) {}

  static std::unique_ptr<PlacementPolicy> Create(const std::string& name) {
    auto policy = CreatePolicy(
        name, PolicyContext{{TypicalTask{1, 500, 0, {}, 2}, TypicalTask{1, 1000, 0, {}, 2},
                             TypicalTask{2, 1000, 0, {}, 1}}});
    EXPECT_TRUE(policy.ok()) << policy.status().message();
    return std::move(*policy);
  }

  NodeIndex Add(const std::string& name, const std::string& rack = "", const std::string& sw = "",
                int gpus = 4) {
    model::Node node = model::MakeNode(name, "T4", gpus, CpuMilli(32000), MemoryMib(65536));
    if (!rack.empty()) node.labels[model::kRackLabel] = rack;
    if (!sw.empty()) node.labels[model::kSwitchLabel] = sw;
    return *state_.AddNode(node);
  }
  // Takes `gpus` whole GPUs of a node (0, 1, ...).
  void Occupy(NodeIndex node, int gpus) {
    Allocation a;
    a.node = node;
    for (int g = 0; g < gpus; ++g) a.gpus.push_back(GpuShare{g, MilliGpu(1000)});
    ASSERT_TRUE(state_.Allocate(a).ok());
  }
  TaskRequest Task(int gpus, int milli = 1000) {
    return placer_.Resolve(model::MakeResources(gpus, milli, 1000, 1024));
  }
  // Tasks per node name of a placement.
  std::map<std::string, int> NodesOf(const std::vector<Allocation>& placed) {
    std::map<std::string, int> out;
    for (const Allocation& a : placed) ++out[state_.node(a.node).name];
    return out;
  }

  ClusterState state_;
  SeededRng rng_{1};
  std::unique_ptr<PlacementPolicy> policy_;
  Placer placer_;
};

// Gangs keep together (fewest nodes, one switch or rack) under every policy a server may run:
// bestfit (which, task by task, would scatter a gang over the fullest nodes), fgd, and the
// default.
class GangTest : public GangFixture, public ::testing::WithParamInterface<std::string> {
 protected:
  GangTest() : GangFixture(GetParam()) {}
};
INSTANTIATE_TEST_SUITE_P(Policies, GangTest,
                         ::testing::Values("bestfit", "fgd", std::string(kDefaultPolicy)),
                         [](const auto& info) { return info.param; });

// What bestfit alone does.
class BestfitGangTest : public GangFixture {
 protected:
  BestfitGangTest() : GangFixture("bestfit") {}
};

TEST_P(GangTest, UsesTheFewestNodes) {
  const NodeIndex a = Add("a"), b = Add("b"), c = Add("c"), d = Add("d");
  (void)a;
  Occupy(b, 2);  // b, c, d have 2 free GPUs, a has 4
  Occupy(c, 2);
  Occupy(d, 2);
  // Two 2-GPU tasks fit on a alone; bestfit task by task would take two of b, c, d.
  auto placed = PlaceGang(placer_, Task(2), 2, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"a", 2}}));
}

TEST_P(GangTest, SplitsOverTheFewestNodesKeepingRoomyNodesFree) {
  const NodeIndex a = Add("a"), b = Add("b"), c = Add("c"), d = Add("d", "", "", 8);
  Occupy(c, 1);  // room for 1-GPU tasks: a 4, b 4, c 3, d 8
  // Nine tasks: two nodes are the fewest (d and another). Node by node, the tightest that still
  // lets the roomiest complete the gang: c (3, with d's 8 to come), then d takes the 6 left.
  auto placed = PlaceGang(placer_, Task(1), 9, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"c", 3}, {"d", 6}}));
  for (const Allocation& p : *placed) ASSERT_TRUE(state_.Release(p).ok());
  Occupy(d, 8);  // now a 4, b 4, c 3: six tasks go 3 + 3, leaving a 4-GPU node whole
  placed = PlaceGang(placer_, Task(1), 6, kTogether);
  ASSERT_TRUE(placed.has_value());
  const auto nodes = NodesOf(*placed);
  ASSERT_EQ(nodes.size(), 2u);
  EXPECT_EQ(nodes.at("c"), 3);
  EXPECT_EQ(nodes.count("a") + nodes.count("b"), 1u);
  (void)a, (void)b;
}

TEST_P(GangTest, OneNodeThatHoldsTheGangBeatsALabelledDomain) {
  Add("a", "r0"), Add("b", "r0");
  Add("c", "", "", 8);  // unlabelled, holds both tasks alone
  auto placed = PlaceGang(placer_, Task(4), 2, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"c", 2}}));
}

TEST_P(GangTest, StaysInOneRackWhenARackHasRoom) {
  Add("r0-a", "r0"), Add("r0-b", "r0");
  Add("r1-a", "r1"), Add("r1-b", "r1"), Add("r1-c", "r1");
  // Three whole nodes: only r1 has room.
  auto placed = PlaceGang(placer_, Task(4), 3, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"r1-a", 1}, {"r1-b", 1}, {"r1-c", 1}}));
  for (const Allocation& a : *placed) ASSERT_TRUE(state_.Release(a).ok());
  // Two whole nodes: both racks have room; r0 is the best fit (none to spare).
  placed = PlaceGang(placer_, Task(4), 2, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"r0-a", 1}, {"r0-b", 1}}));
}

TEST_P(GangTest, PrefersOneSwitchOverOneRackAndSpansRacksOnlyWhenNeeded) {
  // Rack r0 has switches s0 (2 nodes) and s1 (1 node); rack r1 has one node, switch s2.
  Add("a", "r0", "s0"), Add("b", "r0", "s0"), Add("c", "r0", "s1"), Add("d", "r1", "s2");
  auto placed = PlaceGang(placer_, Task(4), 2, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"a", 1}, {"b", 1}}));
  for (const Allocation& a : *placed) ASSERT_TRUE(state_.Release(a).ok());
  // Three nodes: no switch has room; rack r0 has.
  placed = PlaceGang(placer_, Task(4), 3, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"a", 1}, {"b", 1}, {"c", 1}}));
  for (const Allocation& a : *placed) ASSERT_TRUE(state_.Release(a).ok());
  // Four nodes: every rack is too small, the gang spans both.
  placed = PlaceGang(placer_, Task(4), 4, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed).size(), 4u);
}

TEST_P(GangTest, AllOrNothing) {
  const NodeIndex a = Add("a", "r0");
  Add("b", "r0");
  Occupy(a, 3);
  // 2-GPU tasks: a holds none, b holds two; three do not fit and nothing is taken.
  EXPECT_FALSE(PlaceGang(placer_, Task(2), 3, kTogether).has_value());
  EXPECT_EQ(state_.FreeGpuMilli(), 5000);
}

TEST_F(BestfitGangTest, EachTaskFollowsThePolicyAlone) {
  const NodeIndex a = Add("a"), b = Add("b"), c = Add("c");
  (void)a;
  Occupy(b, 2);
  Occupy(c, 2);
  // bestfit puts each 2-GPU task on a fullest node: b and c; together they go to a.
  auto placed = PlaceGang(placer_, Task(2), 2, GangPlacement::kEachTask);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"b", 1}, {"c", 1}}));
  EXPECT_FALSE(PlaceGang(placer_, Task(4), 2, GangPlacement::kEachTask).has_value());
  EXPECT_EQ(state_.FreeGpuMilli(), 4000);
  EXPECT_EQ(*ParseGangPlacement("each-task"), GangPlacement::kEachTask);
  EXPECT_FALSE(ParseGangPlacement("scatter").ok());
}

TEST_P(GangTest, CountsSharesCpuAndMemory) {
  const NodeIndex a = Add("a");
  const NodeClass& free_node = state_.node_class(state_.node(a).class_id);
  EXPECT_EQ(TasksThatFit(free_node, Task(1, 300)), 12);  // three 300-milli shares per GPU
  EXPECT_EQ(TasksThatFit(free_node, Task(2)), 2);
  EXPECT_EQ(TasksThatFit(free_node, Task(0)), 32);  // CPU bound: 32 cores, 1 each
  TaskRequest big_memory = placer_.Resolve(model::MakeResources(1, 1000, 1000, 40000));
  EXPECT_EQ(TasksThatFit(free_node, big_memory), 1);  // 64 GiB holds one 40 GB task
  auto placed = PlaceGang(placer_, Task(1, 300), 5, kTogether);
  ASSERT_TRUE(placed.has_value());
  EXPECT_EQ(NodesOf(*placed), (std::map<std::string, int>{{"a", 5}}));
}

// Without topology labels the search keeps only the first nodes of each room (the others cannot
// be chosen): it must choose exactly as the full search, which runs when every node carries one
// rack label (one domain holding every node is the same pool as no domain). Random gangs of
// whole GPUs and shares on 40 nodes of 4 and 8 GPUs, with releases, under every policy.
TEST_P(GangTest, UnlabelledSearchChoosesAsTheFullSearch) {
  struct Side {
    ClusterState state;
    SeededRng rng{1};
    std::unique_ptr<PlacementPolicy> policy;
    std::unique_ptr<Placer> placer;
  };
  Side plain, labelled;
  for (Side* side : {&plain, &labelled}) {
    side->policy = Create(GetParam());
    side->placer = std::make_unique<Placer>(side->state, *side->policy, side->rng);
    for (int n = 0; n < 40; ++n) {
      model::Node node = model::MakeNode("n" + std::to_string(n), "T4", n % 3 == 0 ? 8 : 4,
                                         CpuMilli(32000), MemoryMib(65536));
      if (side == &labelled) node.labels[model::kRackLabel] = "r";
      ASSERT_TRUE(side->state.AddNode(node).ok());
    }
  }
  ASSERT_FALSE(plain.state.HasTopology());
  ASSERT_TRUE(labelled.state.HasTopology());
  SeededRng draw(7);
  std::vector<std::vector<Allocation>> held;
  int multi_node = 0;
  for (int step = 0; step < 600; ++step) {
    if (!held.empty() && draw.Uniform(3) == 0) {
      const size_t k = draw.Uniform(held.size());
      for (Side* side : {&plain, &labelled}) {
        for (const Allocation& a : held[k]) ASSERT_TRUE(side->state.Release(a).ok());
      }
      held.erase(held.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    const int gpus = 1 + static_cast<int>(draw.Uniform(4));
    const int milli = draw.Uniform(4) == 0 ? 250 * (1 + static_cast<int>(draw.Uniform(3))) : 1000;
    const int count = 2 + static_cast<int>(draw.Uniform(9));
    const model::TaskResources r = model::MakeResources(
        milli < 1000 ? 1 : gpus, milli, 1000 * (1 + static_cast<int64_t>(draw.Uniform(4))), 1024);
    auto a = PlaceGang(*plain.placer, plain.placer->Resolve(r), count, kTogether);
    auto b = PlaceGang(*labelled.placer, labelled.placer->Resolve(r), count, kTogether);
    ASSERT_EQ(a, b) << "step " << step;
    if (!a) continue;
    std::set<NodeIndex> nodes;
    for (const Allocation& x : *a) nodes.insert(x.node);
    multi_node += nodes.size() > 1 ? 1 : 0;
    held.push_back(std::move(*a));
  }
  EXPECT_GT(multi_node, 20);  // the multi-node search ran
}

}  // namespace
}  // namespace corral::sched
