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

// Per GPU of node `row`, the "gpu_tasks" entries that name a job.
std::vector<json> NamedTasks(const json& row) {
  std::vector<json> out;
  for (const json& gpu : row["gpu_tasks"]) {
    for (const json& t : gpu) {
      if (t.contains("job")) out.push_back(t);
    }
  }
  return out;
}

// Issue 15: any member saw the job ids and user names of every project's running jobs. Now a
// member sees another project's task as its share "in use" only; their own projects' and, for
// an admin, every task in full.
TEST_F(NodesApiTest, AMemberSeesOtherProjectsWorkOnlyAsInUse) {
  const std::string node_token = RegisterNode("gpu-1", 4);
  const int64_t secret = SubmitJob(alice_token_, TestJobSpec(2, "vision"));
  const int64_t shared = SubmitJob(alice_token_, TestJobSpec(1, "default"));
  ASSERT_EQ(RunPendingJobs("gpu-1", node_token, 4).size(), 2u);

  const Answer seen_by_bob = Get("/api/v1/nodes", bob_token_);  // in "default" only
  ASSERT_EQ(seen_by_bob.status, 200) << seen_by_bob;
  const json& row = seen_by_bob.body[0];
  int in_use = 0;
  for (const json& gpu : row["gpu_tasks"]) {
    for (const json& t : gpu) {
      if (t.contains("job")) {
        EXPECT_EQ(t["job"], shared) << t;
        EXPECT_EQ(t["project"], "default");
      } else {
        EXPECT_EQ(t, json({{"milli", 1000}})) << "an entry of another project: its share only";
        ++in_use;
      }
    }
  }
  EXPECT_EQ(in_use, 2);
  EXPECT_EQ(seen_by_bob.text.find("vision"), std::string::npos) << seen_by_bob.text;
  EXPECT_EQ(seen_by_bob.text.find("\"job\":" + std::to_string(secret)), std::string::npos);
  EXPECT_EQ(row["gpu_free_milli"], json({0, 0, 0, 1000}));  // the capacity stays visible

  for (const std::string& token : {alice_token_, root_token_}) {
    const Answer full = Get("/api/v1/nodes", token);
    ASSERT_EQ(full.status, 200) << full;
    EXPECT_EQ(NamedTasks(full.body[0]).size(), 3u) << full;
  }
}

class ShowAllWorkNodesApiTest : public NodesApiTest {
 protected:
  void Configure(ControllerConfig& config) override {
    config.work_visibility = WorkVisibility::kAll;
  }
};

// `corral server --show-all-work`: every member sees every task, as before issue 15.
TEST_F(ShowAllWorkNodesApiTest, EveryMemberSeesEveryTask) {
  const std::string node_token = RegisterNode("gpu-1", 4);
  const int64_t secret = SubmitJob(alice_token_, TestJobSpec(2, "vision"));
  ASSERT_EQ(RunPendingJobs("gpu-1", node_token, 4).size(), 1u);
  const std::vector<json> tasks = NamedTasks(Get("/api/v1/nodes", bob_token_).body[0]);
  ASSERT_EQ(tasks.size(), 2u);
  EXPECT_EQ(tasks[0]["job"], secret);
  EXPECT_EQ(tasks[0]["user"], "alice");
  EXPECT_EQ(tasks[0]["project"], "vision");
}

TEST_F(NodesApiTest, OnlyAnAdminCordonsOrDrains) {
  ASSERT_FALSE(RegisterNode("gpu-1", 8).empty());
  for (const char* action : {"cordon", "uncordon", "drain", "remove"}) {
    ExpectAdminOnly("POST", std::string("/api/v1/nodes/gpu-1/") + action);
  }
  EXPECT_EQ(NodeRow("gpu-1")["state"], "ready");
}

TEST_F(NodesApiTest, AnAdminRemovesANodeAtOnce) {
  ASSERT_FALSE(RegisterNode("gpu-1", 8).empty());
  const Answer removed = Post("/api/v1/nodes/gpu-1/remove", json::object(), root_token_);
  ASSERT_EQ(removed.status, 200) << removed;
  EXPECT_EQ(removed.body, json({{"node", "gpu-1"}, {"action", "remove"}}));
  EXPECT_EQ(NodeRow("gpu-1")["state"], "lost");
  // Lost already: nothing more to remove.
  ExpectProblem(Post("/api/v1/nodes/gpu-1/remove", json::object(), root_token_), 409);
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
