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

TEST_F(AgentsApiTest, ABadNodeNameIsA400NamingTheFieldAndTheRule) {
  using namespace std::string_literals;  // "\0"s keeps the NUL
  for (const std::string& name : {"gpu\0-1"s, "a\tb"s, "../x"s, ".."s, "-n"s,
                                  "x\xe2\x80\xae"s
                                  "y",
                                  std::string(100'000, 'n')}) {
    SCOPED_TRACE(name.substr(0, 16));
    ExpectProblem(Post("/api/v1/agent/register", Registration(name), kJoinToken), 400,
                  "registration: field 'name': a node name must be 1 to 253 letters");
  }
  EXPECT_TRUE(Get("/api/v1/nodes", root_token_).body.empty());
}

// An inventory is checked by type and range as it is decoded: each bad field is a 400 naming
// it, and no node joins with it.
TEST_F(AgentsApiTest, ABadInventoryIsA400NamingTheField) {
  json many_gpus = json::array();
  for (int i = 0; i < 65; ++i) many_gpus.push_back({{"uuid", "GPU-" + std::to_string(i)}});
  json many_labels = json::object();
  for (int i = 0; i < 65; ++i) many_labels["l" + std::to_string(i)] = "v";
  auto one_gpu = [](const json& gpu) { return json::array({gpu}); };
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"cpu_milli", -1, "inventory.cpu_milli"},
      {"cpu_milli", int64_t{1} << 40, "inventory.cpu_milli"},
      {"cpu_milli", 1e9, "inventory.cpu_milli"},  // a float: not an integer
      {"cpu_milli", "64000", "inventory.cpu_milli"},
      {"memory_mib", -5, "inventory.memory_mib"},
      {"memory_mib", int64_t{1} << 40, "inventory.memory_mib"},
      {"memory_mib", nullptr, "inventory.memory_mib"},  // required
      {"gpus", "eight", "inventory.gpus"},
      {"gpus", many_gpus, "inventory.gpus"},
      {"gpus", one_gpu({{"memory_mib", int64_t{1} << 30}}), "inventory.gpus[0].memory_mib"},
      {"gpus", one_gpu({{"memory_mib", -1}}), "inventory.gpus[0].memory_mib"},
      {"gpus", one_gpu({{"nvlink_domain", 64}}), "inventory.gpus[0].nvlink_domain"},
      {"gpus", one_gpu({{"uuid", std::string(1000, 'u')}}), "inventory.gpus[0].uuid"},
      {"gpus", one_gpu({{"uuid", 7}}), "inventory.gpus[0].uuid"},
      {"gpu_model", "A100\n", "inventory.gpu_model"},
      {"gpu_model", std::string(100'000, 'm'), "inventory.gpu_model"},
      {"hostname", "../etc", "inventory.hostname"},
      {"labels", many_labels, "inventory.labels"},
      {"labels", {{"rack", "r/../\t"}}, "inventory.labels"},
      {"labels", {{"rack", 1}}, "inventory.labels.rack"},
      {"runtimes", {"process", "a\x01"}, "inventory.runtimes"},
      {"runtimes", "process", "inventory.runtimes"},
      {"container_engine", std::string(200, 'e'), "inventory.container_engine"},
      {"address", "10.0.0.1; reboot", "inventory.address"},
  };
  for (const auto& [field, value, named] : cases) {
    SCOPED_TRACE(field + " = " + value.dump().substr(0, 40));
    json registration = Registration("gpu-1");
    registration["inventory"][field] = value;
    ExpectProblem(Post("/api/v1/agent/register", registration, kJoinToken), 400,
                  "registration: field '" + named + "'");
  }
  EXPECT_TRUE(Get("/api/v1/nodes", root_token_).body.empty());
  // The bounds are far beyond real machines: a large one joins.
  json large = Registration("gpu-1");
  large["inventory"]["cpu_milli"] = 2048 * 1000;
  large["inventory"]["memory_mib"] = int64_t{64} << 20;  // 64 TiB
  EXPECT_EQ(Post("/api/v1/agent/register", large, kJoinToken).status, 200);
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

// Back-pressure (saturation_guard.h): an agent's requests whose token checks out take the
// agents' own pool; the event stream and /healthz none; everything else, the API's.
TEST_F(AgentsApiTest, AgentsRequestsHaveAPoolOfTheirOwn) {
  const std::string token = RegisterNode("gpu-1", 4);
  ASSERT_FALSE(token.empty());
  auto load_of = [&](const std::string& path, const std::string& bearer,
                     const std::string& node = "") -> std::optional<Load> {
    HttpRequest head;
    head.method = path == "/api/v1/jobs" || path.rfind("/api/v1/agent/", 0) == 0 ? "POST" : "GET";
    head.path = path;
    if (!bearer.empty()) head.headers.emplace("Authorization", "Bearer " + bearer);
    if (!node.empty()) head.headers.emplace(protocol::kNodeHeader, node);
    Result<Admission> admitted = Admit(head);
    if (!admitted.ok()) return std::nullopt;
    return admitted->load;
  };
  EXPECT_EQ(load_of("/api/v1/agent/heartbeat", token, "gpu-1"), Load::kAgent);
  EXPECT_EQ(load_of("/api/v1/agent/register", kJoinToken), Load::kAgent);
  // A heartbeat or registration whose token does not check out is refused from its head: it
  // never reaches the agents' pool.
  EXPECT_EQ(load_of("/api/v1/agent/heartbeat", root_token_, "gpu-1"), std::nullopt);
  EXPECT_EQ(load_of("/api/v1/agent/register", root_token_), std::nullopt);
  EXPECT_EQ(load_of("/api/v1/jobs", root_token_), Load::kRegular);
  EXPECT_EQ(load_of("/api/v1/nodes", ""), Load::kRegular);
  EXPECT_EQ(load_of("/api/v1/events/stream", root_token_), Load::kUncounted);
  EXPECT_EQ(load_of("/healthz", ""), Load::kUncounted);
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
