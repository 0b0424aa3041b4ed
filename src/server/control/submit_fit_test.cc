// Requests no registered node could ever run are refused at submit (submit_fit.h), naming the
// field and the largest shape the nodes offer; what fits, or might once nodes join, is not.
#include "server/control/submit_fit.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::server {
namespace {

using ::testing::HasSubstr;

protocol::NodeView Node(std::string name, std::string model, int gpus, int64_t cpu_milli,
                        int64_t memory_mib) {
  protocol::NodeView n;
  n.name = std::move(name);
  n.gpu_model = std::move(model);
  n.gpus = gpus;
  n.cpu = CpuMilli(cpu_milli);
  n.memory = MemoryMib(memory_mib);
  return n;
}

class SubmitFitTest : public ::testing::Test {
 protected:
  std::vector<const protocol::NodeView*> Nodes() const { return {&a_, &b_}; }
  Status Check(model::TaskResources task, int tasks = 1) const {
    return CheckFitsRegisteredNodes(task, tasks, nullptr, Nodes());
  }

  protocol::NodeView a_ = Node("a", "A100", 8, 64'000, 512'000);
  protocol::NodeView b_ = Node("b", "T4", 4, 16'000, 64'000);
};

TEST_F(SubmitFitTest, WhatTheLargestNodeHoldsIsAccepted) {
  EXPECT_TRUE(Check(model::MakeResources(8, 1000, 64'000, 512'000)).ok());
  EXPECT_TRUE(Check(model::MakeResources(4, 1000, 1000, 1024, {"T4"})).ok());
  EXPECT_TRUE(Check(model::MakeResources(1, 250, 1000, 1024)).ok());
  EXPECT_TRUE(Check(model::MakeResources(0, 0, 2000, 4096)).ok());
}

TEST_F(SubmitFitTest, MoreGpusThanAnyNodeHasAreRefusedNamingTheLargestNode) {
  Status s = Check(model::MakeResources(99, 1000, 1000, 1024));
  EXPECT_EQ(s.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("field 'resources.gpus': needs 99 GPUs on one node; the "
                                     "largest node has 8 (a); no registered node could ever run"));
  // Among the nodes of the models asked only.
  EXPECT_THAT(Check(model::MakeResources(8, 1000, 1000, 1024, {"T4"})).message(),
              HasSubstr("needs 8 GPUs on one node; the largest node has 4 (b)"));
}

TEST_F(SubmitFitTest, AModelNoNodeHasIsNotRefused) {
  // New hardware may be on order: the job waits for it (unknown_gpu_model).
  EXPECT_TRUE(Check(model::MakeResources(99, 1000, 1000, 1024, {"H100", "H200"})).ok());
  EXPECT_TRUE(Check(model::MakeResources(1, 1000, 1000, 1024, {"H100"}), 64).ok());
}

TEST_F(SubmitFitTest, CpuAndMemoryBeyondEveryNodeAreRefused) {
  EXPECT_THAT(Check(model::MakeResources(1, 1000, 128'000, 1024)).message(),
              HasSubstr("field 'resources.cpu_milli': needs 128000 CPU milli on one node; the "
                        "largest node has 64000 (a)"));
  EXPECT_THAT(Check(model::MakeResources(0, 0, 1000, 1'000'000)).message(),
              HasSubstr("field 'resources.memory_mib': needs 1000000 MiB on one node; the "
                        "largest node has 512000 (a)"));
  // Each alone fits some node, together none.
  EXPECT_THAT(Check(model::MakeResources(4, 1000, 1000, 100'000, {"T4"})).message(),
              HasSubstr("field 'resources.memory_mib'"));
  protocol::NodeView gpus = Node("g", "X", 8, 1000, 1024), memory = Node("m", "X", 1, 1000, 9999);
  EXPECT_THAT(
      CheckFitsRegisteredNodes(model::MakeResources(8, 1000, 1000, 9999), 1, nullptr,
                               {&gpus, &memory})
          .message(),
      HasSubstr("field 'resources': needs 8 GPUs, 1000 CPU milli and 9999 MiB on one node; no "
                "node has all of them together"));
}

TEST_F(SubmitFitTest, AGangCountsWhatEveryNodeHoldsWhenIdle) {
  // 2 tasks of 4 GPUs fit on a, one on b: 3.
  EXPECT_TRUE(Check(model::MakeResources(4, 1000, 1000, 1024), 3).ok());
  Status s = Check(model::MakeResources(4, 1000, 1000, 1024), 4);
  EXPECT_THAT(s.message(), HasSubstr("field 'tasks': needs 4 tasks started together; the "
                                     "registered nodes hold 3 of them at most (on 2 nodes)"));
}

TEST_F(SubmitFitTest, AClusterWithNoNodesYetRefusesNothing) {
  EXPECT_TRUE(
      CheckFitsRegisteredNodes(model::MakeResources(99, 1000, 1000, 1024), 5, nullptr, {}).ok());
}

TEST_F(SubmitFitTest, SharesPackSeveralTasksOnAGpu) {
  EXPECT_EQ(TasksThatFitIdle(model::MakeResources(1, 250, 1000, 1024), b_), 16);
  EXPECT_EQ(TasksThatFitIdle(model::MakeResources(1, 250, 2000, 1024), b_), 8);  // CPU binds
  EXPECT_EQ(TasksThatFitIdle(model::MakeResources(1, 1000, 1000, 1024, {"A100"}), b_), 0);
}

// An environment no registered node can run is refused naming the field and what it needs; the
// other checks count only the nodes that can run it.
TEST_F(SubmitFitTest, AnEnvironmentNoNodeRunsIsRefused) {
  protocol::EnvironmentSpec jupyter;
  jupyter.tools = {"jupyter-lab", "jupyter-notebook"};
  jupyter.install = "install jupyter-notebook (Debian) or jupyterlab";
  const model::TaskResources small = model::MakeResources(0, 0, 1000, 1024);
  EXPECT_THAT(CheckFitsRegisteredNodes(small, 1, &jupyter, Nodes()).message(),
              HasSubstr("field 'environment': needs jupyter-lab or jupyter-notebook on the PATH: "
                        "no node has it (install jupyter-notebook (Debian) or jupyterlab); no "
                        "registered node could ever run it"));
  b_.tools = {"jupyter-notebook"};
  EXPECT_TRUE(CheckFitsRegisteredNodes(small, 1, &jupyter, Nodes()).ok());
  // Only b runs it, and b has 4 GPUs.
  EXPECT_THAT(
      CheckFitsRegisteredNodes(model::MakeResources(8, 1000, 1000, 1024), 1, &jupyter, Nodes())
          .message(),
      HasSubstr("field 'resources.gpus': needs 8 GPUs on one node; the largest node has 4 (b)"));
  // No node registered yet: nothing is refused.
  EXPECT_TRUE(CheckFitsRegisteredNodes(small, 1, &jupyter, {}).ok());
}

}  // namespace
}  // namespace corral::server
