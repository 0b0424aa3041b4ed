// The nodes routes (nodes.cc) through real HTTP: the list, and cordon, uncordon and drain.
#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {

class NodesApiTest : public ApiTest {
 protected:
  // Node `name`'s row in GET /api/v1/nodes (null when absent).
  json NodeRow(const std::string& name) {
    for (const json& n : Get("/api/v1/nodes", root_token_).body) {
      if (n["name"] == name) return n;
    }
    return nullptr;
  }
};

TEST_F(NodesApiTest, EveryUserSeesTheNodesAndTheirCapacity) {
  ExpectProblem(Get("/api/v1/nodes", ""), 401);
  EXPECT_EQ(Get("/api/v1/nodes", bob_token_).body, json::array());
  ASSERT_FALSE(RegisterNode("gpu-1", 8).empty());
  const Answer nodes = Get("/api/v1/nodes", bob_token_);
  ASSERT_EQ(nodes.status, 200) << nodes;
  EXPECT_TRUE(nodes.IsJson());
  ASSERT_EQ(nodes.body.size(), 1u);
  const json& n = nodes.body[0];
  EXPECT_EQ(n["name"], "gpu-1");
  EXPECT_EQ(n["state"], "ready");
  EXPECT_EQ(n["gpus"], 8);
  EXPECT_EQ(n["gpu_model"], "A100");
  EXPECT_EQ(n["gpu_free_milli"], json(std::vector<int>(8, 1000)));  // per GPU
  EXPECT_EQ(n["gpu_tasks"].size(), 8u);
}

TEST_F(NodesApiTest, OnlyAnAdminCordonsOrDrains) {
  ASSERT_FALSE(RegisterNode("gpu-1", 8).empty());
  for (const char* action : {"cordon", "uncordon", "drain"}) {
    ExpectAdminOnly("POST", std::string("/api/v1/nodes/gpu-1/") + action);
  }
  EXPECT_EQ(NodeRow("gpu-1")["state"], "ready");
}

TEST_F(NodesApiTest, CordonedNodesTakeNoJobsUntilUncordoned) {
  const std::string node_token = RegisterNode("gpu-1", 8);
  ASSERT_FALSE(node_token.empty());
  const Answer cordoned = Post("/api/v1/nodes/gpu-1/cordon", json::object(), root_token_);
  ASSERT_EQ(cordoned.status, 200) << cordoned;
  EXPECT_EQ(cordoned.body, json({{"node", "gpu-1"}, {"action", "cordon"}}));
  EXPECT_EQ(NodeRow("gpu-1")["state"], "cordoned");

  const int64_t id = SubmitJob(alice_token_);
  controller().Tick();
  EXPECT_TRUE(Heartbeat("gpu-1", node_token).body["run"].empty());
  EXPECT_EQ(Get("/api/v1/jobs/" + std::to_string(id), alice_token_).body["state"], "pending");

  ASSERT_EQ(Post("/api/v1/nodes/gpu-1/uncordon", json::object(), root_token_).status, 200);
  EXPECT_EQ(NodeRow("gpu-1")["state"], "ready");
  controller().Tick();
  EXPECT_EQ(Heartbeat("gpu-1", node_token).body["run"].size(), 1u);

  ASSERT_EQ(Post("/api/v1/nodes/gpu-1/drain", json::object(), root_token_).status, 200);
  EXPECT_EQ(NodeRow("gpu-1")["state"], "drained");
}

TEST_F(NodesApiTest, UnknownNodesAndActionsAre404) {
  ExpectProblem(Post("/api/v1/nodes/nope/drain", json::object(), root_token_), 404, "nope");
  ASSERT_FALSE(RegisterNode("gpu-1", 8).empty());
  // Only the three actions are routes; no route is problem+json too.
  ExpectProblem(Post("/api/v1/nodes/gpu-1/reboot", json::object(), root_token_), 404,
                "no such route: POST /api/v1/nodes/gpu-1/reboot");
  // A body over the limit is refused by httplib before any route: problem+json as well.
  ExpectProblem(PostText("/api/v1/nodes/gpu-1/drain", std::string(2 << 20, ' '), root_token_), 413,
                "the request body is over");
  EXPECT_EQ(NodeRow("gpu-1")["state"], "ready");
}

}  // namespace corral::server::api_testing
