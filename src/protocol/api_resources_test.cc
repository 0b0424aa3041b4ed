// The API resources' codecs (api_*.h): a round trip per resource, and refusals that name the
// field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/api_job.h"
#include "protocol/api_node.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

// The message of `result`'s error ("" when it is OK).
template <typename T>
std::string ErrorOf(const Result<T>& result) {
  return result.ok() ? "" : result.status().message();
}

NodeView SomeNode() {
  NodeView n;
  n.name = "gpu-01";
  n.state = model::NodeState::kCordoned;
  n.last_heartbeat = Seconds(1700000000);
  n.gpu_model = "A100";
  n.gpus = 2;
  n.cpu = CpuMilli(64000);
  n.memory = MemoryMib(524288);
  n.labels = {{"rack", "r1"}};
  n.runtimes = {"process", "container"};
  n.container_engine = "podman 4.3.1";
  n.free = NodeFree{{1000, 500}, CpuMilli(60000), MemoryMib(500000)};
  n.gpu_tasks = {{}, {{JobId(7), 0, "alice", "vision", MilliGpu(500)}}};
  return n;
}

TEST(ApiNodeTest, RoundTrips) {
  const NodeView node = SomeNode();
  auto parsed = ParseNodeView(ToJson(node));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, node);
  // Optional fields stay absent when empty, as the API always sent them.
  NodeView bare = node;
  bare.container_engine.clear();
  bare.free.reset();
  const json j = ToJson(bare);
  EXPECT_FALSE(j.contains("container_engine"));
  EXPECT_FALSE(j.contains("gpu_metrics_error"));
  EXPECT_FALSE(j.contains("gpu_free_milli"));
  EXPECT_EQ(j["gpu_tasks"], json::parse(R"([[], [{"job": 7, "task": 0, "user": "alice",
      "project": "vision", "milli": 500}]])"));
  auto list = ParseNodeViews(ToJson(std::vector<NodeView>{node, bare}));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<NodeView>{node, bare}));
}

TEST(ApiNodeTest, RefusalsNameTheField) {
  json j = ToJson(SomeNode());
  j["state"] = "gone";
  EXPECT_THAT(ErrorOf(ParseNodeView(j)), HasSubstr("node: field 'state': unknown node state"));
  j = ToJson(SomeNode());
  j["gpu_tasks"][1][0]["milli"] = 0;
  EXPECT_THAT(ErrorOf(ParseNodeView(j)),
              HasSubstr("node: field 'gpu_tasks[1][0].milli': must be in 1..1000, got 0"));
  j = ToJson(SomeNode());
  j.erase("name");
  EXPECT_THAT(ErrorOf(ParseNodeViews(json::array({j}))),
              HasSubstr("nodes: field '[0].name': is required"));
  j = ToJson(SomeNode());
  j["gpus"] = "2";
  EXPECT_THAT(ErrorOf(ParseNodeView(j)), HasSubstr("node: field 'gpus': must be an integer"));
}

JobSummary SomeSummary() {
  JobSummary j;
  j.id = JobId(12);
  j.name = "train";
  j.user = "alice";
  j.project = "vision";
  j.state = model::JobState::kPending;
  j.priority = 3;
  j.submit_time = Seconds(1700000000);
  j.reason = "submitted";
  j.array = ArrayMembership{JobId(10), 2, 4};
  j.pending_reason = PendingReason{"insufficient_gpus", "no node has 8 free GPUs"};
  j.estimated_start = Seconds(1700000600);
  return j;
}

JobView SomeJob() {
  JobView j;
  j.summary = SomeSummary();
  j.summary.state = model::JobState::kRunning;
  j.restarts = 1;
  j.spec.name = "train";
  j.spec.project = "vision";
  j.spec.command = {"python3", "train.py"};
  j.spec.resources.gpus = GpuCount(1);
  j.spec.resources.gpu_milli = MilliGpu(1000);
  j.spec.resources.cpu = CpuMilli(4000);
  j.spec.cpu_given = j.spec.memory_given = true;
  j.spec.session = SessionSpec{120, ""};
  j.start_time = Seconds(1700000100);
  j.events = {{Seconds(1700000000), std::nullopt, model::JobState::kPending, "submitted"},
              {Seconds(1700000100), model::JobState::kPending, model::JobState::kRunning, "ok"}};
  TaskView t;
  t.index = 0;
  t.allocation_id = 31;
  t.generation = 2;
  t.node = "gpu-01";
  t.state = model::TaskState::kExited;
  t.allocation.gpus = {{1, MilliGpu(1000)}};
  t.allocation.cpu = CpuMilli(4000);
  t.exit_code = 0;
  t.end_cause = model::TaskEndCause::kExited;
  j.tasks = {t};
  j.predicted_run_s = RuntimePrediction{Seconds(600), 0.5, "user+name"};
  return j;
}

TEST(ApiJobTest, RoundTrips) {
  const JobSummary summary = SomeSummary();
  auto parsed = ParseJobSummaries(ToJson(std::vector<JobSummary>{summary}));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, std::vector<JobSummary>{summary});

  const JobView job = SomeJob();
  const json j = ToJson(job);
  EXPECT_EQ(j["tasks"][0]["allocation"]["node"], "gpu-01");  // as clients always read it
  EXPECT_EQ(j["events"][0]["from"], "");
  EXPECT_FALSE(j.contains("end_time"));
  EXPECT_FALSE(j["spec"]["session"].contains("token"));
  auto view = ParseJobView(j);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->summary, job.summary);
  EXPECT_EQ(view->tasks, job.tasks);
  EXPECT_EQ(view->events, job.events);
  EXPECT_EQ(view->predicted_run_s, job.predicted_run_s);
  EXPECT_EQ(ToJson(*view), j);
}

TEST(ApiJobTest, RefusalsNameTheField) {
  json j = ToJson(SomeJob());
  j["tasks"][0]["state"] = "done";
  EXPECT_THAT(ErrorOf(ParseJobView(j)),
              HasSubstr("job: field 'tasks[0].state': unknown task state"));
  j = ToJson(SomeJob());
  j["events"][1]["from"] = "later";
  EXPECT_THAT(ErrorOf(ParseJobView(j)),
              HasSubstr("job: field 'events[1].from': unknown job state"));
  j = ToJson(SomeJob());
  j["predicted_run_s"]["confidence"] = -1;
  EXPECT_THAT(ErrorOf(ParseJobView(j)),
              HasSubstr("job: field 'predicted_run_s.confidence': must be >= 0"));
  j = ToJson(SomeJob());
  j["spec"]["session"]["token"] = std::string(64, 'a');  // never shown
  EXPECT_THAT(ErrorOf(ParseJobView(j)), HasSubstr("job: field 'spec': field 'session.token'"));
  json list = ToJson(std::vector<JobSummary>{SomeSummary()});
  list[0].erase("submit_time");
  EXPECT_THAT(ErrorOf(ParseJobSummaries(list)),
              HasSubstr("jobs: field '[0].submit_time': is required"));
  list = ToJson(std::vector<JobSummary>{SomeSummary()});
  list[0]["array_index"] = -1;
  EXPECT_THAT(ErrorOf(ParseJobSummaries(list)),
              HasSubstr("jobs: field '[0].array_index': must be in 0.."));
}

TEST(ApiSubmitAnswerTest, RoundTripsAJobAndAnArray) {
  SubmitAnswer job{JobId(7),
                   {},
                   model::JobState::kPending,
                   "vision",
                   "alice",
                   "submitted with defaults: resources.cpu_milli 1000 (1 CPU per process)",
                   {{"resources.cpu_milli", 1000, "1 CPU per process"}}};
  EXPECT_EQ(ToString(job.defaults), "resources.cpu_milli 1000 (1 CPU per process)");
  json j = ToJson(job);
  EXPECT_EQ(j["id"], 7);
  EXPECT_EQ(j["defaults"], json::parse(R"([{"field": "resources.cpu_milli", "value": 1000,
      "why": "1 CPU per process"}])"));
  auto parsed = ParseSubmitAnswer(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, job);
  SubmitAnswer array = job;
  array.array_ids = {JobId(7), JobId(8)};
  j = ToJson(array);
  EXPECT_EQ(j["array_id"], 7);
  EXPECT_FALSE(j.contains("id"));
  parsed = ParseSubmitAnswer(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, array);
}

TEST(ApiSubmitAnswerTest, RefusalsNameTheField) {
  json j = ToJson(SubmitAnswer{JobId(7),
                               {},
                               model::JobState::kPending,
                               "p",
                               "u",
                               "submitted",
                               {{"resources.memory_mib", 256, "256 MiB per CPU"}}});
  j["defaults"][0]["value"] = "256";
  EXPECT_THAT(ErrorOf(ParseSubmitAnswer(j)),
              HasSubstr("submit answer: field 'defaults[0].value': must be an integer"));
  j.erase("id");
  EXPECT_THAT(ErrorOf(ParseSubmitAnswer(j)), HasSubstr("submit answer: field 'id': is required"));
}

}  // namespace
}  // namespace corral::protocol
