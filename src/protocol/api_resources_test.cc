// The API resources' codecs (api_*.h): a round trip per resource, and refusals that name the
// field.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "common/json_parse.h"
#include "protocol/api_account.h"
#include "protocol/api_cluster.h"
#include "protocol/api_environment.h"
#include "protocol/api_job.h"
#include "protocol/api_node.h"
#include "protocol/api_project.h"
#include "protocol/api_scheduling.h"
#include "protocol/api_session.h"

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
  n.unreachable = true;
  n.gpu_model = "A100";
  n.gpus = 2;
  n.cpu = CpuMilli(64000);
  n.memory = MemoryMib(524288);
  n.labels = {{"rack", "r1"}};
  n.runtimes = {"process", "container"};
  n.container_engine = "podman 4.3.1";
  n.free = NodeFree{{1000, 500}, CpuMilli(60000), MemoryMib(500000)};
  n.gpu_tasks = {
      {},
      {{TaskOwner{JobId(7), 0, "alice", "vision"}, MilliGpu(500)}, {std::nullopt, MilliGpu(250)}}};
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
  bare.unreachable = false;
  const json j = ToJson(bare);
  EXPECT_FALSE(j.contains("unreachable"));
  EXPECT_FALSE(j.contains("container_engine"));
  EXPECT_FALSE(j.contains("gpu_metrics_error"));
  EXPECT_FALSE(j.contains("gpu_free_milli"));
  // Another project's task is its share only.
  EXPECT_EQ(j["gpu_tasks"], json::parse(R"([[], [{"job": 7, "task": 0, "user": "alice",
      "project": "vision", "milli": 500}, {"milli": 250}]])"));
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
  j["gpu_tasks"][1][1]["user"] = "bob";
  EXPECT_THAT(ErrorOf(ParseNodeView(j)),
              HasSubstr("node: field 'gpu_tasks[1][1].user': is given without 'job'"));
  j = ToJson(SomeNode());
  j["gpu_tasks"][1][0].erase("user");
  EXPECT_THAT(ErrorOf(ParseNodeView(j)),
              HasSubstr("node: field 'gpu_tasks[1][0].user': is required"));
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
  j.total_gpu_milli = MilliGpu(2500);
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
  j.summary.start_time = Seconds(1700000100);
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

TEST(ApiJobTest, AnElasticJobShowsItsRangeWithItsSizeNowAndResizes) {
  JobView job = SomeJob();
  job.spec.session.reset();
  job.spec.resources.gpus = GpuCount(2);
  job.spec.elastic = model::ElasticBounds{model::ElasticUnit::kGpus, 2, 8, 0};
  job.elastic_now = 8;
  job.resizes = 3;
  const json j = ToJson(job);
  EXPECT_EQ(j["elastic"],
            (json{{"unit", "gpus"}, {"min", 2}, {"max", 8}, {"step", 0}, {"now", 8}}));
  EXPECT_EQ(j["resizes"], 3);
  auto view = ParseJobView(j);
  ASSERT_TRUE(view.ok()) << view.status().message();
  EXPECT_EQ(view->elastic_now, 8);
  EXPECT_EQ(view->resizes, 3);
  EXPECT_EQ(view->spec.elastic, job.spec.elastic);
  EXPECT_EQ(ToJson(*view), j);
  // Pending: no size now. A rigid job has neither field.
  job.elastic_now.reset();
  EXPECT_FALSE(ToJson(job)["elastic"].contains("now"));
  EXPECT_FALSE(ToJson(SomeJob()).contains("elastic"));
  EXPECT_FALSE(ToJson(SomeJob()).contains("resizes"));
  json bad = j;
  bad["elastic"]["now"] = -1;
  EXPECT_THAT(ErrorOf(ParseJobView(bad)), HasSubstr("job: field 'elastic.now': must be"));
}

// The listing read from its text, a job at a time (the CLI's `jobs`): the same jobs and the same
// errors as from the tree.
TEST(ApiJobTest, SummariesFromTextMatchThoseFromTheTree) {
  std::vector<JobSummary> jobs(3, SomeSummary());
  jobs[1].id = JobId(8);
  jobs[2].name = "other";
  const json list = ToJson(jobs);
  auto parsed = ParseJobSummaries(list.dump(), JsonLimits{});
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, jobs);
  json bad = list;
  bad[2].erase("submit_time");
  EXPECT_EQ(ErrorOf(ParseJobSummaries(bad.dump(), JsonLimits{})), ErrorOf(ParseJobSummaries(bad)));
  EXPECT_THAT(ErrorOf(ParseJobSummaries(bad.dump(), JsonLimits{})),
              HasSubstr("jobs: field '[2].submit_time': is required"));
  EXPECT_THAT(ErrorOf(ParseJobSummaries("[1]", JsonLimits{})),
              HasSubstr("jobs: field '[0]': must be an object"));
  EXPECT_THAT(ErrorOf(ParseJobSummaries("{}", JsonLimits{})), HasSubstr("must be a JSON array"));
  EXPECT_THAT(ErrorOf(ParseJobSummaries(list.dump().substr(0, 40), JsonLimits{})),
              HasSubstr("jobs: not valid JSON"));
  EXPECT_THAT(ErrorOf(ParseJobSummaries(list.dump(), JsonLimits{16, 64})),
              HasSubstr("over the limit of 16"));
  auto empty = ParseJobSummaries("[]", JsonLimits{});
  ASSERT_TRUE(empty.ok());
  EXPECT_TRUE(empty->empty());
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
  j["spec"]["session"]["salt"] = std::string(64, 'a');  // never shown
  EXPECT_THAT(ErrorOf(ParseJobView(j)), HasSubstr("job: field 'spec': field 'session.salt'"));
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

ProjectView SomeProject() {
  ProjectView p{.name = "vision", .description = "eyes", .running = MilliGpu(3500)};
  p.sharing = {.weight = 2,
               .quota = MilliGpu(64000),
               .model_quota = {{"A100", MilliGpu(8000)}},
               .limit = MilliGpu(96000),
               .user_limit = MilliGpu(500)};
  p.submit_limits = {.max_pending_jobs = 100};
  p.borrowed = MilliGpu(1000);
  p.fair_share_usage = 0.25;
  p.fair_share = {
      .standing = ShareStanding::kUnder, .gpu_hours_from_share = -1.5, .next_in_line = true};
  return p;
}

TEST(ApiProjectTest, RoundTrips) {
  const ProjectView project = SomeProject();
  const json j = ToJson(project);
  EXPECT_EQ(j, json::parse(R"({"name": "vision", "description": "eyes", "sharing": {"weight": 2.0,
      "gpus": 64.0, "model_gpus": {"A100": 8.0}, "limit_gpus": 96.0, "user_limit_gpus": 0.5},
      "submit_limits": {"max_pending_jobs": 100, "max_submits_per_minute": null},
      "quota_gpus": 64.0, "weight": 2.0, "limit_gpus": 96.0, "running_gpus": 3.5,
      "borrowed_gpus": 1.0, "fair_share_usage": 0.25, "fair_share": {"standing": "under",
      "gpu_hours_from_share": -1.5, "next_in_line": true}})"));
  auto list = ParseProjectViews(ToJson(std::vector<ProjectView>{project, {.name = "nlp"}}));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<ProjectView>{project, {.name = "nlp"}}));
  // An older server's row has no standing: "at", 0, not next.
  json older = ToJson(std::vector<ProjectView>{project});
  older[0].erase("fair_share");
  auto old_list = ParseProjectViews(older);
  ASSERT_TRUE(old_list.ok()) << old_list.status().message();
  EXPECT_EQ((*old_list)[0].fair_share, FairShareStandingView{});
  // No limit: absent from the sharing, null beside it (as the dashboard reads it).
  const json bare = ToJson(ProjectView{.name = "nlp"});
  EXPECT_FALSE(bare["sharing"].contains("limit_gpus"));
  EXPECT_TRUE(bare["limit_gpus"].is_null());
  // Taken: every field optional, null limits are none, GPUs rounded to milli-GPU.
  auto sharing = ParseProjectSharing(json::parse(R"({"gpus": 0.0004, "limit_gpus": null})"));
  ASSERT_TRUE(sharing.ok()) << sharing.status().message();
  EXPECT_EQ(*sharing, ProjectSharing{});
}

TEST(ApiProjectTest, RefusalsNameTheField) {
  json standing = ToJson(std::vector<ProjectView>{SomeProject()});
  standing[0]["fair_share"]["standing"] = "ahead";
  EXPECT_THAT(ErrorOf(ParseProjectViews(standing)),
              HasSubstr("field '[0].fair_share.standing': must be under, at or over"));
  EXPECT_THAT(ErrorOf(ParseProjectSharing(json{{"quota", 4}})),
              HasSubstr("project sharing: field 'quota': unknown field"));
  EXPECT_THAT(ErrorOf(ParseProjectSharing(json{{"gpus", -1}})),
              HasSubstr("project sharing: field 'gpus': must be >= 0"));
  EXPECT_THAT(ErrorOf(ParseProjectSharing(json{{"weight", 0}})),
              HasSubstr("project sharing: field 'weight': must be a number > 0"));
  EXPECT_THAT(ErrorOf(ParseProjectSharing(json{{"model_gpus", {{"A100", "x"}}}})),
              HasSubstr("project sharing: field 'model_gpus.A100': must be a number"));
  EXPECT_THAT(ErrorOf(ParseProjectSharing(json{{"gpus", 1e300}})),
              HasSubstr("project sharing: field 'gpus': must be at most 1e12"));
  json list = ToJson(std::vector<ProjectView>{SomeProject()});
  list[0]["sharing"]["limits"] = 1;
  EXPECT_THAT(ErrorOf(ParseProjectViews(list)),
              HasSubstr("projects: field '[0].sharing.limits': unknown field"));
  list = ToJson(std::vector<ProjectView>{SomeProject()});
  list[0]["submit_limits"]["max_pending_jobs"] = -1;
  EXPECT_THAT(ErrorOf(ParseProjectViews(list)),
              HasSubstr("projects: field '[0].submit_limits.max_pending_jobs': must be in "
                        "0..1000000000, got -1"));
  list = ToJson(std::vector<ProjectView>{SomeProject()});
  list[0].erase("running_gpus");
  EXPECT_THAT(ErrorOf(ParseProjectViews(list)),
              HasSubstr("projects: field '[0].running_gpus': is required"));
}

SessionView SomeSession() {
  SessionView s{.id = JobId(7),
                .name = "notebook",
                .user = "alice",
                .project = "vision",
                .state = model::JobState::kRunning,
                .reason = "started",
                .environment = "jupyter@2",
                .path = "/sessions/7/",
                .idle_timeout = Seconds(3600),
                .submit_time = Seconds(1700000000),
                .start_time = Seconds(1700000010),
                .node = "gpu-01",
                .address = "10.0.0.5",
                .port = 41000,
                .last_activity = Seconds(1700000500),
                .idle_notice = IdleNotice{Seconds(1700004100), Seconds(1700004400)},
                .token = "secret",
                .url = "http://corral:8081/sessions/7/"};
  s.direct_url = "http://10.0.0.5:41000/sessions/7/?token=secret";
  return s;
}

TEST(ApiSessionTest, RoundTrips) {
  const SessionView session = SomeSession();
  auto parsed = ParseSessionView(ToJson(session));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, session);
  // A pending session: where it runs is null, the optional fields absent, as always shown.
  SessionView pending{.id = JobId(8), .path = "/sessions/8/", .submit_time = Seconds(1)};
  pending.pending_reason = PendingReason{"insufficient_gpus", "no free GPU"};
  const json j = ToJson(pending);
  for (const char* null :
       {"environment", "node", "address", "port", "last_activity", "idle_notice", "direct_url"}) {
    EXPECT_TRUE(j.contains(null) && j[null].is_null()) << null;
  }
  for (const char* absent : {"start_time", "stopping", "token"}) {
    EXPECT_FALSE(j.contains(absent)) << absent;
  }
  auto list = ParseSessionViews(ToJson(std::vector<SessionView>{session, pending}));
  ASSERT_TRUE(list.ok()) << list.status().message();
  EXPECT_EQ(*list, (std::vector<SessionView>{session, pending}));
}

TEST(ApiSessionTest, RefusalsNameTheField) {
  json j = ToJson(SomeSession());
  j["idle_notice"].erase("stops_at");
  EXPECT_THAT(ErrorOf(ParseSessionView(j)),
              HasSubstr("session: field 'idle_notice.stops_at': is required"));
  j = ToJson(SomeSession());
  j["port"] = 0;
  EXPECT_THAT(ErrorOf(ParseSessionView(j)),
              HasSubstr("session: field 'port': must be in 1..65535"));
  json list = ToJson(std::vector<SessionView>{SomeSession()});
  list[0]["state"] = "sleeping";
  EXPECT_THAT(ErrorOf(ParseSessionViews(list)),
              HasSubstr("sessions: field '[0].state': unknown job state"));
}

EnvironmentView SomeEnvironment() {
  EnvironmentView e{.name = "torch",
                    .version = 3,
                    .owner = "alice",
                    .projects = {"vision"},
                    .created_at = Seconds(1700000000)};
  e.spec.name = "torch";
  e.spec.image = "nvcr.io/nvidia/pytorch:24.05-py3";
  e.spec.env = {{"A", "1"}};
  return e;
}

TEST(ApiEnvironmentTest, RoundTrips) {
  const EnvironmentView env = SomeEnvironment();
  const json j = ToJson(env);
  EXPECT_EQ(j, json::parse(R"({"name": "torch", "version": 3, "owner": "alice", "builtin": false,
      "projects": ["vision"], "created_at": 1700000000, "runtimes": ["container"],
      "spec": {"name": "torch", "image": "nvcr.io/nvidia/pytorch:24.05-py3",
               "env": {"A": "1"}}})"));
  auto parsed = ParseEnvironmentView(j);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, env);
  EnvironmentView builtin = env;
  builtin.owner.clear();
  const json list = ToJson(std::vector<EnvironmentView>{env, builtin});
  EXPECT_EQ(list["environments"][1]["builtin"], true);
  auto views = ParseEnvironmentViews(list);
  ASSERT_TRUE(views.ok()) << views.status().message();
  EXPECT_EQ(*views, (std::vector<EnvironmentView>{env, builtin}));
  // A clone: the source's spec, patched, under the new name.
  auto clone = CloneEnvironmentSpec(
      env.spec, json::parse(R"({"name": "mine", "set": {"env": {"A": null, "B": "2"}}})"));
  ASSERT_TRUE(clone.ok()) << clone.status().message();
  EXPECT_EQ(clone->name, "mine");
  EXPECT_EQ(clone->image, env.spec.image);
  EXPECT_EQ(clone->env, (std::map<std::string, std::string>{{"B", "2"}}));
}

TEST(ApiEnvironmentTest, RefusalsNameTheField) {
  json j = ToJson(SomeEnvironment());
  j["spec"]["image"] = "no spaces allowed";
  EXPECT_THAT(ErrorOf(ParseEnvironmentView(j)),
              HasSubstr("environment: field 'spec': field 'image': must be a container image"));
  j = ToJson(SomeEnvironment());
  j["builtin"] = true;
  EXPECT_THAT(ErrorOf(ParseEnvironmentView(j)), HasSubstr("environment: field 'builtin'"));
  json list = ToJson(std::vector<EnvironmentView>{SomeEnvironment()});
  list["environments"][0]["version"] = 0;
  EXPECT_THAT(ErrorOf(ParseEnvironmentViews(list)),
              HasSubstr("environments: field '[0].version': must be >= 1, got 0"));
  EXPECT_THAT(ErrorOf(CloneEnvironmentSpec(SomeEnvironment().spec,
                                           {{"name", "x"}, {"set", {{"name", "y"}}}})),
              HasSubstr("field 'set.name'"));
}

TEST(ApiAccountTest, RoundTrips) {
  const std::vector<UserView> users = {{"root", true}, {"alice", false, {.max_pending_jobs = 5}}};
  EXPECT_EQ(ToJson(users), json::parse(R"([{"name": "root", "admin": true, "submit_limits":
      {"max_pending_jobs": null, "max_submits_per_minute": null}},
      {"name": "alice", "admin": false, "submit_limits":
      {"max_pending_jobs": 5, "max_submits_per_minute": null}}])"));
  EXPECT_EQ(*ParseUserViews(ToJson(users)), users);
  // An older server's users have no limits.
  EXPECT_EQ(*ParseUserViews(json::parse(R"([{"name": "root", "admin": true}])")),
            (std::vector<UserView>{{"root", true}}));
  const NewUser user{{"bob", false}, "secret"};
  EXPECT_EQ(ToJson(user)["token"], "secret");
  EXPECT_EQ(*ParseNewUser(ToJson(user)), user);
  const std::vector<TokenView> tokens = {
      {1, "initial", Seconds(1700000000), true},
      {2, "laptop", Seconds(1700000100), false, Seconds(1702592100)}};
  EXPECT_EQ(ToJson(tokens)[0], json::parse(R"({"id": 1, "name": "initial",
      "created_at": 1700000000, "expires_at": null, "revoked": true})"));
  EXPECT_EQ(ToJson(tokens)[1]["expires_at"], 1702592100);
  EXPECT_EQ(*ParseTokenViews(ToJson(tokens)), tokens);
  const NewToken token{3, "ci", "secret", Seconds(1702592100)};
  EXPECT_EQ(ToJson(token), json::parse(R"({"id": 3, "name": "ci", "token": "secret",
      "expires_at": 1702592100})"));
  EXPECT_EQ(*ParseNewToken(ToJson(token)), token);
  // Submit limits: null and absent are no limit.
  const model::SubmitLimits limits{.max_submits_per_minute = 0};
  EXPECT_EQ(ToJson(limits),
            json::parse(R"({"max_pending_jobs": null, "max_submits_per_minute": 0})"));
  EXPECT_EQ(*ParseSubmitLimits(ToJson(limits)), limits);
  EXPECT_EQ(*ParseSubmitLimits(json::object()), model::SubmitLimits{});
}

TEST(ApiAccountTest, RefusalsNameTheField) {
  EXPECT_THAT(ErrorOf(ParseUserViews(json::parse(R"([{"name": "a", "admin": "yes"}])"))),
              HasSubstr("users: field '[0].admin': must be true or false"));
  EXPECT_THAT(ErrorOf(ParseNewUser(json::parse(R"({"name": "a", "admin": false})"))),
              HasSubstr("new user: field 'token': is required"));
  json tokens = ToJson(std::vector<TokenView>{{1, "initial", Seconds(1), false}});
  tokens[0].erase("revoked");
  EXPECT_THAT(ErrorOf(ParseTokenViews(tokens)),
              HasSubstr("tokens: field '[0].revoked': is required"));
  EXPECT_THAT(ErrorOf(ParseNewToken(json::parse(R"({"id": 0, "name": "x", "token": "s"})"))),
              HasSubstr("new token: field 'id': must be >= 1"));
  EXPECT_THAT(ErrorOf(ParseSubmitLimits(json{{"max_pending", 1}})),
              HasSubstr("submit limits: field 'max_pending': unknown field"));
  EXPECT_THAT(ErrorOf(ParseSubmitLimits(json{{"max_pending_jobs", -1}})),
              HasSubstr("submit limits: field 'max_pending_jobs': must be in 0..1000000000"));
  EXPECT_THAT(ErrorOf(ParseSubmitLimits(json{{"max_submits_per_minute", 1000000001}})),
              HasSubstr("submit limits: field 'max_submits_per_minute': must be in 0..1000000000, "
                        "got 1000000001"));
  EXPECT_THAT(ErrorOf(ParseSubmitLimits(json{{"max_pending_jobs", "5"}})),
              HasSubstr("submit limits: field 'max_pending_jobs': must be an integer"));
  EXPECT_THAT(ErrorOf(ParseSubmitLimits(json::array())),
              HasSubstr("submit limits: must be a JSON object"));
}

TEST(ApiClusterTest, RoundTrips) {
  const ClusterSummary summary{.time = Seconds(1700000000),
                               .nodes = 4,
                               .nodes_ready = 3,
                               .gpus = 32,
                               .allocated = MilliGpu(12500),
                               .gpus_used = 9.75,
                               .jobs_pending = 7,
                               .jobs_starting = 1,
                               .jobs_running = 5};
  EXPECT_EQ(ToJson(summary), json::parse(R"({"time": 1700000000, "nodes": 4, "nodes_ready": 3,
      "gpus": 32, "gpus_allocated": 12.5, "gpus_used": 9.75, "jobs_pending": 7,
      "jobs_starting": 1, "jobs_running": 5})"));
  EXPECT_EQ(*ParseClusterSummary(ToJson(summary)), summary);
  const SummaryHistory history{Seconds(60), {summary, summary}};
  EXPECT_EQ(ToJson(history)["step_s"], 60);
  auto parsed = ParseSummaryHistory(ToJson(history));
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(*parsed, history);
}

TEST(ApiClusterTest, RefusalsNameTheField) {
  json j = ToJson(ClusterSummary{.nodes = 1});
  j["gpus_used"] = -1;
  EXPECT_THAT(ErrorOf(ParseClusterSummary(j)),
              HasSubstr("summary: field 'gpus_used': must be >= 0"));
  json history = ToJson(SummaryHistory{Seconds(60), {ClusterSummary{}, ClusterSummary{}}});
  history["summaries"][1].erase("time");
  EXPECT_THAT(ErrorOf(ParseSummaryHistory(history)),
              HasSubstr("summary history: field 'summaries[1].time': is required"));
}

QueueRow SomeRow() {
  return {.position = 2,
          .id = JobId(7),
          .name = "train",
          .user = "alice",
          .project = "vision",
          .priority = 1,
          .gpus = MilliGpu(1500),
          .submit_time = Seconds(1700000000),
          .pending_reason = {"insufficient_gpus", "no node has 2 free GPUs"},
          .estimated_start = Seconds(1700000600)};
}

PolicyView SomePolicy() {
  return {.rules = {.order = "fairshare",
                    .blocking = "backfill",
                    .reclaim = true,
                    .las_thresholds_gpu_s = {3600},
                    .half_life = Seconds(604800),
                    .fair_share_weight = 1000,
                    .age_weight = 100,
                    .age_unit = Seconds(86400)},
          .placement = "fgd",
          .profile_jobs = 10000,
          .typical_tasks = 12,
          .uses_profile = true,
          .profile_min_jobs = 100,
          .file = "/etc/corral/policy.yaml"};
}

TEST(ApiSchedulingTest, RoundTrips) {
  QueueRow unestimated = SomeRow();
  unestimated.estimated_start.reset();
  const std::vector<QueueRow> queue = {SomeRow(), unestimated};
  const json q = ToJson(queue);
  EXPECT_EQ(q[0]["gpus"], 1.5);
  EXPECT_TRUE(q[1]["estimated_start"].is_null());  // shown null, as always
  EXPECT_EQ(*ParseQueue(q), queue);
  PolicyView policy = SomePolicy();
  json p = ToJson(policy);
  EXPECT_EQ(p, json::parse(R"({"policy": {"order": "fairshare", "blocking": "backfill",
      "reclaim": true, "las_thresholds_gpu_s": [3600], "fair_share": {"half_life_s": 604800,
      "fair_share_weight": 1000.0, "age_weight": 100.0, "age_unit_s": 86400}},
      "placement": "fgd", "profile_jobs": 10000, "typical_tasks": 12,
      "uses_profile": true, "profile_min_jobs": 100, "file": "/etc/corral/policy.yaml",
      "file_error": null})"));
  EXPECT_EQ(*ParsePolicyView(p), policy);
  policy.file_error = "field 'order': unknown";
  EXPECT_EQ(*ParsePolicyView(ToJson(policy)), policy);
}

TEST(ApiSchedulingTest, RefusalsNameTheField) {
  json q = ToJson(std::vector<QueueRow>{SomeRow()});
  q[0]["pending_reason"].erase("code");
  EXPECT_THAT(ErrorOf(ParseQueue(q)),
              HasSubstr("queue: field '[0].pending_reason.code': is required"));
  json p = ToJson(SomePolicy());
  p["policy"]["fair_share"]["age_weight"] = -1;
  EXPECT_THAT(ErrorOf(ParsePolicyView(p)),
              HasSubstr("policy: field 'policy.fair_share.age_weight': must be >= 0"));
  p = ToJson(SomePolicy());
  p["uses_profile"] = "yes";
  EXPECT_THAT(ErrorOf(ParsePolicyView(p)),
              HasSubstr("policy: field 'uses_profile': must be true or false"));
  p = ToJson(SomePolicy());
  p["profile_min_jobs"] = -1;
  EXPECT_THAT(ErrorOf(ParsePolicyView(p)), HasSubstr("policy: field 'profile_min_jobs'"));
}

}  // namespace
}  // namespace corral::protocol
