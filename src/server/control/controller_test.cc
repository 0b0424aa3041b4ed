// The controller's state machine driven directly (no HTTP), on a real SQLite store and a
// FakeClock: launches, reports, cancellation, gang failure, node loss and identity.
#include "server/control/controller.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <future>
#include <iostream>
#include <map>
#include <thread>
#include <tuple>

#include "model/node.h"
#include "protocol/agent_messages.h"
#include "server/test_store.h"
#include "store/migrations.h"
#include "store/sqlite_connection.h"

namespace corral::server {
namespace {

using nlohmann::json;
using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr char kNodeA[] = "node-a-0123456789abcdef";  // node ids: 16+ characters
constexpr char kNodeB[] = "node-b-0123456789abcdef";

json Inventory(int gpus) {
  json list = json::array();
  for (int i = 0; i < gpus; ++i) {
    list.push_back({{"index", i}, {"uuid", "GPU-" + std::to_string(i)}, {"memory_mib", 81920}});
  }
  return {{"hostname", "h"},     {"cpu_milli", 64000}, {"memory_mib", 512 * 1024},
          {"gpu_model", "A100"}, {"gpus", list},       {"labels", json::object()}};
}

json Spec(int gpus, int tasks = 1, int max_restarts = 0) {
  return {{"name", "t"},
          {"command", {"true"}},
          {"resources", {{"gpus", gpus}}},
          {"tasks", tasks},
          {"max_restarts", max_restarts}};
}

// A task status as an agent reports it.
json TaskReport(const json& launch, const std::string& state, int exit_code = 0) {
  json s = {{"job_id", launch["job_id"]},
            {"task_index", launch["task_index"]},
            {"allocation_id", launch["allocation_id"]},
            {"generation", launch["generation"]},
            {"state", state}};
  if (state != "running") s["exit_code"] = exit_code;
  // What an agent says of an exited or killed process (protocol::TaskStatus::end_cause).
  if (state == "exited") s["end_cause"] = "exited";
  if (state == "killed") s["end_cause"] = "stopped";
  return s;
}

json Report(std::vector<json> tasks = {}) {
  json r = {{"tasks", json::array()}, {"logs", json::array()}};
  for (auto& t : tasks) r["tasks"].push_back(std::move(t));
  return r;
}

class ControllerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = test_store_.store();
    ASSERT_NE(store_, nullptr);
    auto alice = store_->CreateUser("alice", false, Seconds(1));
    ASSERT_TRUE(store_->CreateUser("bob", false, Seconds(1)).ok());
    ASSERT_TRUE(store_->CreateProject("default", "", Seconds(1)).ok());
    alice_ = {alice->id, "alice", false, {"default"}};
    bob_ = {alice->id + 1, "bob", false, {"default"}};
    Restart();
  }
  void TearDown() override { controller_.reset(); }

  void Restart() {
    controller_.reset();
    ControllerConfig config;
    config.node_timeout = node_timeout_;
    config.node_give_up = std::max(node_give_up_, node_timeout_);  // never before the timeout
    config.policy_file = policy_file_;
    config.session_idle_timeout = session_idle_timeout_;
    config.session_idle_warning = Seconds(300);
    config.session_app_probe = session_app_probe_;
    config.loop_tick = loop_tick_;
    config.session_key = session_key_;
    config.max_pending_jobs = max_pending_jobs_;
    config.default_token_expiry = default_token_expiry_;
    config.resize_interval = resize_interval_;
    config.resize_cost = resize_cost_;
    config.victims = victims_;
    config.min_run_before_preemption = min_run_before_preemption_;
    config.profile = profile_options_;
    config.policy = placement_;
    auto c = Controller::Create(config, *store_, clock_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
  }

  // The job's view in its API form (protocol::ToJson), as clients read it.
  Result<json> JobJson(const Principal& who, JobId id) {
    auto view = controller_->JobView(who, id);
    if (!view.ok()) return view.status();
    return protocol::ToJson(*view);
  }
  void TeachRunTime(const json& spec);
  // Submissions of a JSON spec, read by the job spec's codec first, as the API does (a session's
  // gets "session" when it has none).
  Result<protocol::SubmitAnswer> SubmitJson(const Principal& who, const json& spec) {
    auto parsed = protocol::ParseJobSpec(spec);
    if (!parsed.ok()) return parsed.status();
    return controller_->Submit(who, std::move(parsed).value());
  }
  Result<protocol::SubmitAnswer> SubmitArrayJson(const Principal& who, const json& spec) {
    auto parsed = protocol::ParseJobSpec(spec);
    if (!parsed.ok()) return parsed.status();
    return controller_->SubmitArray(who, std::move(parsed).value());
  }
  Result<protocol::SubmitAnswer> SubmitSessionJson(const Principal& who, json spec) {
    if (!spec.contains("session")) spec["session"] = json::object();
    auto parsed = protocol::ParseJobSpec(spec);
    if (!parsed.ok()) return parsed.status();
    return controller_->SubmitSession(who, std::move(parsed).value());
  }
  // The session's view in its API form, as JobJson.
  Result<json> SessionJson(const Principal& who, JobId id) {
    auto view = controller_->SessionView(who, id);
    if (!view.ok()) return view.status();
    return protocol::ToJson(*view);
  }
  // Creates an environment from its spec's JSON, as the API does.
  Result<EnvironmentVersion> CreateEnv(const Principal& who, const json& spec) {
    auto parsed = protocol::ParseEnvironmentSpec(spec);
    if (!parsed.ok()) return parsed.status();
    return controller_->Environments().Create(who, *parsed);
  }
  // A project's sharing as the API takes it: decoded by its codec, then set.
  Result<protocol::ProjectSharing> SetSharing(const std::string& project, const json& sharing) {
    auto parsed = protocol::ParseProjectSharing(sharing);
    if (!parsed.ok()) return parsed.status();
    return controller_->SetProjectSharing(project, *parsed);
  }
  JobId Submit(const json& spec) {
    auto job = SubmitJson(alice_, spec);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    return job.ok() ? job->id : JobId(0);
  }
  // Node "a" (4 GPUs) running a job of all of them for at most 100 s, and `waiting` (4 GPUs)
  // queued behind it, each after a pass: `waiting` is expected to start at 1000 + 100.
  struct RunningAndWaiting {
    JobId running, waiting;
  };
  RunningAndWaiting RunOneAndQueueOne() {
    EXPECT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
    json first = Spec(4);
    first["time_limit_s"] = 100;
    const JobId running = Submit(first);
    controller_->Tick();
    const JobId waiting = Submit(Spec(4));
    controller_->Tick();
    return {running, waiting};
  }
  // The first port block this cluster hands out (its search start: RendezvousPorts).
  int FirstPort() { return RendezvousPorts::SearchStartFor(store_->ClusterId()); }
  std::string StateOf(JobId id) { return std::string(model::ToString(store_->GetJob(id)->state)); }
  // Sends `report` (its wire JSON, as an agent sends it) through the protocol's codec and
  // answers with the answer's wire JSON. A report without "seq" gets the node's next number (as
  // an agent numbers every report); `wait_ms` is the report's long poll. Thread-safe.
  Result<json> Heartbeat(const std::string& node, json report, int wait_ms) {
    {
      std::lock_guard lock(seq_mu_);
      int64_t& next = next_seq_[node];
      if (!report.is_object() || !report.contains("seq")) {
        if (report.is_object()) report["seq"] = ++next;
      } else if (report["seq"].is_number_integer()) {
        next = std::max(next, report["seq"].get<int64_t>());
      }
    }
    if (report.is_object()) report["wait_ms"] = wait_ms;
    auto parsed = protocol::ParseReport(report);
    if (!parsed.ok()) return parsed.status();
    // Authenticated as the agent route does (0: no registration, as for a lost node).
    std::string token;
    {
      std::lock_guard lock(seq_mu_);
      token = node_tokens_[node];
    }
    const uint64_t registration = controller_->AuthenticateNode(node, token).value_or(0);
    auto answer = controller_->Heartbeat(node, registration, *parsed);
    if (!answer.ok()) return answer.status();
    return protocol::ToJson(*answer);
  }
  json Beat(const std::string& node, const json& report) {
    auto answer = Heartbeat(node, report, 0);
    EXPECT_TRUE(answer.ok()) << answer.status().ToString();
    return answer.ok() ? *answer : json::object();
  }
  // Registers through the protocol's codec, as the agent route does.
  Result<protocol::RegisterAnswer> RegisterNode(const std::string& name, const std::string& node_id,
                                                const json& inventory) {
    auto request = protocol::ParseRegisterRequest({{"protocol_version", protocol::kProtocolVersion},
                                                   {"name", name},
                                                   {"node_id", node_id},
                                                   {"inventory", inventory}});
    if (!request.ok()) return request.status();
    auto answer = controller_->RegisterNode(*request);
    if (answer.ok()) {
      std::lock_guard lock(seq_mu_);
      node_tokens_[name] = answer->node_token;
    }
    return answer;
  }
  // Makes the store's writes to `table` fail (a trigger, from a second connection) or work.
  void BreakWrites(const std::string& table, bool broken) {
    auto conn = store::SqliteConnection::Open(test_store_.db_path());
    ASSERT_TRUE(conn.ok());
    const std::string trigger = "break_" + table;
    ASSERT_TRUE((*conn)
                    ->ExecuteScript(broken
                                        ? "CREATE TRIGGER " + trigger + " BEFORE UPDATE ON " +
                                              table + " BEGIN SELECT RAISE(ABORT, 'injected'); END"
                                        : "DROP TRIGGER " + trigger)
                    .ok());
  }

  // Writes the policy file with a modification time `age` seconds in the future (so that each
  // write is seen as a change however coarse the file system's clock).
  void WritePolicy(const std::string& text, int age) {
    policy_file_ = (test_store_.dir() / "policy.yaml").string();
    std::ofstream(policy_file_) << text;
    std::filesystem::last_write_time(
        policy_file_, std::filesystem::file_time_type::clock::now() + std::chrono::seconds(age));
  }

  TestStore test_store_{"controller"};  // outlives the controller (declared before it)
  std::string policy_file_;
  Seconds node_timeout_{30};
  Seconds node_give_up_{3600};
  std::string session_key_ = std::string(64, 'k');  // the server's (ControllerConfig)
  Seconds session_idle_timeout_{3600};
  SessionAppProbe* session_app_probe_ = nullptr;  // sessions' tests set one
  std::chrono::milliseconds loop_tick_{1000};
  int64_t max_pending_jobs_ = SubmitLimiter::kDefaultMaxPendingJobs;
  std::optional<Seconds> default_token_expiry_;
  Seconds resize_interval_{60};
  Seconds resize_cost_{60};
  sched::VictimOrder victims_ = sched::VictimOrder::kLeastLostWork;  // the server's default
  Seconds min_run_before_preemption_{0};
  WorkloadProfileOptions profile_options_;
  std::string placement_{sched::kDefaultPolicy};
  FakeClock clock_{Seconds(1000)};
  store::Store* store_ = nullptr;  // test_store_'s
  std::unique_ptr<Controller> controller_;
  Principal alice_, bob_;
  std::mutex seq_mu_;
  std::map<std::string, int64_t> next_seq_;         // guarded by seq_mu_
  std::map<std::string, std::string> node_tokens_;  // guarded by seq_mu_; from RegisterNode
};

// A heartbeat's "gpu_metrics" (agent/gpu_metrics.h): GPU `index` at `util` %, held by `tasks`.
json GpuMetrics(std::vector<std::tuple<int, int, std::vector<std::string>>> gpus) {
  json list = json::array();
  for (auto& [index, util, tasks] : gpus) {
    list.push_back({{"index", index},
                    {"utilization_percent", util},
                    {"tasks", tasks},
                    {"processes", json::array()}});
  }
  return {{"sampled_at_ms", 0}, {"gpus", list}};
}

std::string TaskKeyOf(const json& launch) {
  return std::to_string(launch["allocation_id"].get<int64_t>()) + "-" +
         std::to_string(launch["generation"].get<int64_t>());
}

TEST_F(ControllerTest, GpuMetricsNameTheJobsHoldingEachGpuOnTheReportingNodeOnly) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  const json launch = answer["run"][0];
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const std::string node = "a", other = "b";
  const int gpu = launch["gpus"][0];
  json report = Report({TaskReport(launch, "running")});
  report["gpu_metrics"] = GpuMetrics({{gpu, 4, {TaskKeyOf(launch)}}, {7 - gpu, 0, {}}});
  Beat(node, report);
  // Another node naming the same task speaks for nothing it runs.
  json foreign = Report();
  foreign["gpu_metrics"] = GpuMetrics({{0, 3, {TaskKeyOf(launch)}}});
  Beat(other, foreign);

  std::map<std::pair<std::string, int>, GpuStatus> by_gpu;
  for (const GpuStatus& g : controller_->Gpus().Gpus()) by_gpu[{g.node, g.index}] = g;
  ASSERT_TRUE(by_gpu.count({node, gpu}));
  const GpuStatus& held = by_gpu[{node, gpu}];
  ASSERT_EQ(held.holders.size(), 1u);
  EXPECT_EQ(held.holders[0].job, id);
  EXPECT_EQ(held.holders[0].user, "alice");
  EXPECT_EQ(held.holders[0].project, "default");
  EXPECT_EQ(held.uuid, "GPU-" + std::to_string(gpu));
  EXPECT_EQ(held.latest.utilization_percent, 4);
  EXPECT_EQ(held.latest.at_ms, 1000 * 1000);
  EXPECT_TRUE((by_gpu[{node, 7 - gpu}].holders.empty()));
  EXPECT_TRUE((by_gpu[{other, 0}].holders.empty()));

  // Malformed metrics are dropped and counted; the heartbeat's task reports still count.
  json bad = Report({TaskReport(launch, "exited", 0)});
  bad["gpu_metrics"] = {{"gpus", {{{"index", 0}, {"utilization_percent", 900}}}}};
  ASSERT_TRUE(Heartbeat(node, bad, 0).ok());
  EXPECT_EQ(StateOf(id), "succeeded");
  EXPECT_EQ(controller_->RejectedGpuReports(), 1);
  for (const protocol::NodeView& row : controller_->Nodes(alice_)) {
    if (row.name == node) {
      EXPECT_THAT(row.gpu_metrics_error,
                  HasSubstr("gpu_metrics: field 'gpus[0].utilization_percent': must be in 0..100"));
    } else {
      EXPECT_EQ(row.gpu_metrics_error, "");
    }
  }
}

TEST_F(ControllerTest, AJobWhoseGpusIdleGetsAnEventAndAnotherWhenBusyAgain) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(2));
  controller_->Tick();
  const json launch = Beat("a", Report())["run"][0];
  const std::vector<std::string> tasks = {TaskKeyOf(launch)};
  auto beat = [&](int util) {
    json report = Report({TaskReport(launch, "running")});
    report["gpu_metrics"] =
        GpuMetrics({{launch["gpus"][0], util, tasks}, {launch["gpus"][1], util, tasks}});
    Beat("a", report);
  };
  auto events = [&] {
    std::vector<std::string> out;
    auto stored = store_->JobEvents(id);
    for (const auto& e : *stored) out.push_back(e.reason);
    return out;
  };
  beat(3);
  // The default: flagged after 30 minutes under 10 %.
  clock_.Advance(Seconds(1799));
  beat(3);
  controller_->Tick();
  EXPECT_EQ(events().back(), "all tasks running");
  clock_.Advance(Seconds(1));
  beat(3);
  controller_->Tick();
  EXPECT_EQ(events().back(), "GPUs idle: under 10 % for 1800 s");
  controller_->Tick();  // said once
  const std::vector<std::string> said = events();
  EXPECT_EQ(std::count(said.begin(), said.end(), "GPUs idle: under 10 % for 1800 s"), 1);
  // After a restart the server has no readings: it neither says "busy again" nor, once the
  // GPUs have idled another 30 minutes, "idle" a second time.
  Restart();
  beat(3);
  controller_->Tick();
  clock_.Advance(Seconds(1800));
  beat(3);
  controller_->Tick();
  EXPECT_EQ(events().back(), "GPUs idle: under 10 % for 1800 s");
  const std::vector<std::string> after_restart = events();
  EXPECT_EQ(
      std::count(after_restart.begin(), after_restart.end(), "GPUs idle: under 10 % for 1800 s"),
      1);
  beat(60);
  controller_->Tick();
  EXPECT_EQ(events().back(), "GPUs busy again");
  // Flagged again, a reading without utilisation (the probe could not tell) is no news, nor
  // are readings that stop (the node still beats, without GPU metrics): no "busy again".
  beat(3);
  clock_.Advance(Seconds(1800));
  beat(3);
  controller_->Tick();
  EXPECT_EQ(events().back(), "GPUs idle: under 10 % for 1800 s");
  json unknown = Report({TaskReport(launch, "running")});
  unknown["gpu_metrics"] =
      GpuMetrics({{launch["gpus"][0], 0, tasks}, {launch["gpus"][1], 0, tasks}});
  for (json& g : unknown["gpu_metrics"]["gpus"]) g.erase("utilization_percent");
  Beat("a", unknown);
  controller_->Tick();
  for (int i = 0; i < 61; ++i) {
    clock_.Advance(Seconds(30));
    Beat("a", Report({TaskReport(launch, "running")}));
    controller_->Tick();
  }
  const std::vector<std::string> stale = events();
  EXPECT_EQ(stale.back(), "GPUs idle: under 10 % for 1800 s");
  EXPECT_EQ(std::count(stale.begin(), stale.end(), "GPUs busy again"), 1);
}

TEST_F(ControllerTest, EachRunOfARequeuedJobIsToldOfItsIdleGpus) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1, 1, /*max_restarts=*/2));
  auto idle_events = [&] {
    auto stored = store_->JobEvents(id);
    return std::count_if(stored->begin(), stored->end(), [](const store::JobEvent& e) {
      return e.reason.rfind(kGpusIdleEvent, 0) == 0;
    });
  };
  // Starts the job's next run, its task running.
  auto start_run = [&] {
    controller_->Tick();
    const json launch = Beat("a", Report())["run"][0];
    Beat("a", Report({TaskReport(launch, "running")}));
    EXPECT_EQ(StateOf(id), "running");
    return launch;
  };
  // The run's GPU at `util` %.
  auto sample = [&](const json& launch, int util) {
    json report = Report({TaskReport(launch, "running")});
    report["gpu_metrics"] = GpuMetrics({{launch["gpus"][0], util, {TaskKeyOf(launch)}}});
    Beat("a", report);
  };
  // The run idles 30 minutes, then fails (its GPU is free again): the job is requeued.
  auto idle_then_fail = [&](const json& launch) {
    sample(launch, 3);
    clock_.Advance(Seconds(1800));
    sample(launch, 3);
    controller_->Tick();
    json report = Report({TaskReport(launch, "exited", 1)});
    report["gpu_metrics"] = GpuMetrics({{launch["gpus"][0], 0, {}}});
    Beat("a", report);
    EXPECT_EQ(StateOf(id), "pending");
  };
  idle_then_fail(start_run());
  EXPECT_EQ(idle_events(), 1);
  idle_then_fail(start_run());
  EXPECT_EQ(idle_events(), 2);
  // After a server restart, the earlier runs' events say nothing about this run.
  const json third = start_run();
  Restart();
  sample(third, 3);
  clock_.Advance(Seconds(1800));
  sample(third, 3);
  controller_->Tick();
  EXPECT_EQ(idle_events(), 3);
}

TEST_F(ControllerTest, TheSummaryIsRecordedOnceAMinuteForTheOverview) {
  node_timeout_ = Seconds(int64_t{1} << 30);  // the clock jumps; the node stays
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  controller_->Tick();  // t = 1000: recorded
  Submit(Spec(2));
  clock_.Advance(Seconds(30));
  controller_->Tick();  // t = 1030: not yet a minute
  clock_.Advance(Seconds(30));
  controller_->Tick();  // t = 1060
  const auto all = controller_->SummaryHistory(Seconds(0));
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].time, Seconds(1000));
  EXPECT_EQ(all[0].allocated, MilliGpu(0));
  EXPECT_EQ(all[1].time, Seconds(1060));
  EXPECT_EQ(all[1].allocated, MilliGpu(2000));
  EXPECT_EQ(all[1].gpus, 8);
  EXPECT_EQ(controller_->SummaryHistory(Seconds(1001)).size(), 1u);
}

TEST_F(ControllerTest, ALostNodesGpusAreForgotten) {
  node_timeout_ = Seconds(30);
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(2)).ok());
  json report = Report();
  report["gpu_metrics"] = GpuMetrics({{0, 0, {}}, {1, 0, {}}});
  Beat("a", report);
  EXPECT_EQ(controller_->Gpus().Gpus().size(), 2u);
  clock_.Advance(Seconds(31));
  controller_->Tick();
  EXPECT_TRUE(controller_->Gpus().Gpus().empty());
}

TEST_F(ControllerTest, LaunchLostInTransitIsSentAgain) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(2));
  controller_->Tick();
  json first = Beat("a", Report());
  ASSERT_EQ(first["run"].size(), 1u);
  // The agent never got that answer: its next report lists nothing. The launch goes out again.
  json again = Beat("a", Report());
  ASSERT_EQ(again["run"].size(), 1u);
  EXPECT_EQ(again["run"][0]["allocation_id"], first["run"][0]["allocation_id"]);
  Beat("a", Report({TaskReport(again["run"][0], "running")}));
  EXPECT_EQ(StateOf(id), "running");
  // Once it runs it is not launched again.
  EXPECT_TRUE(Beat("a", Report({TaskReport(again["run"][0], "running")}))["run"].empty());
}

// A report as the agents number them: `seq`, partial or whole, with the launches it accepted.
json Numbered(json report, int64_t seq, bool partial = false, std::vector<json> starting = {}) {
  report["seq"] = seq;
  if (partial) report["partial"] = true;
  report["starting"] = json::array();
  for (const json& launch : starting) {
    report["starting"].push_back(
        {{"allocation_id", launch["allocation_id"]}, {"generation", launch["generation"]}});
  }
  return report;
}

TEST_F(ControllerTest, AReportOlderThanOneTakenCannotMarkAJustStartedTaskLost) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Numbered(Report(), 1))["run"][0];
  // The heartbeat thread's next report (2) was made before the task started; the push thread's
  // (3) after, and it arrives first.
  json pushed = Beat("a", Numbered(Report({TaskReport(launch, "running")}), 3, true));
  EXPECT_FALSE(pushed.contains("stale_report"));
  EXPECT_EQ(StateOf(id), "running");
  json late = Beat("a", Numbered(Report(), 2));
  EXPECT_TRUE(late.value("stale_report", false));
  EXPECT_EQ(StateOf(id), "running");  // not lost
  // A newer whole report that leaves the task out does lose it.
  Beat("a", Numbered(Report(), 4));
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["state"], "failed");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("was lost"));
}

TEST_F(ControllerTest, ARegistrationStartsTheNumberingAgain) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Numbered(Report(), 50))["run"][0];
  // The agent restarted (tasks survive it) and registers again: its reports count from 1.
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  EXPECT_FALSE(
      Beat("a", Numbered(Report({TaskReport(launch, "running")}), 1)).contains("stale_report"));
  EXPECT_EQ(StateOf(id), "running");
}

TEST_F(ControllerTest, AcceptedLaunchesAreNeitherSentAgainNorLost) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Numbered(Report(), 1))["run"][0];
  // The agent is still starting it: not sent again (a long poll would return at once), and
  // not taken for a launch that never arrived.
  json answer = Beat("a", Numbered(Report(), 2, false, {launch}));
  EXPECT_TRUE(answer["run"].empty());
  EXPECT_EQ(StateOf(id), "starting");
  // Cancelled while starting: the agent gets the kill (and drops the queued launch).
  ASSERT_TRUE(controller_->Cancel(alice_, id).ok());
  answer = Beat("a", Numbered(Report(), 3, false, {launch}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(StateOf(id), "starting");
  Beat("a", Numbered(Report(), 4));  // dropped before it started
  EXPECT_EQ(StateOf(id), "cancelled");
}

TEST_F(ControllerTest, APartialReportChangesOnlyTheTasksItLists) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId first = Submit(Spec(1));
  const JobId second = Submit(Spec(1));
  controller_->Tick();
  json run = Beat("a", Numbered(Report(), 1))["run"];
  ASSERT_EQ(run.size(), 2u);
  Beat("a", Numbered(Report({TaskReport(run[0], "running"), TaskReport(run[1], "running")}), 2));
  ASSERT_EQ(StateOf(first), "running");
  Beat("a", Numbered(Report({TaskReport(run[0], "exited", 0)}), 3, true));
  EXPECT_EQ(StateOf(first), "succeeded");
  EXPECT_EQ(StateOf(second), "running");  // left out of a partial report: not lost
}

TEST_F(ControllerTest, AnEndSchedulesTheNextJobAndWakesTheNodesWaitingHeartbeat) {
  loop_tick_ = std::chrono::hours(1);  // so that only the end can start the next job
  Restart();
  controller_->Start();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(1)).ok());
  const JobId first = Submit(Spec(1));
  json launch;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (launch.is_null() && std::chrono::steady_clock::now() < deadline) {
    json run = Beat("a", Numbered(Report(), 1))["run"];  // submissions wake the loop
    if (!run.empty()) launch = run[0];
  }
  ASSERT_FALSE(launch.is_null());
  const JobId second = Submit(Spec(1));  // waits for the only GPU
  // The heartbeat thread's long poll waits at the server...
  auto waiting = std::async(std::launch::async, [&] {
    return Heartbeat("a", Numbered(Report({TaskReport(launch, "running")}), 2), 20000);
  });
  while (controller_->WaitingHeartbeats() < 1 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(controller_->WaitingHeartbeats(), 1);
  // ... when the push thread reports the end: the next job's launch goes out on that long poll.
  Beat("a", Numbered(Report({TaskReport(launch, "exited", 0)}), 3, true));
  EXPECT_EQ(StateOf(first), "succeeded");
  auto answer = waiting.get();
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  ASSERT_EQ((*answer)["run"].size(), 1u);
  EXPECT_EQ((*answer)["run"][0]["job_id"], second.value());
  controller_->Stop();
}

TEST_F(ControllerTest, CancelBeforeAnyLaunchFreesTheGpusAtOnce) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId first = Submit(Spec(8));
  controller_->Tick();
  EXPECT_EQ(StateOf(first), "starting");
  ASSERT_TRUE(controller_->Cancel(alice_, first).ok());
  EXPECT_EQ(StateOf(first), "cancelled");  // no agent heard of it: nothing to wait for
  const JobId second = Submit(Spec(8));
  controller_->Tick();
  EXPECT_EQ(StateOf(second), "starting");
}

TEST_F(ControllerTest, CancelAfterLaunchHoldsTheGpusUntilTheAgentReports) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId first = Submit(Spec(8));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  ASSERT_TRUE(controller_->Cancel(alice_, first).ok());
  const JobId second = Submit(Spec(8));
  controller_->Tick();
  // The launch went out and may be running: its GPUs are not given to anyone else yet.
  EXPECT_EQ(StateOf(first), "starting");
  EXPECT_EQ(StateOf(second), "pending");
  // The agent started it before hearing of the cancel: it gets a kill.
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(answer["kill"][0]["allocation_id"], launch["allocation_id"]);
  Beat("a", Report({TaskReport(launch, "killed", 143)}));
  EXPECT_EQ(StateOf(first), "cancelled");
  controller_->Tick();
  EXPECT_EQ(StateOf(second), "starting");
}

TEST_F(ControllerTest, CancelledLaunchTheAgentNeverGotEndsWithItsNextReport) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(8));
  controller_->Tick();
  ASSERT_EQ(Beat("a", Report())["run"].size(), 1u);
  ASSERT_TRUE(controller_->Cancel(alice_, id).ok());
  EXPECT_EQ(StateOf(id), "starting");
  // The answer was lost: the agent's next report does not list the task. It never ran.
  Beat("a", Report());
  EXPECT_EQ(StateOf(id), "cancelled");
}

// The write group (controller_writes.cc): cancels from many threads are decided under the lock
// and committed together without it; each answer comes once its cancel is durable.
TEST_F(ControllerTest, ConcurrentCancelsAreCommittedTogetherAndEachOnce) {
  std::vector<JobId> ids;
  for (int i = 0; i < 400; ++i) ids.push_back(Submit(Spec(1, 1)));
  const int64_t commits_before = controller_->StoreCommits();
  std::vector<std::thread> threads;
  std::atomic<int> failed{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (size_t i = t; i < ids.size(); i += 8) {
        if (!controller_->Cancel(alice_, ids[i]).ok()) ++failed;
      }
    });
  }
  for (auto& t : threads) t.join();
  const int64_t commits = controller_->StoreCommits() - commits_before;
  EXPECT_EQ(failed.load(), 0);
  for (JobId id : ids) EXPECT_EQ(StateOf(id), "cancelled") << id.value();
  // At most one commit each; how many share one depends on the disk (said, not checked).
  EXPECT_LE(commits, static_cast<int64_t>(ids.size()));
  std::cout << "400 cancels from 8 threads in " << commits << " commits\n";
  // Cancelled once: a second cancel says it already ended.
  EXPECT_EQ(controller_->Cancel(alice_, ids[0]).code(), StatusCode::kFailedPrecondition);
}

// The order rule (controller_writes.cc): while the cancel of a job whose launch has not gone out
// is decided but not yet durable, its node hears of no launch of it (the cancel will end its
// tasks and free their GPUs); once the cancel is applied the job is cancelled and its GPUs free.
TEST_F(ControllerTest, APendingCancelHoldsBackTheJobsLaunch) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(8));
  controller_->Tick();
  ASSERT_EQ(StateOf(id), "starting");
  // Another connection holds the database's write lock: the cancel's commit waits for it.
  auto blocker = store::SqliteConnection::Open(test_store_.db_path());
  ASSERT_TRUE(blocker.ok());
  ASSERT_TRUE((*blocker)->Begin().ok());
  std::thread cancel([&] { EXPECT_TRUE(controller_->Cancel(alice_, id).ok()); });
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  while (controller_->PendingWrites() == 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::yield();
  }
  ASSERT_EQ(controller_->PendingWrites(), 1);
  // A push (partial report) meets no pending write: answered now, without the job's launch.
  json push = Report();
  push["partial"] = true;
  const json answer = Beat("a", push);
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  ASSERT_TRUE((*blocker)->Rollback().ok());
  cancel.join();
  EXPECT_EQ(StateOf(id), "cancelled");
  EXPECT_TRUE(Beat("a", Report())["run"].empty());
  const JobId next = Submit(Spec(8));
  controller_->Tick();
  EXPECT_EQ(StateOf(next), "starting");
}

// Reports of several nodes and cancels of their jobs, all at once: every job ends exactly once,
// with the state the first durable change gave it, and nothing is left half applied (the GPUs of
// every ended job are free again).
TEST_F(ControllerTest, ConcurrentReportsAndCancelsSettleEveryJobOnce) {
  const std::vector<std::string> nodes = {"a", "b", "c", "d"};
  for (const std::string& n : nodes) {
    ASSERT_TRUE(RegisterNode(n, "node-" + n + "-0123456789abcdef", Inventory(8)).ok());
  }
  std::vector<JobId> ids;
  for (int i = 0; i < 32; ++i) ids.push_back(Submit(Spec(1)));
  controller_->Tick();
  std::map<std::string, std::vector<json>> launches;
  size_t launched = 0;
  for (const std::string& n : nodes) {
    const json answer = Beat(n, Report());
    for (const json& l : answer["run"]) launches[n].push_back(l);
    launched += launches[n].size();
  }
  ASSERT_EQ(launched, ids.size());
  std::vector<std::thread> threads;
  for (const std::string& n : nodes) {
    threads.emplace_back([&, n] {
      std::vector<json> running, exited;
      for (const json& l : launches[n]) {
        running.push_back(TaskReport(l, "running"));
        exited.push_back(TaskReport(l, "exited", 0));
      }
      EXPECT_TRUE(Heartbeat(n, Report(running), 0).ok());
      EXPECT_TRUE(Heartbeat(n, Report(exited), 0).ok());
    });
  }
  threads.emplace_back([&] {
    for (size_t i = 0; i < ids.size(); i += 2) (void)controller_->Cancel(alice_, ids[i]);
  });
  for (auto& t : threads) t.join();
  for (const std::string& n : nodes) Beat(n, Report());  // kills answered, if any are left
  for (JobId id : ids) {
    const std::string state = StateOf(id);
    EXPECT_TRUE(state == "succeeded" || state == "cancelled") << id.value() << " " << state;
  }
  // Every GPU is free again: four jobs of 8 GPUs start.
  std::vector<JobId> whole;
  for (size_t n = 0; n < nodes.size(); ++n) whole.push_back(Submit(Spec(8)));
  controller_->Tick();
  for (JobId id : whole) EXPECT_EQ(StateOf(id), "starting") << id.value();
}

TEST_F(ControllerTest, OnlyTheOwnerOrAnAdminMayCancel) {
  const JobId id = Submit(Spec(1));
  Status s = controller_->Cancel(bob_, id);
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(), HasSubstr("owner"));
  Principal admin{99, "root", true, {}};
  EXPECT_TRUE(controller_->Cancel(admin, id).ok());
  EXPECT_EQ(StateOf(id), "cancelled");
}

TEST_F(ControllerTest, GangFailsEvenWhenAPartNeverLaunched) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const JobId id = Submit(Spec(8, 2));
  controller_->Tick();
  ASSERT_EQ(StateOf(id), "starting");
  json launch = Beat("a", Report())["run"][0];
  // Node b has not heartbeated since; task 0 fails on node a.
  Beat("a", Report({TaskReport(launch, "exited", 3)}));
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["state"], "failed");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("exited with code 3"));
  // Node b is never told to start its part.
  EXPECT_TRUE(Beat("b", Report())["run"].empty());
}

TEST_F(ControllerTest, RunningTaskMissingFromAReportIsLostAndRequeued) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1, 1, /*max_restarts=*/1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(StateOf(id), "running");
  Beat("a", Report());  // the agent no longer knows the task
  auto view = JobJson(alice_, id);
  EXPECT_EQ((*view)["state"], "pending");
  EXPECT_EQ((*view)["restarts"], 1);
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("was lost"));
}

TEST_F(ControllerTest, StoreFailureFailsTheHeartbeatAndTheReportIsTakenWhenResent) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  BreakWrites("tasks", true);
  auto failed = Heartbeat("a", Report({TaskReport(launch, "exited", 0)}), 0);
  EXPECT_FALSE(failed.ok());  // not acknowledged: the agent keeps its report
  BreakWrites("tasks", false);
  EXPECT_EQ(StateOf(id), "running");
  Beat("a", Report({TaskReport(launch, "exited", 0)}));
  EXPECT_EQ(StateOf(id), "succeeded");
}

TEST_F(ControllerTest, ALiveNodeNameCannotBeTakenWithAnotherNodeId) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto taken = RegisterNode("a", kNodeB, Inventory(8));
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  // The same node id again (an agent restart) gets a new token; the old one stops working.
  auto first = RegisterNode("a", kNodeA, Inventory(8));
  auto second = RegisterNode("a", kNodeA, Inventory(8));
  ASSERT_TRUE(first.ok() && second.ok());
  EXPECT_FALSE(controller_->AuthenticateNode("a", first->node_token).has_value());
  EXPECT_TRUE(controller_->AuthenticateNode("a", second->node_token).has_value());
  // Remembered across a server restart.
  Restart();
  EXPECT_EQ(RegisterNode("a", kNodeB, Inventory(8)).status().code(), StatusCode::kAlreadyExists);
  // Unreachable, the node is not lost yet: its tasks may be running.
  clock_.Advance(Seconds(31));
  controller_->Tick();
  EXPECT_EQ(RegisterNode("a", kNodeB, Inventory(8)).status().code(), StatusCode::kAlreadyExists);
  // Once the node is lost (the give-up time), another agent may take the name.
  clock_.Advance(Seconds(3600));
  controller_->Tick();
  EXPECT_TRUE(RegisterNode("a", kNodeB, Inventory(8)).ok());
  EXPECT_EQ(RegisterNode("a", "short", Inventory(8)).status().code(), StatusCode::kInvalidArgument);
}

// A job's name is checked when it is submitted (protocol/names.h), never when it is read back: a
// job whose stored name breaks the rule (made before the rule, or by a rule made stricter) and
// its user's and project's names recover with the server and show as they are.
TEST_F(ControllerTest, NamesStoredBeforeTheRulesRecoverAndShow) {
  const std::string old_user = "Old User\t", old_project = "../x\x01y", old_name = "-old\tjob";
  auto user = store_->CreateUser(old_user, false, Seconds(1));
  ASSERT_TRUE(user.ok()) << user.status().ToString();
  ASSERT_TRUE(store_->CreateProject(old_project, "", Seconds(1)).ok());
  const Principal old{user->id, old_user, false, {"default", old_project}};
  auto spec = protocol::ParseJobSpec(Spec(1));
  ASSERT_TRUE(spec.ok()) << spec.status().ToString();
  spec->name = old_name;  // as an older server took it
  spec->project = old_project;
  auto submitted = controller_->Submit(old, *spec);
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  Restart();
  auto view = JobJson(old, submitted->id);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ((*view)["name"], old_name);
  EXPECT_EQ((*view)["user"], old_user);
  EXPECT_EQ((*view)["project"], old_project);
  EXPECT_EQ((*view)["state"], "pending");
  // A new job may not take such a name.
  json renamed = Spec(1);
  renamed["name"] = old_name;
  EXPECT_THAT(SubmitJson(old, renamed).status().message(), HasSubstr("field 'name': a job name"));
}

TEST_F(ControllerTest, RegistrationTellsTheStoresClusterIdAndRefusesUnsafeNames) {
  auto registered = RegisterNode("a", kNodeA, Inventory(8));
  ASSERT_TRUE(registered.ok()) << registered.status().ToString();
  EXPECT_EQ(registered->cluster_id, store_->ClusterId());
  EXPECT_TRUE(model::ValidateClusterId(registered->cluster_id).ok());
  // The same after a restart: the id is the store's, not the process's.
  Restart();
  EXPECT_EQ(RegisterNode("a", kNodeA, Inventory(8))->cluster_id, registered->cluster_id);
  // Agents use the name as a path component on their host.
  for (const char* name : {"../x", "a/b", "..", ".hidden", ""}) {
    auto refused = RegisterNode(name, kNodeB, Inventory(8));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(refused.status().message(), HasSubstr("field 'name'")) << name;
  }
}

TEST_F(ControllerTest, ANodeBackWithOtherCpuAndMemoryKeepsItsJobsWhileTheyFit) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json spec = Spec(8, 1, /*max_restarts=*/1);
  spec["resources"]["cpu_milli"] = 16000;
  const JobId id = Submit(spec);
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  // The agent comes back (an upgrade, another --cpus) offering more CPU and less memory.
  json more = Inventory(8);
  more["cpu_milli"] = 128000;
  more["memory_mib"] = 256 * 1024;
  ASSERT_TRUE(RegisterNode("a", kNodeA, more).ok());
  EXPECT_EQ((*JobJson(alice_, id))["state"], "running");
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  EXPECT_TRUE(answer["kill"].empty()) << answer.dump();
  // Back with less CPU than its task holds: the node is replaced, as for any other change.
  json less = Inventory(8);
  less["cpu_milli"] = 8000;
  ASSERT_TRUE(RegisterNode("a", kNodeA, less).ok());
  auto view = JobJson(alice_, id);
  EXPECT_EQ((*view)["state"], "pending");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("another inventory"));
}

TEST_F(ControllerTest, ChangedInventoryReplacesTheNodeAndRequeuesItsJobs) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(8, 1, /*max_restarts=*/1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  // The agent comes back with one GPU fewer.
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(7)).ok());
  auto view = JobJson(alice_, id);
  EXPECT_EQ((*view)["state"], "pending");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("another inventory"));
  auto nodes = controller_->Nodes(alice_);
  ASSERT_EQ(nodes.size(), 1u);
  EXPECT_EQ(nodes[0].gpus, 7);
  EXPECT_EQ(nodes[0].state, model::NodeState::kReady);
  // The old run is stale on the node and gets a kill.
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
}

TEST_F(ControllerTest, SilentNodeIsLostAndItsJobRequeued) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const JobId id = Submit(Spec(8, 1, /*max_restarts=*/1));
  controller_->Tick();
  const std::string node = store_->TasksOfJob(id)->at(0).node;
  const std::string other = node == "a" ? "b" : "a";
  json launch = Beat(node, Report())["run"][0];
  Beat(node, Report({TaskReport(launch, "running")}));
  clock_.Advance(Seconds(20));
  Beat(other, Report());
  clock_.Advance(Seconds(20));
  Beat(other, Report());
  // `node` silent for 40 s > 30 s: unreachable, its requeue-able job fenced, requeued and
  // placed on `other`.
  controller_->Tick();
  EXPECT_EQ(StateOf(id), "starting");
  EXPECT_EQ(store_->GetJob(id)->restarts, 1);
  EXPECT_EQ(Beat(other, Report())["run"].size(), 1u);
  // Heard again (not lost), its old run is stale there: killed.
  EXPECT_EQ(Beat(node, Report({TaskReport(launch, "running")}))["kill"].size(), 1u);
}

TEST_F(ControllerTest, WaitingHeartbeatsAreCapped) {
  const int n = Controller::kMaxWaitingHeartbeats;
  for (int i = 0; i <= n; ++i) {
    ASSERT_TRUE(RegisterNode("n" + std::to_string(i), "id-0123456789abcdef-" + std::to_string(i),
                             Inventory(1))
                    .ok());
  }
  std::vector<std::future<Result<json>>> waiting;
  for (int i = 0; i < n; ++i) {
    waiting.push_back(std::async(std::launch::async, [this, i] {
      return Heartbeat("n" + std::to_string(i), Report(), 20000);
    }));
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (controller_->WaitingHeartbeats() < n && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  ASSERT_EQ(controller_->WaitingHeartbeats(), n);
  // The (n+1)th answers at once, telling the agent to pause.
  auto answer = Heartbeat("n" + std::to_string(n), Report(), 20000);
  ASSERT_TRUE(answer.ok());
  EXPECT_EQ(answer->value("retry_after_ms", 0), 20000);
  controller_->Stop();  // wakes the waiting ones
  for (auto& w : waiting) EXPECT_TRUE(w.get().ok());
}

TEST_F(ControllerTest, FailedJobCommitIsRetriedOnTheNextTick) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  BreakWrites("jobs", true);
  Beat("a", Report({TaskReport(launch, "exited", 0)}));  // the task's end is committed
  BreakWrites("jobs", false);
  EXPECT_EQ(StateOf(id), "running");  // the job's end was not
  controller_->Tick();
  EXPECT_EQ(StateOf(id), "succeeded");
}

TEST_F(ControllerTest, AHeartbeatCommitsOnceHoweverManyTasksAndJobsItSettles) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId gang = Submit(Spec(1, 4));  // four tasks on node a
  const JobId single = Submit(Spec(1));
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 5u);
  std::vector<json> running, ended;
  for (const json& launch : run) {
    running.push_back(TaskReport(launch, "running"));
    ended.push_back(TaskReport(launch, "exited", 0));
  }
  // Five tasks start and two jobs start running: one commit (before: one per task and job).
  int64_t before = store_->Commits();
  Beat("a", Report(running));
  EXPECT_EQ(store_->Commits(), before + 1);
  EXPECT_EQ(StateOf(gang), "running");
  EXPECT_EQ(StateOf(single), "running");
  // Five tasks end and both jobs succeed: one commit.
  before = store_->Commits();
  Beat("a", Report(ended));
  EXPECT_EQ(store_->Commits(), before + 1);
  EXPECT_EQ(StateOf(gang), "succeeded");
  EXPECT_EQ(StateOf(single), "succeeded");
  // Nothing changes: no commit.
  before = store_->Commits();
  Beat("a", Report());
  EXPECT_EQ(store_->Commits(), before);
}

TEST_F(ControllerTest, ASchedulingPassCommitsItsStartsOnce) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId gang = Submit(Spec(1, 4));
  const JobId first = Submit(Spec(1));
  const JobId second = Submit(Spec(2));
  const int64_t before = store_->Commits();
  controller_->Tick();
  // Three starts (six tasks) in one transaction (before: one per job).
  EXPECT_EQ(store_->Commits(), before + 1);
  for (JobId id : {gang, first, second}) EXPECT_EQ(StateOf(id), "starting");
  EXPECT_EQ(Beat("a", Report())["run"].size(), 6u);
}

TEST_F(ControllerTest, OneHeartbeatCommitHoldsTasksItLeftOutToo) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId ends = Submit(Spec(1));
  const JobId vanishes = Submit(Spec(1));
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 2u);
  Beat("a", Report({TaskReport(run[0], "running"), TaskReport(run[1], "running")}));
  ASSERT_EQ(StateOf(ends), "running");
  ASSERT_EQ(StateOf(vanishes), "running");
  // One task ends; the other is left out of a whole report, so it is lost (and its job, with no
  // restarts left, fails): both settled in one commit.
  const json& ended = run[0]["job_id"] == ends.value() ? run[0] : run[1];
  const int64_t before = store_->Commits();
  Beat("a", Report({TaskReport(ended, "exited", 0)}));
  EXPECT_EQ(store_->Commits(), before + 1);
  EXPECT_EQ(StateOf(ends), "succeeded");
  EXPECT_EQ(StateOf(vanishes), "failed");
}

TEST_F(ControllerTest, OneJobsRefusedTransitionHoldsBackNoOther) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId refused = Submit(Spec(1));
  const JobId other = Submit(Spec(1));
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 2u);
  Beat("a", Report({TaskReport(run[0], "running"), TaskReport(run[1], "running")}));
  // The store no longer agrees with memory about one job (its compare-and-set will fail).
  {
    auto conn = store::SqliteConnection::Open(test_store_.db_path());
    ASSERT_TRUE(conn.ok());
    ASSERT_TRUE(
        (*conn)->Execute("UPDATE jobs SET state = 'pending' WHERE id = ?", {refused.value()}).ok());
  }
  EXPECT_TRUE(
      Heartbeat("a", Report({TaskReport(run[0], "exited", 0), TaskReport(run[1], "exited", 0)}), 0)
          .ok());
  EXPECT_EQ(StateOf(other), "succeeded");  // written and applied
  EXPECT_EQ(StateOf(refused), "pending");  // its transition refused...
  auto tasks = store_->TasksOfJob(refused);
  ASSERT_TRUE(tasks.ok() && tasks->size() == 1u);
  EXPECT_EQ((*tasks)[0].state, model::TaskState::kExited);  // ...but what its agent said is kept
}

TEST_F(ControllerTest, AWaitingHeartbeatOfAReplacedRegistrationIsRefused) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto waiting = std::async(std::launch::async, [&] { return Heartbeat("a", Report(), 20000); });
  for (int i = 0; i < 10000 && controller_->WaitingHeartbeats() == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ASSERT_EQ(controller_->WaitingHeartbeats(), 1);
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());  // the agent restarted
  EXPECT_EQ(waiting.get().status().code(), StatusCode::kNotFound);
  EXPECT_EQ(controller_->WaitingHeartbeats(), 0);
}

TEST_F(ControllerTest, AnAllocationListedTwiceIsDecidedAgainstItsFirstEntry) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  // Ended, then (a confused agent) running again: the end stands, and the second entry is
  // answered as a stale report of an ended task (a kill), as two reports in a row would be.
  json answer = Beat("a", Report({TaskReport(launch, "exited", 0), TaskReport(launch, "running")}));
  EXPECT_EQ(StateOf(id), "succeeded");
  EXPECT_EQ(answer["kill"].size(), 1u) << answer.dump();
}

TEST_F(ControllerTest, AReportAuthenticatedBeforeTheNodeRegisteredAgainIsRefused) {
  auto first = RegisterNode("a", kNodeA, Inventory(8));
  ASSERT_TRUE(first.ok());
  const std::optional<uint64_t> old = controller_->AuthenticateNode("a", first->node_token);
  ASSERT_TRUE(old.has_value());
  // The same agent registers again (a restart) between an old request's authentication and
  // its report: the report speaks for a registration that is gone.
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json body = Report();
  body["seq"] = 1;
  auto report = protocol::ParseReport(body);
  ASSERT_TRUE(report.ok()) << report.status().ToString();
  EXPECT_EQ(controller_->Heartbeat("a", *old, *report).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(Heartbeat("a", Report(), 0).ok());  // the new registration's own
}

TEST_F(ControllerTest, AfterARestartAssignedTasksCountAsLaunched) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId first = Submit(Spec(8));
  controller_->Tick();
  ASSERT_EQ(Beat("a", Report())["run"].size(), 1u);  // the launch went out, then a crash
  Restart();
  ASSERT_TRUE(controller_->Cancel(alice_, first).ok());
  const JobId second = Submit(Spec(8));
  controller_->Tick();
  // The old server may have launched it: its GPUs wait for the agent's word.
  EXPECT_EQ(StateOf(first), "starting");
  EXPECT_EQ(StateOf(second), "pending");
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  Beat("a", Report());  // it never ran
  EXPECT_EQ(StateOf(first), "cancelled");
  controller_->Tick();
  EXPECT_EQ(StateOf(second), "starting");
}

TEST_F(ControllerTest, CancelOfAStartedJobSurvivesARestart) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_TRUE(controller_->Cancel(alice_, id).ok());
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  Beat("a", Report({TaskReport(launch, "killed", 143)}));
  auto view = JobJson(alice_, id);
  EXPECT_EQ((*view)["state"], "cancelled");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("cancelled by alice"));
}

TEST_F(ControllerTest, MalformedReportIsRefusedWholeAndLosesNothing) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  for (const json& bad :
       {json{{"logs", json::array()}}, json{{"tasks", "all"}}, json{{"tasks", {1}}},
        json{{"tasks", {{{"allocation_id", "x"}, {"generation", 1}, {"state", "exited"}}}}},
        json{{"tasks", {{{"allocation_id", 1}, {"generation", 1}, {"state", "melted"}}}}},
        json{{"tasks", json::array()}, {"logs", {{{"stream", 5}}}}}}) {
    auto answer = Heartbeat("a", bad, 0);
    EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument) << bad.dump();
  }
  EXPECT_EQ(StateOf(id), "running");
}

// A task's end as an agent reports it: killed or exited by `signal`, with the agent's typed end
// cause and note.
json EndedBy(const json& launch, const std::string& state, int signal, const std::string& cause,
             const std::string& message) {
  json s = TaskReport(launch, state);
  s.erase("exit_code");
  s.erase("end_cause");
  s["signal"] = signal;
  s["end_cause"] = cause;
  s["message"] = message;
  return s;
}

TEST_F(ControllerTest, AJobStoppedAtItsTimeLimitEndsTimeout) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  Beat("a",
       Report({EndedBy(launch, "killed", SIGTERM, "time_limit", "time limit of 60 s reached")}));
  EXPECT_EQ(StateOf(id), "timeout");
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["state"], "timeout");
  EXPECT_EQ((*view)["reason"], "task 0 was killed by signal 15: time limit of 60 s reached");
  EXPECT_EQ((*view)["events"].back()["to"], "timeout");
  EXPECT_EQ((*view)["tasks"][0]["end_cause"], "time_limit");
  EXPECT_TRUE((*view)["end_time"].is_number());
  auto listed =
      controller_->ListJobs(alice_, {.states = {model::JobState::kTimeout}, .limit = 10}, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs.size(), 1u);
  EXPECT_EQ(listed->jobs[0].state, model::JobState::kTimeout);
}

TEST_F(ControllerTest, AJobKilledByTheOomKillerEndsOom) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  // The kernel, not corral, killed it: the agent reports it exited (by SIGKILL), out of memory.
  Beat("a", Report({EndedBy(launch, "exited", SIGKILL, "out_of_memory",
                            "out of memory: killed at its memory limit of 64 MiB")}));
  EXPECT_EQ(StateOf(id), "oom");
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("killed at its memory limit"));
  EXPECT_EQ((*view)["tasks"][0]["end_cause"], "out_of_memory");
}

// An agent that predates end causes, or a cause that is no failure of the job's own, ends the
// job failed as before; the note alone never decides.
TEST_F(ControllerTest, OnlyATypedCauseEndsAJobTimeoutOrOom) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  // The message is words for people: the cause decides.
  const std::vector<std::pair<std::string, std::string>> ends = {
      {"signalled", "out of memory"}, {"exited", "time limit of 60 s reached"}};
  for (const auto& [cause, note] : ends) {
    const JobId id = Submit(Spec(1));
    controller_->Tick();
    json launch = Beat("a", Report())["run"][0];
    Beat("a", Report({EndedBy(launch, "exited", SIGKILL, cause, note)}));
    EXPECT_EQ(StateOf(id), "failed") << cause;
  }
}

// A program that handles SIGTERM at its time limit and exits 0 still ran out of time.
TEST_F(ControllerTest, ATaskStoppedAtItsTimeLimitThatExitsZeroEndsTimeout) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  json ended = TaskReport(launch, "killed", 0);
  ended["end_cause"] = "time_limit";
  ended["message"] = "time limit of 60 s reached";
  Beat("a", Report({ended}));
  EXPECT_EQ(StateOf(id), "timeout");
  EXPECT_EQ((*JobJson(alice_, id))["reason"],
            "task 0 was stopped and exited with code 0: time limit of 60 s reached");
}

// Agents of protocol version 1 type every end: a report that leaves the cause out, or gives one
// to a running task, is refused whole, naming the field.
TEST_F(ControllerTest, AnEndedTaskWithoutACauseIsRefusedNamingTheField) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  json ended = TaskReport(launch, "exited", 1);
  ended.erase("end_cause");
  auto refused = Heartbeat("a", Report({ended}), 0);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("field 'tasks[0].end_cause': is required when 'state' is exited"));
  json running = TaskReport(launch, "running");
  running["end_cause"] = "exited";
  refused = Heartbeat("a", Report({running}), 0);
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'tasks[0].end_cause': must be absent"));
  EXPECT_EQ(StateOf(id), "running");
}

// The gang's first failed task decides how it ends, also when the server restarts while the
// rest of the gang is being stopped (the cause is stored with the task).
TEST_F(ControllerTest, AGangEndsByItsFirstFailedTasksCauseAcrossARestart) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const JobId id = Submit(Spec(8, 2));
  controller_->Tick();
  json on_a = Beat("a", Report())["run"][0];
  json on_b = Beat("b", Report())["run"][0];
  Beat("a", Report({TaskReport(on_a, "running")}));
  Beat("b", Report({TaskReport(on_b, "running")}));
  ASSERT_EQ(StateOf(id), "running");
  // The part on b is killed by the OOM killer; the one on a is being stopped when the server
  // restarts.
  Beat("b", Report({EndedBy(on_b, "exited", SIGKILL, "out_of_memory", "out of memory")}));
  EXPECT_EQ(StateOf(id), "running");  // the part on a still runs: it is stopped first
  json answer = Beat("a", Report({TaskReport(on_a, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  // The server stopped it: its own cause (stopped) does not change the job's end.
  Beat("a", Report({EndedBy(on_a, "killed", SIGTERM, "stopped", "the gang failed")}));
  EXPECT_EQ(StateOf(id), "oom");
  EXPECT_THAT(store_->GetJob(id)->reason,
              HasSubstr("task " + on_b["task_index"].dump() + " was killed by signal 9"));
}

// A running job whose allocations no longer fit its node as stored (here the node's GPUs went
// from 8 to 4 behind the server's back) is stopped at recovery, with a reason that says so,
// instead of running on GPUs the scheduler does not hold.
TEST_F(ControllerTest, ARunningJobWhoseAllocationsNoLongerFitIsStoppedAtRecovery) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(8));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(StateOf(id), "running");
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  store::NodeRecord shrunk = nodes->front();
  json inventory = json::parse(shrunk.inventory_json);
  inventory["gpus"] = Inventory(4)["gpus"];
  shrunk.inventory_json = inventory.dump();
  ASSERT_TRUE(store_->UpsertNode(shrunk).ok());
  Restart();
  EXPECT_THAT(store_->GetJob(id)->cancel_reason.value_or(""),
              HasSubstr("cannot recover: its allocations do not fit"));
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  Beat("a", Report({EndedBy(launch, "killed", SIGTERM, "stopped", "cancelled")}));
  EXPECT_EQ(StateOf(id), "cancelled");
  EXPECT_THAT(store_->GetJob(id)->reason, HasSubstr("cannot recover"));
}

// A timed-out or OOM-killed run is a failed run for max_restarts (as before these states): it is
// requeued while restarts are left, and the last run's cause is the job's end.
TEST_F(ControllerTest, TimeoutAndOomRunsAreRequeuedLikeFailuresThenEndByTheirCause) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1, 1, /*max_restarts=*/1));
  controller_->Tick();
  json first = Beat("a", Report())["run"][0];
  Beat("a", Report({EndedBy(first, "exited", SIGKILL, "out_of_memory", "out of memory")}));
  EXPECT_EQ(StateOf(id), "pending");
  EXPECT_EQ(store_->GetJob(id)->restarts, 1);
  controller_->Tick();
  json second = Beat("a", Report())["run"][0];
  ASSERT_EQ(second["generation"], 2);
  Beat("a",
       Report({EndedBy(second, "killed", SIGTERM, "time_limit", "time limit of 5 s reached")}));
  EXPECT_EQ(StateOf(id), "timeout");
}

TEST_F(ControllerTest, AnUnknownEndCauseIsRefusedNamingTheField) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  for (const json& cause : {json("melted"), json(3)}) {
    json ended = EndedBy(launch, "killed", SIGTERM, "stopped", "");
    ended["end_cause"] = cause;
    auto answer = Heartbeat("a", Report({ended}), 0);
    EXPECT_EQ(answer.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(answer.status().message(), HasSubstr("tasks[0].end_cause"));
  }
  EXPECT_EQ(StateOf(id), "running");  // refused whole
}

TEST_F(ControllerTest, LongMultibyteEndNoteIsCutOnACharacterBoundary) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit(Spec(1));
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  json ended = TaskReport(launch, "failed_to_start", 127);
  std::string note;
  for (int i = 0; i < 400; ++i) note += "\u00e9";  // 'é', two bytes each: 800 bytes
  ended["message"] = note;
  Beat("a", Report({ended}));
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["state"], "failed");
  EXPECT_NO_THROW((void)view->dump());  // strict UTF-8: throws on a split character
}

TEST_F(ControllerTest, LostNodeKeepsTheGangsOtherGpusUntilTheirTasksEnd) {
  node_give_up_ = node_timeout_;  // lost as soon as it times out
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const JobId gang = Submit(Spec(8, 2));
  controller_->Tick();
  json on_a = Beat("a", Report())["run"][0];
  json on_b = Beat("b", Report())["run"][0];
  Beat("a", Report({TaskReport(on_a, "running")}));
  Beat("b", Report({TaskReport(on_b, "running")}));
  clock_.Advance(Seconds(20));
  Beat("a", Report({TaskReport(on_a, "running")}));
  clock_.Advance(Seconds(20));
  json answer = Beat("a", Report({TaskReport(on_a, "running")}));
  controller_->Tick();  // b is lost
  const JobId next = Submit(Spec(8));
  controller_->Tick();
  EXPECT_EQ(StateOf(gang), "running");  // its task on a still runs
  EXPECT_EQ(StateOf(next), "pending");  // so a's GPUs are not free
  answer = Beat("a", Report({TaskReport(on_a, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  Beat("a", Report({TaskReport(on_a, "killed", 143)}));
  auto view = JobJson(alice_, gang);
  EXPECT_EQ((*view)["state"], "lost");
  EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("node b lost"));
  controller_->Tick();
  EXPECT_EQ(StateOf(next), "starting");
}

TEST_F(ControllerTest, ReclaimPreemptsBorrowedTasksAndLaunchesOnlyOnceTheyStopped) {
  ASSERT_TRUE(store_->CreateProject("owner", "", Seconds(1)).ok());
  alice_.projects.push_back("owner");
  ASSERT_TRUE(SetSharing("owner", {{"gpus", 4}}).ok());
  EXPECT_EQ(SetSharing("owner", {{"gpus", -1}}).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SetSharing("nope", {{"gpus", 1}}).status().code(), StatusCode::kNotFound);
  for (const json& bad : {json{{"weight", 1e-9}}, json{{"gpus", 1e300}}, json{{"limit_gpus", -2}},
                          json{{"quota", 4}}, json{{"model_gpus", {{"A100", "x"}}}}}) {
    auto refused = SetSharing("owner", bad);
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad.dump();
    EXPECT_THAT(refused.status().message(), HasSubstr("field '")) << bad.dump();
  }
  EXPECT_EQ((*store_->ListProjects())[1].sharing_json.find("1e-09"), std::string::npos);
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
  std::vector<JobId> borrowed;
  for (int i = 0; i < 4; ++i) borrowed.push_back(Submit(Spec(1)));  // project "default"
  controller_->Tick();
  json launches = Beat("a", Report())["run"];
  ASSERT_EQ(launches.size(), 4u);
  std::vector<json> running;
  for (const json& l : launches) running.push_back(TaskReport(l, "running"));
  Beat("a", Report(running));

  json spec = Spec(2);
  spec["project"] = "owner";
  const JobId owner = Submit(spec);
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(StateOf(owner), "starting");
  int preempted = 0;
  for (JobId id : borrowed) {
    auto view = JobJson(alice_, id);
    if ((*view)["state"] != "pending") continue;
    ++preempted;
    EXPECT_THAT((*view)["reason"].get<std::string>(), HasSubstr("preempted for job"));
  }
  EXPECT_EQ(preempted, 2);
  // The agent still runs all four: the two preempted get kills, the owner's launch waits.
  json answer = Beat("a", Report(running));
  EXPECT_EQ(answer["kill"].size(), 2u);
  EXPECT_TRUE(answer["run"].empty());
  std::vector<json> after;
  for (const json& r : running) {
    bool killed = false;
    for (const json& k : answer["kill"]) killed |= k["allocation_id"] == r["allocation_id"];
    after.push_back(killed ? TaskReport(r, "killed", 143) : r);
  }
  answer = Beat("a", Report(after));
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], owner.value());
  auto projects = controller_->ProjectsView(alice_);
  ASSERT_TRUE(projects.ok());
  for (const protocol::ProjectView& p : *projects) {
    if (p.name == "owner") {
      EXPECT_EQ(p.running, MilliGpu(2000));
    }
  }
}

// An elastic job's spec: `gpus` MIN..MAX whole GPUs of one task.
json ElasticSpec(int min, int max, int max_restarts = 0) {
  json spec = Spec(min, 1, max_restarts);
  spec["elastic"] = {{"unit", "gpus"}, {"min", min}, {"max", max}};
  return spec;
}

std::vector<std::string> EventsOf(store::Store& store, JobId id) {
  std::vector<std::string> out;
  auto events = store.JobEvents(id);  // kept: the loop reads into it
  for (const store::JobEvent& e : *events) out.push_back(e.reason);
  return out;
}

bool HasEvent(store::Store& store, JobId id, const std::string& prefix) {
  for (const std::string& r : EventsOf(store, id)) {
    if (r.rfind(prefix, 0) == 0) return true;
  }
  return false;
}

std::set<int> GpusOf(const json& launch) {
  std::set<int> out;
  for (const json& g : launch["gpus"]) out.insert(g.get<int>());
  return out;
}

// Issue 20's live scenario on one node of 8 GPUs, driven pass by pass: an elastic 2-8 job alone
// starts at 8; a 4-GPU job makes it shrink to 4 (a new generation, the job running throughout,
// no preemption), and the 4-GPU job's launch waits for the old run to stop; once that job ends
// and the resize interval has passed, it grows back to 8.
TEST_F(ControllerTest, ElasticJobShrinksForAPendingJobAndGrowsBackWithoutPreemption) {
  resize_interval_ = Seconds(20);  // under the node timeout: the test's node stays reachable
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId elastic = Submit(ElasticSpec(2, 8));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  const json first = answer["run"][0];
  EXPECT_EQ(GpusOf(first).size(), 8u);    // alone: started at its MAX, not resized
  EXPECT_EQ(first["requeueable"], true);  // fencing treats elastic tasks as requeue-able
  Beat("a", Report({TaskReport(first, "running")}));
  EXPECT_EQ(StateOf(elastic), "running");
  EXPECT_TRUE(HasEvent(*store_, elastic, "started at 8 GPUs"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 0);

  const JobId rigid = Submit(Spec(4));
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(StateOf(elastic), "running");           // a resize keeps it running
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 1);  // a new generation
  EXPECT_TRUE(HasEvent(*store_, elastic, "resized from 8 to 4 GPUs: a pending job needs them"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_EQ(StateOf(rigid), "starting");
  auto view = JobJson(alice_, elastic);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["elastic"]["now"], 4);
  EXPECT_EQ((*view)["resizes"], 1);
  // The old run is told to stop; nothing launches on its GPUs before it has.
  answer = Beat("a", Report({TaskReport(first, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(answer["kill"][0]["allocation_id"], first["allocation_id"]);
  EXPECT_TRUE(answer["run"].empty());
  answer = Beat("a", Report({TaskReport(first, "killed", 143)}));
  ASSERT_EQ(answer["run"].size(), 2u);
  json shrunk, other;
  for (const json& l : answer["run"]) (l["job_id"] == elastic.value() ? shrunk : other) = l;
  EXPECT_EQ(shrunk["generation"], 2);
  EXPECT_EQ(GpusOf(shrunk).size(), 4u);
  EXPECT_EQ(other["job_id"], rigid.value());
  std::set<int> both = GpusOf(shrunk);
  for (int g : GpusOf(other)) EXPECT_TRUE(both.insert(g).second) << "GPU " << g << " twice";
  Beat("a", Report({TaskReport(shrunk, "running"), TaskReport(other, "running")}));
  EXPECT_EQ(StateOf(rigid), "running");
  for (JobId id : {elastic, rigid}) {
    for (const std::string& r : EventsOf(*store_, id))
      EXPECT_THAT(r, ::testing::Not(HasSubstr("preempted")));
  }

  // The rigid job ends: growth waits for the resize interval, then takes the idle GPUs.
  Beat("a", Report({TaskReport(shrunk, "running"), TaskReport(other, "exited", 0)}));
  EXPECT_EQ(StateOf(rigid), "succeeded");
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 1);
  clock_.Advance(resize_interval_ - Seconds(1));
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 1);     // not before the interval
  Beat("a", Report({TaskReport(shrunk, "running")}));  // the node stays reachable
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 2);
  EXPECT_TRUE(HasEvent(*store_, elastic, "resized from 4 to 8 GPUs: idle GPUs"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  answer = Beat("a", Report({TaskReport(shrunk, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  answer = Beat("a", Report({TaskReport(shrunk, "killed", 143)}));
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(GpusOf(answer["run"][0]).size(), 8u);
  EXPECT_EQ(answer["run"][0]["generation"], 3);
  EXPECT_EQ(StateOf(elastic), "running");
}

// A --nodes 1-2 torchrun job on two nodes (the elastic DDP scenario): it starts on node a while
// a rigid job holds node b; once that job is cancelled it grows to both nodes, and both tasks of
// the new generation launch once the old task on node a has stopped; then a pending job that
// needs node b shrinks it back to one node, and the shrunk run launches once both old tasks
// stopped.
TEST_F(ControllerTest, ElasticNodesJobGrowsToTwoNodesAndShrinksBack) {
  resize_interval_ = Seconds(20);  // under the node timeout: the test's nodes stay reachable
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(8)).ok());
  const JobId blocker = Submit(Spec(8));
  controller_->Tick();
  const json on_a = Beat("a", Report())["run"];
  const json on_b = Beat("b", Report())["run"];
  ASSERT_EQ(on_a.size() + on_b.size(), 1u);
  const std::string blocker_node = on_a.empty() ? "b" : "a";
  const std::string free_node = on_a.empty() ? "a" : "b";
  const json blocker_task = on_a.empty() ? on_b[0] : on_a[0];
  Beat(blocker_node, Report({TaskReport(blocker_task, "running")}));

  json spec = Spec(8, 1);
  spec["launcher"] = "torchrun";
  spec["elastic"] = {{"unit", "nodes"}, {"min", 1}, {"max", 2}};
  const JobId elastic = Submit(spec);
  controller_->Tick();
  json answer = Beat(free_node, Report());
  ASSERT_EQ(answer["run"].size(), 1u) << answer.dump();
  const json first = answer["run"][0];
  EXPECT_EQ(first["distributed"]["nodes"], 1) << first.dump();
  Beat(free_node, Report({TaskReport(first, "running")}));
  EXPECT_EQ(StateOf(elastic), "running");

  // The blocker goes: after the resize interval the job grows to both nodes.
  ASSERT_TRUE(controller_->Cancel(alice_, blocker).ok());
  answer = Beat(blocker_node, Report({TaskReport(blocker_task, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  Beat(blocker_node, Report({TaskReport(blocker_task, "killed", 143)}));
  EXPECT_EQ(StateOf(blocker), "cancelled");
  Beat(free_node, Report({TaskReport(first, "running")}));
  clock_.Advance(resize_interval_);
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(elastic)->restarts, 1)
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_TRUE(HasEvent(*store_, elastic, "resized from 1 to 2 nodes: idle GPUs"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  // Node b launches nothing until the old task on node a stopped.
  answer = Beat(blocker_node, Report());
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  answer = Beat(free_node, Report({TaskReport(first, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u) << answer.dump();
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  // Each launch as the agent's codec takes it (a refused one is never run, and says nothing).
  auto agent_runs = [](const json& answer) {
    auto parsed = protocol::ParseReportAnswer(answer);
    EXPECT_TRUE(parsed.ok() && parsed->refused_run.empty()) << answer.dump();
    return parsed.ok() ? parsed->run.size() : 0;
  };
  answer = Beat(free_node, Report({TaskReport(first, "killed", 143)}));
  ASSERT_EQ(agent_runs(answer), 1u);
  const json grown_a = answer["run"][0];
  answer = Beat(blocker_node, Report());
  ASSERT_EQ(agent_runs(answer), 1u);
  const json grown_b = answer["run"][0];
  for (const json& l : {grown_a, grown_b}) {
    EXPECT_EQ(l["generation"], 2);
    EXPECT_EQ(l["distributed"]["nodes"], 2) << l.dump();
  }
  EXPECT_NE(grown_a["task_index"], grown_b["task_index"]);
  Beat(free_node, Report({TaskReport(grown_a, "running")}));
  Beat(blocker_node, Report({TaskReport(grown_b, "running")}));
  EXPECT_EQ(StateOf(elastic), "running");
  EXPECT_EQ(JobJson(alice_, elastic)->at("elastic")["now"], 2);

  // A job that needs a whole node shrinks it back to one.
  const JobId rigid = Submit(Spec(8));
  clock_.Advance(Seconds(1));
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(elastic)->restarts, 2)
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_TRUE(HasEvent(*store_, elastic, "resized from 2 to 1 node: a pending job needs them"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_EQ(StateOf(rigid), "starting");
  answer = Beat(free_node, Report({TaskReport(grown_a, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u) << answer.dump();
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  answer = Beat(blocker_node, Report({TaskReport(grown_b, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u) << answer.dump();
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  json launched = Beat(free_node, Report({TaskReport(grown_a, "killed", 143)}))["run"];
  const json on_blocker_node = Beat(blocker_node, Report({TaskReport(grown_b, "killed", 143)}));
  for (const json& l : on_blocker_node["run"]) launched.push_back(l);
  ASSERT_EQ(launched.size(), 2u) << launched.dump();
  json shrunk, other;
  for (const json& l : launched) (l["job_id"] == elastic.value() ? shrunk : other) = l;
  EXPECT_EQ(shrunk["generation"], 3);
  EXPECT_EQ(shrunk["distributed"]["nodes"], 1) << shrunk.dump();
  EXPECT_EQ(other["job_id"], rigid.value());
}

// A pending job that waits for its own limit (here an array's running limit), not for GPUs,
// makes no elastic job shrink: the GPUs would only idle until the job grew back.
TEST_F(ControllerTest, ElasticJobDoesNotShrinkForAJobHeldByItsArrayLimit) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json array = Spec(2);
  array["array"] = {{"indices", {0, 1}}, {"max_running", 1}};
  auto elements = SubmitArrayJson(alice_, array);
  ASSERT_TRUE(elements.ok()) << elements.status().ToString();
  controller_->Tick();  // element 0 starts; element 1 waits for the array's limit
  const JobId waiting = elements->array_ids[1];
  ASSERT_EQ((*JobJson(alice_, waiting))["pending_reason"]["code"], "array_limit");
  json spec = ElasticSpec(2, 8);
  spec["elastic"]["step"] = 2;  // 2, 4, 6, 8: it takes every idle GPU
  const JobId elastic = Submit(spec);
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 2u);
  json run;
  for (const json& l : answer["run"]) {
    if (l["job_id"] == elastic.value()) run = l;
  }
  EXPECT_EQ(GpusOf(run).size(), 6u);  // all the idle GPUs
  for (int i = 0; i < 3; ++i) {
    clock_.Advance(Seconds(1));
    controller_->Tick();
  }
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 0);  // never shrunk
  EXPECT_FALSE(HasEvent(*store_, elastic, "resized from"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
  EXPECT_EQ(StateOf(waiting), "pending");
}

// A generation launched while the job runs has what is left of the run's time limit.
TEST_F(ControllerTest, AResizedGenerationHasWhatIsLeftOfTheTimeLimit) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json spec = ElasticSpec(2, 8);
  spec["time_limit_s"] = 100;
  const JobId elastic = Submit(spec);
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  const json first = answer["run"][0];
  EXPECT_EQ(first["time_limit_s"], 100);
  Beat("a", Report({TaskReport(first, "running")}));  // the run starts
  clock_.Advance(Seconds(10));
  Submit(Spec(4));
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(elastic)->restarts, 1);  // shrunk to 4
  answer = Beat("a", Report({TaskReport(first, "killed", 143)}));
  json shrunk;
  for (const json& l : answer["run"]) {
    if (l["job_id"] == elastic.value()) shrunk = l;
  }
  ASSERT_FALSE(shrunk.is_null()) << answer.dump();
  EXPECT_EQ(shrunk["time_limit_s"], 90);
}

// A job elastic by nodes grows only onto nodes with its tasks' CPU and memory free: node b has
// idle GPUs but too little CPU, so the job starts on a and c (2 of its 1-3), not planning 3
// and getting 1.
TEST_F(ControllerTest, ElasticByNodesStartsOnNodesWithItsCpuFree) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json small = Inventory(8);
  small["cpu_milli"] = 1000;
  ASSERT_TRUE(RegisterNode("b", kNodeB, small).ok());
  ASSERT_TRUE(RegisterNode("c", "node-c-0123456789abcdef", Inventory(8)).ok());
  json spec = Spec(8);
  spec["resources"]["cpu_milli"] = 8000;
  spec["elastic"] = {{"unit", "nodes"}, {"min", 1}, {"max", 3}};
  const JobId elastic = Submit(spec);
  controller_->Tick();
  auto view = JobJson(alice_, elastic);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["elastic"]["now"], 2) << view->dump();
}

// Resizes use up none of max_restarts, and a restarted server takes the newest generation as
// the run, with the resizes counted back from the job's events.
TEST_F(ControllerTest, ElasticResizesUseNoRestartsAndSurviveAServerRestart) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId elastic = Submit(ElasticSpec(2, 8, /*max_restarts=*/1));
  controller_->Tick();
  const json first = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(first, "running")}));
  const JobId rigid = Submit(Spec(6));
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(elastic)->restarts, 1);  // shrunk to 2 for the 6-GPU job
  json answer = Beat("a", Report({TaskReport(first, "killed", 143)}));
  ASSERT_EQ(answer["run"].size(), 2u);

  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto view = JobJson(alice_, elastic);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["resizes"], 1);
  EXPECT_EQ((*view)["elastic"]["now"], 2);
  answer = Beat("a", Report());
  json second;
  for (const json& l : answer["run"]) {
    if (l["job_id"] == elastic.value()) second = l;
  }
  ASSERT_FALSE(second.is_null()) << answer.dump();
  EXPECT_EQ(second["generation"], 2);  // the newest generation is the run
  EXPECT_EQ(GpusOf(second).size(), 2u);
  // Its run fails: with max_restarts 1 and one resize, a restart is still left.
  Beat("a", Report({TaskReport(second, "exited", 1)}));
  EXPECT_EQ(StateOf(elastic), "pending");
  EXPECT_THAT(store_->GetJob(elastic)->reason, HasSubstr("requeued (restart 1 of 1)"));
  EXPECT_EQ(StateOf(rigid), "starting");
}

// Growth does not take the GPUs of the node a backfill reservation holds for the head job: it
// would delay that job (and be shrunk back for it).
TEST_F(ControllerTest, GrowthLeavesTheBackfillReservationsNodesAlone) {
  resize_interval_ = Seconds(20);  // under the node timeout: the test's node stays reachable
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json spec = Spec(4);
  spec["time_limit_s"] = 1000;
  Submit(spec);
  spec = Spec(2);
  spec["time_limit_s"] = 1000;
  const JobId second = Submit(spec);
  controller_->Tick();
  const JobId elastic = Submit(ElasticSpec(2, 8));
  controller_->Tick();
  const json launches = Beat("a", Report())["run"];
  ASSERT_EQ(launches.size(), 3u);
  std::vector<json> running;
  json ending;
  for (const json& l : launches) {
    if (l["job_id"] == elastic.value()) {
      EXPECT_EQ(GpusOf(l).size(), 2u);  // what was idle
    }
    if (l["job_id"] == second.value()) ending = l;
    running.push_back(TaskReport(l, "running"));
  }
  Beat("a", Report(running));
  // The 2-GPU job ends: 2 GPUs idle, too few for the head job, which is reserved node a.
  std::vector<json> after;
  for (const json& r : running) {
    after.push_back(r["job_id"] == second.value() ? TaskReport(ending, "exited", 0) : r);
  }
  Beat("a", Report(after));
  after.erase(std::remove_if(after.begin(), after.end(),
                             [&](const json& r) { return r["job_id"] == second.value(); }),
              after.end());
  const JobId head = Submit(Spec(6));
  clock_.Advance(resize_interval_ + Seconds(5));
  Beat("a", Report(after));
  controller_->Tick();
  EXPECT_EQ(StateOf(head), "pending");
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 0);  // not grown into the reserved GPUs
  for (const std::string& r : EventsOf(*store_, elastic)) {
    EXPECT_THAT(r, ::testing::Not(HasSubstr("resized")));
  }
}

// A job with a time limit grows only when the time the growth saves exceeds the server's
// resize cost (--resize-cost): 2 -> 4 GPUs with some 280 s left saves some 120 s.
TEST_F(ControllerTest, GrowthPaysTheServersResizeCost) {
  resize_interval_ = Seconds(20);  // under the node timeout: the test's node stays reachable
  resize_cost_ = Seconds(200);
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  Submit(Spec(4));
  const JobId second = Submit(Spec(2));
  controller_->Tick();
  json spec = ElasticSpec(2, 8);
  spec["time_limit_s"] = 300;
  const JobId elastic = Submit(spec);
  controller_->Tick();
  std::vector<json> running;
  const json launches = Beat("a", Report())["run"];
  for (const json& l : launches) {
    running.push_back(TaskReport(l, l["job_id"] == second.value() ? "exited" : "running"));
  }
  ASSERT_EQ(running.size(), 3u);
  Beat("a", Report(running));  // the 2-GPU job ends at once: 2 GPUs idle
  std::erase_if(running, [&](const json& r) { return r["job_id"] == second.value(); });
  clock_.Advance(resize_interval_ + Seconds(1));
  Beat("a", Report(running));
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 0);  // 120 s saved < 200 s
  resize_cost_ = Seconds(60);
  Restart();
  clock_.Advance(Seconds(1));
  Beat("a", Report(running));
  controller_->Tick();
  EXPECT_EQ(store_->GetJob(elastic)->restarts, 1);
  EXPECT_TRUE(HasEvent(*store_, elastic, "resized from 2 to 4 GPUs: idle GPUs"))
      << ::testing::PrintToString(EventsOf(*store_, elastic));
}

// A server restarted during a resize's grace does not know the old run still stops: the node's
// first report after the restart says so. Until then nothing launches there; the old task is
// then waited for and its stop order keeps the job's grace (not the kill grace).
TEST_F(ControllerTest, ARestartDuringAResizesGraceHoldsTheNewRunUntilTheOldOneStopped) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  json spec = ElasticSpec(2, 8);
  spec["checkpoint_grace_s"] = 120;
  const JobId elastic = Submit(spec);
  controller_->Tick();
  const json first = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(first, "running")}));
  const JobId rigid = Submit(Spec(4));
  clock_.Advance(Seconds(1));
  controller_->Tick();
  ASSERT_EQ(store_->GetJob(elastic)->restarts, 1);  // resized to 4; the old run stops

  Restart();
  json answer = Beat("a", Report({TaskReport(first, "running")}));
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  ASSERT_EQ(answer["kill"].size(), 1u) << answer.dump();
  EXPECT_EQ(answer["kill"][0]["allocation_id"], first["allocation_id"]);
  EXPECT_EQ(answer["kill"][0]["grace_s"], 120);
  answer = Beat("a", Report({TaskReport(first, "running")}));  // still in its grace
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  EXPECT_EQ(answer["kill"][0]["grace_s"], 120);
  answer = Beat("a", Report({TaskReport(first, "killed", 143)}));
  ASSERT_EQ(answer["run"].size(), 2u) << answer.dump();
  std::set<int64_t> jobs;
  for (const json& l : answer["run"]) jobs.insert(l["job_id"].get<int64_t>());
  EXPECT_EQ(jobs, (std::set<int64_t>{elastic.value(), rigid.value()}));
}

// Checkpoint-aware preemption (docs/in-job.md, "Preemption and checkpoints"): four borrowed
// one-GPU jobs run 600 s; the two started first checkpoint then, so they would lose least: the
// owner's two-GPU job reclaims them (under --victims priority it takes the two started last).
// The victims' stop orders carry their checkpoint grace; their lost work is recorded.
class CheckpointPreemptionTest : public ControllerTest {
 protected:
  // Runs the four borrowed jobs (the first asks a grace over the server's cap, the third one
  // under it), checkpoints the first two at +600 s, then (restarting the server first when
  // `restart`) submits the owner's job at +601 s.
  void RunBorrowedThenReclaim(bool restart = false) {
    ASSERT_TRUE(store_->CreateProject("owner", "", Seconds(1)).ok());
    alice_.projects.push_back("owner");
    ASSERT_TRUE(SetSharing("owner", {{"gpus", 2}}).ok());
    ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
    for (int i = 0; i < 4; ++i) {
      json spec = Spec(1);
      if (i == 0) spec["checkpoint_grace_s"] = 900;  // over the default cap of 300 s
      if (i == 2) spec["checkpoint_grace_s"] = 60;
      borrowed_.push_back(Submit(spec));
    }
    controller_->Tick();
    const json launches = Beat("a", Report())["run"];
    for (const json& l : launches) running_.push_back(TaskReport(l, "running"));
    ASSERT_EQ(running_.size(), 4u);
    Beat("a", Report(running_));
    RunFor(600);
    for (int i : {0, 1}) {
      ASSERT_TRUE(
          controller_->RecordCheckpoint(alice_, borrowed_[i], {.path = "/ckpt/step-9"}).ok());
    }
    if (restart) Restart();
    clock_.Advance(Seconds(1));
    json spec = Spec(2);
    spec["project"] = "owner";
    owner_ = Submit(spec);
    controller_->Tick();
  }
  // Advances the clock by `seconds`, the node reporting its tasks running every 20 s.
  void RunFor(int seconds) {
    for (int left = seconds; left > 0; left -= 20) {
      clock_.Advance(Seconds(std::min(left, 20)));
      Beat("a", Report(running_));
    }
  }
  // The kill orders the agent gets for the running tasks, by job id.
  std::map<int64_t, json> Kills() {
    std::map<int64_t, json> kills;
    const json answer = Beat("a", Report(running_));
    for (const json& k : answer["kill"]) {
      for (const json& r : running_) {
        if (r["allocation_id"] == k["allocation_id"]) kills[r["job_id"].get<int64_t>()] = k;
      }
    }
    return kills;
  }
  // The node reports the tasks it was told to kill ended (the others running); the answer.
  json StopKilled() {
    const std::map<int64_t, json> kills = Kills();
    std::vector<json> after, still;
    for (const json& r : running_) {
      const bool killed = kills.count(r["job_id"].get<int64_t>()) > 0;
      after.push_back(killed ? TaskReport(r, "killed", 143) : r);
      if (!killed) still.push_back(r);
    }
    running_ = still;
    return Beat("a", Report(after));
  }
  // The lost GPU time of project "default" in the usage rows.
  int64_t LostByDefault() {
    auto usage = store_->GpuUsage("1970-01-01", "1970-01-01");
    EXPECT_TRUE(usage.ok());
    int64_t lost = 0;
    for (const store::GpuUsageRow& r : *usage) lost += r.project == "default" ? r.lost_gpu_ms : 0;
    return lost;
  }
  std::vector<JobId> borrowed_;
  std::vector<json> running_;
  JobId owner_;
};

TEST_F(CheckpointPreemptionTest, LeastLostWorkTakesTheFreshlyCheckpointedWithTheirGrace) {
  RunBorrowedThenReclaim();
  EXPECT_EQ(StateOf(owner_), "starting");
  for (int i : {0, 1}) EXPECT_EQ(StateOf(borrowed_[i]), "pending") << i;
  for (int i : {2, 3}) EXPECT_EQ(StateOf(borrowed_[i]), "running") << i;
  const std::map<int64_t, json> kills = Kills();
  ASSERT_EQ(kills.size(), 2u);
  // The job's grace, capped by the server's --max-checkpoint-grace; else the kill grace.
  EXPECT_EQ(kills.at(borrowed_[0].value())["grace_s"], 300);
  EXPECT_EQ(kills.at(borrowed_[1].value())["grace_s"], 10);
  EXPECT_THAT(kills.at(borrowed_[0].value())["reason"].get<std::string>(),
              HasSubstr("preempted for job " + std::to_string(owner_.value())));
  // 1 GPU x 1 s since the checkpoint at risk in its event; nothing lost before its tasks end.
  auto view = JobJson(alice_, borrowed_[0]);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["lost_work_gpu_s"], 0.0);
  EXPECT_EQ((*view)["stop_grace_s"], 300);
  EXPECT_THAT((*view)["reason"].get<std::string>(),
              HasSubstr("; 1 GPU-s since its last checkpoint at risk"));
  EXPECT_EQ((*JobJson(alice_, borrowed_[2]))["stop_grace_s"], 60);
  // Once the agent says they stopped (2 s later), the loss is recorded in the job and the
  // usage, and the owner's job launches; a stale report of the same task later (as from an
  // agent that lost its state) gets the plain kill grace again.
  const json stale = running_[0];
  clock_.Advance(Seconds(2));
  json answer = StopKilled();
  EXPECT_EQ((*JobJson(alice_, borrowed_[0]))["lost_work_gpu_s"], 3.0);
  EXPECT_EQ((*JobJson(alice_, borrowed_[2]))["lost_work_gpu_s"], 0.0);
  EXPECT_EQ(LostByDefault(), 2 * 3'000);
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], owner_.value());
  running_.insert(running_.begin(), stale);
  EXPECT_EQ(Kills().at(borrowed_[0].value())["grace_s"], 10);
}

// A job that saves a checkpoint in its grace loses (almost) nothing: the loss counts from the
// newest checkpoint before its tasks ended.
TEST_F(CheckpointPreemptionTest, ACheckpointInTheGraceSavesTheWork) {
  RunBorrowedThenReclaim();
  ASSERT_EQ(StateOf(borrowed_[0]), "pending");
  clock_.Advance(Seconds(30));
  ASSERT_TRUE(controller_->RecordCheckpoint(alice_, borrowed_[0], {.path = "/ckpt/step-10"}).ok());
  clock_.Advance(Seconds(1));
  StopKilled();
  EXPECT_EQ((*JobJson(alice_, borrowed_[0]))["lost_work_gpu_s"], 1.0);   // 1 GPU x 1 s
  EXPECT_EQ((*JobJson(alice_, borrowed_[1]))["lost_work_gpu_s"], 32.0);  // none in its grace
}

// A restarted server counts lost work from the checkpoints its predecessor recorded, and keeps
// the lost work already recorded.
TEST_F(CheckpointPreemptionTest, ARestartedServerKnowsTheLastCheckpoints) {
  RunBorrowedThenReclaim(/*restart=*/true);
  EXPECT_EQ(StateOf(owner_), "starting");
  for (int i : {0, 1}) EXPECT_EQ(StateOf(borrowed_[i]), "pending") << i;
  for (int i : {2, 3}) EXPECT_EQ(StateOf(borrowed_[i]), "running") << i;
  StopKilled();
  EXPECT_EQ((*JobJson(alice_, borrowed_[0]))["lost_work_gpu_s"], 1.0);
  Restart();
  EXPECT_EQ((*JobJson(alice_, borrowed_[0]))["lost_work_gpu_s"], 1.0);
  EXPECT_EQ(LostByDefault(), 2 * 1'000);
}

TEST_F(CheckpointPreemptionTest, PriorityVictimsIgnoreCheckpoints) {
  victims_ = sched::VictimOrder::kPriority;
  Restart();
  RunBorrowedThenReclaim();
  EXPECT_EQ(StateOf(owner_), "starting");
  for (int i : {0, 1}) EXPECT_EQ(StateOf(borrowed_[i]), "running") << i;
  for (int i : {2, 3}) EXPECT_EQ(StateOf(borrowed_[i]), "pending") << i;
  // No checkpoint: 1 GPU x 601 s since the start each, "0.2 GPU-h" in the event.
  EXPECT_EQ(Kills().at(borrowed_[2].value())["grace_s"], 60);
  StopKilled();
  auto view = JobJson(alice_, borrowed_[3]);
  EXPECT_EQ((*view)["lost_work_gpu_s"], 601.0);
  EXPECT_THAT((*view)["reason"].get<std::string>(),
              HasSubstr("; 0.2 GPU-h since its last checkpoint at risk"));
  EXPECT_EQ(LostByDefault(), 2 * 601'000);
}

// A cancel during a checkpoint grace keeps the kill grace, as every cancel does.
TEST_F(CheckpointPreemptionTest, ACancelDuringTheGraceKeepsTheKillGrace) {
  RunBorrowedThenReclaim();
  ASSERT_EQ(Kills().at(borrowed_[0].value())["grace_s"], 300);
  ASSERT_TRUE(controller_->Cancel(alice_, borrowed_[0]).ok());
  const json kill = Kills().at(borrowed_[0].value());
  EXPECT_EQ(kill["grace_s"], 10);
  EXPECT_THAT(kill["reason"].get<std::string>(), HasSubstr("cancelled by"));
}

// A lost node's stopping tasks are forgotten with it: if its agent comes back with them, they
// get the plain kill grace.
TEST_F(CheckpointPreemptionTest, ALostNodeForgetsItsStoppingTasks) {
  RunBorrowedThenReclaim();
  ASSERT_EQ(Kills().at(borrowed_[0].value())["grace_s"], 300);
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());  // another inventory: lost first
  EXPECT_EQ(Kills().at(borrowed_[0].value())["grace_s"], 10);
}

TEST_F(CheckpointPreemptionTest, NoVictimBeforeItsMinimumRun) {
  min_run_before_preemption_ = Seconds(3600);
  Restart();
  RunBorrowedThenReclaim();
  EXPECT_EQ(StateOf(owner_), "pending");
  for (JobId id : borrowed_) EXPECT_EQ(StateOf(id), "running");
  EXPECT_TRUE(Kills().empty());
  RunFor(3000);
  controller_->Tick();
  EXPECT_EQ(StateOf(owner_), "starting");
}

// The workload profile follows the jobs accepted while the server runs: the first once min_jobs
// are known, then after refresh_jobs more or refresh_interval with a new one, over the last
// `capacity` jobs; a restart learns it from the store. Each is handed to the scheduler: the
// typical tasks its placement scores against change with it.
TEST_F(ControllerTest, TheWorkloadProfileIsRefreshedAfterNJobsOrTMinutes) {
  profile_options_ = {
      .capacity = 10, .min_jobs = 3, .refresh_jobs = 4, .refresh_interval = Seconds(600)};
  Restart();
  // (profile_jobs, typical_tasks) after a round.
  auto profile = [&] {
    controller_->Tick();
    const protocol::PolicyView view = controller_->PolicyView();
    return std::pair{view.profile_jobs, view.typical_tasks};
  };
  using P = std::pair<int64_t, int64_t>;
  EXPECT_EQ(profile(), P(0, 0));  // a fresh server: none, fgd and best place as bestfit
  Submit(Spec(1));
  Submit(Spec(2));
  EXPECT_EQ(profile(), P(0, 0));  // 2 < min_jobs
  Submit(Spec(1));
  EXPECT_EQ(profile(), P(3, 2));  // the first profile as soon as min_jobs are known: 1 and 2 GPUs
  for (int i = 0; i < 3; ++i) Submit(Spec(1));
  EXPECT_EQ(profile(), P(3, 2));  // 3 new < refresh_jobs, and not 600 s yet
  clock_.Advance(Seconds(599));
  EXPECT_EQ(profile(), P(3, 2));
  clock_.Advance(Seconds(1));
  EXPECT_EQ(profile(), P(6, 2));  // refresh_interval passed with new jobs
  clock_.Advance(Seconds(3600));
  EXPECT_EQ(profile(), P(6, 2));  // no new job: nothing to learn
  for (int i = 0; i < 4; ++i) Submit(Spec(1));
  EXPECT_EQ(profile(), P(10, 2));  // refresh_jobs new ones
  for (int i = 0; i < 4; ++i) Submit(Spec(1));
  // The window holds the last `capacity` jobs: the 2-GPU one has left it.
  EXPECT_EQ(profile(), P(10, 1));
  Restart();
  const protocol::PolicyView view = controller_->PolicyView();
  EXPECT_EQ(P(view.profile_jobs, view.typical_tasks), P(10, 1));  // learnt from the store at start
}

// Policies that place without a profile (bestfit here) never compute one: no policy rebuilt,
// no score cache dropped.
TEST_F(ControllerTest, NoWorkloadProfileUnderAPolicyThatPlacesWithoutOne) {
  profile_options_ = {
      .capacity = 10, .min_jobs = 3, .refresh_jobs = 1, .refresh_interval = Seconds(600)};
  placement_ = "bestfit";
  Restart();
  for (int i = 0; i < 4; ++i) Submit(Spec(1));
  controller_->Tick();
  EXPECT_EQ(controller_->PolicyView().profile_jobs, 0);
  EXPECT_EQ(controller_->PolicyView().typical_tasks, 0);
  Restart();  // nor at start, from the store
  EXPECT_EQ(controller_->PolicyView().profile_jobs, 0);
}

TEST_F(ControllerTest, PolicyFileIsValidatedAndReloadedWithoutRestart) {
  WritePolicy("order: fifo\nblocking: skip\n", 1);
  Restart();
  EXPECT_EQ(controller_->PolicyView().rules.order, "fifo");
  WritePolicy("order: fastest\n", 2);  // refused: the rules in force stay
  controller_->Tick();
  protocol::PolicyView view = controller_->PolicyView();
  EXPECT_EQ(view.rules.order, "fifo");
  EXPECT_THAT(view.file_error.value_or(""), HasSubstr("field 'order'"));
  WritePolicy("order: las\nlas_thresholds_gpu_s: [100, 50]\n", 3);  // not ascending
  controller_->Tick();
  EXPECT_THAT(controller_->PolicyView().file_error.value_or(""), HasSubstr("las_thresholds_gpu_s"));
  WritePolicy("order: sjf\nfair_share: {half_life_s: 3600}\n", 4);
  controller_->Tick();
  view = controller_->PolicyView();
  EXPECT_EQ(view.rules.order, "sjf");
  EXPECT_EQ(view.rules.half_life, Seconds(3600));
  EXPECT_FALSE(view.file_error.has_value());
  // The rules are shown in the policy file's own format: they read back as they are.
  auto shown = sched::ParseSchedulingPolicy(protocol::ToJson(view)["policy"]);
  ASSERT_TRUE(shown.ok()) << shown.status().message();
  EXPECT_EQ(shown->order, sched::QueueOrder::kSjf);
  EXPECT_EQ(shown->sharing.fair_share.half_life, Seconds(3600));
  // A bad file at start is an error naming it.
  WritePolicy("reclaim: maybe\n", 5);
  controller_.reset();
  ControllerConfig config;
  config.policy_file = policy_file_;
  auto refused = Controller::Create(config, *store_, clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'reclaim'"));
  policy_file_.clear();
  Restart();
}

TEST_F(ControllerTest, SchedulerRulesAreThoseInForceWithoutTheEstimator) {
  WritePolicy(
      "order: las\nblocking: strict\nreclaim: false\nlas_thresholds_gpu_s: [600, 7200]\n"
      "fair_share: {half_life_s: 3600}\n",
      1);
  Restart();
  ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
  ASSERT_TRUE(SetSharing("vision", {{"gpus", 4}, {"limit_gpus", 6}}).ok());
  const sched::SchedulerConfig rules = controller_->SchedulerRules();
  EXPECT_EQ(rules.order, sched::QueueOrder::kLas);
  EXPECT_EQ(rules.blocking, sched::Blocking::kStrict);
  EXPECT_FALSE(rules.sharing.reclaim);
  EXPECT_EQ(rules.sharing.fair_share.half_life, Seconds(3600));
  EXPECT_EQ(rules.las_thresholds_gpu_s, (std::vector<int64_t>{600, 7200}));
  ASSERT_EQ(rules.sharing.projects.count("vision"), 1u);
  EXPECT_EQ(rules.sharing.projects.at("vision").quota_milli, 4000);
  EXPECT_EQ(rules.sharing.projects.at("vision").limit_milli, 6000);
  EXPECT_FALSE(rules.estimate);  // it reads the live predictor: replays bring their own
}

TEST_F(ControllerTest, QueueShowsOrderReasonsAndEstimatedStarts) {
  const JobId waiting = RunOneAndQueueOne().waiting;
  auto queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 1u);
  EXPECT_EQ((*queue)[0].id, waiting);
  EXPECT_EQ((*queue)[0].position, 1);
  EXPECT_EQ((*queue)[0].estimated_start, Seconds(1000 + 100));  // the running job's limit
  EXPECT_FALSE((*queue)[0].pending_reason.code.empty());
  EXPECT_EQ((*JobJson(alice_, waiting))["estimated_start"], 1100);
  EXPECT_EQ(controller_->QueueView(alice_, 0).status().code(), StatusCode::kInvalidArgument);
}

// The reads answer from the published view (read_view.h): while a round holds the controller's
// lock (here: reading a policy file that is a FIFO no one writes yet), the job list, a job, the
// queue, the nodes, the summary and the policy all answer, with what the last round published.
TEST_F(ControllerTest, ReadsAnswerWhileARoundHoldsTheLock) {
  WritePolicy("order: fifo\n", 1);
  Restart();
  const auto [running, waiting] = RunOneAndQueueOne();
  // The policy file becomes a FIFO with a newer time: the next round opens it and waits, holding
  // the lock, until someone writes it.
  std::filesystem::remove(policy_file_);
  ASSERT_EQ(mkfifo(policy_file_.c_str(), 0600), 0);
  std::filesystem::last_write_time(
      policy_file_, std::filesystem::file_time_type::clock::now() + std::chrono::seconds(2));
  std::thread round([&] { controller_->Tick(); });
  int writer = -1;  // opens (without blocking) only once the round is reading the FIFO
  while ((writer = open(policy_file_.c_str(), O_WRONLY | O_NONBLOCK)) < 0 && errno == ENXIO) {
    std::this_thread::yield();
  }
  const int open_error = writer < 0 ? errno : 0;
  // A write waits for the round (it takes the lock); the reads do not. Each read gets a minute:
  // one that took the lock would wait for the FIFO, written only after.
  auto cancel =
      std::async(std::launch::async, [&] { return controller_->Cancel(alice_, waiting); });
  auto reads = std::async(std::launch::async, [&] {
    store::JobFilter all;
    all.limit = 10;
    return std::make_tuple(controller_->ListJobs(alice_, all, /*all_projects=*/false),
                           controller_->QueueView(alice_, 10),
                           controller_->JobView(alice_, waiting), controller_->Nodes(alice_),
                           controller_->ClusterSummary(), controller_->PolicyView(),
                           controller_->ProjectsView(alice_));
  });
  const bool read_in_time = reads.wait_for(std::chrono::minutes(1)) == std::future_status::ready;
  const bool cancel_waited =
      cancel.wait_for(std::chrono::milliseconds(0)) == std::future_status::timeout;
  if (writer >= 0) {
    const std::string text = "order: fifo\n";
    EXPECT_EQ(write(writer, text.data(), text.size()), static_cast<ssize_t>(text.size()));
    close(writer);
  }
  round.join();
  ASSERT_EQ(open_error, 0) << "the FIFO could not be opened: " << std::strerror(open_error);
  ASSERT_TRUE(read_in_time) << "a read waited for the round holding the lock";
  EXPECT_TRUE(cancel_waited) << "the round did not hold the lock: nothing was tested";
  EXPECT_TRUE(cancel.get().ok());
  auto [page, queue, job, nodes, summary, policy, projects] = reads.get();
  ASSERT_TRUE(projects.ok());
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 2u);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 1u);
  EXPECT_EQ((*queue)[0].id, waiting);
  ASSERT_TRUE(job.ok());
  ASSERT_TRUE(job->summary.pending_reason);
  EXPECT_EQ(job->summary.estimated_start, Seconds(1000 + 100));
  ASSERT_EQ(nodes.size(), 1u);
  ASSERT_EQ(nodes[0].gpu_tasks.size(), 4u);
  ASSERT_EQ(nodes[0].gpu_tasks[0].size(), 1u);
  EXPECT_EQ(nodes[0].gpu_tasks[0][0].owner->job, running);
  EXPECT_EQ(summary.jobs_pending, 1);
  EXPECT_EQ(summary.jobs_starting, 1);
  EXPECT_EQ(policy.rules.order, "fifo");
}

// A pending job's reason and estimated start come from the same pass, wherever they are read
// (the listing, the job, the queue); a job submitted after it reads "not yet considered".
TEST_F(ControllerTest, APublishedViewGivesEachPendingJobOnePassesReasonAndEstimate) {
  const auto [running, waiting] = RunOneAndQueueOne();
  // A model no node has: it waits for one, without an estimate (a size beyond every node
  // would be refused at submit).
  json unknown_model = Spec(1);
  unknown_model["resources"]["gpu_models"] = {"H100"};
  const JobId too_big = Submit(unknown_model);
  controller_->Tick();
  const JobId late = Submit(Spec(1));  // after the last pass
  store::JobFilter all;
  all.limit = 10;
  auto page = controller_->ListJobs(alice_, all, /*all_projects=*/false);
  auto queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(page.ok());
  ASSERT_TRUE(queue.ok());
  std::map<JobId, protocol::QueueRow> queued;
  for (const protocol::QueueRow& row : *queue) queued[row.id] = row;
  ASSERT_EQ(queued.size(), 3u);
  for (const protocol::JobSummary& row : page->jobs) {
    auto job = controller_->JobView(alice_, row.id);
    ASSERT_TRUE(job.ok());
    EXPECT_EQ(job->summary.pending_reason, row.pending_reason) << row.id.value();
    EXPECT_EQ(job->summary.estimated_start, row.estimated_start) << row.id.value();
    if (row.id == running) {
      EXPECT_FALSE(row.pending_reason);
    } else if (row.id == late) {
      ASSERT_TRUE(row.pending_reason);
      EXPECT_EQ(row.pending_reason->code, sched::kReasonNotYetConsidered);
      EXPECT_FALSE(row.estimated_start);
      EXPECT_EQ(queued[late].pending_reason, *row.pending_reason);  // last in the queue
      EXPECT_EQ(queued[late].position, 3);
    } else {
      ASSERT_TRUE(queued.count(row.id));
      EXPECT_EQ(row.pending_reason, queued[row.id].pending_reason);
      EXPECT_EQ(row.estimated_start, queued[row.id].estimated_start);
    }
  }
  EXPECT_EQ(queued[waiting].estimated_start, Seconds(1000 + 100));
  EXPECT_EQ(queued[too_big].pending_reason.code, sched::kReasonUnknownModel);
  controller_->Tick();  // the late job's pass
  auto late_view = controller_->JobView(alice_, late);
  ASSERT_TRUE(late_view.ok());
  ASSERT_TRUE(late_view->summary.pending_reason);
  EXPECT_NE(late_view->summary.pending_reason->code, sched::kReasonNotYetConsidered);
}

// As squeue after sbatch: a job is in the queue (after the pass's rows, in submit order, not yet
// considered) and counted pending from the moment its submission returned, before any pass or
// published view; once its pass is published it is there once, with the pass's reason.
TEST_F(ControllerTest, ASubmittedJobIsQueuedAndCountedPendingAtOnce) {
  const JobId first = Submit(Spec(1));
  controller_->Tick();
  const JobId second = Submit(Spec(1));
  const JobId third = Submit(Spec(1));
  auto queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 3u);
  const std::vector<JobId> order = {first, second, third};
  for (size_t i = 0; i < order.size(); ++i) {
    EXPECT_EQ((*queue)[i].id, order[i]);
    EXPECT_EQ((*queue)[i].position, static_cast<int>(i) + 1);
    EXPECT_EQ((*queue)[i].gpus, MilliGpu(1000));
    EXPECT_EQ((*queue)[i].pending_reason.code == sched::kReasonNotYetConsidered, i > 0) << i;
  }
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 3);
  auto two = controller_->QueueView(alice_, 2);  // positions past the limit are left out
  ASSERT_TRUE(two.ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[1].id, second);
  const Principal outsider{alice_.user_id + 2, "carol", false, {"vision"}};
  auto none = controller_->QueueView(outsider, 10);  // not their project's
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());

  controller_->Tick();
  queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 3u);
  for (const protocol::QueueRow& row : *queue) {
    EXPECT_NE(row.pending_reason.code, sched::kReasonNotYetConsidered) << row.id.value();
  }
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 3);
  ASSERT_TRUE(controller_->Cancel(alice_, first).ok());
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 2);
}

// A job that leaves the queue (cancelled, here) leaves the queue's view at once, whether its
// row came from the last pass or from the submissions since; no one sees another project's rows.
TEST_F(ControllerTest, ACancelledJobLeavesTheQueueAtOnce) {
  const JobId passed = Submit(Spec(1));
  const JobId kept = Submit(Spec(1));
  controller_->Tick();
  const JobId late = Submit(Spec(1));
  const JobId late_kept = Submit(Spec(1));
  const Principal outsider{alice_.user_id + 2, "carol", false, {"vision"}};
  auto unseen = controller_->QueueView(outsider, 10);
  ASSERT_TRUE(unseen.ok());
  EXPECT_TRUE(unseen->empty());
  ASSERT_TRUE(controller_->Cancel(alice_, passed).ok());
  ASSERT_TRUE(controller_->Cancel(alice_, late).ok());
  auto queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(queue.ok());
  std::vector<JobId> ids;
  std::vector<int> positions;  // counted over the rows still queued, at once
  for (const protocol::QueueRow& row : *queue) {
    ids.push_back(row.id);
    positions.push_back(row.position);
  }
  EXPECT_EQ(ids, (std::vector<JobId>{kept, late_kept}));
  EXPECT_EQ(positions, (std::vector<int>{1, 2}));
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 2);
  auto first = controller_->QueueView(alice_, 1);  // the limit counts positions as shown
  ASSERT_TRUE(first.ok());
  ASSERT_EQ(first->size(), 1u);
  EXPECT_EQ((*first)[0].id, kept);
  controller_->Tick();
  queue = controller_->QueueView(alice_, 10);
  ASSERT_TRUE(queue.ok());
  ASSERT_EQ(queue->size(), 2u);
  EXPECT_EQ((*queue)[1].position, 2);
}

// With the loop running (publishing views and draining the inbox between submissions), every
// job is in the queue exactly once, and counted, as soon as its submission returned.
TEST_F(ControllerTest, WhileTheLoopPublishesEverySubmittedJobIsQueuedOnceAtOnce) {
  controller_->Start();
  for (int i = 1; i <= 100; ++i) {
    const JobId id = Submit(Spec(1));  // no node: every job stays pending
    auto queue = controller_->QueueView(alice_, PendingPart::kQueueRows);
    ASSERT_TRUE(queue.ok());
    ASSERT_EQ(queue->size(), static_cast<size_t>(i));
    EXPECT_EQ(std::count_if(queue->begin(), queue->end(),
                            [&](const protocol::QueueRow& row) { return row.id == id; }),
              1);
    for (size_t k = 0; k < queue->size(); ++k) {
      EXPECT_EQ((*queue)[k].position, static_cast<int>(k) + 1) << i;
    }
    EXPECT_EQ(controller_->ClusterSummary().jobs_pending, i);
  }
  controller_->Stop();
}

// Runs `spec` twice for 50 s each on node "a", which teaches the predictor its run time.
void ControllerTest::TeachRunTime(const json& spec) {
  for (int run = 0; run < 2; ++run) {
    const JobId id = Submit(spec);
    controller_->Tick();
    json launch = Beat("a", Report())["run"][0];
    Beat("a", Report({TaskReport(launch, "running")}));
    clock_.Advance(Seconds(50));
    Beat("a", Report({TaskReport(launch, "exited", 0)}));
    ASSERT_EQ(StateOf(id), "succeeded");
  }
}

TEST_F(ControllerTest, RunTimesAreLearnedAndUsedForEstimatedStarts) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
  json spec = Spec(4);
  spec["name"] = "train-lr0.1";
  ASSERT_NO_FATAL_FAILURE(TeachRunTime(spec));
  spec["name"] = "train-lr0.2";  // a similar name
  const JobId running = Submit(spec);
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  auto view = JobJson(alice_, running);
  EXPECT_EQ((*view)["predicted_run_s"]["estimate"], 50);
  EXPECT_EQ((*view)["predicted_run_s"]["basis"], "user+similar-name");
  const JobId waiting = Submit(spec);
  controller_->Tick();
  // The running job started at t=1100 and is expected to take 50 s.
  EXPECT_EQ((*JobJson(alice_, waiting))["estimated_start"], 1100 + 50);
  // A restarted server learns again from the store.
  Restart();
  EXPECT_EQ((*JobJson(alice_, waiting))["predicted_run_s"]["estimate"], 50);
  // Never beyond the job's time limit, as the scheduler plans it.
  spec["time_limit_s"] = 20;
  const JobId limited = Submit(spec);
  EXPECT_EQ((*JobJson(alice_, limited))["predicted_run_s"]["estimate"], 20);
  EXPECT_EQ((*JobJson(alice_, limited))["predicted_run_s"]["basis"], "time_limit");
}

// Issue 18: a job predicted at 50 s that runs on is estimated at its time limit, not at what it
// has run, and the job behind it keeps its estimated start as the clock moves.
TEST_F(ControllerTest, AJobThatOutlivesItsPredictionIsEstimatedAtItsLimitWithoutSliding) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
  json spec = Spec(4);
  spec["name"] = "train";
  ASSERT_NO_FATAL_FAILURE(TeachRunTime(spec));
  spec["time_limit_s"] = 900;
  const JobId running = Submit(spec);
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  const int64_t started = *(*JobJson(alice_, running))["start_time"].get_ptr<const int64_t*>();
  const JobId waiting = Submit(spec);
  controller_->Tick();
  EXPECT_EQ((*JobJson(alice_, waiting))["estimated_start"], started + 50);
  for (int64_t elapsed : {60, 300, 899}) {
    clock_.Advance(Seconds(elapsed - (clock_.Now().value() - started)));
    Beat("a", Report({TaskReport(launch, "running")}));
    controller_->Tick();
    auto view = JobJson(alice_, running);
    EXPECT_EQ((*view)["predicted_run_s"]["estimate"], 900) << elapsed;
    EXPECT_EQ((*view)["predicted_run_s"]["basis"], "outlived:time_limit");
    EXPECT_EQ((*JobJson(alice_, waiting))["estimated_start"], started + 900) << elapsed;
  }
  // Cancelled, it has no estimated start, whatever view the reads were built from.
  ASSERT_TRUE(controller_->Cancel(alice_, waiting).ok());
  auto cancelled = JobJson(alice_, waiting);
  EXPECT_FALSE(cancelled->contains("estimated_start"));
  EXPECT_FALSE(cancelled->contains("predicted_run_s"));
}

}  // namespace
}  // namespace corral::server

namespace corral::server {
namespace {

json AddressedInventory(int gpus, const std::string& address) {
  json inventory = Inventory(gpus);
  inventory["address"] = address;
  return inventory;
}

TEST_F(ControllerTest, DistributedPartsGetOneRendezvous) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(4, "10.0.0.1")).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, AddressedInventory(4, "10.0.0.2")).ok());
  json spec = Spec(4, 2);
  spec["launcher"] = "torchrun";
  spec["procs_per_node"] = 2;
  Submit(spec);
  controller_->Tick();
  std::map<int, json> launches;        // by node rank
  std::map<int, std::string> node_of;  // by node rank
  for (const char* node : {"a", "b"}) {
    json answer = Beat(node, Report());
    ASSERT_EQ(answer["run"].size(), 1u) << node;
    const int rank = answer["run"][0]["task_index"].get<int>();
    launches[rank] = answer["run"][0];
    node_of[rank] = node;
  }
  const std::string master = launches[0]["distributed"]["master_addr"];
  EXPECT_EQ(master, node_of[0] == "a" ? "10.0.0.1" : "10.0.0.2");  // part 0's node's address
  for (const auto& [rank, launch] : launches) {
    const json& d = launch["distributed"];
    EXPECT_EQ(d["launcher"], "torchrun");
    EXPECT_EQ(d["procs_per_node"], 2);
    EXPECT_EQ(d["node_rank"], rank);
    EXPECT_EQ(d["nodes"], 2);
    EXPECT_EQ(d["port"], FirstPort());
    EXPECT_EQ(d["master_addr"], master);  // the same for every part
    EXPECT_EQ(d["hosts"][0], master);
    EXPECT_EQ(d["hosts"].size(), 2u);
  }
  EXPECT_NE(launches[0]["distributed"]["hosts"][0], launches[0]["distributed"]["hosts"][1]);
}

TEST_F(ControllerTest, RendezvousPortsDifferPerJobAndSurviveARestart) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  // Every part on node a (the only node): launches by job id, each with its parts.
  auto launches = [&]() {
    std::map<int64_t, std::vector<json>> out;
    const json answer = Beat("a", Report());  // kept alive: the loop reads into it
    for (const json& launch : answer["run"]) {
      out[launch["job_id"].get<int64_t>()].push_back(launch);
    }
    return out;
  };
  const JobId plain = Submit(Spec(1));
  const JobId x = Submit(Spec(1, 2));
  const JobId y = Submit(Spec(1, 2));
  controller_->Tick();
  auto run = launches();
  ASSERT_EQ(run[plain.value()].size(), 1u);
  EXPECT_FALSE(run[plain.value()][0].contains("distributed"));
  ASSERT_EQ(run[x.value()].size(), 2u);
  ASSERT_EQ(run[y.value()].size(), 2u);
  EXPECT_EQ(run[x.value()][0]["distributed"]["port"], FirstPort());
  EXPECT_EQ(run[x.value()][1]["distributed"]["port"], FirstPort());
  EXPECT_EQ(run[y.value()][0]["distributed"]["port"], FirstPort() + 1);
  EXPECT_EQ(run[y.value()][0]["distributed"]["launcher"], "none");
  EXPECT_EQ(run[y.value()][0]["distributed"]["master_addr"], "a");  // no --address: the name
  const std::vector<json> x_parts = run[x.value()];
  // After a restart both blocks are taken again: the next job gets the next block.
  Restart();
  const JobId z = Submit(Spec(1, 2));
  controller_->Tick();
  run = launches();
  ASSERT_EQ(run[z.value()].size(), 2u);
  EXPECT_EQ(run[z.value()][0]["distributed"]["port"], FirstPort() + 2);
  // x's block is free again once x ended.
  Beat("a", Report({TaskReport(x_parts[0], "exited", 0), TaskReport(x_parts[1], "exited", 0)}));
  EXPECT_EQ(StateOf(x), "succeeded");
  const JobId w = Submit(Spec(1, 2));
  controller_->Tick();
  run = launches();
  ASSERT_EQ(run[w.value()].size(), 2u);
  EXPECT_EQ(run[w.value()][0]["distributed"]["port"], FirstPort());
}

TEST_F(ControllerTest, InventoryLabelsAndAddressAreChecked) {
  json inventory = Inventory(1);
  inventory["labels"] = json::array({"r0"});
  auto refused = RegisterNode("a", kNodeA, inventory);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'inventory.labels': must be an object"));
  inventory["labels"] = {{"rack", "r 0"}};
  refused = RegisterNode("a", kNodeA, inventory);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("labels"));
  refused = RegisterNode("a", kNodeA, AddressedInventory(1, "10.0.0.1;reboot"));
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("address"));
  inventory["labels"] = {{"rack", "r0"}};
  ASSERT_TRUE(RegisterNode("a", kNodeA, inventory).ok());
  EXPECT_EQ(controller_->Nodes(alice_)[0].labels,
            (std::map<std::string, std::string>{{"rack", "r0"}}));
}

TEST_F(ControllerTest, MpiJobEndsWithPartZero) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(4)).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, Inventory(4)).ok());
  json spec = Spec(4, 2);
  spec["launcher"] = "mpi";
  const JobId id = Submit(spec);
  controller_->Tick();
  std::map<int, std::pair<std::string, json>> parts;  // node rank → (node, launch)
  for (const char* node : {"a", "b"}) {
    json answer = Beat(node, Report());
    ASSERT_EQ(answer["run"].size(), 1u);
    parts[answer["run"][0]["task_index"].get<int>()] = {node, answer["run"][0]};
  }
  const auto& [node0, launch0] = parts[0];
  const auto& [node1, launch1] = parts[1];
  Beat(node0, Report({TaskReport(launch0, "running")}));
  Beat(node1, Report({TaskReport(launch1, "running")}));
  ASSERT_EQ(StateOf(id), "running");
  // mpirun (part 0) ends well: the holding part is told to stop, and the job succeeds once it
  // has, although that part was killed.
  Beat(node0, Report({TaskReport(launch0, "exited", 0)}));
  json answer = Beat(node1, Report({TaskReport(launch1, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(StateOf(id), "running");
  json killed = TaskReport(launch1, "killed");
  killed.erase("exit_code");
  killed["signal"] = 15;
  Beat(node1, Report({killed}));
  EXPECT_EQ(StateOf(id), "succeeded");
  EXPECT_THAT(store_->JobEvents(id)->back().reason, HasSubstr("task 0 (mpirun)"));
}

}  // namespace
}  // namespace corral::server

namespace corral::server {
namespace {

// Spec(gpus) submitted as an array of `indices`, with a running limit when `max_running` > 0.
json ArrayJobSpec(int gpus, const std::vector<int>& indices, int max_running = 0) {
  json spec = Spec(gpus);
  spec["array"] = {{"indices", indices}};
  if (max_running > 0) spec["array"]["max_running"] = max_running;
  return spec;
}

TEST_F(ControllerTest, ArrayIsOneJobPerIndexCommittedTogether) {
  json spec = ArrayJobSpec(1, {0, 5, 7}, 2);
  spec["env"] = {{"SEED", "1"}, {"LR", "1"}};
  spec["array"]["env"] = json::array({json{{"LR", "0.1"}}, json::object(), json{{"B", "64"}}});
  auto jobs = SubmitArrayJson(alice_, spec);
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  ASSERT_EQ(jobs->array_ids.size(), 3u);
  const JobId array = jobs->array_ids[0];
  const std::vector<std::map<std::string, std::string>> envs = {
      {{"SEED", "1"}, {"LR", "0.1"}},
      {{"SEED", "1"}, {"LR", "1"}},
      {{"SEED", "1"}, {"LR", "1"}, {"B", "64"}}};
  for (size_t i = 0; i < jobs->array_ids.size(); ++i) {
    auto stored = store_->GetJob(jobs->array_ids[i]);
    ASSERT_TRUE(stored.ok());
    EXPECT_EQ(stored->array_id, array);
    EXPECT_EQ(stored->array_index, (std::vector<int>{0, 5, 7})[i]);
    EXPECT_EQ(stored->array_max_running, 2);
    json view = *JobJson(alice_, jobs->array_ids[i]);
    EXPECT_EQ(view["array_id"], array.value());
    EXPECT_EQ(view["array_index"], (std::vector<int>{0, 5, 7})[i]);
    EXPECT_FALSE(view["spec"].contains("array"));  // each element is an ordinary job
    EXPECT_EQ(view["spec"]["env"], json(envs[i]));
  }
  auto listed = controller_->ListJobs(
      alice_, {.array = array, .direction = store::SortDirection::kDescending, .limit = 10}, false);
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->jobs.size(), 3u);
  EXPECT_EQ(listed->jobs[0].array->index, 7);  // newest first
  EXPECT_EQ(listed->jobs[2].array->array_id, array);

  // Every bad array is refused whole, naming the field; nothing is stored.
  const size_t stored = store_->ListJobs({.limit = 0})->size();
  auto refused = [&](json bad, const std::string& field) {
    auto r = SubmitArrayJson(alice_, bad);
    EXPECT_EQ(r.status().code(), StatusCode::kInvalidArgument) << field;
    EXPECT_THAT(r.status().message(), HasSubstr(field));
  };
  refused(ArrayJobSpec(1, {0, 1, 0}), "field 'array.indices[2]': 0 is repeated");
  refused(ArrayJobSpec(1, {}), "field 'array.indices'");
  refused(ArrayJobSpec(1, {-1}), "field 'array.indices[0]'");
  refused(ArrayJobSpec(1, std::vector<int>(model::kMaxArrayElements + 1)), "field 'array.indices'");
  json bad = ArrayJobSpec(1, {0, 1});
  bad["array"]["max_running"] = 0;
  refused(bad, "field 'array.max_running'");
  bad = ArrayJobSpec(1, {0, 1});
  bad["array"]["env"] = json::array({json::object()});
  refused(bad, "field 'array.env': must be a list of one object per index (2)");
  bad["array"]["env"] = json::array({json::object(), json{{"learning-rate", "1"}}});
  refused(bad, "field 'array.env[1].learning-rate': is not a valid variable name");
  bad["array"]["env"] = json::array({json::object(), json{{"LR", 1}}});
  refused(bad, "field 'array.env[1].LR': must be a string");
  bad = ArrayJobSpec(1, {0});
  bad["array"]["size"] = 3;
  refused(bad, "field 'array.size': unknown field");
  EXPECT_EQ(SubmitJson(alice_, ArrayJobSpec(1, {0})).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(SubmitArrayJson(alice_, Spec(1)).status().code(), StatusCode::kInvalidArgument);
  json elsewhere = ArrayJobSpec(1, {0});
  elsewhere["project"] = "vision";
  EXPECT_EQ(SubmitArrayJson(alice_, elsewhere).status().code(), StatusCode::kPermissionDenied);
  EXPECT_EQ(store_->ListJobs({.limit = 0})->size(), stored);
}

TEST_F(ControllerTest, ArrayRunsAtMostMaxRunningAndLaunchesCarryTheIndex) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto jobs = SubmitArrayJson(alice_, ArrayJobSpec(1, {3, 1, 4, 2}, 2));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const JobId array = jobs->array_ids[0];
  const JobId plain = Submit(Spec(1));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 3u);  // two elements and the plain job
  std::map<int64_t, json> launches;     // by job id
  for (const json& launch : answer["run"]) launches[launch["job_id"].get<int64_t>()] = launch;
  EXPECT_EQ(launches[jobs->array_ids[0].value()]["array_index"], 3);
  EXPECT_EQ(launches[jobs->array_ids[1].value()]["array_index"], 1);
  EXPECT_FALSE(launches[plain.value()].contains("array_index"));
  json waiting = *JobJson(alice_, jobs->array_ids[2]);
  EXPECT_EQ(waiting["pending_reason"]["code"], "array_limit");
  EXPECT_EQ(waiting["pending_reason"]["message"],
            "array " + std::to_string(array.value()) + " has max_running 2 running");
  // A restarted server keeps the limit: the running elements are adopted and count.
  Restart();
  controller_->Tick();
  EXPECT_TRUE(Beat("a", Report({TaskReport(launches[jobs->array_ids[0].value()], "running"),
                                TaskReport(launches[jobs->array_ids[1].value()], "running"),
                                TaskReport(launches[plain.value()], "running")}))["run"]
                  .empty());
  EXPECT_EQ(StateOf(jobs->array_ids[2]), "pending");
  // One element ends: the next one (in index order given) starts, with its index.
  Beat("a", Report({TaskReport(launches[jobs->array_ids[0].value()], "exited", 0),
                    TaskReport(launches[jobs->array_ids[1].value()], "running")}));
  EXPECT_EQ(StateOf(jobs->array_ids[0]), "succeeded");
  controller_->Tick();
  json next = Beat("a", Report({TaskReport(launches[jobs->array_ids[1].value()], "running")}));
  ASSERT_EQ(next["run"].size(), 1u);
  EXPECT_EQ(next["run"][0]["job_id"], jobs->array_ids[2].value());
  EXPECT_EQ(next["run"][0]["array_index"], 4);
  EXPECT_EQ(StateOf(jobs->array_ids[3]), "pending");
}

TEST_F(ControllerTest, ArrayIsCancelledWholeOrOneElementAtATime) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto jobs = SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1, 2, 3}, 1));
  ASSERT_TRUE(jobs.ok()) << jobs.status().ToString();
  const std::vector<JobId> ids = jobs->array_ids;
  const JobId array = ids[0];
  controller_->Tick();
  json launch = Beat("a", Report())["run"][0];
  ASSERT_EQ(launch["job_id"], ids[0].value());
  Beat("a", Report({TaskReport(launch, "running")}));
  // One element alone: the others stay.
  ASSERT_TRUE(controller_->Cancel(alice_, ids[1]).ok());
  EXPECT_EQ(StateOf(ids[1]), "cancelled");
  EXPECT_EQ(StateOf(ids[2]), "pending");

  // Who may cancel the array: its owner or an admin; others do not see it.
  Status s = controller_->CancelArray(bob_, array).status();
  EXPECT_EQ(s.code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(s.message(),
              HasSubstr("array " + std::to_string(array.value()) + " belongs to alice"));
  const Principal outsider{bob_.user_id, "bob", false, {}};
  EXPECT_EQ(controller_->CancelArray(outsider, array).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(StateOf(ids[2]), "pending");
  const JobId plain = Submit(Spec(1));
  s = controller_->CancelArray(alice_, plain).status();
  EXPECT_EQ(s.code(), StatusCode::kNotFound);
  EXPECT_THAT(s.message(), HasSubstr("array " + std::to_string(plain.value()) + " not found"));
  EXPECT_EQ(controller_->CancelArray(alice_, ids[1]).status().code(), StatusCode::kNotFound);

  // The whole array: pending elements end at once, the running one once its task stopped.
  auto cancelled = controller_->CancelArray(alice_, array);
  ASSERT_TRUE(cancelled.ok()) << cancelled.status().ToString();
  EXPECT_EQ(*cancelled, (std::vector<JobId>{ids[0], ids[2], ids[3]}));
  EXPECT_EQ(StateOf(ids[2]), "cancelled");
  EXPECT_EQ(StateOf(ids[3]), "cancelled");
  EXPECT_EQ(StateOf(ids[0]), "running");
  json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(answer["kill"][0]["allocation_id"], launch["allocation_id"]);
  Beat("a", Report({TaskReport(launch, "killed", 143)}));
  EXPECT_EQ(StateOf(ids[0]), "cancelled");
  EXPECT_EQ(StateOf(plain), "pending");  // the plain job was never part of it
  s = controller_->CancelArray(alice_, array).status();
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("already ended"));

  // An admin may cancel anyone's array.
  auto other = SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1}));
  ASSERT_TRUE(other.ok());
  const Principal admin{bob_.user_id, "root", true, {}};
  auto by_admin = controller_->CancelArray(admin, other->array_ids[0]);
  ASSERT_TRUE(by_admin.ok()) << by_admin.status().ToString();
  EXPECT_EQ(*by_admin, other->array_ids);
  EXPECT_EQ(StateOf(other->array_ids[1]), "cancelled");
  EXPECT_EQ(store_->JobEvents(other->array_ids[1])->back().reason, "cancelled by root");
}

// --- Environments (docs/environments.md) ------------------------------------------------------

json EnvSpec(const std::string& name, const std::string& venv, const std::string& word) {
  return {{"name", name},
          {"host", {{"venv", venv}}},
          {"command", {"echo", word}},
          {"env", {{"A", "env"}, {"B", "env"}}}};
}

TEST_F(ControllerTest, AnEnvironmentIsInvisibleToOthersUntilShared) {
  ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
  alice_.projects.push_back("vision");
  EnvironmentCatalog& envs = controller_->Environments();
  ASSERT_TRUE(CreateEnv(alice_, EnvSpec("mine", "/opt/mine", "hi")).ok());
  EXPECT_EQ(envs.Get(bob_, "mine", std::nullopt).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(envs.List(bob_)->empty());
  json spec = {{"name", "t"}, {"environment", "mine"}};
  auto refused = SubmitJson(bob_, spec);
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'environment'"));
  // Bob may neither take the name nor share alice's environment.
  EXPECT_EQ(CreateEnv(bob_, EnvSpec("mine", "/opt/b", "b")).status().code(),
            StatusCode::kAlreadyExists);
  EXPECT_EQ(envs.Share(bob_, "mine", "default").code(), StatusCode::kNotFound);
  EXPECT_EQ(envs.Share(alice_, "mine", "robotics").code(), StatusCode::kPermissionDenied);

  ASSERT_TRUE(envs.Share(alice_, "mine", "vision").ok());
  EXPECT_EQ(envs.Get(bob_, "mine", std::nullopt).status().code(), StatusCode::kNotFound);
  bob_.projects.push_back("vision");
  ASSERT_TRUE(envs.Get(bob_, "mine", std::nullopt).ok());
  EXPECT_EQ(envs.Share(bob_, "mine", "vision").code(), StatusCode::kPermissionDenied);
  auto job = SubmitJson(bob_, spec);
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  // A clone is the cloner's own.
  auto source = envs.Get(bob_, "mine", std::nullopt);
  ASSERT_TRUE(source.ok());
  auto changed = protocol::CloneEnvironmentSpec(
      source->spec, {{"name", "bobs"}, {"set", {{"env", {{"A", nullptr}}}}}});
  ASSERT_TRUE(changed.ok()) << changed.status().ToString();
  auto clone = envs.Create(bob_, *changed);
  ASSERT_TRUE(clone.ok()) << clone.status().ToString();
  EXPECT_EQ(clone->record.owner, "bob");
  EXPECT_EQ(clone->spec.env, (std::map<std::string, std::string>{{"B", "env"}}));
  EXPECT_THAT(
      protocol::CloneEnvironmentSpec(source->spec, {{"name", "x"}, {"set", {{"colour", "red"}}}})
          .status()
          .message(),
      HasSubstr("field 'colour': unknown field"));
}

TEST_F(ControllerTest, SubmissionPinsTheEnvironmentVersionAcrossNewVersionsAndRestarts) {
  ASSERT_TRUE(CreateEnv(alice_, EnvSpec("mine", "/opt/v1", "v1")).ok());
  const JobId id = Submit({{"name", "t"}, {"environment", "mine"}, {"env", {{"B", "job"}}}});
  ASSERT_TRUE(CreateEnv(alice_, EnvSpec("mine", "/opt/v2", "v2")).ok());
  const json stored = json::parse(store_->GetJob(id)->spec_json);
  EXPECT_EQ(stored["environment"], "mine@1");
  EXPECT_EQ(stored["command"], json({"echo", "v1"}));
  EXPECT_EQ(stored["env"], json({{"A", "env"}, {"B", "job"}}));

  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0]["environment"],
            json({{"name", "mine"}, {"version", 1}, {"runtime", "process"}, {"venv", "/opt/v1"}}));
  Restart();
  run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0]["environment"]["version"], 1);
  EXPECT_EQ(run[0]["argv"], json({"echo", "v1"}));

  EXPECT_EQ(
      json::parse(store_->GetJob(Submit({{"environment", "mine"}}))->spec_json)["environment"],
      "mine@2");
  auto missing = SubmitJson(alice_, {{"environment", "mine@3"}});
  EXPECT_THAT(missing.status().message(), HasSubstr("field 'environment'"));
}

TEST_F(ControllerTest, AJobNeedsACommandFromItselfOrItsEnvironment) {
  ASSERT_TRUE(CreateEnv(alice_, {{"name", "bare"}}).ok());
  auto job = SubmitJson(alice_, {{"environment", "bare"}});
  EXPECT_THAT(job.status().message(), HasSubstr("field 'command': is required"));
  EXPECT_THAT(SubmitJson(alice_, {{"name", "t"}}).status().message(), HasSubstr("field 'command'"));
  EXPECT_TRUE(SubmitJson(alice_, {{"environment", "bare"}, {"command", {"true"}}}).ok());
}

TEST_F(ControllerTest, AContainerEnvironmentRunsOnlyOnNodesWithAContainerRuntime) {
  ASSERT_TRUE(CreateEnv(alice_, {{"name", "boxed"}, {"image", "corral-test/busybox:1"}}).ok());
  const JobId id = Submit({{"environment", "boxed"}, {"command", {"true"}}});
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  controller_->Tick();
  EXPECT_TRUE(Beat("a", Report())["run"].empty());
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["pending_reason"]["code"], "no_runtime");
  EXPECT_THAT((*view)["pending_reason"]["message"].get<std::string>(),
              HasSubstr("needs a node offering container"));
  // With node a registered, the same environment is refused at submit, saying what it needs.
  EXPECT_THAT(
      SubmitJson(alice_, {{"environment", "boxed"}, {"command", {"true"}}}).status().message(),
      HasSubstr("field 'environment': needs a container engine (podman or docker)"));

  json with_engine = Inventory(8);
  with_engine["runtimes"] = {"process", "container"};
  ASSERT_TRUE(RegisterNode("b", kNodeB, with_engine).ok());
  controller_->Tick();
  json run = Beat("b", Report())["run"];
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0]["environment"]["runtime"], "container");
  EXPECT_EQ(run[0]["environment"]["image"], "corral-test/busybox:1");

  // A runtime this server does not know (a newer agent's) is ignored, not refused.
  json newer = Inventory(8);
  newer["runtimes"] = {"process", "vm"};
  EXPECT_TRUE(RegisterNode("c", "node-c-0123456789abcdef", newer).ok());
  // A job of an environment that can run on the process runtime is not constrained: a gang of
  // it spans every node, the process-only one too, and a size no node has is refused naming
  // GPUs, not runtimes.
  ASSERT_TRUE(CreateEnv(alice_, {{"name", "both"},
                                 {"image", "corral-test/busybox:1"},
                                 {"host", {{"venv", "/opt/both"}}},
                                 {"command", {"true"}}})
                  .ok());
  auto big = SubmitJson(alice_, {{"environment", "both"}, {"resources", {{"gpus", 64}}}});
  EXPECT_THAT(big.status().message(),
              HasSubstr("field 'resources.gpus': needs 64 GPUs on one node; the largest node "
                        "has 8"));
  const JobId wide = Submit({{"environment", "both"}, {"resources", {{"gpus", 8}}}, {"tasks", 3}});
  controller_->Tick();
  auto wide_view = JobJson(alice_, wide);
  ASSERT_TRUE(wide_view.ok());
  std::set<std::string> nodes;
  for (const json& t : (*wide_view)["tasks"]) nodes.insert(t["node"].get<std::string>());
  EXPECT_EQ(nodes, (std::set<std::string>{"a", "b", "c"})) << wide_view->dump();
}

// A plain-host environment that needs a tool (host.tools) is placed only on nodes whose agent
// found it, and launched on the process runtime there even when it also has an image.
TEST_F(ControllerTest, AnEnvironmentNeedingAToolRunsOnlyWhereTheToolIs) {
  ASSERT_TRUE(CreateEnv(alice_, {{"name", "nb"},
                                 {"image", "corral-test/notebook:1"},
                                 {"host", {{"tools", {"jupyter-lab", "jupyter-notebook"}}}},
                                 {"command", {"jupyter-notebook"}}})
                  .ok());
  const JobId id = Submit({{"environment", "nb"}});
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  controller_->Tick();
  EXPECT_TRUE(Beat("a", Report())["run"].empty());
  auto view = JobJson(alice_, id);
  ASSERT_TRUE(view.ok());
  EXPECT_EQ((*view)["pending_reason"]["code"], "no_runtime");
  EXPECT_THAT((*view)["pending_reason"]["message"].get<std::string>(),
              HasSubstr("container or tool:jupyter-lab or tool:jupyter-notebook"));

  json with_notebook = Inventory(8);
  with_notebook["runtimes"] = {"process", "container"};
  with_notebook["tools"] = {"python3", "jupyter-notebook"};
  ASSERT_TRUE(RegisterNode("b", kNodeB, with_notebook).ok());
  controller_->Tick();
  json run = Beat("b", Report())["run"];
  ASSERT_EQ(run.size(), 1u);
  EXPECT_EQ(run[0]["environment"]["runtime"], "process");
}

// What an agent says of a task's start (a scratch folder instead of the submit folder, limits
// it could not apply) follows "all tasks running" in the job's event, each note once with its
// tasks, even when it came in an earlier heartbeat than the start of the gang's last task.
TEST_F(ControllerTest, TheStartEventSaysWhatTheAgentsSaidOfTheStarts) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId id = Submit({{"command", {"true"}}, {"tasks", 2}, {"resources", {{"gpus", 1}}}});
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 2u);
  if (run[0]["task_index"] != 1) std::swap(run[0], run[1]);  // run[0]: task 1
  const std::string note =
      "running in a scratch folder: the submit folder /home/a is not on this node (give "
      "--workdir to choose)";
  json noted = TaskReport(run[0], "running");
  noted["message"] = note;
  Beat("a", Report({noted}));
  json also_noted = TaskReport(run[1], "running");  // task 0, the same note: said once
  also_noted["message"] = note;
  Beat("a", Report({TaskReport(run[0], "running"), also_noted}));
  auto events = store_->JobEvents(id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().to_state, model::JobState::kRunning);
  EXPECT_EQ(events->back().reason, "all tasks running; tasks 0 and 1: " + note);

  // A job that succeeded before its start was recorded says it in its end.
  const JobId quick = Submit({{"command", {"true"}}, {"resources", {{"gpus", 1}}}});
  controller_->Tick();
  json launch = Beat("a", Report())["run"];
  ASSERT_EQ(launch.size(), 1u);
  json exited = TaskReport(launch[0], "exited", 0);
  exited["message"] = note;
  Beat("a", Report({TaskReport(run[0], "running"), TaskReport(run[1], "running"), exited}));
  events = store_->JobEvents(quick);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().to_state, model::JobState::kSucceeded);
  EXPECT_EQ(events->back().reason, "all tasks exited with code 0; task 0: " + note);
}

TEST_F(ControllerTest, AJobNoRegisteredNodeCouldRunIsRefusedAtSubmit) {
  // No node yet: nothing is refused, the nodes may not have joined.
  EXPECT_TRUE(SubmitJson(alice_, {{"command", {"true"}}, {"resources", {{"gpus", 64}}}}).ok());
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto refused = SubmitJson(alice_, {{"command", {"true"}}, {"resources", {{"gpus", 9}}}});
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("field 'resources.gpus': needs 9 GPUs on one node; the largest node has 8 "
                        "(a); no registered node could ever run it"));
  EXPECT_THAT(SubmitArrayJson(alice_, {{"command", {"true"}},
                                       {"resources", {{"gpus", 9}}},
                                       {"array", {{"indices", {0, 1}}}}})
                  .status()
                  .message(),
              HasSubstr("field 'resources.gpus': needs 9 GPUs"));
  EXPECT_THAT(
      SubmitJson(alice_, {{"command", {"true"}}, {"resources", {{"gpus", 8}}}, {"tasks", 2}})
          .status()
          .message(),
      HasSubstr("field 'tasks': needs 2 tasks started together; the registered nodes hold "
                "1 of them at most (on 1 node)"));
  EXPECT_TRUE(SubmitJson(alice_, {{"command", {"true"}}, {"resources", {{"gpus", 8}}}}).ok());
  // A drained node still counts: it may come back.
  ASSERT_TRUE(controller_->SetNodeState("a", "drain").ok());
  EXPECT_TRUE(SubmitJson(alice_, {{"command", {"true"}}, {"resources", {{"gpus", 8}}}}).ok());
}

TEST_F(ControllerTest, EnvironmentVariablesMayNotHoldNamesCorralSets) {
  EXPECT_THAT(
      CreateEnv(alice_, {{"name", "x"}, {"env", {{"CORRAL_JOB_ID", "1"}}}}).status().message(),
      HasSubstr("field 'env.CORRAL_JOB_ID'"));
  // MASTER_PORT is only corral's in distributed jobs: the environment may set it, a torchrun
  // job may not use the environment.
  ASSERT_TRUE(
      CreateEnv(alice_,
                {{"name", "port"}, {"command", {"true"}}, {"env", {{"MASTER_PORT", "1234"}}}})
          .ok());
  EXPECT_TRUE(SubmitJson(alice_, {{"environment", "port"}}).ok());
  auto refused =
      SubmitJson(alice_, {{"environment", "port"}, {"launcher", "torchrun"}, {"tasks", 2}});
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'env.MASTER_PORT'"));
}

TEST_F(ControllerTest, AJobThatMayRunInAContainerHasNoLineBreaksInItsVariables) {
  ASSERT_TRUE(
      CreateEnv(alice_, {{"name", "boxed"}, {"image", "busybox"}, {"command", {"true"}}}).ok());
  auto refused = SubmitJson(alice_, {{"environment", "boxed"}, {"env", {{"A", "1\n2"}}}});
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'env.A': may not contain a line break"));
  // Without a container in sight, line breaks are fine.
  EXPECT_TRUE(SubmitJson(alice_, {{"command", {"true"}}, {"env", {{"A", "1\n2"}}}}).ok());
}

TEST_F(ControllerTest, AnEnvironmentsGpuMinimumIsEnforcedAtSubmission) {
  ASSERT_TRUE(
      CreateEnv(alice_, {{"name", "gpu"}, {"command", {"true"}}, {"gpus", {{"min", 2}}}}).ok());
  auto refused = SubmitJson(alice_, {{"environment", "gpu"}, {"resources", {{"gpus", 1}}}});
  EXPECT_THAT(refused.status().message(),
              HasSubstr("field 'resources.gpus': environment 'gpu@1' needs at least 2 GPUs"));
  EXPECT_TRUE(SubmitJson(alice_, {{"environment", "gpu"}, {"resources", {{"gpus", 2}}}}).ok());
}

TEST_F(ControllerTest, AJobWhoseEnvironmentCannotBeLoadedFailsAloneOnRecovery) {
  const JobId kept = Submit(Spec(1));
  // A stored spec pinned to a version that does not exist (as after a hand edit of the store).
  store::JobRecord record;
  record.user = "alice";
  record.project = "default";
  record.name = "ghost";
  record.submit_time = Seconds(1);
  record.spec_json = json({{"name", "ghost"},
                           {"command", {"true"}},
                           {"environment", "ghost@1"},
                           {"resources", {{"gpus", 1}}}})
                         .dump();
  auto ghost = store_->InsertJob(record);
  ASSERT_TRUE(ghost.ok()) << ghost.status().ToString();
  Restart();
  EXPECT_EQ(StateOf(*ghost), "failed");
  EXPECT_THAT(store_->JobEvents(*ghost)->back().reason, HasSubstr("cannot recover"));
  EXPECT_EQ(StateOf(kept), "pending");
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  controller_->Tick();
  EXPECT_EQ(Beat("a", Report())["run"].size(), 1u);
}

TEST_F(ControllerTest, ABuiltinNamedLikeAUsersEnvironmentIsSkipped) {
  EnvironmentCatalog& envs = controller_->Environments();
  ASSERT_TRUE(CreateEnv(alice_, {{"name", "newcomer"}}).ok());
  EnvironmentSpec builtin;
  builtin.name = "newcomer";
  builtin.description = "added to envs/ later";
  EnvironmentSpec other;
  other.name = "fresh";
  auto loaded = envs.LoadBuiltins({builtin, other});
  ASSERT_TRUE(loaded.ok()) << loaded.status().ToString();
  EXPECT_EQ(loaded->added, (std::vector<std::string>{"fresh@1"}));
  ASSERT_EQ(loaded->skipped.size(), 1u);
  EXPECT_THAT(loaded->skipped[0], HasSubstr("'newcomer' not loaded"));
  EXPECT_EQ(envs.Get(bob_, "newcomer", std::nullopt).status().code(), StatusCode::kNotFound);
  // Taking a name does not tell who holds it.
  auto taken = CreateEnv(bob_, {{"name", "newcomer"}});
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.status().message(), Not(HasSubstr("alice")));
}

// --- Sessions (docs/sessions.md) ----------------------------------------------------------

json SessionSpec(json session = json::object()) {
  return {{"name", "lab"},
          {"command", {"python3", "-m", "http.server"}},
          {"resources", {{"gpus", 1}}},
          {"session", std::move(session)}};
}

class SessionTest : public ControllerTest {
 protected:
  // Submits a session of alice's and starts it on node a (address 10.0.0.1): its launch.
  json StartSession(const json& spec = SessionSpec()) {
    auto job = SubmitSessionJson(alice_, spec);
    EXPECT_TRUE(job.ok()) << job.status().ToString();
    id_ = job.ok() ? job->id : JobId(0);
    controller_->Tick();
    json answer = Beat("a", Running());
    EXPECT_EQ(answer["run"].size(), 1u);
    if (answer["run"].empty()) return json::object();
    json launch = answer["run"][0];
    running_.push_back(launch);
    Beat("a", Running());
    EXPECT_EQ(StateOf(id_), "running");
    return launch;
  }
  // A report of every session task started so far as running (a heartbeat lists them all).
  json Running() {
    std::vector<json> tasks;
    for (const json& launch : running_) tasks.push_back(TaskReport(launch, "running"));
    return Report(tasks);
  }
  std::string Token() { return (*SessionJson(alice_, id_))["token"]; }
  std::vector<std::string> EventReasons(JobId id) {
    auto events = store_->JobEvents(id);
    EXPECT_TRUE(events.ok());
    std::vector<std::string> out;
    for (const auto& e : *events) out.push_back(e.reason);
    return out;
  }
  std::vector<std::string> EventReasons() { return EventReasons(id_); }
  void SetUp() override {
    node_timeout_ = Seconds(int64_t{1} << 30);  // the clock jumps; nodes stay
    ControllerTest::SetUp();
    ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(8, "10.0.0.1")).ok());
  }

  JobId id_{0};
  std::vector<json> running_;  // launches of the sessions started
  const Principal admin_{99, "root", true, {}};
};

TEST_F(SessionTest, TheSecretIsNeverStoredAndIsDerivedFromTheServersKey) {
  StartSession();
  const std::string token = Token();
  auto record = store_->GetJob(id_);
  ASSERT_TRUE(record.ok());
  EXPECT_EQ(record->spec_json.find(token), std::string::npos) << record->spec_json;
  EXPECT_NE(record->spec_json.find("\"salt\""), std::string::npos) << record->spec_json;
  // Every server with the key derives the same secret (after a restart, or a failover).
  Restart();
  EXPECT_EQ(Token(), token);
  // Without the key, what the store holds says nothing about it.
  session_key_ = std::string(64, '7');
  Restart();
  EXPECT_NE(Token(), token);
}

TEST_F(SessionTest, TheLaunchCarriesThePortPrefixAndToken) {
  const json launch = StartSession();
  const std::string token = Token();
  EXPECT_EQ(token.size(), 64u);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos);
  const int port = launch["session"]["port"];
  EXPECT_GE(port, model::kFirstRendezvousPort);
  EXPECT_LE(port, model::kLastRendezvousPort);
  const std::string prefix = "/sessions/" + std::to_string(id_.value()) + "/";
  EXPECT_EQ(launch["session"], json({{"port", port}, {"url_prefix", prefix}, {"token", token}}));
  EXPECT_EQ(launch["argv"], json({"python3", "-m", "http.server"}));
  // The agent sets the variables from "session" (agent::TaskEnvironment): none in "env".
  EXPECT_TRUE(launch["env"].empty()) << launch["env"];
  EXPECT_FALSE(launch.contains("distributed"));
  // The proxy reaches the app at the node's address and that port, with the token.
  auto target = controller_->ProxyTarget(alice_, id_);
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->state, model::JobState::kRunning);
  EXPECT_EQ(target->address, "10.0.0.1");
  EXPECT_EQ(target->port, port);
  EXPECT_EQ(target->token, token);
  auto view = SessionJson(alice_, id_);
  EXPECT_EQ((*view)["node"], "a");
  EXPECT_EQ((*view)["address"], "10.0.0.1");
  EXPECT_EQ((*view)["port"], port);
  EXPECT_EQ((*view)["path"], prefix);
  EXPECT_EQ((*view)["idle_timeout_s"], 3600);  // the server's default
}

TEST_F(SessionTest, TheTokenIsShownOnlyToTheOwnerThroughTheSessionApi) {
  StartSession();
  const std::string token = Token();
  auto job = JobJson(alice_, id_);
  ASSERT_TRUE(job.ok());
  EXPECT_EQ(job->dump().find(token), std::string::npos);
  EXPECT_TRUE((*job)["spec"]["session"].is_object());
  auto page = controller_->ListJobs(alice_, {.limit = 10}, false);
  ASSERT_TRUE(page.ok());
  ASSERT_EQ(page->jobs.size(), 1u);
  EXPECT_EQ(protocol::ToJson(page->jobs).dump().find(token), std::string::npos);
  EXPECT_EQ(protocol::ToJson(*controller_->QueueView(alice_, 10)).dump().find(token),
            std::string::npos);
  // Another member of the project: as if there were no session.
  EXPECT_EQ(controller_->SessionView(bob_, id_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(controller_->ProxyTarget(bob_, id_).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(controller_->StopSession(bob_, id_).code(), StatusCode::kNotFound);
  EXPECT_TRUE(controller_->ListSessions(bob_).empty());
  // An admin sees it (and may stop it), but neither gets the token nor passes the proxy: an
  // app's pages run on the server's origin, so they must not reach an admin's browser.
  auto seen = SessionJson(admin_, id_);
  ASSERT_TRUE(seen.ok());
  EXPECT_FALSE(seen->contains("token"));
  EXPECT_EQ(controller_->ProxyTarget(admin_, id_).status().code(), StatusCode::kNotFound);
  ASSERT_EQ(controller_->ListSessions(alice_).size(), 1u);
  EXPECT_EQ(controller_->ListSessions(alice_)[0].token, token);
  // A plain job is no session.
  const JobId plain = Submit(Spec(1));
  EXPECT_EQ(controller_->SessionView(alice_, plain).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(controller_->ProxyTarget(alice_, plain).status().code(), StatusCode::kNotFound);
}

TEST_F(SessionTest, APendingOrEndedSessionHasNoEndpoint) {
  ASSERT_TRUE(SubmitSessionJson(alice_, SessionSpec()).ok());
  auto waiting = SubmitSessionJson(alice_, [] {
    json spec = SessionSpec();
    spec["resources"]["gpus"] = 1;
    spec["resources"]["gpu_models"] = {"H100"};  // no node has one: it waits
    return spec;
  }());
  ASSERT_TRUE(waiting.ok());
  auto target = controller_->ProxyTarget(alice_, waiting->id);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->state, model::JobState::kPending);
  EXPECT_EQ(target->port, 0);
  ASSERT_TRUE(controller_->StopSession(alice_, waiting->id).ok());
  target = controller_->ProxyTarget(alice_, waiting->id);
  ASSERT_TRUE(target.ok());
  EXPECT_EQ(target->state, model::JobState::kCancelled);
  EXPECT_EQ(controller_->StopSession(alice_, waiting->id).code(), StatusCode::kFailedPrecondition);
}

TEST_F(SessionTest, AnIdleSessionGetsANoticeAndIsThenStopped) {
  const json launch = StartSession(SessionSpec({{"idle_timeout_s", 600}}));
  clock_.Advance(Seconds(599));
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "all tasks running");
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "session idle for 600 s: stopping in 300 s unless used");
  auto view = SessionJson(alice_, id_);
  EXPECT_EQ((*view)["idle_notice"], json({{"time", 1600}, {"stops_at", 1900}}));
  clock_.Advance(Seconds(299));
  controller_->Tick();
  EXPECT_EQ(StateOf(id_), "running");
  EXPECT_TRUE(Beat("a", Report({TaskReport(launch, "running")}))["kill"].empty());
  clock_.Advance(Seconds(1));
  controller_->Tick();
  const json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(answer["kill"][0]["reason"], "session idle for 900 s");
  Beat("a", Report({TaskReport(launch, "killed", 143)}));
  running_.clear();
  EXPECT_EQ(StateOf(id_), "cancelled");
  EXPECT_EQ(store_->GetJob(id_)->reason, "session idle for 900 s");
  // Its port is free again: the next session on the node gets the same one.
  const int port = launch["session"]["port"];
  EXPECT_EQ(StartSession()["session"]["port"], port);
}

TEST_F(SessionTest, ASessionWhoseGpuWorksIsInUseAndOneWhoseGpuIdlesIsStopped) {
  const json launch = StartSession(SessionSpec({{"idle_timeout_s", 600}}));
  const int gpu = launch["gpus"][0];
  auto beat = [&](int util) {
    json report = Running();
    report["gpu_metrics"] = GpuMetrics({{gpu, util, {TaskKeyOf(launch)}}});
    return Beat("a", report);
  };
  // Nobody uses it through the proxy, but its GPU works (80 %) for 20 minutes: no notice.
  for (int minute = 0; minute < 20; ++minute) {
    beat(80);
    clock_.Advance(Seconds(60));
    controller_->Tick();
  }
  EXPECT_EQ(EventReasons().back(), "all tasks running");
  EXPECT_EQ((*SessionJson(alice_, id_))["last_activity"], 2200);
  // Its GPU falls under the idle threshold: idle from then on, noticed 600 s later, stopped.
  beat(2);
  const Seconds idle_from = clock_.Now();
  clock_.Advance(Seconds(599));
  beat(2);
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "all tasks running");
  clock_.Advance(Seconds(1));
  beat(2);
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "session idle for 600 s: stopping in 300 s unless used");
  EXPECT_EQ((*SessionJson(alice_, id_))["last_activity"], idle_from.value());
  clock_.Advance(Seconds(300));
  beat(2);
  controller_->Tick();
  EXPECT_EQ(beat(2)["kill"][0]["reason"], "session idle for 900 s");
}

TEST_F(SessionTest, UseAfterTheNoticeClearsIt) {
  const json launch = StartSession(SessionSpec({{"idle_timeout_s", 600}}));
  clock_.Advance(Seconds(600));
  controller_->Tick();
  ASSERT_THAT(EventReasons().back(), HasSubstr("stopping in 300 s unless used"));
  clock_.Advance(Seconds(100));
  ASSERT_TRUE(controller_->ProxyTarget(alice_, id_).ok());  // a request through the proxy
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "session in use again");
  EXPECT_TRUE((*SessionJson(alice_, id_))["idle_notice"].is_null());
  EXPECT_EQ((*SessionJson(alice_, id_))["last_activity"], 1700);
  // Where the first notice would have stopped it, it runs on; idle again, a new notice.
  clock_.Advance(Seconds(200));
  controller_->Tick();
  EXPECT_EQ(StateOf(id_), "running");
  EXPECT_EQ(EventReasons().back(), "session in use again");
  clock_.Advance(Seconds(400));
  controller_->Tick();
  EXPECT_THAT(EventReasons().back(), HasSubstr("session idle for 600 s"));
  EXPECT_TRUE(Beat("a", Report({TaskReport(launch, "running")}))["kill"].empty());
}

TEST_F(SessionTest, IdleTimeoutZeroNeverStopsAndTheServerDefaultApplies) {
  session_idle_timeout_ = Seconds(120);
  Restart();
  StartSession(SessionSpec({{"idle_timeout_s", 0}}));
  const JobId never = id_;
  StartSession();  // the server's default: 120 s
  clock_.Advance(Seconds(1000000));
  controller_->Tick();
  EXPECT_EQ(StateOf(never), "running");
  EXPECT_EQ(EventReasons(never).back(), "all tasks running");
  EXPECT_THAT(EventReasons().back(), HasSubstr("session idle for 1000000 s"));
  EXPECT_EQ((*SessionJson(alice_, id_))["idle_timeout_s"], 120);
}

TEST_F(SessionTest, AShellIsNeverStoppedWhenIdleEvenWithoutAnIdleTimeout) {
  session_idle_timeout_ = Seconds(120);
  Restart();
  StartSession(SessionSpec({{"shell", true}}));  // no idle_timeout_s: not the server's 120 s
  clock_.Advance(Seconds(1000000));
  controller_->Tick();
  EXPECT_EQ(StateOf(id_), "running");
  EXPECT_EQ((*SessionJson(alice_, id_))["idle_timeout_s"], 0);
}

TEST_F(SessionTest, ARestartKeepsTheSessionsPort) {
  const json launch = StartSession(SessionSpec({{"idle_timeout_s", 600}}));
  const int port = launch["session"]["port"];
  clock_.Advance(Seconds(500));
  Restart();
  // The port is taken again: the next session on the node gets another one.
  json next = StartSession();
  EXPECT_NE(next["session"]["port"], port);
  auto target = controller_->ProxyTarget(alice_, JobId(launch["job_id"].get<int64_t>()));
  ASSERT_TRUE(target.ok()) << target.status().ToString();
  EXPECT_EQ(target->port, port);
  EXPECT_EQ(target->state, model::JobState::kRunning);
  EXPECT_EQ(target->token.size(), 64u);
}

TEST_F(SessionTest, IdleTimeAfterARestartCountsFromTheRestart) {
  StartSession(SessionSpec({{"idle_timeout_s", 600}}));
  clock_.Advance(Seconds(500));
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(8, "10.0.0.1")).ok());
  clock_.Advance(Seconds(599));
  controller_->Tick();
  EXPECT_EQ(EventReasons().back(), "all tasks running");
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_THAT(EventReasons().back(), HasSubstr("session idle for 600 s"));
}

// An app that says what it is told to about its use, and checks that the controller's lock is
// free while it is asked (heartbeats and the API must not wait for apps).
class FakeAppProbe final : public SessionAppProbe {
 public:
  explicit FakeAppProbe(std::function<void()> needs_the_lock)
      : needs_the_lock_(std::move(needs_the_lock)) {}
  ~FakeAppProbe() override { JoinCheckers(); }
  std::optional<Seconds> LastActivity(const SessionApp& app) override {
    std::promise<void> done;
    auto took_the_lock = done.get_future();
    std::thread checker([this, &done] {
      needs_the_lock_();
      done.set_value();
    });
    const bool lock_free =
        took_the_lock.wait_for(std::chrono::seconds(10)) == std::future_status::ready;
    std::lock_guard lock(mu_);
    if (lock_free) {
      checker.join();
    } else {
      // Blocked on the controller's lock: joined once the controller let it go.
      checkers_.push_back(std::move(checker));
    }
    asked.push_back(app);
    asked_without_the_lock = asked_without_the_lock && lock_free;
    return answer;
  }
  void JoinCheckers() {
    std::vector<std::thread> checkers;
    {
      std::lock_guard lock(mu_);
      checkers.swap(checkers_);
    }
    for (auto& t : checkers) t.join();
  }

  std::optional<Seconds> answer;  // what the app says
  std::vector<SessionApp> asked;
  bool asked_without_the_lock = true;

 private:
  std::function<void()> needs_the_lock_;
  std::mutex mu_;
  std::vector<std::thread> checkers_;
};

TEST_F(SessionTest, TheAppIsAskedBeforeTheNoticeAndTheStop) {
  FakeAppProbe probe([this] { controller_->ListSessions(alice_); });
  session_app_probe_ = &probe;
  Restart();
  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(8, "10.0.0.1")).ok());
  const json launch = StartSession(SessionSpec({{"idle_timeout_s", 600}}));  // at 1000
  auto tick = [&](int64_t seconds) {
    clock_.Advance(Seconds(seconds));
    controller_->Tick();
    probe.JoinCheckers();
  };
  tick(599);  // not idle yet: not asked
  EXPECT_TRUE(probe.asked.empty());
  // Used through the direct URL at 1500 (the proxy never saw it): no notice at 1600.
  probe.answer = Seconds(1500);
  tick(1);
  ASSERT_EQ(probe.asked.size(), 1u);
  EXPECT_EQ(probe.asked[0].address, "10.0.0.1");
  EXPECT_EQ(probe.asked[0].port, launch["session"]["port"]);
  EXPECT_EQ(probe.asked[0].url_prefix, "/sessions/" + std::to_string(id_.value()) + "/");
  EXPECT_EQ(probe.asked[0].token, Token());
  EXPECT_EQ(EventReasons().back(), "all tasks running");
  EXPECT_EQ((*SessionJson(alice_, id_))["last_activity"], 1500);
  tick(499);  // 2099: idle 599 s since 1500: not asked
  EXPECT_EQ(probe.asked.size(), 1u);
  // An app that says nothing (no such endpoint, no answer) changes nothing: the notice.
  probe.answer = std::nullopt;
  tick(1);
  EXPECT_EQ(probe.asked.size(), 2u);
  EXPECT_EQ(EventReasons().back(), "session idle for 600 s: stopping in 300 s unless used");
  // Asked again before the stop: used at 2300, so in use again.
  probe.answer = Seconds(2300);
  tick(300);
  EXPECT_EQ(probe.asked.size(), 3u);
  EXPECT_EQ(EventReasons().back(), "session in use again");
  EXPECT_EQ(StateOf(id_), "running");
  // An app whose clock is ahead counts as used when asked (3000), not later.
  probe.answer = Seconds(1000000);
  tick(600);
  EXPECT_EQ(probe.asked.size(), 4u);
  EXPECT_EQ((*SessionJson(alice_, id_))["last_activity"], 3000);
  probe.answer = std::nullopt;
  tick(600);
  EXPECT_EQ(EventReasons().back(), "session idle for 600 s: stopping in 300 s unless used");
  tick(300);
  EXPECT_EQ(probe.asked.size(), 6u);
  const json answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["kill"].size(), 1u);
  EXPECT_EQ(answer["kill"][0]["reason"], "session idle for 900 s");
  EXPECT_TRUE(probe.asked_without_the_lock);
  controller_.reset();  // before the probe it borrows
}

}  // namespace
}  // namespace corral::server

// ---- Typed allocations (issue 14, point 4) ----

namespace corral::server {
namespace {

// Copies every row of the tables `to` has from the database attached as `from`, column by column
// as `to` names them (so a table that gained columns since still copies).
void CopyRows(store::SqlConnection& to, const std::string& from,
              const std::vector<std::string>& tables) {
  for (const std::string& table : tables) {
    auto columns = to.Query("SELECT name FROM pragma_table_info('" + table + "')", {});
    ASSERT_TRUE(columns.ok()) << columns.status().ToString();
    std::string list;
    for (const auto& row : *columns) list += (list.empty() ? "" : ", ") + row.Text(0);
    Status s = to.ExecuteScript("INSERT INTO " + table + " (" + list + ") SELECT " + list +
                                " FROM " + from + "." + table);
    ASSERT_TRUE(s.ok()) << table << ": " << s.ToString();
  }
}

// The summary counts each live job once by its state, without walking the queue (a gang on two
// nodes is one running job), and the same after a restart re-adopts the gang.
TEST_F(ControllerTest, TheSummaryCountsEachJobOnceByItsState) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(4, "10.0.0.1")).ok());
  ASSERT_TRUE(RegisterNode("b", kNodeB, AddressedInventory(4, "10.0.0.2")).ok());
  const JobId gang = Submit(Spec(4, 2));  // one part on each node
  Submit(Spec(4));                        // waits for the gang's GPUs
  Submit(Spec(4));
  controller_->Tick();
  auto counts = [&] {
    const protocol::ClusterSummary s = controller_->ClusterSummary();
    return std::vector<int64_t>{s.jobs_pending, s.jobs_starting, s.jobs_running};
  };
  EXPECT_EQ(counts(), (std::vector<int64_t>{2, 1, 0}));
  const json on_a = Beat("a", Report())["run"];
  const json on_b = Beat("b", Report())["run"];
  ASSERT_EQ(on_a.size() + on_b.size(), 2u);
  Beat("a", Report({TaskReport(on_a[0], "running")}));
  Beat("b", Report({TaskReport(on_b[0], "running")}));
  ASSERT_EQ(StateOf(gang), "running");
  controller_->Tick();  // the reports' writes are applied, and a view published
  EXPECT_EQ(counts(), (std::vector<int64_t>{2, 0, 1}));

  Restart();
  EXPECT_EQ(StateOf(gang), "running");
  EXPECT_EQ(counts(), (std::vector<int64_t>{2, 0, 1}));
}

// A store as the corral before typed allocations wrote it (schema version 8, each task's
// allocation in that corral's form), with a running distributed gang: a new server opens it,
// adopts the gang without launching it again, keeps its GPUs and rendezvous ports taken, shows
// its allocation, and ends it when its parts exit.
TEST_F(ControllerTest, ARunningGangOfAStoreWrittenBeforeTypedAllocationsIsAdopted) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(8, "10.0.0.1")).ok());
  const JobId gang = Submit(Spec(4, 2));  // two parts of 4 GPUs: all of node a
  controller_->Tick();
  const json launches = Beat("a", Report())["run"];
  ASSERT_EQ(launches.size(), 2u);
  Beat("a", Report({TaskReport(launches[0], "running"), TaskReport(launches[1], "running")}));
  ASSERT_EQ(StateOf(gang), "running");
  controller_.reset();

  const std::string old_path = (test_store_.dir() / "v8.db").string();
  {
    auto conn = store::SqliteConnection::Open(old_path);
    ASSERT_TRUE(conn.ok()) << conn.status().ToString();
    store::SqlConnection& c = **conn;
    const std::vector<store::Migration> v8(store::StoreMigrations().begin(),
                                           store::StoreMigrations().begin() + 8);
    ASSERT_TRUE(store::ApplyMigrations(c, v8).ok());
    ASSERT_TRUE(c.ExecuteScript("ATTACH DATABASE '" + test_store_.db_path() +
                                "' AS now; PRAGMA foreign_keys = OFF; DELETE FROM counters")
                    .ok());
    CopyRows(c, "now",
             {"users", "tokens", "projects", "project_members", "jobs", "job_events", "nodes",
              "counters", "cluster", "environments", "environment_shares"});
    // Task rows in migration 1's column order; the allocation as that corral wrote it: the same
    // members with the task's node repeated.
    Status tasks = c.ExecuteScript(
        "INSERT INTO tasks SELECT allocation_id, generation, job_id, task_index, node, "
        "json_set(allocation, '$.node', node), state, exit_code, signal, start_time, end_time "
        "FROM now.tasks");
    ASSERT_TRUE(tasks.ok()) << tasks.ToString();
    auto rows = c.Query("SELECT * FROM tasks");
    ASSERT_TRUE(rows.ok() && rows->size() == 2u);
    EXPECT_THAT((*rows)[0].Text(5), HasSubstr("\"node\":\"a\""));
  }
  auto old_store = store::OpenStore("sqlite:" + old_path);
  ASSERT_TRUE(old_store.ok()) << old_store.status().ToString();
  auto c = Controller::Create(ControllerConfig{}, **old_store, clock_);
  ASSERT_TRUE(c.ok()) << c.status().ToString();
  controller_ = std::move(c).value();

  ASSERT_TRUE(RegisterNode("a", kNodeA, AddressedInventory(8, "10.0.0.1")).ok());
  json answer =
      Beat("a", Report({TaskReport(launches[0], "running"), TaskReport(launches[1], "running")}));
  EXPECT_TRUE(answer["run"].empty()) << answer.dump();
  EXPECT_TRUE(answer["kill"].empty()) << answer.dump();
  auto view = JobJson(alice_, gang);
  ASSERT_TRUE(view.ok()) << view.status().ToString();
  EXPECT_EQ((*view)["state"], "running");
  const json& allocation = (*view)["tasks"][1]["allocation"];
  EXPECT_EQ(allocation["node"], "a");
  EXPECT_EQ(allocation["gpus"].size(), 4u);
  EXPECT_EQ(allocation["rendezvous"]["port"], FirstPort());
  EXPECT_EQ(allocation["rendezvous"]["hosts"], json({"10.0.0.1", "10.0.0.1"}));

  // Its GPUs stay held; its port block stays taken.
  auto one = SubmitJson(alice_, Spec(1));
  auto pair = SubmitJson(alice_, Spec(0, 2));
  ASSERT_TRUE(one.ok() && pair.ok());
  controller_->Tick();
  EXPECT_EQ((*(*old_store)->GetJob(one->id)).state, model::JobState::kPending);
  answer =
      Beat("a", Report({TaskReport(launches[0], "running"), TaskReport(launches[1], "running")}));
  ASSERT_EQ(answer["run"].size(), 2u) << answer.dump();
  EXPECT_EQ(answer["run"][0]["job_id"], pair->id.value());
  EXPECT_EQ(answer["run"][0]["distributed"]["port"], FirstPort() + 1);

  Beat("a", Report({TaskReport(launches[0], "exited", 0), TaskReport(launches[1], "exited", 0)}));
  EXPECT_EQ((*(*old_store)->GetJob(gang)).state, model::JobState::kSucceeded);
  controller_->Tick();
  EXPECT_EQ((*(*old_store)->GetJob(one->id)).state, model::JobState::kStarting);
  controller_.reset();  // before the store it borrows
}

// --- Submit limits and token expiry (docs/control-plane.md, "Submit limits") -----------------

// Jobs in the store (any state).
size_t StoredJobs(store::Store& store) { return store.ListJobs({.limit = 0})->size(); }

TEST_F(ControllerTest, APendingCapCountsArrayElementsAndFollowsJobsInAndOutOfTheQueue) {
  ASSERT_TRUE(controller_->SetUserSubmitLimits("alice", {.max_pending_jobs = 3}).ok());
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId running = Submit(Spec(8, 1, /*max_restarts=*/1));
  Submit(Spec(8));
  // Two pending and an array of two: refused whole, nothing stored.
  auto array = SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1}));
  EXPECT_EQ(array.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(array.status().message(),
            "user 'alice' may have at most 3 jobs pending (max_pending_jobs) and has 2; this "
            "submission adds 2");
  EXPECT_EQ(array.status().retry_after(), SubmitLimiter::kPendingRetryAfter);
  EXPECT_EQ(StoredJobs(*store_), 2u);
  EXPECT_TRUE(SubmitJson(bob_, Spec(1)).ok());  // others are not held back
  // One starts: the array fits now, the queue is full again.
  controller_->Tick();
  EXPECT_EQ(StateOf(running), "starting");
  ASSERT_TRUE(SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1})).ok());
  EXPECT_EQ(SubmitJson(alice_, Spec(1)).status().code(), StatusCode::kResourceExhausted);
  // Its node is lost: requeued, it counts as pending again (4 over a cap of 3, not refused).
  node_give_up_ = node_timeout_;
  Restart();
  clock_.Advance(Seconds(40));
  controller_->Tick();
  EXPECT_EQ(StateOf(running), "pending");
  EXPECT_THAT(SubmitJson(alice_, Spec(1)).status().message(), HasSubstr("and has 4"));
  // Cancelled pending jobs free their places; a restart counts the queue again from the store.
  auto pending = store_->ListJobs({.states = {model::JobState::kPending}, .users = {"alice"}});
  ASSERT_EQ(pending->size(), 4u);
  ASSERT_TRUE(controller_->Cancel(alice_, (*pending)[0].id).ok());
  ASSERT_TRUE(controller_->Cancel(alice_, (*pending)[1].id).ok());
  Restart();
  EXPECT_TRUE(SubmitJson(alice_, Spec(1)).ok());
  EXPECT_THAT(SubmitJson(alice_, Spec(1)).status().message(),
              HasSubstr("at most 3 jobs pending (max_pending_jobs) and has 3"));
  // An array larger than the cap can never fit: 400, not 429.
  auto never = SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1, 2, 3}));
  EXPECT_EQ(never.status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(never.status().retry_after(), std::nullopt);
}

TEST_F(ControllerTest, ARateCapSaysWhenASlotFreesAndTheClusterCapHoldsEveryone) {
  max_pending_jobs_ = 5;
  Restart();
  ASSERT_TRUE(controller_->SetProjectSubmitLimits("default", {.max_submits_per_minute = 3}).ok());
  ASSERT_TRUE(SubmitJson(alice_, Spec(1)).ok());
  clock_.Advance(Seconds(20));
  ASSERT_TRUE(SubmitArrayJson(bob_, ArrayJobSpec(1, {0, 1})).ok());
  auto refused = SubmitJson(alice_, Spec(1));
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("project 'default' may submit at most 3 jobs a minute "
                        "(max_submits_per_minute) and submitted 3 in the last 60 s"));
  EXPECT_EQ(refused.status().retry_after(), Seconds(40));  // alice's first leaves the window
  clock_.Advance(Seconds(40));
  ASSERT_TRUE(SubmitJson(alice_, Spec(1)).ok());
  // Limits are stored: a restart keeps them. Cleared, only the cluster's cap (5) is left.
  Restart();
  EXPECT_EQ(SubmitJson(bob_, Spec(1)).status().code(), StatusCode::kResourceExhausted);
  ASSERT_TRUE(controller_->SetProjectSubmitLimits("default", {}).ok());
  ASSERT_TRUE(SubmitJson(bob_, Spec(1)).ok());
  auto full = SubmitJson(alice_, Spec(1));
  EXPECT_EQ(full.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(full.status().message(),
              HasSubstr("the cluster may hold at most 5 jobs pending (corral server "
                        "--max-pending-jobs) and holds 5"));
  EXPECT_EQ(StoredJobs(*store_), 5u);
}

TEST_F(ControllerTest, ConcurrentSubmissionsCommittedTogetherNeverPassACap) {
  ASSERT_TRUE(controller_->SetUserSubmitLimits("alice", {.max_pending_jobs = 40}).ok());
  std::atomic<int> admitted{0}, refused{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < 16; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 8; ++i) {
        // Single jobs go through the group commit together; every fourth is an array of 2.
        auto r = (t + i) % 4 == 0 ? SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1}))
                                  : SubmitJson(alice_, Spec(1));
        if (r.ok()) {
          admitted += r->array_ids.empty() ? 1 : 2;
        } else {
          EXPECT_EQ(r.status().code(), StatusCode::kResourceExhausted) << r.status().ToString();
          ++refused;
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_LE(admitted.load(), 40);
  EXPECT_GE(admitted.load(), 39);
  EXPECT_EQ(StoredJobs(*store_), static_cast<size_t>(admitted.load()));
  EXPECT_GT(refused.load(), 0);
}

TEST_F(ControllerTest, LimitsAreShownWithTheirUsersAndProjects) {
  ASSERT_TRUE(controller_->SetUserSubmitLimits("bob", {.max_submits_per_minute = 9}).ok());
  ASSERT_TRUE(controller_->SetProjectSubmitLimits("default", {.max_pending_jobs = 7}).ok());
  EXPECT_EQ(controller_->SetUserSubmitLimits("carol", {}).code(), StatusCode::kNotFound);
  EXPECT_EQ(controller_->SetProjectSubmitLimits("nlp", {}).code(), StatusCode::kNotFound);
  auto users = controller_->Accounts().ListUsers();
  ASSERT_TRUE(users.ok());
  EXPECT_EQ((*users)[1].submit_limits, (model::SubmitLimits{.max_submits_per_minute = 9}));
  auto projects = controller_->ProjectsView(alice_);
  ASSERT_TRUE(projects.ok());
  EXPECT_EQ((*projects)[0].submit_limits, (model::SubmitLimits{.max_pending_jobs = 7}));
}

TEST_F(ControllerTest, ATokenIsRefusedFromItsExpiryOnEvenWhileRemembered) {
  default_token_expiry_ = Seconds(3600);
  Restart();
  auto short_lived = controller_->Accounts().CreateToken(alice_.user_id, "ci", Seconds(60));
  auto by_default = controller_->Accounts().CreateToken(alice_.user_id, "laptop", std::nullopt);
  ASSERT_TRUE(short_lived.ok() && by_default.ok());
  EXPECT_EQ(short_lived->expires_at, Seconds(1060));
  EXPECT_EQ(by_default->expires_at, Seconds(4600));
  ASSERT_TRUE(controller_->Accounts().Authenticate(short_lived->token).ok());  // now remembered
  clock_.Advance(Seconds(59));
  EXPECT_TRUE(controller_->Accounts().Authenticate(short_lived->token).ok());
  clock_.Advance(Seconds(1));
  auto expired = controller_->Accounts().Authenticate(short_lived->token);
  EXPECT_EQ(expired.status().code(), StatusCode::kUnauthenticated);
  EXPECT_THAT(expired.status().message(), HasSubstr("token expired at 1970-01-01 00:17:40 UTC"));
  EXPECT_TRUE(controller_->Accounts().Authenticate(by_default->token).ok());
  auto tokens = controller_->Accounts().ListTokens(alice_.user_id);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].expires_at, Seconds(1060));
  // A new user's first token lasts the default too; without a default tokens never expire.
  auto carol = controller_->Accounts().CreateUser("carol", false, {"default"});
  ASSERT_TRUE(carol.ok());
  clock_.Advance(Seconds(3600));
  EXPECT_THAT(controller_->Accounts().Authenticate(carol->token).status().message(),
              HasSubstr("token expired"));
  default_token_expiry_.reset();
  Restart();
  auto forever = controller_->Accounts().CreateToken(alice_.user_id, "forever", std::nullopt);
  ASSERT_TRUE(forever.ok());
  EXPECT_EQ(forever->expires_at, std::nullopt);
  clock_.Advance(Seconds(int64_t{100} * 365 * 86400));
  EXPECT_TRUE(controller_->Accounts().Authenticate(forever->token).ok());
}

TEST_F(ControllerTest, AUsersEnvironmentOver64KiBIsRefusedNamingTheLimit) {
  json spec = {{"name", "big"}, {"env", json::object()}};
  for (int i = 0; i < 5; ++i) spec["env"]["V" + std::to_string(i)] = std::string(16000, 'x');
  auto env = CreateEnv(alice_, spec);
  EXPECT_EQ(env.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(env.status().message(), HasSubstr("bytes as stored, over the limit of 65536 bytes"));
  spec["env"].erase("V4");
  EXPECT_TRUE(CreateEnv(alice_, spec).ok());
}

// --- Fencing (docs/control-plane.md, "Fencing") ------------------------------------------------

// The events of job `id`, their reasons in order.
std::vector<std::string> EventReasons(store::Store& store, JobId id) {
  std::vector<std::string> out;
  auto events = store.JobEvents(id);
  if (events.ok()) {
    for (const auto& e : *events) out.push_back(e.reason);
  }
  return out;
}

TEST_F(ControllerTest, RegistrationTellsTheAgentWhenToFence) {
  auto answer = RegisterNode("a", kNodeA, Inventory(8));
  ASSERT_TRUE(answer.ok());
  ASSERT_TRUE(answer->fence.has_value());
  EXPECT_EQ(answer->fence->node_timeout, Seconds(30));
  EXPECT_EQ(answer->fence->fence_after, Seconds(10));
  EXPECT_EQ(answer->fence->kill_grace, Seconds(10));
  const json wire = protocol::ToJson(*answer);
  EXPECT_EQ(wire["node_timeout_s"], 30);
  EXPECT_EQ(wire["fence_after_s"], 10);
  EXPECT_EQ(wire["kill_grace_s"], 10);
}

TEST_F(ControllerTest, AnUnreachableNodeFencesRequeueableJobsAndKeepsTheOthersRunning) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId requeueable = Submit(Spec(4, 1, 1));
  const JobId kept = Submit(Spec(4, 1, 0));
  controller_->Tick();
  json run = Beat("a", Report())["run"];
  ASSERT_EQ(run.size(), 2u);
  const json r = run[0]["job_id"] == requeueable.value() ? run[0] : run[1];
  const json k = run[0]["job_id"] == requeueable.value() ? run[1] : run[0];
  // The launches say what the agent fences when it reaches no server.
  EXPECT_EQ(r.value("requeueable", false), true);
  EXPECT_FALSE(k.contains("requeueable"));
  Beat("a", Report({TaskReport(r, "running"), TaskReport(k, "running")}));
  ASSERT_EQ(StateOf(requeueable), "running");
  ASSERT_EQ(StateOf(kept), "running");
  // Silent for the node timeout: unreachable.
  clock_.Advance(Seconds(31));
  controller_->Tick();
  EXPECT_EQ(StateOf(requeueable), "pending");  // fenced: its agent stopped it by now
  EXPECT_EQ(store_->GetJob(requeueable)->restarts, 1);
  auto fenced = JobJson(alice_, requeueable);
  ASSERT_TRUE(fenced.ok());
  EXPECT_EQ((*fenced)["tasks"][0]["state"], "lost");
  EXPECT_THAT((*fenced)["reason"].get<std::string>(),
              HasSubstr("fenced: node a unreachable since "));
  EXPECT_EQ(StateOf(kept), "running");  // no restarts left: it keeps running
  EXPECT_THAT(EventReasons(*store_, kept).back(),
              AllOf(HasSubstr("node a unreachable since "), HasSubstr("keep running")));
  EXPECT_EQ(JobJson(alice_, kept)->at("reason"), EventReasons(*store_, kept).back());
  EXPECT_TRUE(controller_->Nodes(alice_).at(0).unreachable);
  // Its GPUs stay allocated; the node takes no new work, the requeued job included.
  const JobId other = Submit(Spec(1));
  controller_->Tick();
  EXPECT_EQ(StateOf(other), "pending");
  EXPECT_EQ(StateOf(requeueable), "pending");
  // The agent comes back: the kept task is re-adopted from its report, the fenced one (reported
  // ended by its agent) is taken as it is, and the node takes work again.
  json back = Beat("a", Report({TaskReport(k, "running"), EndedBy(r, "killed", SIGTERM, "fenced",
                                                                  "fenced: no server reached")}));
  EXPECT_TRUE(back["kill"].empty()) << back.dump();
  EXPECT_EQ(StateOf(kept), "running");
  EXPECT_EQ(EventReasons(*store_, kept).back(), "node a reachable again");
  EXPECT_EQ(JobJson(alice_, kept)->at("reason"), "all tasks running");  // its record's again
  EXPECT_FALSE(controller_->Nodes(alice_).at(0).unreachable);
  controller_->Tick();
  EXPECT_EQ(StateOf(requeueable), "starting");  // its next run, on the node heard again
  EXPECT_EQ(StateOf(other), "pending");         // 4 + 4 of 8 GPUs
  // Nothing more happens while the node is heard.
  clock_.Advance(Seconds(20));
  Beat("a", Report({TaskReport(k, "running")}));
  controller_->Tick();
  EXPECT_EQ(StateOf(kept), "running");
}

TEST_F(ControllerTest, AnUnreachableNodeIsLostAfterTheGiveUpTime) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId kept = Submit(Spec(4, 1, 0));
  controller_->Tick();
  const json k = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(k, "running")}));
  clock_.Advance(Seconds(31));
  controller_->Tick();
  ASSERT_EQ(StateOf(kept), "running");
  clock_.Advance(Seconds(3600 - 31));
  controller_->Tick();
  EXPECT_EQ(StateOf(kept), "running");  // exactly the give-up time still counts
  clock_.Advance(Seconds(1));
  controller_->Tick();
  EXPECT_EQ(StateOf(kept), "lost");
  auto view = JobJson(alice_, kept);
  EXPECT_THAT((*view)["reason"].get<std::string>(),
              HasSubstr("node a lost (no heartbeat for 3600 s)"));
}

TEST_F(ControllerTest, RemovingAnUnreachableNodeEndsItsJobsLostAndFreesItsName) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId kept = Submit(Spec(4, 1, 0));
  controller_->Tick();
  const json k = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(k, "running")}));
  clock_.Advance(Seconds(31));
  controller_->Tick();
  ASSERT_EQ(StateOf(kept), "running");
  EXPECT_EQ(RegisterNode("a", kNodeB, Inventory(8)).status().code(), StatusCode::kAlreadyExists);
  ASSERT_TRUE(controller_->SetNodeState("a", "remove").ok());
  EXPECT_EQ(StateOf(kept), "lost");
  EXPECT_THAT(JobJson(alice_, kept)->at("reason").get<std::string>(),
              HasSubstr("node a removed by an admin"));
  EXPECT_EQ(controller_->SetNodeState("a", "remove").code(), StatusCode::kFailedPrecondition);
  EXPECT_TRUE(RegisterNode("a", kNodeB, Inventory(8)).ok());
}

// --- Dependencies ------------------------------------------------------------------------------

json DependentSpec(const std::string& dependency, bool kill_on_invalid_dep = false) {
  json spec = Spec(1);
  spec["dependency"] = dependency;
  if (kill_on_invalid_dep) spec["kill_on_invalid_dep"] = true;
  return spec;
}

std::string Id(JobId id) { return std::to_string(id.value()); }

TEST_F(ControllerTest, ADependentJobWaitsUnseenByTheSchedulerUntilItsDependencyIsMet) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId first = Submit(Spec(1));
  const JobId then = Submit(DependentSpec("afterok:" + Id(first)));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);  // GPUs are free: only the dependency holds `then`
  const json launch = answer["run"][0];
  EXPECT_EQ(launch["job_id"], first.value());
  json view = *JobJson(alice_, then);
  EXPECT_EQ(view["pending_reason"]["code"], "dependency");
  EXPECT_EQ(view["pending_reason"]["message"],
            "waits for job " + Id(first) + " to end successfully (afterok)");
  EXPECT_FALSE(view.contains("estimated_start"));  // unknown, never a wrong time
  EXPECT_EQ(view["dependencies"], json::parse(R"([{"type": "afterok", "job": )" + Id(first) +
                                              R"(, "status": "waiting"}])"));
  EXPECT_EQ(view["spec"]["dependency"], "afterok:" + Id(first));
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 1);  // held, but pending all the same
  // A restarted server holds it again.
  Restart();
  controller_->Tick();
  EXPECT_TRUE(Beat("a", Report({TaskReport(launch, "running")}))["run"].empty());
  EXPECT_EQ(JobJson(alice_, then)->at("pending_reason")["code"], "dependency");
  // Its dependency succeeds: the next pass starts it.
  Beat("a", Report({TaskReport(launch, "exited", 0)}));
  ASSERT_EQ(StateOf(first), "succeeded");
  controller_->Tick();
  answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], then.value());
  EXPECT_EQ(JobJson(alice_, then)->at("dependencies")[0]["status"], "met");
  EXPECT_EQ(controller_->ClusterSummary().jobs_pending, 0);
}

TEST_F(ControllerTest, ADependencyThatCanNeverBeMetWaitsOrCancelsWithKillOnInvalidDep) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId failing = Submit(Spec(1));
  const JobId after = Submit(DependentSpec("after:" + Id(failing)));
  const JobId ok = Submit(DependentSpec("afterok:" + Id(failing)));
  const JobId killed = Submit(DependentSpec("afterok:" + Id(failing), true));
  const JobId notok = Submit(DependentSpec("afternotok:" + Id(failing)));
  // Waits for `killed`, which will be cancelled: never met in turn.
  const JobId chained = Submit(DependentSpec("afterok:" + Id(killed)));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  const json launch = answer["run"][0];
  controller_->Tick();  // `after` is met once `failing` started
  answer = Beat("a", Report({TaskReport(launch, "running")}));
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], after.value());
  Beat("a", Report({TaskReport(launch, "exited", 1), TaskReport(answer["run"][0], "running")}));
  ASSERT_EQ(StateOf(failing), "failed");
  controller_->Tick();
  const std::string never = "job " + Id(failing) + " failed: afterok can never be met";
  json view = *JobJson(alice_, ok);
  EXPECT_EQ(view["state"], "pending");
  EXPECT_EQ(view["pending_reason"]["code"], "dependency_never_satisfied");
  EXPECT_EQ(view["pending_reason"]["message"], never);
  EXPECT_EQ(view["dependencies"][0]["status"], "never_met");
  // The kill is written as a user's cancel is: a cancel decided after it finds the job ended.
  EXPECT_EQ(controller_->Cancel(alice_, killed).code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(StateOf(killed), "cancelled");
  EXPECT_EQ(store_->GetJob(killed)->reason, never);
  controller_->Tick();  // the kill, once durable, noted `chained`: this pass checks it
  json chain = *JobJson(alice_, chained);
  EXPECT_EQ(chain["pending_reason"]["code"], "dependency_never_satisfied");
  EXPECT_EQ(chain["pending_reason"]["message"],
            "job " + Id(killed) + " was cancelled: afterok can never be met");
  answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], notok.value());
  // Still held a pass later; a cancel ends it as any pending job.
  controller_->Tick();
  EXPECT_EQ(StateOf(ok), "pending");
  ASSERT_TRUE(controller_->Cancel(alice_, ok).ok());
  EXPECT_EQ(StateOf(ok), "cancelled");
}

TEST_F(ControllerTest, ADependencyOnAnArrayWaitsForEveryElement) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  auto array = SubmitArrayJson(alice_, ArrayJobSpec(1, {0, 1}));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const JobId after_all = Submit(DependentSpec("afterany:" + Id(array->id)));
  controller_->Tick();
  json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 2u);
  Beat("a", Report({TaskReport(answer["run"][0], "exited", 0),
                    TaskReport(answer["run"][1], "running")}));
  controller_->Tick();
  EXPECT_EQ(JobJson(alice_, after_all)->at("pending_reason")["code"], "dependency");
  EXPECT_TRUE(Beat("a", Report({TaskReport(answer["run"][1], "running")}))["run"].empty());
  Beat("a", Report({TaskReport(answer["run"][1], "exited", 3)}));
  controller_->Tick();
  answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 1u);
  EXPECT_EQ(answer["run"][0]["job_id"], after_all.value());
}

TEST_F(ControllerTest, ADependencyOnAJobNotSeenIsRefusedNamingTheField) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
  const JobId alices = Submit(Spec(1));
  const Principal carol{alice_.user_id + 2, "carol", false, {"vision"}};
  json other_project = DependentSpec("afterok:" + Id(alices));
  other_project["project"] = "vision";
  auto unseen = SubmitJson(carol, other_project);
  auto unknown = SubmitJson(alice_, DependentSpec("afterok:9999"));
  for (const auto* refused : {&unseen, &unknown}) {
    ASSERT_FALSE(refused->ok());
    EXPECT_EQ(refused->status().code(), StatusCode::kInvalidArgument);
  }
  // The same answer for a job of another project as for none: ids leak nothing.
  EXPECT_THAT(unseen.status().message(),
              HasSubstr("field 'dependency': job " + Id(alices) + " not found"));
  EXPECT_THAT(unknown.status().message(), HasSubstr("field 'dependency': job 9999 not found"));
  EXPECT_TRUE(SubmitJson(bob_, DependentSpec("afterok:" + Id(alices))).ok());  // same project
}

TEST_F(ControllerTest, AnAfterDependencyOnARequeuedJobIsMetForItStartedOnce) {
  ASSERT_TRUE(RegisterNode("a", kNodeA, Inventory(8)).ok());
  const JobId requeued = Submit(Spec(1, 1, /*max_restarts=*/1));
  controller_->Tick();
  const json launch = Beat("a", Report())["run"][0];
  Beat("a", Report({TaskReport(launch, "running")}));
  Beat("a", Report({TaskReport(launch, "exited", 1)}));
  ASSERT_EQ(StateOf(requeued), "pending");  // the store cleared its start time
  const JobId after = Submit(DependentSpec("after:" + Id(requeued)));
  controller_->Tick();
  const json answer = Beat("a", Report());
  ASSERT_EQ(answer["run"].size(), 2u);  // the rerun, and the job after it: not held
  EXPECT_TRUE(answer["run"][0]["job_id"] == after.value() ||
              answer["run"][1]["job_id"] == after.value());
  EXPECT_EQ(JobJson(alice_, after)->at("dependencies")[0]["status"], "met");
}

TEST_F(ControllerTest, ACancelledHeldJobLeavesTheDependencyIndex) {
  const JobId first = Submit(Spec(1));  // no node: it never starts
  const JobId held = Submit(DependentSpec("afterok:" + Id(first)));
  const JobId other = Submit(DependentSpec("afterany:" + Id(first) + ",afterok:" + Id(held)));
  controller_->Tick();
  EXPECT_EQ(controller_->IndexedDependents(), 3u);
  ASSERT_TRUE(controller_->Cancel(alice_, other).ok());
  EXPECT_EQ(controller_->IndexedDependents(), 1u);
  ASSERT_TRUE(controller_->Cancel(alice_, held).ok());
  EXPECT_EQ(controller_->IndexedDependents(), 0u);
}

}  // namespace
}  // namespace corral::server
