// The monitoring routes (monitoring.cc) and the dashboard's summary (dashboard.cc) through real
// HTTP: /metrics, GPUs, usage, capacity forecast and what-if, a job's GPUs and GPU history.
#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {

class MonitoringApiTest : public ApiTest {};

TEST_F(MonitoringApiTest, MetricsNeedAnAdminToken) {
  ExpectProblem(Get("/metrics", ""), 401);
  ExpectProblem(Get("/metrics", "not-a-token"), 401);
  ExpectProblem(Get("/metrics", bob_token_), 403, "/metrics");
  ASSERT_FALSE(RegisterNode("gpu-1", 4).empty());
  const Answer metrics = Get("/metrics", root_token_);
  ASSERT_EQ(metrics.status, 200) << metrics;
  EXPECT_EQ(metrics.content_type.rfind("text/plain; version=0.0.4", 0), 0u) << metrics.content_type;
  EXPECT_NE(metrics.text.find("# TYPE corral_"), std::string::npos) << metrics.text;
}

TEST_F(MonitoringApiTest, TheSummaryCountsNodesGpusAndJobs) {
  ExpectProblem(Get("/api/v1/summary", ""), 401);
  ASSERT_FALSE(RegisterNode("gpu-1", 4).empty());
  SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const Answer summary = Get("/api/v1/summary", bob_token_);  // counts, visible to everyone
  ASSERT_EQ(summary.status, 200) << summary;
  EXPECT_EQ(summary.body["nodes"], 1);
  EXPECT_EQ(summary.body["nodes_ready"], 1);
  EXPECT_EQ(summary.body["gpus"], 4);
  EXPECT_EQ(summary.body["jobs_pending"], 1);
  const Answer history = Get("/api/v1/summary/history", bob_token_);
  ASSERT_EQ(history.status, 200) << history;
  EXPECT_EQ(history.body["step_s"], 60);
  EXPECT_TRUE(history.body["summaries"].is_array());
  ExpectProblem(Get("/api/v1/summary/history?since=yesterday", bob_token_), 400, "since");
}

TEST_F(MonitoringApiTest, GpusAreListedForEveryone) {
  ExpectProblem(Get("/api/v1/gpus", ""), 401);
  const Answer gpus = Get("/api/v1/gpus?idle=1", bob_token_);
  ASSERT_EQ(gpus.status, 200) << gpus;
  EXPECT_TRUE(gpus.body["gpus"].is_array()) << gpus;
  EXPECT_TRUE(gpus.body.contains("idle_threshold_percent")) << gpus;
}

// Issue 15: GET /api/v1/gpus named every holder's job, user and project to any member. Now a
// holder of another project is its share only; the GPU's reading stays (the heatmap colours it).
TEST_F(MonitoringApiTest, GpusShowOtherProjectsHoldersOnlyAsInUse) {
  const std::string node_token = RegisterNode("gpu-1", 2);
  const int64_t secret = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const json launches = RunPendingJobs("gpu-1", node_token, 2, /*utilization=*/3);
  ASSERT_EQ(launches.size(), 1u);
  clock_.Advance(Seconds(3600));  // flagged idle (3 % for an hour): also on ?idle=1
  ReportRunning("gpu-1", node_token, launches, 2, 3);

  for (const std::string route : {"/api/v1/gpus", "/api/v1/gpus?idle=1"}) {
    SCOPED_TRACE(route);
    const Answer bob = Get(route, bob_token_);
    ASSERT_EQ(bob.status, 200) << bob;
    std::vector<json> holders;
    for (const json& g : bob.body["gpus"]) {
      for (const json& h : g["holders"]) holders.push_back(h);
      if (!g["holders"].empty()) EXPECT_EQ(g["utilization_percent"], 3);
    }
    EXPECT_EQ(holders, std::vector<json>{json({{"share", 1.0}})}) << bob;
    EXPECT_EQ(bob.text.find("alice"), std::string::npos) << bob.text;
    EXPECT_EQ(bob.text.find("vision"), std::string::npos) << bob.text;

    for (const std::string& token : {alice_token_, root_token_}) {
      const Answer full = Get(route, token);
      int named = 0;
      for (const json& g : full.body["gpus"]) {
        for (const json& h : g["holders"]) {
          EXPECT_EQ(h["job"], secret);
          EXPECT_EQ(h["user"], "alice");
          ++named;
        }
      }
      EXPECT_EQ(named, 1) << full;
    }
  }
}

// A GPU shared by two projects' jobs: who may see one job sees the other only as "in use".
TEST_F(MonitoringApiTest, AJobsSharedGpuShowsTheOtherProjectsHolderOnlyAsInUse) {
  const std::string node_token = RegisterNode("gpu-1", 1);
  json half = TestJobSpec(1, "vision");
  half["resources"]["gpu_milli"] = 500;
  const int64_t secret = SubmitJob(alice_token_, half);
  half["project"] = "default";
  const int64_t mine = SubmitJob(bob_token_, half);
  ASSERT_EQ(RunPendingJobs("gpu-1", node_token, 1).size(), 2u);
  const Answer gpus = Get("/api/v1/jobs/" + std::to_string(mine) + "/gpus", bob_token_);
  ASSERT_EQ(gpus.status, 200) << gpus;
  ASSERT_EQ(gpus.body["gpus"].size(), 1u) << gpus;
  json holders = gpus.body["gpus"][0]["holders"];
  ASSERT_EQ(holders.size(), 2u) << gpus;
  const json theirs = holders[0].contains("job") ? holders[1] : holders[0];
  const json own = holders[0].contains("job") ? holders[0] : holders[1];
  EXPECT_EQ(own["job"], mine);
  EXPECT_EQ(theirs, json({{"share", 0.5}}));
  EXPECT_EQ(gpus.text.find("\"job\":" + std::to_string(secret)), std::string::npos);
}

TEST_F(MonitoringApiTest, AJobsGpusAreForWhoMaySeeTheJob) {
  const int64_t id = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  for (const std::string& route : {job + "/gpus", job + "/gpu-history"}) {
    SCOPED_TRACE(route);
    const Answer mine = Get(route, alice_token_);
    ASSERT_EQ(mine.status, 200) << mine;
    EXPECT_EQ(mine.body["job"], id);
    ExpectProblem(Get(route, bob_token_), 404, "not found");
    ExpectProblem(Get(route, ""), 401);
    ExpectProblem(Get(route + "?since=-5", alice_token_), 400, "since");
  }
  ExpectProblem(Get("/api/v1/jobs/999/gpus", root_token_), 404, "999");
  ExpectProblem(Get("/api/v1/jobs/999/gpu-history", root_token_), 404, "999");
  ExpectProblem(Get(job + "/gpu-history?until=x", alice_token_), 400, "until");
}

TEST_F(MonitoringApiTest, UsageIsValidatedAndServedAsJsonOrCsv) {
  ExpectProblem(Get("/api/v1/usage", ""), 401);
  const Answer usage = Get("/api/v1/usage", bob_token_);
  ASSERT_EQ(usage.status, 200) << usage;
  EXPECT_TRUE(usage.body["rows"].is_array());
  EXPECT_TRUE(usage.body["since"].is_string());
  const Answer csv = Get("/api/v1/usage?format=csv&by=user", bob_token_);
  ASSERT_EQ(csv.status, 200) << csv;
  EXPECT_EQ(csv.content_type.rfind("text/csv", 0), 0u) << csv.content_type;
  ExpectProblem(Get("/api/v1/usage?format=xml", bob_token_), 400, "format");
  ExpectProblem(Get("/api/v1/usage?by=colour", bob_token_), 400, "by");
  ExpectProblem(Get("/api/v1/usage?since=forever", bob_token_), 400, "since");
}

TEST_F(MonitoringApiTest, CapacityPlanning) {
  const Answer forecast =
      Get("/api/v1/capacity/forecast?history_days=7&horizon_days=3", bob_token_);
  ASSERT_EQ(forecast.status, 200) << forecast;
  EXPECT_TRUE(forecast.IsJson());
  ExpectProblem(Get("/api/v1/capacity/forecast?history_days=0", bob_token_), 400, "history_days");
  ExpectProblem(Get("/api/v1/capacity/forecast?horizon_days=29", bob_token_), 400, "horizon_days");

  ExpectAdminOnly("POST", "/api/v1/capacity/what-if", json::object());
  ExpectProblem(Post("/api/v1/capacity/what-if", {{"colour", 1}}, root_token_), 400, "colour");
  ExpectProblem(Post("/api/v1/capacity/what-if", {{"since", 7}}, root_token_), 400, "since");
  ASSERT_FALSE(RegisterNode("gpu-1", 4).empty());
  const Answer what_if = Post("/api/v1/capacity/what-if", json::object(), root_token_);
  ASSERT_EQ(what_if.status, 200) << what_if;
  EXPECT_TRUE(what_if.IsJson());
}

}  // namespace corral::server::api_testing
