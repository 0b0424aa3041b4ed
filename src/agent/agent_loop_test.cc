// The reconcile loop against an in-process HTTP server on loopback that plays the server's part.
#include "agent/agent_loop.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <future>
#include <nlohmann/json.hpp>
#include <thread>

#include "agent/fake_probe.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

// Runs nothing: registration is all these tests exercise.
class NoTasks final : public Runtime {
 public:
  TaskStatus Start(const TaskLaunch&) override { return TaskStatus{}; }
  std::vector<TaskStatus> Poll() override { return {}; }
  using Runtime::Kill;
  Status Kill(const TaskKey&, Seconds, const std::string&, model::TaskEndCause) override {
    return Status::Ok();
  }
  Status Forget(const TaskKey&) override { return Status::Ok(); }
  Result<std::string> ReadLog(const TaskKey&, LogStream, int64_t, int64_t) override {
    return std::string();
  }
  std::vector<RunningTask> Running() const override { return {}; }
};

class AgentLoopTest : public ::testing::Test {
 protected:
  void SetUp() override {
    port_ = server_.bind_to_any_port("127.0.0.1");
    ASSERT_GT(port_, 0);
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    // stop() only stops a server that is running: wait until it is.
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  void TearDown() override {
    server_.stop();
    thread_.join();
  }

  // Answers every registration with `status` and a problem detail, recording the last body.
  void AnswerRegister(int status, const std::string& detail) {
    server_.Post("/api/v1/agent/register",
                 [=, this](const httplib::Request& req, httplib::Response& res) {
                   std::lock_guard<std::mutex> lock(mu_);
                   register_body_ = nlohmann::json::parse(req.body, nullptr, false);
                   ++registrations_;
                   res.status = status;
                   res.set_content(nlohmann::json{{"detail", detail}}.dump(), "application/json");
                 });
  }

  // Registers every agent, telling it to fence after 1 s without an answer (kill grace 2 s).
  void AnswerRegisterFencingAfterOneSecond() {
    server_.Post("/api/v1/agent/register", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"protocol_version": 1, "node_token": "node-secret", )"
                      R"("cluster_id": "0123456789abcdef", "heartbeat_interval_s": 5, )"
                      R"("node_timeout_s": 10, "fence_after_s": 1, "kill_grace_s": 2})",
                      "application/json");
    });
  }

  std::string Url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  AgentOptions Options() {
    AgentOptions o;
    o.servers = *ServerList::Parse("http://127.0.0.1:" + std::to_string(port_));
    o.join_token = "join-secret";
    o.name = "node-a";
    o.node_id = "0123456789abcdef0123456789abcdef";
    return o;
  }

  // Options() with no long poll and no GPU metrics: heartbeats as fast as answered.
  AgentOptions OptionsWithoutWaits() {
    AgentOptions o = Options();
    o.wait_ms = 0;
    o.metrics_interval_ms = 0;
    return o;
  }

  // Run() with a deadline: a loop that keeps retrying is stopped and reported.
  Status RunUntilItReturns(AgentLoop& loop) {
    std::atomic<bool> stop{false};
    auto done = std::async(std::launch::async, [&] { return loop.Run(stop); });
    if (done.wait_for(std::chrono::seconds(20)) != std::future_status::ready) {
      stop = true;
      ADD_FAILURE() << "Run() kept retrying";
    }
    return done.get();
  }

  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  nlohmann::json register_body_;
  int registrations_ = 0;
  FakeProbe probe_ = std::move(FakeProbe::Create("2xA100-80GB", "node-a")).value();
  NoTasks runtime_;
};

TEST_F(AgentLoopTest, NameHeldByAnotherNodeStopsTheAgent) {
  AnswerRegister(409, "node 'node-a' is registered with another node id");
  AgentLoop loop(Options(), probe_, runtime_);
  Status s = RunUntilItReturns(loop);
  EXPECT_EQ(s.code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(s.message(), HasSubstr("node 'node-a' is registered with another node id"));
  EXPECT_THAT(s.message(), HasSubstr("another --name"));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(registrations_, 1);
  EXPECT_EQ(register_body_["name"], "node-a");
  EXPECT_EQ(register_body_["node_id"], "0123456789abcdef0123456789abcdef");
  EXPECT_TRUE(register_body_["inventory"].is_object());
}

TEST_F(AgentLoopTest, InvalidJoinTokenStopsTheAgent) {
  AnswerRegister(401, "invalid join token");
  AgentLoop loop(Options(), probe_, runtime_);
  Status s = RunUntilItReturns(loop);
  EXPECT_EQ(s.code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(s.message(), HasSubstr("invalid join token"));
}

// Answers every registration with `answer` (200).
void AnswerRegistration(httplib::Server& server, const std::string& answer) {
  server.Post("/api/v1/agent/register", [answer](const httplib::Request&, httplib::Response& res) {
    res.set_content(answer, "application/json");
  });
}

TEST_F(AgentLoopTest, RegistrationTellsTheClusterId) {
  std::string answer = R"({"protocol_version": 1, "node_token": "t", "cluster_id": )"
                       R"("0123456789abcdef"})";
  server_.Post("/api/v1/agent/register", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    res.set_content(answer, "application/json");
  });
  Result<Registration> joined = RegisterAgent(Options(), Url(), probe_).registration;
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ(joined->node_token, "t");
  EXPECT_EQ(joined->cluster_id, "0123456789abcdef");
  EXPECT_FALSE(joined->fence.has_value());  // a server older than fencing: never fence
  // Not a path component of this host's: refused (and not fatal: a broken answer).
  {
    std::lock_guard<std::mutex> lock(mu_);
    answer = R"({"protocol_version": 1, "node_token": "t", "cluster_id": "../../etc"})";
  }
  Result<Registration> broken = RegisterAgent(Options(), Url(), probe_).registration;
  EXPECT_EQ(broken.status().code(), StatusCode::kInternal);
  EXPECT_FALSE(IsFatalRegistrationError(broken.status()));
}

// A server older than protocol versions (which sent no cluster id either).
TEST_F(AgentLoopTest, AServerWithoutProtocolVersionsStopsTheAgentNamingTheUpgrade) {
  AnswerRegistration(server_, R"({"node_token": "t", "heartbeat_interval_s": 5})");
  AgentLoop loop(Options(), probe_, runtime_);
  Status s = RunUntilItReturns(loop);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("speaks no protocol version"));
  EXPECT_THAT(s.message(), HasSubstr("upgrade the servers before their agents"));
}

// The server refuses this agent's protocol version: the agent stops, showing why.
TEST_F(AgentLoopTest, ARefusedProtocolVersionStopsTheAgentWithTheServersReason) {
  server_.Post("/api/v1/agent/register", [&](const httplib::Request& req, httplib::Response& res) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      register_body_ = nlohmann::json::parse(req.body, nullptr, false);
    }
    res.status = 409;
    res.set_content(R"({"title": "failed_precondition", "status": 409, "detail": )"
                    R"("this agent speaks protocol version 1, too old for this server"})",
                    "application/problem+json");
  });
  AgentLoop loop(Options(), probe_, runtime_);
  Status s = RunUntilItReturns(loop);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("this agent speaks protocol version 1, too old"));
  EXPECT_THAT(s.message(), Not(HasSubstr("--name")));  // not a name held by another node
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(register_body_["protocol_version"], protocol::kProtocolVersion);
}

// The server at the agent's URL now serves another store (another cluster): the agent stops
// rather than report its tasks there, where they are unknown and would be killed.
TEST_F(AgentLoopTest, AServerOfAnotherClusterStopsTheAgent) {
  AnswerRegistration(server_, R"({"protocol_version": 1, "node_token": "t", )"
                              R"("cluster_id": "bbbbbbbbbbbbbbbb"})");
  int beats = 0;
  server_.Post("/api/v1/agent/heartbeat", [&](const httplib::Request&, httplib::Response& res) {
    std::lock_guard<std::mutex> lock(mu_);
    ++beats;
    res.set_content("{}", "application/json");
  });
  AgentOptions options = Options();
  options.cluster_id = "aaaaaaaaaaaaaaaa";
  AgentLoop loop(options, probe_, runtime_);
  Status s = RunUntilItReturns(loop);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is of cluster bbbbbbbbbbbbbbbb, but this agent runs tasks "
                                     "of cluster aaaaaaaaaaaaaaaa"));
  std::lock_guard<std::mutex> lock(mu_);
  EXPECT_EQ(beats, 0);
}

// A probe whose Sample() hangs until released, as NVML can on a GPU fallen off the bus.
class HangingProbe final : public GpuProbe {
 public:
  Result<GpuInventory> Discover() override { return fake_.Discover(); }
  Result<std::vector<GpuSample>> Sample() override {
    std::unique_lock lock(mu_);
    cv_.wait(lock, [&] { return released_; });
    return fake_.Sample();
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }

 private:
  FakeProbe fake_ = std::move(FakeProbe::Create("2xA100-80GB", "node-a")).value();
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
};

TEST_F(AgentLoopTest, AHungGpuProbeDoesNotStopTheHeartbeats) {
  server_.Post("/api/v1/agent/register", [](const httplib::Request&, httplib::Response& res) {
    res.set_content(R"({"protocol_version": 1, "node_token": "node-secret", )"
                    R"("cluster_id": "0123456789abcdef", "heartbeat_interval_s": 5})",
                    "application/json");
  });
  int beats = 0, with_metrics = 0, named = 0;
  server_.Post("/api/v1/agent/heartbeat", [&](const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    std::lock_guard<std::mutex> lock(mu_);
    ++beats;
    with_metrics += body.contains("gpu_metrics");
    // Credentials in headers only: the node's name and token, never in the body.
    named += req.get_header_value("X-Corral-Node") == "node-a" &&
             req.get_header_value("Authorization") == "Bearer node-secret" &&
             !body.contains("name");
    res.set_content(nlohmann::json{{"taken_seq", body["seq"]}}.dump(), "application/json");
  });
  HangingProbe probe;
  AgentOptions options = Options();
  options.wait_ms = 0;
  options.metrics_interval_ms = 100;
  AgentLoop loop(options, probe, runtime_);
  std::atomic<bool> stop{false};
  auto done = std::async(std::launch::async, [&] { return loop.Run(stop); });
  auto count = [&](int& n) {
    std::lock_guard<std::mutex> lock(mu_);
    return n;
  };
  auto wait_until = [&](const std::function<bool()>& ok) {
    for (int i = 0; i < 2000 && !ok(); ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return ok();
  };
  EXPECT_TRUE(wait_until([&] { return count(beats) >= 5; }));
  EXPECT_EQ(count(named), count(beats));
  EXPECT_EQ(count(with_metrics), 0);  // the sample never came: the heartbeats went on without
  probe.Release();
  EXPECT_TRUE(wait_until([&] { return count(with_metrics) >= 1; }));
  stop = true;
  EXPECT_TRUE(done.get().ok());
}

// One task that runs until the test ends it; the end is announced on the exit notice pipe, as
// ProcessRuntime's supervisors do. Called from the loop's runtime thread and the test's.
class OneTask final : public Runtime {
 public:
  OneTask() {
    EXPECT_EQ(pipe2(notices_, O_NONBLOCK | O_CLOEXEC), 0);
    status_.job_id = JobId(7);
    status_.key = TaskKey{AllocationId(3), 1};
    status_.state = ProcessState::kRunning;
  }
  ~OneTask() override {
    close(notices_[0]);
    close(notices_[1]);
  }
  TaskStatus Start(const TaskLaunch&) override { return TaskStatus{}; }
  std::vector<TaskStatus> Poll() override {
    char buffer[64];
    while (read(notices_[0], buffer, sizeof(buffer)) > 0) {
    }
    std::lock_guard lock(mu_);
    return {status_};
  }
  using Runtime::Kill;
  Status Kill(const TaskKey&, Seconds, const std::string&, model::TaskEndCause) override {
    return Status::Ok();
  }
  Status Forget(const TaskKey&) override { return Status::Ok(); }
  Result<std::string> ReadLog(const TaskKey&, LogStream stream, int64_t offset, int64_t) override {
    // Its last line, written as it ended: it must come with the end.
    std::lock_guard lock(mu_);
    if (stream != LogStream::kStdout || status_.state == ProcessState::kRunning)
      return std::string();
    return offset == 0 ? std::string("bye\n") : std::string();
  }
  std::vector<RunningTask> Running() const override { return {}; }
  int ExitNoticeFd() const override { return notices_[0]; }
  void End() {
    {
      std::lock_guard lock(mu_);
      status_.state = ProcessState::kExited;
      status_.exit_code = 0;
    }
    ASSERT_EQ(write(notices_[1], "x", 1), 1);
  }

 private:
  std::mutex mu_;
  TaskStatus status_;
  int notices_[2] = {-1, -1};
};

// A server that takes every report and holds every whole report after the first as a long
// poll until released.
class HoldingServer {
 public:
  explicit HoldingServer(httplib::Server& http) {
    http.Post("/api/v1/agent/register", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(R"({"protocol_version": 1, "node_token": "node-secret", )"
                      R"("cluster_id": "0123456789abcdef", "heartbeat_interval_s": 5})",
                      "application/json");
    });
    http.Post(
        "/api/v1/agent/heartbeat", [this](const httplib::Request& req, httplib::Response& res) {
          const auto body = nlohmann::json::parse(req.body, nullptr, false);
          std::unique_lock lock(mu_);
          const bool partial = body.value("partial", false);
          (partial ? partials_ : fulls_).push_back(body);
          changed_.notify_all();
          if (!partial && fulls_.size() > 1) {
            ++held_;
            changed_.notify_all();
            changed_.wait_for(lock, std::chrono::seconds(20), [&] { return released_; });
            --held_;
          }
          res.set_content(nlohmann::json{{"taken_seq", body["seq"]}}.dump(), "application/json");
        });
  }
  // Waits (up to 20 s) until `done` holds for the reports so far.
  bool WaitUntil(const std::function<bool()>& done) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, std::chrono::seconds(20), done);
  }
  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }
  // The reports of task 3 ended, among `reports`.
  static bool HasEnd(const std::vector<nlohmann::json>& reports) {
    for (const auto& r : reports) {
      for (const auto& t : r["tasks"]) {
        if (t["allocation_id"] == 3 && t["state"] == "exited") return true;
      }
    }
    return false;
  }

  std::mutex mu_;
  std::condition_variable changed_;
  std::vector<nlohmann::json> fulls_, partials_;
  int held_ = 0;
  bool released_ = false;
};

TEST_F(AgentLoopTest, AnEndIsPushedWhileTheLongPollWaitsWithItsOutputAndANewerNumber) {
  HoldingServer server(server_);
  OneTask runtime;
  AgentOptions options = Options();
  options.metrics_interval_ms = 0;
  options.runtime_thread.poll_interval = std::chrono::hours(1);  // only the notice tells
  AgentLoop loop(options, probe_, runtime);
  std::atomic<bool> stop{false};
  auto done = std::async(std::launch::async, [&] { return loop.Run(stop); });
  ASSERT_TRUE(server.WaitUntil([&] { return server.held_ == 1; }));  // the long poll waits
  runtime.End();
  ASSERT_TRUE(server.WaitUntil([&] { return HoldingServer::HasEnd(server.partials_); }));
  {
    std::lock_guard lock(server.mu_);
    EXPECT_EQ(server.held_, 1);  // still waiting: the end did not wait for it
    const nlohmann::json& push = server.partials_.back();
    EXPECT_EQ(push["wait_ms"], 0);
    EXPECT_GT(push["seq"].get<int64_t>(), server.fulls_.back()["seq"].get<int64_t>());
    ASSERT_EQ(push["logs"].size(), 1u);  // the last output comes with the end
    EXPECT_EQ(push["logs"][0]["data"], "bye\n");
    EXPECT_TRUE(HoldingServer::HasEnd({push}));
  }
  server.Release();
  stop = true;
  EXPECT_TRUE(done.get().ok());
}

// Two running tasks, one requeue-able; a kill ends its task at once with the kill's cause, as
// ProcessRuntime reports it. Called from the loop's runtime thread and the test's.
class TwoTasks final : public Runtime {
 public:
  TwoTasks() {
    for (int64_t alloc : {1, 2}) {
      TaskLaunch launch;
      launch.job_id = JobId(alloc);
      launch.key = TaskKey{AllocationId(alloc), 1};
      launch.argv = {"true"};
      launch.requeueable = alloc == 1;
      TaskStatus status;
      status.job_id = launch.job_id;
      status.key = launch.key;
      status.state = ProcessState::kRunning;
      tasks_.push_back({launch, status});
    }
  }
  TaskStatus Start(const TaskLaunch&) override { return TaskStatus{}; }
  std::vector<TaskStatus> Poll() override {
    std::lock_guard lock(mu_);
    std::vector<TaskStatus> out;
    for (const auto& [launch, status] : tasks_) out.push_back(status);
    return out;
  }
  using Runtime::Kill;
  Status Kill(const TaskKey& key, Seconds grace, const std::string& reason,
              model::TaskEndCause cause) override {
    std::lock_guard lock(mu_);
    for (auto& [launch, status] : tasks_) {
      if (launch.key != key) continue;
      status.state = ProcessState::kKilled;
      status.signal = 15;
      status.end_cause = cause;
      status.message = reason;
      graces_.push_back(grace);
    }
    return Status::Ok();
  }
  Status Forget(const TaskKey&) override { return Status::Ok(); }
  Result<std::string> ReadLog(const TaskKey&, LogStream, int64_t, int64_t) override {
    return std::string();
  }
  std::vector<RunningTask> Running() const override {
    std::lock_guard lock(mu_);
    std::vector<RunningTask> out;
    for (const auto& [launch, status] : tasks_) {
      if (status.state == ProcessState::kRunning) out.push_back({launch, 1, false});
    }
    return out;
  }
  std::vector<TaskStatus> Statuses() { return Poll(); }
  std::vector<Seconds> Graces() {
    std::lock_guard lock(mu_);
    return graces_;
  }

 private:
  mutable std::mutex mu_;
  std::vector<std::pair<TaskLaunch, TaskStatus>> tasks_;
  std::vector<Seconds> graces_;
};

// Run() on a thread of its own until Stop() or the test's end (a failed ASSERT returns early:
// the loop must stop before the test waits for it).
class RunningLoop {
 public:
  explicit RunningLoop(AgentLoop& loop)
      : done_(std::async(std::launch::async, [this, &loop] { return loop.Run(stop_); })) {}
  ~RunningLoop() {
    stop_ = true;
    if (done_.valid()) done_.wait();
  }
  Status Stop() {
    stop_ = true;
    return done_.get();
  }

 private:
  std::atomic<bool> stop_{false};
  std::future<Status> done_;
};

// Waits (up to 10 s) until `ok` holds.
bool WaitUntil(const std::function<bool()>& ok) {
  for (int i = 0; i < 2000 && !ok(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return ok();
}

TEST_F(AgentLoopTest, CutOffFromItsServerItStopsOnlyWhatWouldBeRequeuedAndSaysSo) {
  AnswerRegisterFencingAfterOneSecond();
  bool answering = true;
  std::vector<nlohmann::json> taken;  // the reports answered
  server_.Post("/api/v1/agent/heartbeat", [&](const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    std::lock_guard<std::mutex> lock(mu_);
    if (!answering) {  // as a follower answers, or a proxy in front of no server
      res.status = 503;
      return;
    }
    taken.push_back(body);
    res.set_content(nlohmann::json{{"taken_seq", body["seq"]}}.dump(), "application/json");
  });
  TwoTasks runtime;
  AgentLoop loop(OptionsWithoutWaits(), probe_, runtime);
  RunningLoop running(loop);
  auto reports = [&] {
    std::lock_guard<std::mutex> lock(mu_);
    return taken.size();
  };
  // Heard for twice the fence_after: nothing is stopped.
  ASSERT_TRUE(WaitUntil([&] { return reports() >= 3; }));
  const auto heard_until = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  while (std::chrono::steady_clock::now() < heard_until) {
    ASSERT_TRUE(runtime.Graces().empty());
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  {
    std::lock_guard<std::mutex> lock(mu_);
    answering = false;
  }
  const auto cut = std::chrono::steady_clock::now();
  ASSERT_TRUE(WaitUntil([&] { return !runtime.Graces().empty(); }));
  EXPECT_GE(std::chrono::steady_clock::now() - cut, std::chrono::milliseconds(900));
  EXPECT_EQ(runtime.Graces(), std::vector<Seconds>{Seconds(2)});  // the server's kill grace
  const std::vector<TaskStatus> statuses = runtime.Statuses();
  EXPECT_EQ(statuses[0].end_cause, model::TaskEndCause::kFenced);
  EXPECT_EQ(statuses[1].state, ProcessState::kRunning);  // no restarts left: it runs on
  // Heard again: its next report says which task it fenced, and why.
  {
    std::lock_guard<std::mutex> lock(mu_);
    answering = true;
    taken.clear();
  }
  // The first report that names job 1's task (a full report, or a delta: whichever the loop
  // sends first) says it was fenced; job 2's task is never reported ended.
  auto reported = [&](int64_t job) -> std::optional<nlohmann::json> {
    std::lock_guard<std::mutex> lock(mu_);
    for (const nlohmann::json& report : taken) {
      for (const nlohmann::json& task : report["tasks"]) {
        if (task["job_id"] == job) return task;
      }
    }
    return std::nullopt;
  };
  ASSERT_TRUE(WaitUntil([&] { return reported(1).has_value(); }));
  const nlohmann::json fenced = *reported(1);
  EXPECT_EQ(fenced["state"], "killed");
  EXPECT_EQ(fenced["end_cause"], "fenced");
  EXPECT_THAT(fenced["message"].get<std::string>(), HasSubstr("fenced: no server reached"));
  if (std::optional<nlohmann::json> kept = reported(2)) EXPECT_EQ((*kept)["state"], "running");
  EXPECT_TRUE(running.Stop().ok());
}

// Back-pressure (docs/control-plane.md): a saturated server's 503 (Retry-After, Corral-Busy)
// holds the next heartbeat back at least that long, and it is no answer: the server heard nothing,
// so the fence clock runs on and the agent fences what would be requeued.
TEST_F(AgentLoopTest, AShedHeartbeatWaitsItsRetryAfterAndIsNoAnswerToTheFence) {
  AnswerRegisterFencingAfterOneSecond();
  int answered = 0;
  std::vector<std::chrono::steady_clock::time_point> shed;  // whole reports refused, when
  server_.Post("/api/v1/agent/heartbeat", [&](const httplib::Request& req, httplib::Response& res) {
    const auto body = nlohmann::json::parse(req.body, nullptr, false);
    std::lock_guard<std::mutex> lock(mu_);
    if (answered < 2) {
      ++answered;
      res.set_content(nlohmann::json{{"taken_seq", body["seq"]}}.dump(), "application/json");
      return;
    }
    if (!body.value("partial", false)) shed.push_back(std::chrono::steady_clock::now());
    res.status = 503;
    res.set_header("Retry-After", "1");
    res.set_header("Corral-Busy", "1");
    res.set_content(R"({"title":"unavailable","status":503,)"
                    R"("detail":"server saturated: 96 agent requests in flight"})",
                    "application/problem+json");
  });
  TwoTasks runtime;
  AgentLoop loop(OptionsWithoutWaits(), probe_, runtime);
  RunningLoop running(loop);
  ASSERT_TRUE(WaitUntil([&] {
    std::lock_guard<std::mutex> lock(mu_);
    return shed.size() >= 3;
  }));
  {
    std::lock_guard<std::mutex> lock(mu_);
    for (size_t i = 1; i < shed.size(); ++i) {
      EXPECT_GE(shed[i] - shed[i - 1], std::chrono::milliseconds(1000)) << "heartbeat " << i;
      // Its own cadence would be at once (wait_ms 0), a backoff 100 ms doubling: the server's
      // word, jittered by at most a quarter.
      EXPECT_LT(shed[i] - shed[i - 1], std::chrono::milliseconds(1250 + 250)) << "heartbeat " << i;
    }
  }
  // Refused for over fence_after (1 s): the requeue-able task is fenced, the other runs on.
  ASSERT_TRUE(WaitUntil([&] { return !runtime.Graces().empty(); }));
  EXPECT_EQ(runtime.Statuses()[0].end_cause, model::TaskEndCause::kFenced);
  EXPECT_EQ(runtime.Statuses()[1].state, ProcessState::kRunning);
  EXPECT_TRUE(running.Stop().ok());
}

TEST(BusyWaitTest, AtLeastTheRetryAfterJitteredWithinBounds) {
  using std::chrono::milliseconds;
  EXPECT_EQ(BusyWait(Seconds(1), 0), milliseconds(1000));
  EXPECT_EQ(BusyWait(Seconds(2), 0.5), milliseconds(2250));
  EXPECT_LE(BusyWait(Seconds(1), 0.999), milliseconds(1250));
  // A 0 is taken as 1 s (no busy loop); past kMaxHonouredRetryAfter, that.
  EXPECT_EQ(BusyWait(Seconds(0), 0), milliseconds(1000));
  EXPECT_EQ(BusyWait(Seconds(3600), 0), milliseconds(5000));
}

TEST(BusyWaitTest, ABusyAnswerIsWaitedAsSaidOtherErrorsBackOff) {
  using std::chrono::milliseconds;
  AnsweredErrorBackoff backoff(42);
  const Status internal(StatusCode::kInternal, "heartbeat: HTTP 500: boom");
  EXPECT_EQ(backoff.Next(internal), milliseconds(100));
  EXPECT_EQ(backoff.Next(internal), milliseconds(200));
  const milliseconds busy =
      backoff.Next(Unavailable("heartbeat: HTTP 503: server saturated", Seconds(2)));
  EXPECT_GE(busy, milliseconds(2000));
  EXPECT_LE(busy, milliseconds(2500));
  // A busy answer does not grow the backoff of other errors.
  EXPECT_EQ(backoff.Next(internal), milliseconds(400));
  for (int i = 0; i < 10; ++i) backoff.Next(internal);
  EXPECT_EQ(backoff.Next(internal), milliseconds(5000));
  backoff.Reset();
  EXPECT_EQ(backoff.Next(internal), milliseconds(100));
}

// A second server on loopback that plays the leader or a follower (a follower answers 503 with
// Corral-Leader: docs/control-plane.md) as told, counting registrations and heartbeats.
class SwitchingServer {
 public:
  SwitchingServer() {
    server_.Post(".*", [this](const httplib::Request& req, httplib::Response& res) {
      std::lock_guard lock(mu_);
      if (!leader_.empty()) {
        ++refused;
        res.status = 503;
        res.set_header("Corral-Leader", leader_);
        res.set_content(R"({"status": 503, "detail": "this server is not the leader"})",
                        "application/problem+json");
      } else if (req.path == "/api/v1/agent/register") {
        ++registrations;
        res.set_content(R"({"protocol_version": 1, "node_token": "node-secret", )"
                        R"("cluster_id": "0123456789abcdef"})",
                        "application/json");
      } else {
        beats += req.get_header_value("Authorization") == "Bearer node-secret";
        const auto body = nlohmann::json::parse(req.body, nullptr, false);
        res.set_content(nlohmann::json{{"taken_seq", body["seq"]}}.dump(), "application/json");
      }
    });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~SwitchingServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  // "" : lead; else follow `leader`.
  void Follow(const std::string& leader) {
    std::lock_guard lock(mu_);
    leader_ = leader;
  }
  template <typename Condition>
  bool WaitUntil(Condition condition) {
    for (int i = 0; i < 2000; ++i) {
      {
        std::lock_guard lock(mu_);
        if (condition()) return true;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return false;
  }

  std::mutex mu_;
  int registrations = 0, beats = 0, refused = 0;

 private:
  httplib::Server server_;
  std::string leader_;
  int port_ = 0;
  std::thread thread_;
};

// The agent given "dead,follower,leader" registers with the leader; when that one steps down
// naming a leader outside the list, the heartbeats follow it with the same node token.
TEST_F(AgentLoopTest, RegistrationAndHeartbeatsFindAndFollowTheLeader) {
  server_.Post("/api/v1/agent/register",
               [](const httplib::Request&, httplib::Response& res) { res.status = 503; });
  SwitchingServer first, second;
  first.Follow("");
  server_.Post("/api/v1/agent/heartbeat",
               [](const httplib::Request&, httplib::Response& res) { res.status = 503; });
  // The fixture's server follows, naming `first`.
  server_.set_post_routing_handler([&](const httplib::Request&, httplib::Response& res) {
    res.set_header("Corral-Leader", first.url());
  });
  // A port where nothing listens: bound, never listened on, closed.
  std::string dead;
  {
    const int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
    socklen_t len = sizeof addr;
    getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
    close(fd);
    dead = "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
  }
  AgentOptions options = Options();
  options.servers = *ServerList::Parse(dead + "," + Url() + "," + first.url());
  options.metrics_interval_ms = 0;
  AgentLoop loop(options, probe_, runtime_);
  std::atomic<bool> stop{false};
  auto done = std::async(std::launch::async, [&] { return loop.Run(stop); });
  EXPECT_TRUE(first.WaitUntil([&] { return first.registrations == 1 && first.beats >= 2; }));
  first.Follow(second.url());
  EXPECT_TRUE(second.WaitUntil([&] { return second.beats >= 2; }));
  stop = true;
  EXPECT_TRUE(done.get().ok());
  std::lock_guard lock(second.mu_);
  EXPECT_EQ(second.registrations, 0);  // its node token still holds
}

TEST(MetricsIntervalTest, OffOrATenthToFifteenSeconds) {
  EXPECT_EQ(*MetricsIntervalMs(0), 0);
  EXPECT_EQ(*MetricsIntervalMs(0.5), 500);
  EXPECT_EQ(*MetricsIntervalMs(15), 15000);
  for (double bad : {0.0001, 0.05, 16.0, 3600.0, -1.0}) {
    auto ms = MetricsIntervalMs(bad);
    ASSERT_FALSE(ms.ok()) << bad;
    EXPECT_NE(ms.status().message().find("--metrics-interval: 0 (no GPU metrics) or 0.1 to 15"),
              std::string::npos);
  }
}

}  // namespace
}  // namespace corral::agent
