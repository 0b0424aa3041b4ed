// Runs the placement scenarios in testdata/*.scenario (format described at the top of
// testdata/policies.scenario): small hand-computed clusters with the exact node and GPUs each
// policy must choose, and the pending-reason code when nothing fits.
#include <gtest/gtest.h>

#include <fstream>
#include <map>
#include <sstream>

#include "common/rng.h"
#include "sched/cluster_state.h"
#include "sched/pending_reason.h"
#include "sched/placement_policy.h"
#include "sched/placer.h"

namespace corral::sched {
namespace {

// key=value words of a scenario line.
std::map<std::string, std::string> Fields(std::istringstream& in) {
  std::map<std::string, std::string> out;
  std::string word;
  while (in >> word) {
    size_t eq = word.find('=');
    if (eq == std::string::npos) {
      out[word] = "";
    } else {
      out[word.substr(0, eq)] = word.substr(eq + 1);
    }
  }
  return out;
}

std::vector<std::string> Split(const std::string& s, char sep) {
  std::vector<std::string> out;
  std::stringstream ss(s);
  std::string part;
  while (std::getline(ss, part, sep)) out.push_back(part);
  return out;
}

// One scenario block under one policy: builds the cluster lazily at the first take/place line.
class Scenario {
 public:
  Scenario(std::string name, std::string policy)
      : name_(std::move(name)), policy_name_(std::move(policy)) {}

  void Typical(std::map<std::string, std::string> f) {
    TypicalTask t;
    t.gpus = std::stoi(f["gpus"]);
    t.gpu_milli = std::stoi(f["milli"]);
    t.cpu = std::stoll(f["cpu"]);
    t.count = std::stoll(f["count"]);
    context_.typical_tasks.push_back(t);
  }
  void Node(const std::string& name, std::map<std::string, std::string> f) {
    nodes_.push_back(model::MakeNode(name, f["model"], std::stoi(f["gpus"]),
                                     CpuMilli(std::stoll(f["cpu"])),
                                     MemoryMib(std::stoll(f["mem"]))));
  }
  void Take(const std::string& node, const std::string& rest) {
    Build();
    std::istringstream in(rest);
    Allocation a;
    a.node = state_->FindNode(node);
    ASSERT_GE(a.node, 0) << name_ << ": unknown node " << node;
    std::string word;
    std::string kind;
    while (in >> word) {
      auto eq = word.find('=');
      std::string key = word.substr(0, eq), value = word.substr(eq + 1);
      if (key == "gpu") {
        auto parts = Split(value, ':');
        a.gpus.push_back(GpuShare{std::stoi(parts[0]), MilliGpu(std::stoi(parts[1]))});
      } else if (key == "cpu") {
        a.cpu = CpuMilli(std::stoll(value));
      } else if (key == "mem") {
        a.memory = MemoryMib(std::stoll(value));
      } else if (key == "kind") {
        kind = value;
      }
    }
    if (kind == "share") a.kind = state_->TaskKindId(1, true);
    if (kind == "whole") a.kind = state_->TaskKindId(static_cast<int>(a.gpus.size()), false);
    ASSERT_TRUE(state_->Allocate(a).ok()) << name_ << ": take on " << node;
  }
  void Place(const std::string& request, const std::string& expected, int line) {
    Build();
    std::istringstream in(request);
    auto f = Fields(in);
    std::vector<std::string> models =
        f.count("models") ? Split(f["models"], '|') : std::vector<std::string>{};
    TaskRequest t =
        placer_->Resolve(model::MakeResources(std::stoi(f["gpus"]), std::stoi(f["milli"]),
                                              std::stoll(f["cpu"]), std::stoll(f["mem"]), models));
    std::optional<Allocation> a = placer_->Place(t);
    std::istringstream want(expected);
    std::string node;
    want >> node;
    SCOPED_TRACE(name_ + " line " + std::to_string(line) + ": place " + request);
    if (node == "none") {
      std::string code;
      want >> code;
      ASSERT_FALSE(a.has_value()) << "placed on " << state_->node(a->node).name;
      EXPECT_EQ(ExplainUnplaced(*state_, t, 1).code, code)
          << ExplainUnplaced(*state_, t, 1).message;
      return;
    }
    ASSERT_TRUE(a.has_value()) << ExplainUnplaced(*state_, t, 1).message;
    if (node == "any") return;
    EXPECT_EQ(state_->node(a->node).name, node);
    std::string gpus_word;
    want >> gpus_word;
    std::vector<int> got;
    for (const GpuShare& g : a->gpus) got.push_back(g.index);
    std::vector<int> expect;
    if (gpus_word.rfind("gpu=", 0) == 0) {
      for (const auto& i : Split(gpus_word.substr(4), ',')) expect.push_back(std::stoi(i));
    }
    EXPECT_EQ(got, expect);
  }

 private:
  void Build() {
    if (state_) return;
    auto policy = CreatePolicy(policy_name_, context_);
    ASSERT_TRUE(policy.ok()) << policy.status().message();
    policy_ = std::move(policy).value();
    state_ = std::make_unique<ClusterState>(ClusterStateOptions{1, policy_->NeedsTaskKinds()});
    for (const auto& n : nodes_) ASSERT_TRUE(state_->AddNode(n).ok());
    placer_ = std::make_unique<Placer>(*state_, *policy_, rng_);
  }

  std::string name_;
  std::string policy_name_;
  PolicyContext context_;
  std::vector<model::Node> nodes_;
  SeededRng rng_{1};
  std::unique_ptr<PlacementPolicy> policy_;
  std::unique_ptr<ClusterState> state_;
  std::unique_ptr<Placer> placer_;
};

// One block of the file: its name, the policies it runs under (once each) and its other lines
// with their numbers.
struct Block {
  std::string name;
  std::vector<std::string> policies;
  std::vector<std::pair<int, std::string>> lines;
};

std::vector<Block> ReadBlocks(std::istream& file) {
  std::vector<Block> blocks;
  std::string line;
  int number = 0;
  while (std::getline(file, line)) {
    ++number;
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    if (verb == "scenario") {
      blocks.emplace_back();
      in >> blocks.back().name;
    } else if (blocks.empty()) {
      ADD_FAILURE() << "line " << number << ": no scenario started";
    } else if (verb == "policy") {
      for (std::string name; in >> name;) blocks.back().policies.push_back(name);
    } else {
      blocks.back().lines.emplace_back(number, line);
    }
  }
  return blocks;
}

// Plays a block's lines on a fresh cluster under `policy`; returns the placements checked.
int Play(const Block& block, const std::string& policy) {
  Scenario current(block.name + " [" + policy + "]", policy);
  int placements = 0;
  for (const auto& [number, line] : block.lines) {
    std::istringstream in(line);
    std::string verb;
    in >> verb;
    std::string rest;
    std::getline(in, rest);
    if (verb == "typical") {
      std::istringstream r(rest);
      current.Typical(Fields(r));
    } else if (verb == "node") {
      std::istringstream r(rest);
      std::string name;
      r >> name;
      current.Node(name, Fields(r));
    } else if (verb == "take") {
      std::istringstream r(rest);
      std::string node;
      r >> node;
      std::string tail;
      std::getline(r, tail);
      current.Take(node, tail);
    } else if (verb == "place") {
      size_t arrow = rest.find("->");
      if (arrow == std::string::npos) {
        ADD_FAILURE() << "line " << number << ": place needs '->'";
        continue;
      }
      current.Place(rest.substr(0, arrow), rest.substr(arrow + 2), number);
      ++placements;
    } else {
      ADD_FAILURE() << "line " << number << ": unknown verb '" << verb << "'";
    }
  }
  return placements;
}

TEST(PlacementScenarios, AllScenariosHold) {
  std::ifstream file(CORRAL_SCHED_TESTDATA "/policies.scenario");
  ASSERT_TRUE(file) << "cannot open scenarios";
  const std::vector<Block> blocks = ReadBlocks(file);
  int placements = 0;
  std::map<std::string, int> blocks_per_policy;
  for (const Block& block : blocks) {
    EXPECT_FALSE(block.policies.empty()) << block.name << ": no policy";
    for (const std::string& policy : block.policies) {
      placements += Play(block, policy);
      ++blocks_per_policy[policy];
    }
  }
  EXPECT_GE(blocks.size(), 12u);
  EXPECT_GE(placements, 20);
  // The default policy runs the scenarios of the live features (models, CPU and memory, shares,
  // whole GPUs, NVLink) beside bestfit and fgd.
  EXPECT_GE(blocks_per_policy[std::string(kDefaultPolicy)], 5);
}

}  // namespace
}  // namespace corral::sched
