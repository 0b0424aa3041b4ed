// For the API's tests (src/server/api/*_test.cc): the real HttpApi with a real Controller on a
// real SQLite store (TestStore), served by HttpServer on a free loopback port, and a small
// client that speaks to it over real HTTP.
//
// Every test starts with the projects "default" and "vision" and three users, each with a token:
// "root" (an admin, in "default"), "alice" (a member of "default" and "vision") and "bob" (a
// member of "default" only). The controller's scheduling loop is not started: a test that needs
// a scheduling round calls controller().Tick(), so every test is a sequence of synchronous calls.
// The clock is a FakeClock; nodes never time out unless a test moves it that far.
#pragma once

#include <gtest/gtest.h>
#include <httplib.h>

#include <csignal>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "protocol/agent_messages.h"
#include "server/api/http_api.h"
#include "server/control/controller.h"
#include "server/http/auth.h"
#include "server/monitoring/gpu_history.h"
#include "server/test_store.h"

namespace corral::server::api_testing {

using nlohmann::json;

// One HTTP answer: the status, the Content-Type, the raw body and, when the body is JSON
// (application/json or application/problem+json), its parse (else null).
struct Answer {
  int status = 0;
  std::string content_type;
  std::string text;
  json body;
  httplib::Headers headers;

  bool IsProblem() const { return content_type.rfind("application/problem+json", 0) == 0; }
  bool IsJson() const { return content_type.rfind("application/json", 0) == 0; }
  // The problem's "detail" ("" when the answer is not a problem).
  std::string Detail() const {
    return IsProblem() && body.is_object() ? body.value("detail", "") : "";
  }
};

inline std::ostream& operator<<(std::ostream& os, const Answer& a) {
  return os << a.status << " " << a.content_type << " " << a.text;
}

// A node's inventory as an agent reports it: `gpus` A100s of 80 GiB.
inline json TestInventory(int gpus) {
  json list = json::array();
  for (int i = 0; i < gpus; ++i) {
    list.push_back({{"index", i}, {"uuid", "GPU-" + std::to_string(i)}, {"memory_mib", 81920}});
  }
  return {{"hostname", "h"},     {"cpu_milli", 64000}, {"memory_mib", 512 * 1024},
          {"gpu_model", "A100"}, {"gpus", list},       {"labels", json::object()}};
}

// A one-task job spec asking for `gpus` GPUs, in `project` ("" : the default project).
inline json TestJobSpec(int gpus = 1, const std::string& project = "") {
  json spec = {{"name", "t"}, {"command", {"true"}}, {"resources", {{"gpus", gpus}}}};
  if (!project.empty()) spec["project"] = project;
  return spec;
}

class ApiTest : public ::testing::Test {
 protected:
  static constexpr char kJoinToken[] = "join-token-for-the-api-tests";
  static constexpr char kNodeId[] = "node-id-0123456789abcdef";  // node ids: 16+ characters
  // The session gateway's port the API names in sessions' URLs (no gateway listens there).
  static constexpr int kSessionPort = 18443;

  void SetUp() override {
    ASSERT_NE(test_store_.store(), nullptr);
    ControllerConfig config;
    config.node_timeout = Seconds(int64_t{1} << 30);  // nodes stay, whatever the clock does
    config.logs_dir = (test_store_.dir() / "logs").string();
    Configure(config);
    auto controller = Controller::Create(config, *test_store_.store(), clock_);
    ASSERT_TRUE(controller.ok()) << controller.status().ToString();
    controller_ = std::move(controller).value();
    Accounts& accounts = controller_->Accounts();
    ASSERT_TRUE(accounts.CreateProject("default", "").ok());
    ASSERT_TRUE(accounts.CreateProject("vision", "").ok());
    root_token_ = NewUser("root", true, {"default"});
    alice_token_ = NewUser("alice", false, {"default", "vision"});
    bob_token_ = NewUser("bob", false, {"default"});

    gpu_history_ = std::make_unique<GpuHistory>(controller_->Gpus(), *test_store_.store(), clock_,
                                                GpuHistory::Options{});
    HttpApiConfig api_config;
    api_config.join_token_hash = HashToken(kJoinToken);
    api_config.gpu_history = gpu_history_.get();
    api_config.session_port = kSessionPort;
    ConfigureApi(api_config);
    api_ = std::make_unique<HttpApi>(*controller_, clock_, api_config);
    std::signal(SIGPIPE, SIG_IGN);  // a body refused before it is all sent (413): EPIPE, no signal
    auto socket = Listen("127.0.0.1", 0, "--listen");
    ASSERT_TRUE(socket.ok()) << socket.status().message();
    port_ = socket->port;
    HttpServerOptions http;
    http.admit = [this](const HttpRequest& head) { return api_->Admit(head); };
    auto server = HttpServer::Create(*socket, std::move(http));
    ASSERT_TRUE(server.ok()) << server.status().message();
    http_ = std::move(server).value();
    api_->Register(*http_);
    ASSERT_TRUE(http_->Start().ok());
    client_ = std::make_unique<httplib::Client>("127.0.0.1", port_);
    client_->set_read_timeout(30, 0);
  }

  // A fixture's own controller and API settings, applied before each is created.
  virtual void Configure(ControllerConfig& /*config*/) {}
  virtual void ConfigureApi(HttpApiConfig& /*config*/) {}

  void TearDown() override {
    client_.reset();
    if (api_) api_->Shutdown();
    if (http_) http_->Stop();
    api_.reset();
    gpu_history_.reset();
    controller_.reset();
  }

  // --- HTTP ---------------------------------------------------------------------------------
  // `token` "" sends no Authorization header.
  Answer Get(const std::string& path, const std::string& token,
             const httplib::Headers& extra = {}) {
    httplib::Headers headers = Headers(token);
    headers.insert(extra.begin(), extra.end());
    return Of(client_->Get(path.c_str(), headers));
  }
  Answer Delete(const std::string& path, const std::string& token) {
    return Of(client_->Delete(path.c_str(), Headers(token)));
  }
  Answer Post(const std::string& path, const json& body, const std::string& token,
              const httplib::Headers& extra = {}) {
    return PostText(path, body.dump(), token, extra);
  }
  // A body sent as is (not necessarily JSON).
  Answer PostText(const std::string& path, const std::string& body, const std::string& token,
                  const httplib::Headers& extra = {}) {
    httplib::Headers headers = Headers(token);
    headers.insert(extra.begin(), extra.end());
    return Of(client_->Post(path.c_str(), headers, body, "application/json"));
  }
  Answer Put(const std::string& path, const json& body, const std::string& token) {
    return Of(client_->Put(path.c_str(), Headers(token), body.dump(), "application/json"));
  }

  // --- Checks -------------------------------------------------------------------------------
  // `a` is an application/problem+json answer with HTTP `status` whose body says so and whose
  // detail contains `detail` (a field's name, say).
  static void ExpectProblem(const Answer& a, int status, const std::string& detail = "") {
    EXPECT_EQ(a.status, status) << a;
    EXPECT_TRUE(a.IsProblem()) << a;
    ASSERT_TRUE(a.body.is_object()) << a;
    EXPECT_EQ(a.body.value("status", 0), status) << a;
    EXPECT_FALSE(a.body.value("title", "").empty()) << a;
    EXPECT_NE(a.Detail().find(detail), std::string::npos)
        << "detail lacks '" << detail << "': " << a;
  }
  // No token: 401 problem+json. A member's token on an admin route: 403 problem+json.
  void ExpectAdminOnly(const std::string& method, const std::string& path,
                       const json& body = json::object()) {
    for (const auto& [token, status] :
         std::vector<std::pair<std::string, int>>{{"", 401}, {bob_token_, 403}}) {
      const Answer a = method == "GET"    ? Get(path, token)
                       : method == "PUT"  ? Put(path, body, token)
                       : method == "POST" ? Post(path, body, token)
                                          : Delete(path, token);
      SCOPED_TRACE(method + " " + path + " with " + (token.empty() ? "no token" : "bob's token"));
      ExpectProblem(a, status);
    }
  }

  // --- Cluster ------------------------------------------------------------------------------
  // A user made through the accounts service, with their first token.
  std::string NewUser(const std::string& name, bool admin,
                      const std::vector<std::string>& projects) {
    auto user = controller_->Accounts().CreateUser(name, admin, projects);
    EXPECT_TRUE(user.ok()) << user.status().ToString();
    return user.ok() ? user->token : "";
  }
  // Submits `spec` through the API as the owner of `token`: the new job's id (0 on failure).
  int64_t SubmitJob(const std::string& token, const json& spec = TestJobSpec()) {
    const Answer a = Post("/api/v1/jobs", spec, token);
    EXPECT_EQ(a.status, 201) << a;
    return a.body.is_object() ? a.body.value("id", int64_t{0}) : 0;
  }
  // Registers node `name` through the agent gateway: its node token ("" on failure).
  std::string RegisterNode(const std::string& name, int gpus) {
    const Answer a = Post("/api/v1/agent/register",
                          {{"protocol_version", protocol::kProtocolVersion},
                           {"name", name},
                           {"node_id", kNodeId},
                           {"inventory", TestInventory(gpus)}},
                          kJoinToken);
    EXPECT_EQ(a.status, 200) << a;
    return a.body.is_object() ? a.body.value("node_token", "") : "";
  }
  // A heartbeat of node `name` (no long poll) reporting `tasks`, and `gpu_metrics` when given.
  Answer Heartbeat(const std::string& name, const std::string& node_token,
                   const json& tasks = json::array(), const json& gpu_metrics = nullptr) {
    json report = {{"seq", ++seq_}, {"wait_ms", 0}, {"tasks", tasks}, {"logs", json::array()}};
    if (!gpu_metrics.is_null()) report["gpu_metrics"] = gpu_metrics;
    return Post("/api/v1/agent/heartbeat", report, node_token, {{protocol::kNodeHeader, name}});
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
  // Starts what is pending on node `name` (`gpus` GPUs): a scheduling round, the heartbeat that
  // hears the launches, and ReportRunning. Returns the launches.
  json RunPendingJobs(const std::string& name, const std::string& node_token, int gpus,
                      int utilization = 50) {
    controller().Tick();
    const Answer heard = Heartbeat(name, node_token);
    EXPECT_EQ(heard.status, 200) << heard;
    const json launches = heard.body.is_object() ? heard.body["run"] : json::array();
    ReportRunning(name, node_token, launches, gpus, utilization);
    return launches;
  }
  // A heartbeat of node `name` (`gpus` GPUs) reporting the tasks of `launches` running, with
  // GPU metrics: every GPU at `utilization` %, with the tasks holding it.
  void ReportRunning(const std::string& name, const std::string& node_token, const json& launches,
                     int gpus, int utilization) {
    json running = json::array();
    std::vector<json> holders(gpus, json::array());
    for (const json& launch : launches) {
      running.push_back(TaskStatus(launch, "running"));
      for (const json& gpu : launch["gpus"]) {
        holders.at(gpu.get<int>())
            .push_back(std::to_string(launch["allocation_id"].get<int64_t>()) + "-" +
                       std::to_string(launch["generation"].get<int64_t>()));
      }
    }
    json metrics = {{"sampled_at_ms", 0}, {"gpus", json::array()}};
    for (int i = 0; i < gpus; ++i) {
      metrics["gpus"].push_back({{"index", i},
                                 {"utilization_percent", utilization},
                                 {"tasks", holders[i]},
                                 {"processes", json::array()}});
    }
    const Answer reported = Heartbeat(name, node_token, running, metrics);
    EXPECT_EQ(reported.status, 200) << reported;
  }

  Controller& controller() { return *controller_; }
  store::Store& store() { return *test_store_.store(); }
  // The controller's task logs (ControllerConfig::logs_dir).
  std::filesystem::path logs_dir() const { return test_store_.dir() / "logs"; }
  // A folder of the test's own for other files, removed with it.
  const std::filesystem::path& test_dir() const { return test_store_.dir(); }

  int port() const { return port_; }

  FakeClock clock_{Seconds(1'700'000'000)};
  std::string root_token_, alice_token_, bob_token_;

  // The API's admission rule for a request's head (HttpApi::Admit).
  Result<Admission> Admit(const HttpRequest& head) { return api_->Admit(head); }

 private:
  static httplib::Headers Headers(const std::string& token) {
    if (token.empty()) return {};
    return {{"Authorization", "Bearer " + token}};
  }
  static Answer Of(const httplib::Result& r) {
    Answer a;
    EXPECT_TRUE(r) << "no HTTP answer: " << httplib::to_string(r.error());
    if (!r) return a;
    a.status = r->status;
    a.content_type = r->get_header_value("Content-Type");
    a.text = r->body;
    a.headers = r->headers;
    if (a.IsJson() || a.IsProblem()) {
      a.body = json::parse(r->body, nullptr, /*allow_exceptions=*/false);
      EXPECT_FALSE(a.body.is_discarded()) << "not JSON: " << r->body;
    }
    return a;
  }

  TestStore test_store_{"api"};
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<GpuHistory> gpu_history_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> http_;
  int port_ = 0;
  std::unique_ptr<httplib::Client> client_;
  int64_t seq_ = 0;
};

}  // namespace corral::server::api_testing
