// The agent gateway (agents.cc) through real HTTP: registration with the join token and a
// protocol version, heartbeats with the node token, and a job's launch and end through them.
#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {

class AgentsApiTest : public ApiTest {
 protected:
  json Registration(const std::string& name, const std::string& node_id = kNodeId) {
    return {{"protocol_version", protocol::kProtocolVersion},
            {"name", name},
            {"node_id", node_id},
            {"inventory", TestInventory(4)}};
  }
  // A task status as an agent reports it, for the task of `launch` (an answer's "run" entry).
  static json TaskStatus(const json& launch, const std::string& state) {
    json s = {{"job_id", launch["job_id"]},
              {"task_index", launch["task_index"]},
              {"allocation_id", launch["allocation_id"]},
              {"generation", launch["generation"]},
              {"state", state}};
    if (state == "exited") {
      s["exit_code"] = 0;
      s["end_cause"] = "exited";
    }
    return s;
  }
};

TEST_F(AgentsApiTest, RegistrationNeedsTheJoinToken) {
  for (const std::string& token : {std::string(), std::string("wrong"), root_token_}) {
    SCOPED_TRACE("token '" + token + "'");
    ExpectProblem(Post("/api/v1/agent/register", Registration("gpu-1"), token), 401, "join token");
  }
  EXPECT_TRUE(Get("/api/v1/nodes", root_token_).body.empty());

  const Answer registered = Post("/api/v1/agent/register", Registration("gpu-1"), kJoinToken);
  ASSERT_EQ(registered.status, 200) << registered;
  EXPECT_EQ(registered.body["protocol_version"], protocol::kProtocolVersion);
  EXPECT_FALSE(registered.body.value("node_token", "").empty());
  EXPECT_FALSE(registered.body.value("cluster_id", "").empty());
  EXPECT_EQ(registered.body["cluster_id"], store().ClusterId());
}

TEST_F(AgentsApiTest, RegistrationIsValidatedAndVersioned) {
  json old = Registration("gpu-1");
  old.erase("protocol_version");
  ExpectProblem(Post("/api/v1/agent/register", old, kJoinToken), 409, "upgrade");
  json newer = Registration("gpu-1");
  newer["protocol_version"] = protocol::kProtocolVersion + 1;
  ExpectProblem(Post("/api/v1/agent/register", newer, kJoinToken), 409, "upgrade the servers");
  json bad = Registration("gpu-1");
  bad["protocol_version"] = "one";
  ExpectProblem(Post("/api/v1/agent/register", bad, kJoinToken), 400, "protocol_version");
  ExpectProblem(Post("/api/v1/agent/register", Registration("Bad Name!"), kJoinToken), 400, "name");
  ExpectProblem(Post("/api/v1/agent/register", Registration("gpu-1", "short"), kJoinToken), 400,
                "node_id");
  json no_inventory = Registration("gpu-1");
  no_inventory.erase("inventory");
  ExpectProblem(Post("/api/v1/agent/register", no_inventory, kJoinToken), 400, "inventory");
  ExpectProblem(PostText("/api/v1/agent/register", "[]", kJoinToken), 400);
  EXPECT_TRUE(Get("/api/v1/nodes", root_token_).body.empty());

  // A live node's name is its own: another node id may not take it.
  ASSERT_FALSE(RegisterNode("gpu-1", 4).empty());
  ExpectProblem(Post("/api/v1/agent/register", Registration("gpu-1", "another-node-id-0123456789"),
                     kJoinToken),
                409, "gpu-1");
}

TEST_F(AgentsApiTest, HeartbeatsNeedTheNodesOwnToken) {
  const std::string one = RegisterNode("gpu-1", 4);
  const std::string two = RegisterNode("gpu-2", 4);
  ASSERT_FALSE(one.empty());
  ASSERT_FALSE(two.empty());
  ASSERT_NE(one, two);
  EXPECT_EQ(Heartbeat("gpu-1", one).status, 200);
  ExpectProblem(Heartbeat("gpu-1", two), 401, "node token");
  ExpectProblem(Heartbeat("gpu-1", ""), 401, "node token");
  ExpectProblem(Heartbeat("gpu-1", kJoinToken), 401, "node token");
  ExpectProblem(Heartbeat("gpu-3", one), 401);
  // No node header: an agent from before protocol versions, told to upgrade.
  ExpectProblem(Post("/api/v1/agent/heartbeat", {{"tasks", json::array()}}, one), 401,
                protocol::kNodeHeader);
  // A malformed report names the field.
  ExpectProblem(Post("/api/v1/agent/heartbeat", {{"seq", 99}, {"wait_ms", 0}, {"tasks", 3}}, one,
                     {{protocol::kNodeHeader, "gpu-1"}}),
                400, "tasks");
}

TEST_F(AgentsApiTest, AJobIsLaunchedAndEndsThroughHeartbeats) {
  const std::string node_token = RegisterNode("gpu-1", 4);
  ASSERT_FALSE(node_token.empty());
  const int64_t id = SubmitJob(alice_token_, TestJobSpec(2));
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  controller().Tick();  // places it on gpu-1

  const Answer launch = Heartbeat("gpu-1", node_token);
  ASSERT_EQ(launch.status, 200) << launch;
  ASSERT_EQ(launch.body["run"].size(), 1u) << launch;
  const json task = launch.body["run"][0];
  EXPECT_EQ(task["job_id"], id);
  EXPECT_EQ(task["task_index"], 0);
  EXPECT_EQ(Get(job, alice_token_).body["state"], "starting");

  // The node list shows whose job holds its GPUs.
  const Answer nodes = Get("/api/v1/nodes", bob_token_);
  ASSERT_EQ(nodes.status, 200) << nodes;
  ASSERT_EQ(nodes.body.size(), 1u);
  int held = 0;
  for (const json& gpu : nodes.body[0]["gpu_tasks"]) {
    for (const json& t : gpu) {
      EXPECT_EQ(t["job"], id);
      EXPECT_EQ(t["user"], "alice");
      ++held;
    }
  }
  EXPECT_EQ(held, 2);

  ASSERT_EQ(Heartbeat("gpu-1", node_token, json::array({TaskStatus(task, "running")})).status, 200);
  EXPECT_EQ(Get(job, alice_token_).body["state"], "running");
  const Answer ended = Heartbeat("gpu-1", node_token, json::array({TaskStatus(task, "exited")}));
  ASSERT_EQ(ended.status, 200) << ended;
  const Answer view = Get(job, alice_token_);
  EXPECT_EQ(view.body["state"], "succeeded") << view;
  ASSERT_EQ(view.body["tasks"].size(), 1u);
  EXPECT_EQ(view.body["tasks"][0]["node"], "gpu-1");
  EXPECT_EQ(view.body["tasks"][0]["exit_code"], 0);
}

}  // namespace corral::server::api_testing
