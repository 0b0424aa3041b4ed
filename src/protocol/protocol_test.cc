// The agent <-> server messages' codecs: round trips, and every refusal names its field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/agent_messages.h"
#include "protocol/task.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

NodeInventory SomeInventory() {
  NodeInventory inv;
  inv.hostname = "gpu-01";
  inv.cpu = CpuMilli(64000);
  inv.memory = MemoryMib(512 * 1024);
  inv.gpu_model = "A100-80GB";
  inv.gpus = {{"GPU-0", MemoryMib(81920), 0}, {"GPU-1", MemoryMib(81920), 1}};
  inv.labels = {{"rack", "r1"}};
  inv.runtimes = {"process", "container"};
  inv.address = "10.0.0.1";
  inv.container_engine = "podman 4.3.1";
  return inv;
}

TaskStatus SomeStatus() {
  TaskStatus s;
  s.job_id = JobId(7);
  s.task_index = 1;
  s.key = {AllocationId(12), 2};
  s.state = ProcessState::kExited;
  s.pid = 4242;
  s.exit_code = 3;
  s.started_at = Seconds(100);
  s.ended_at = Seconds(160);
  s.message = "done";
  s.end_cause = model::TaskEndCause::kExited;
  return s;
}

Report SomeReport() {
  Report r;
  r.seq = 9;
  r.partial = true;
  r.wait_ms = 0;
  r.tasks = {SomeStatus()};
  r.starting = {{AllocationId(13), 0}};
  r.logs = {{{AllocationId(12), 2}, LogStream::kStderr, 64, "oops\n"}};
  GpuMetric gpu;
  gpu.index = 1;
  gpu.tasks = {{AllocationId(12), 2}};
  gpu.utilization_percent = 93;
  gpu.power_mw = 250000;
  gpu.processes = {{5, 4000, TaskKey{AllocationId(12), 2}}, {6, std::nullopt, std::nullopt}};
  r.gpu_metrics = GpuMetrics{1234, {gpu}};
  return r;
}

// `json` with the value at `path` (a JSON pointer) removed or replaced.
json Without(json j, const std::string& path) {
  json::json_pointer p(path);
  j[p.parent_pointer()].erase(p.back());
  return j;
}
json With(json j, const std::string& path, json value) {
  j[json::json_pointer(path)] = std::move(value);
  return j;
}

TEST(ProtocolVersionTest, OwnAndPreviousAreAcceptedOthersNamedWithTheUpgrade) {
  EXPECT_TRUE(CheckAgentProtocolVersion(kProtocolVersion, "0.1.0", Seconds(30)).ok());
  EXPECT_TRUE(CheckAgentProtocolVersion(kOldestProtocolVersion, "0.1.0", Seconds(30)).ok());
  Status none = CheckAgentProtocolVersion(std::nullopt, "0.1.0", Seconds(30));
  EXPECT_EQ(none.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(none.message(),
            "this agent speaks no protocol version: upgrade corral on this node to 0.1.0 within "
            "30 s of its last heartbeat: its tasks keep running and the upgraded agent adopts "
            "them (later, the node is lost and its jobs with it)");
  Status old = CheckAgentProtocolVersion(kOldestProtocolVersion - 1, "0.1.0", Seconds(30));
  EXPECT_EQ(old.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(old.message(), HasSubstr("too old for this server"));
  EXPECT_THAT(old.message(), HasSubstr("upgrade corral on this node to 0.1.0"));
  Status newer = CheckAgentProtocolVersion(kProtocolVersion + 1, "0.1.0", Seconds(30));
  EXPECT_EQ(newer.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(newer.message(), HasSubstr("newer than this server's"));
  EXPECT_THAT(newer.message(), HasSubstr("upgrade the servers before their agents"));
}

TEST(ProtocolVersionTest, ReadBeforeTheRestOfTheBody) {
  EXPECT_EQ(*ReadProtocolVersion(json{{"name", 5}}), std::nullopt);  // the rest is not read
  EXPECT_EQ(*ReadProtocolVersion(json{{"protocol_version", 7}}), 7);
  for (const json& bad : {json{{"protocol_version", "1"}}, json{{"protocol_version", 0}},
                          json{{"protocol_version", 1.5}}}) {
    auto v = ReadProtocolVersion(bad);
    ASSERT_FALSE(v.ok()) << bad.dump();
    EXPECT_THAT(v.status().message(), HasSubstr("field 'protocol_version'")) << bad.dump();
  }
  EXPECT_FALSE(ReadProtocolVersion(json::array()).ok());
}

TEST(RegisterTest, RequestAndAnswerRoundTrip) {
  RegisterRequest request{kProtocolVersion, "gpu-01", "0123456789abcdef0123", SomeInventory()};
  auto parsed = ParseRegisterRequest(ToJson(request));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(parsed->protocol_version, kProtocolVersion);
  EXPECT_EQ(parsed->name, "gpu-01");
  EXPECT_EQ(parsed->node_id, request.node_id);
  EXPECT_EQ(parsed->inventory, request.inventory);

  RegisterAnswer answer{kProtocolVersion, "crl_node", "0123456789abcdef", 5};
  auto back = ParseRegisterAnswer(ToJson(answer));
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->node_token, "crl_node");
  EXPECT_EQ(back->cluster_id, "0123456789abcdef");
  EXPECT_EQ(back->heartbeat_interval_s, 5);
  EXPECT_FALSE(back->fence.has_value());  // as an older server answers: its agents never fence
}

TEST(RegisterTest, TheFenceTimingsRoundTripAllOrNone) {
  RegisterAnswer answer{kProtocolVersion, "crl_node", "0123456789abcdef", 5};
  answer.fence = FenceTimings{Seconds(30), Seconds(10), Seconds(10)};
  const json wire = ToJson(answer);
  EXPECT_EQ(wire["node_timeout_s"], 30);
  EXPECT_EQ(wire["fence_after_s"], 10);
  EXPECT_EQ(wire["kill_grace_s"], 10);
  auto back = ParseRegisterAnswer(wire);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->fence, answer.fence);
  for (const auto& [body, message] : std::vector<std::pair<json, std::string>>{
           {Without(wire, "/node_timeout_s"), "field 'node_timeout_s': is required"},
           {Without(wire, "/kill_grace_s"), "field 'kill_grace_s': is required"},
           {With(wire, "/fence_after_s", 0), "field 'fence_after_s': must be in"}}) {
    auto refused = ParseRegisterAnswer(body);
    ASSERT_FALSE(refused.ok()) << body.dump();
    EXPECT_THAT(refused.status().message(), HasSubstr(message));
  }
}

TEST(RegisterTest, AnInventoryWithoutOptionalFieldsGetsTheDefaults) {
  auto inv = ParseNodeInventory(json{{"cpu_milli", 1000}, {"memory_mib", 1024}});
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->runtimes, std::vector<std::string>{"process"});
  EXPECT_TRUE(inv->gpus.empty());
  EXPECT_TRUE(inv->address.empty());
  // Inventories stored by earlier servers list GPU indices: read and ignored (the place counts).
  inv = ParseNodeInventory(
      json{{"cpu_milli", 1}, {"memory_mib", 1}, {"gpus", {{{"index", 0}, {"uuid", "GPU-0"}}}}});
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->gpus.at(0).uuid, "GPU-0");
}

TEST(RegisterTest, EveryRequiredFieldMissingIsNamed) {
  const json good =
      ToJson(RegisterRequest{kProtocolVersion, "n", "0123456789abcdef", SomeInventory()});
  for (const char* path : {"/protocol_version", "/name", "/node_id", "/inventory",
                           "/inventory/cpu_milli", "/inventory/memory_mib"}) {
    auto parsed = ParseRegisterRequest(Without(good, path));
    ASSERT_FALSE(parsed.ok()) << path;
    std::string field = std::string(path).substr(1);
    std::replace(field.begin(), field.end(), '/', '.');
    EXPECT_EQ(parsed.status().message(), "registration: field '" + field + "': is required");
  }
  const json answer = ToJson(RegisterAnswer{kProtocolVersion, "t", "0123456789abcdef", 5});
  for (const char* field : {"protocol_version", "node_token", "cluster_id"}) {
    auto parsed = ParseRegisterAnswer(Without(answer, std::string("/") + field));
    ASSERT_FALSE(parsed.ok()) << field;
    EXPECT_THAT(parsed.status().message(), HasSubstr(std::string("field '") + field + "'"));
  }
}

TEST(RegisterTest, WrongTypesAndRangesAreNamed) {
  const json good =
      ToJson(RegisterRequest{kProtocolVersion, "n", "0123456789abcdef", SomeInventory()});
  const std::pair<json, std::string> cases[] = {
      {With(good, "/name", 5), "field 'name': must be a string"},
      {With(good, "/node_id", "short"), "field 'node_id': 16..128 characters"},
      {With(good, "/inventory", "big"), "field 'inventory': must be an object"},
      {With(good, "/inventory/cpu_milli", -1),
       "field 'inventory.cpu_milli': must be in 0..100000000, got -1"},
      {With(good, "/inventory/cpu_milli", int64_t{1} << 40), "field 'inventory.cpu_milli'"},
      {With(good, "/inventory/cpu_milli", 1e9), "field 'inventory.cpu_milli': must be an integer"},
      {With(good, "/inventory/memory_mib", int64_t{1} << 31), "field 'inventory.memory_mib'"},
      {With(good, "/inventory/memory_mib", "lots"),
       "field 'inventory.memory_mib': must be an integer"},
      {With(good, "/inventory/gpus/1/memory_mib", -5),
       "field 'inventory.gpus[1].memory_mib': must be in 0.."},
      {With(good, "/inventory/gpus/0", 3), "field 'inventory.gpus[0]': must be an object"},
      {With(good, "/inventory/gpus/0/memory_mib", int64_t{1} << 25),
       "field 'inventory.gpus[0].memory_mib'"},
      {With(good, "/inventory/gpus/1/nvlink_domain", 64),
       "field 'inventory.gpus[1].nvlink_domain': must be in 0..63"},
      {With(good, "/inventory/gpus/0/uuid", "GPU-\n0"), "field 'inventory.gpus[0].uuid'"},
      {With(good, "/inventory/gpu_model", "A100\x1b[2J"), "field 'inventory.gpu_model'"},
      {With(good, "/inventory/hostname", "../gpu"),
       "field 'inventory.hostname': a node name must be"},
      {With(good, "/name", "n/../x"), "field 'name': a node name must be"},
      {With(good, "/inventory/labels/rack", "r 1"), "field 'inventory.labels'"},
      {With(good, "/inventory/labels", json::array({"r0"})),
       "field 'inventory.labels': must be an object of strings"},
      {With(good, "/inventory/labels/rack", 1), "field 'inventory.labels.rack': must be a string"},
      {With(good, "/inventory/runtimes", json(std::vector<std::string>(9, "process"))),
       "field 'inventory.runtimes': at most 8"},
      {With(good, "/inventory/address", "10.0.0.1;reboot"), "field 'inventory.address'"},
      {With(good, "/inventory/runtimes/1", "con\ttainer"), "field 'inventory.runtimes'"},
      {With(good, "/inventory/container_engine", std::string(129, 'p')),
       "field 'inventory.container_engine': must be at most 128 bytes of printable ASCII"},
  };
  for (const auto& [body, message] : cases) {
    auto parsed = ParseRegisterRequest(body);
    ASSERT_FALSE(parsed.ok()) << body.dump();
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(message)) << body.dump();
  }
  EXPECT_THAT(ParseRegisterAnswer(
                  json{{"protocol_version", 1}, {"node_token", "t"}, {"cluster_id", "../../etc"}})
                  .status()
                  .message(),
              HasSubstr("field 'cluster_id'"));
}

TEST(ReportTest, RoundTrips) {
  const Report report = SomeReport();
  auto parsed = ParseReport(ToJson(report));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(ToJson(*parsed), ToJson(report));
  EXPECT_EQ(parsed->tasks.at(0).state, ProcessState::kExited);
  EXPECT_EQ(parsed->logs.at(0).stream, LogStream::kStderr);
  ASSERT_TRUE(parsed->gpu_metrics.has_value());
  EXPECT_EQ(parsed->gpu_metrics->gpus.at(0).processes.at(1).task, std::nullopt);
  EXPECT_TRUE(parsed->gpu_metrics_error.empty());
}

TEST(ReportTest, EveryRequiredFieldMissingIsNamed) {
  const json good = ToJson(SomeReport());
  const std::pair<const char*, const char*> cases[] = {
      {"/seq", "heartbeat: field 'seq': is required"},
      {"/tasks", "heartbeat: field 'tasks': is required"},
      {"/tasks/0/job_id", "heartbeat: field 'tasks[0].job_id': is required"},
      {"/tasks/0/allocation_id", "heartbeat: field 'tasks[0].allocation_id': is required"},
      {"/tasks/0/generation", "heartbeat: field 'tasks[0].generation': is required"},
      {"/tasks/0/state", "heartbeat: field 'tasks[0].state': is required"},
      {"/starting/0/allocation_id", "heartbeat: field 'starting[0].allocation_id': is required"},
      {"/logs/0/generation", "heartbeat: field 'logs[0].generation': is required"},
      {"/logs/0/stream", "heartbeat: field 'logs[0].stream': is required"},
      {"/logs/0/offset", "heartbeat: field 'logs[0].offset': is required"},
      {"/logs/0/data", "heartbeat: field 'logs[0].data': is required"},
  };
  for (const auto& [path, message] : cases) {
    auto parsed = ParseReport(Without(good, path));
    ASSERT_FALSE(parsed.ok()) << path;
    EXPECT_EQ(parsed.status().message(), message);
  }
}

TEST(ReportTest, WrongTypesAndRangesAreNamedAndRefuseTheWholeReport) {
  json good = ToJson(SomeReport());
  good["tasks"].push_back(good["tasks"][0]);
  good["tasks"].push_back(good["tasks"][0]);
  good["tasks"].push_back(good["tasks"][0]);
  const std::pair<json, std::string> cases[] = {
      {json::array(), "heartbeat: must be a JSON object"},
      {With(good, "/tasks/3/state", "melted"), "field 'tasks[3].state': unknown state 'melted'"},
      {With(good, "/tasks/3/state", 3), "field 'tasks[3].state': must be a string"},
      {With(good, "/tasks", "all"), "field 'tasks': must be an array"},
      {With(good, "/tasks/1", 1), "field 'tasks[1]': must be an object"},
      {With(good, "/tasks/0/allocation_id", "x"),
       "field 'tasks[0].allocation_id': must be an "
       "integer"},
      {With(good, "/tasks/0/generation", -1), "field 'tasks[0].generation': must be >= 0"},
      {With(good, "/tasks/2/exit_code", 300), "field 'tasks[2].exit_code': must be in 0..255"},
      {With(good, "/tasks/2/signal", 0), "field 'tasks[2].signal': must be in 1..127"},
      {With(good, "/tasks/0/ended_at", "soon"), "field 'tasks[0].ended_at': must be an integer"},
      {With(good, "/tasks/0/task_index", -1), "field 'tasks[0].task_index': must be in 0.."},
      {With(good, "/seq", 0), "field 'seq': must be >= 1"},
      {With(good, "/partial", "yes"), "field 'partial': must be true or false"},
      {With(good, "/wait_ms", 30001), "field 'wait_ms': must be in 0..30000"},
      {With(good, "/logs/0/stream", "stdin"), "field 'logs[0].stream': must be stdout or stderr"},
      {With(good, "/logs/0/offset", -1), "field 'logs[0].offset': must be >= 0"},
      {With(good, "/starting", json::object()), "field 'starting': must be an array"},
  };
  for (const auto& [body, message] : cases) {
    auto parsed = ParseReport(body);
    ASSERT_FALSE(parsed.ok()) << body.dump();
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(parsed.status().message(), HasSubstr(message)) << body.dump();
  }
}

TEST(ReportTest, MalformedGpuMetricsAreSetAsideNotFatal) {
  const json good = ToJson(SomeReport());
  const std::pair<json, std::string> cases[] = {
      {With(good, "/gpu_metrics/gpus/0/utilization_percent", 101),
       "gpu_metrics: field 'gpus[0].utilization_percent': must be in 0..100"},
      {Without(good, "/gpu_metrics/gpus/0/index"),
       "gpu_metrics: field 'gpus[0].index': is "
       "required"},
      {With(good, "/gpu_metrics/gpus/0/index", 64), "field 'gpus[0].index': must be in 0..63"},
      {With(good, "/gpu_metrics/gpus/0/tasks", json::array({"12"})),
       "field 'gpus[0].tasks': '12' is not a task key"},
      {With(good, "/gpu_metrics/gpus/0/power_mw", "high"), "field 'gpus[0].power_mw'"},
      {With(good, "/gpu_metrics/gpus/0/processes/0/task", "x-1"),
       "field 'gpus[0].processes[0].task': 'x-1' is not a task key"},
      {With(good, "/gpu_metrics", json::array()), "gpu_metrics: must be a JSON object"},
  };
  for (const auto& [body, message] : cases) {
    auto parsed = ParseReport(body);
    ASSERT_TRUE(parsed.ok()) << body.dump();
    EXPECT_FALSE(parsed->gpu_metrics.has_value());
    EXPECT_THAT(parsed->gpu_metrics_error, HasSubstr(message)) << body.dump();
    EXPECT_EQ(parsed->tasks.size(), 1u);  // the rest is taken
  }
}

TEST(ReportAnswerTest, RoundTripsAndSetsAsideABadLaunchOnly) {
  ReportAnswer answer;
  TaskLaunch launch;
  launch.job_id = JobId(7);
  launch.key = {AllocationId(12), 0};
  launch.argv = {"true"};
  launch.workdir = "/tmp";
  TaskLaunch requeueable = launch;
  requeueable.key = {AllocationId(13), 0};
  requeueable.requeueable = true;  // sent only when true
  answer.run = {launch, requeueable};
  answer.kill = {{{AllocationId(3), 1}, Seconds(5), "cancelled"}};
  answer.taken_seq = 9;
  answer.stale_report = true;
  answer.retry_after_ms = 1000;
  auto parsed = ParseReportAnswer(ToJson(answer));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_EQ(ToJson(*parsed), ToJson(answer));
  EXPECT_FALSE(ToJson(answer)["run"][0].contains("requeueable"));
  EXPECT_FALSE(parsed->run[0].requeueable);
  EXPECT_TRUE(parsed->run[1].requeueable);

  json j = ToJson(answer);
  j["run"].push_back(Without(j["run"][0], "/argv"));
  auto partly = ParseReportAnswer(j);
  ASSERT_TRUE(partly.ok());
  EXPECT_EQ(partly->run.size(), 2u);
  ASSERT_EQ(partly->refused_run.size(), 1u);
  EXPECT_EQ(partly->refused_run[0].message(), "heartbeat answer: field 'run[2].argv': is required");
  EXPECT_EQ(partly->kill.size(), 1u);
  EXPECT_THAT(ParseReportAnswer(With(ToJson(answer), "/run/1/requeueable", "yes"))
                  ->refused_run[0]
                  .message(),
              HasSubstr("field 'run[1].requeueable'"));

  for (const auto& [body, message] : std::vector<std::pair<json, std::string>>{
           {Without(ToJson(answer), "/taken_seq"), "field 'taken_seq': is required"},
           {Without(ToJson(answer), "/kill/0/generation"), "field 'kill[0].generation'"},
           {With(ToJson(answer), "/kill/0/grace_s", -1), "field 'kill[0].grace_s': must be in"},
           {With(ToJson(answer), "/retry_after_ms", 1e9), "field 'retry_after_ms'"}}) {
    auto refused = ParseReportAnswer(body);
    ASSERT_FALSE(refused.ok()) << body.dump();
    EXPECT_THAT(refused.status().message(), HasSubstr(message));
  }
}

// Found reading DistributedProblem for fuzz/agent_protocol_fuzzer.cc, which then reproduced it
// under UBSan: the port block's size, procs_per_node x nodes, overflowed an int for a launch of
// 2^31 - 1 nodes.
TEST(ReportAnswerTest, ALaunchOfMoreNodesThanALaunchHasTasksIsSetAside) {
  TaskLaunch launch;
  launch.job_id = JobId(7);
  launch.key = {AllocationId(12), 0};
  launch.argv = {"python3", "train.py"};
  launch.workdir = "/tmp";
  launch.tasks = 2;
  launch.distributed =
      Distributed{model::Launcher::kTorchrun, 2, 0, 2, "10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  ReportAnswer answer;
  answer.run = {launch};
  ASSERT_EQ(ParseReportAnswer(ToJson(answer))->run.size(), 1u);
  auto parsed = ParseReportAnswer(With(ToJson(answer), "/run/0/distributed/nodes", INT32_MAX));
  ASSERT_TRUE(parsed.ok()) << parsed.status().ToString();
  EXPECT_TRUE(parsed->run.empty());
  ASSERT_EQ(parsed->refused_run.size(), 1u);
  EXPECT_THAT(parsed->refused_run[0].message(),
              HasSubstr("field 'run[0].distributed.nodes': must be in 1..1000000, got 2147483647"));
}

TEST(FieldReaderTest, IntegersOutsideInt64AreRefused) {
  auto parsed = ParseReport(With(ToJson(SomeReport()), "/seq", uint64_t{1} << 63));
  ASSERT_FALSE(parsed.ok());
  EXPECT_THAT(parsed.status().message(), HasSubstr("field 'seq': out of range"));
}

TEST(FieldReaderTest, SecondsAreWholeAndNotNegative) {
  const nlohmann::json object = {{"limit", 90}, {"back", -1}, {"half", 1.5}, {"none", nullptr}};
  const FieldReader r(object, "test");
  Seconds s{7};
  ASSERT_TRUE(r.Secs("limit", true, s).ok());
  EXPECT_EQ(s, Seconds(90));
  EXPECT_THAT(r.Secs("back", true, s).message(), HasSubstr("field 'back'"));
  EXPECT_FALSE(r.Secs("half", true, s).ok());
  EXPECT_EQ(s, Seconds(90)) << "a refused value leaves the output as it was";
  EXPECT_TRUE(r.Secs("none", false, s).ok());
  EXPECT_EQ(s, Seconds(90)) << "absent and not required: left as is";
  EXPECT_THAT(r.Secs("missing", true, s).message(), HasSubstr("field 'missing'"));
  std::optional<Seconds> o;
  ASSERT_TRUE(r.OptionalSecs("none", o).ok());
  EXPECT_FALSE(o.has_value());
  ASSERT_TRUE(r.OptionalSecs("limit", o).ok());
  EXPECT_EQ(o, Seconds(90));
  EXPECT_FALSE(r.OptionalSecs("back", o).ok());
}

}  // namespace
}  // namespace corral::protocol
