// Where an environment runs (environment_runnable.h): what it needs of a node, what a node
// offers, the runtime of a launch, and the count and reason `env list` shows.
#include "server/control/environment_runnable.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::server {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

protocol::EnvironmentSpec Spec(std::string image, std::string venv,
                               std::vector<std::string> tools = {}) {
  protocol::EnvironmentSpec s;
  s.name = "e";
  s.image = std::move(image);
  s.venv = std::move(venv);
  s.tools = std::move(tools);
  return s;
}

protocol::NodeView Node(std::string name, std::vector<std::string> runtimes,
                        std::vector<std::string> tools = {},
                        std::vector<std::string> prefixes = {}) {
  protocol::NodeView n;
  n.name = std::move(name);
  n.runtimes = std::move(runtimes);
  n.tools = std::move(tools);
  n.env_prefixes = std::move(prefixes);
  return n;
}

TEST(EnvironmentNeedsTest, NamesWhatANodeMustOffer) {
  EXPECT_THAT(EnvironmentNeeds(Spec("", "")), IsEmpty());  // the plain host
  EXPECT_THAT(EnvironmentNeeds(Spec("img", "")), ElementsAre("container"));
  EXPECT_THAT(EnvironmentNeeds(Spec("img", "/opt/corral/envs/torch")),
              ElementsAre("container", "prefix:/opt/corral/envs/torch"));
  // A prefix elsewhere is not reported by agents: not checked.
  EXPECT_THAT(EnvironmentNeeds(Spec("img", "/home/a/venv")), IsEmpty());
  EXPECT_THAT(EnvironmentNeeds(Spec("", "", {"jupyter-lab", "jupyter-notebook"})),
              ElementsAre("tool:jupyter-lab", "tool:jupyter-notebook"));
  EXPECT_THAT(NodeOffers({"process"}, {"python3"}, {"/opt/corral/envs/x"}),
              ElementsAre("process", "tool:python3", "prefix:/opt/corral/envs/x"));
}

TEST(EnvironmentNeedsTest, ALaunchUsesTheHostWhereItsSetupIsThere) {
  const auto jupyter = Spec("img", "", {"jupyter-lab", "jupyter-notebook"});
  EXPECT_EQ(LaunchRuntime(jupyter, {"process", "container", "tool:jupyter-notebook"}), "process");
  EXPECT_EQ(LaunchRuntime(jupyter, {"process", "container"}), "container");
  EXPECT_EQ(LaunchRuntime(Spec("", ""), {"process"}), "process");
  EXPECT_EQ(LaunchRuntime(Spec("img", ""), {"process", "container"}), "container");
}

TEST(RunsOnTest, CountsNodesAndSaysWhyNone) {
  const protocol::NodeView bare = Node("a", {"process"}, {"python3"});
  const protocol::NodeView engine = Node("b", {"process", "container"});
  const protocol::NodeView folder = Node("c", {"process"}, {}, {"/opt/corral/envs/torch"});
  const auto torch = Spec("nvcr.io/torch", "/opt/corral/envs/torch");

  EXPECT_EQ(RunsOn(torch, {&bare, &engine, &folder}), (protocol::EnvironmentRunsHere{2, 3, ""}));
  EXPECT_EQ(RunsOn(torch, {&bare}).why_not,
            "needs a container engine (podman or docker) for its image, or the folder "
            "/opt/corral/envs/torch: no node has any of them");
  EXPECT_EQ(RunsOn(Spec("img", ""), {&bare}).why_not,
            "needs a container engine (podman or docker) for its image: no node has it");
  EXPECT_EQ(RunsOn(Spec("", "", {"python3"}), {&bare, &engine}),
            (protocol::EnvironmentRunsHere{1, 2, ""}));
  EXPECT_EQ(RunsOn(Spec("", ""), {&bare, &engine, &folder}),
            (protocol::EnvironmentRunsHere{3, 3, ""}));
  EXPECT_EQ(RunsOn(Spec("", ""), {}),
            (protocol::EnvironmentRunsHere{0, 0, "no node has registered yet"}));
}

}  // namespace
}  // namespace corral::server
