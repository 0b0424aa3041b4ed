// The in-job channel through the API (docs/in-job.md): the job token's scope and revocation,
// reports and checkpoints with their bounds, the job view's new fields, the metric history.
#include "server/api/api_test_fixture.h"
#include "server/control/channel_rate_limiter.h"
#include "server/http/job_token.h"

namespace corral::server::api_testing {
namespace {

constexpr char kSessionKey[] = "the-channel-test-session-key-0123456789";

class JobChannelApiTest : public ApiTest {
 protected:
  void Configure(ControllerConfig& config) override {
    config.session_key = kSessionKey;
    config.checkpoint_root = "/shared/checkpoints";
  }

  // Alice's job, running on gpu-1, and the job token its launch carries.
  void SetUp() override {
    ApiTest::SetUp();
    node_token_ = RegisterNode("gpu-1", 2);
    job_ = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
    other_ = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
    const json launches = RunPendingJobs("gpu-1", node_token_, 2);
    for (const json& launch : launches) {
      if (launch["job_id"] == job_) {
        token_ = launch["job_token"];
        EXPECT_EQ(launch["checkpoint_dir"], "/shared/checkpoints/" + std::to_string(job_));
      }
    }
    ASSERT_EQ(token_.rfind("crj_", 0), 0u) << launches;
  }

  std::string JobPath(int64_t id, const std::string& rest = "") const {
    return "/api/v1/jobs/" + std::to_string(id) + rest;
  }

  std::string node_token_, token_;
  int64_t job_ = 0, other_ = 0;
};

TEST_F(JobChannelApiTest, AJobTokenReadsAndReportsOnItsOwnJobOnly) {
  EXPECT_EQ(Get(JobPath(job_), token_).status, 200);
  EXPECT_EQ(Get(JobPath(job_, "/metrics"), token_).status, 200);
  EXPECT_EQ(Post(JobPath(job_, "/report"), {{"metrics", {{"loss", 0.5}}}}, token_).status, 204);
  const std::string scope = "a job token may only read and report on its own job";
  ExpectProblem(Get("/api/v1/jobs", token_), 403, scope);
  ExpectProblem(Get(JobPath(other_), token_), 403, scope);
  ExpectProblem(Post(JobPath(other_, "/report"), {{"metrics", {{"loss", 1}}}}, token_), 403, scope);
  ExpectProblem(Post("/api/v1/jobs", TestJobSpec(1, "vision"), token_), 403, scope);
  ExpectProblem(Post(JobPath(job_, "/cancel"), json::object(), token_), 403, scope);
  ExpectProblem(Get("/api/v1/whoami", token_), 403, scope);
  // Another job's id on this job's MAC, or a MAC under another key: not a token.
  std::string forged = token_;
  forged.replace(4, std::to_string(job_).size(), std::to_string(other_));
  ExpectProblem(Get(JobPath(other_), forged), 401);
  ExpectProblem(Get(JobPath(job_), JobToken("another-key-of-32-characters-or-more", JobId(job_),
                                            store().GetJob(JobId(job_))->submit_time)),
                401);
  ExpectProblem(Get(JobPath(job_), "crj_garbage"), 401);
}

TEST_F(JobChannelApiTest, AJobTokenIsRevokedWhenItsJobEnds) {
  // The pending job's token, as a launch of it would carry it.
  const int64_t pending = SubmitJob(alice_token_, TestJobSpec(1, "vision"));  // GPUs all held
  const std::string token =
      JobToken(kSessionKey, JobId(pending), store().GetJob(JobId(pending))->submit_time);
  EXPECT_EQ(Get(JobPath(pending), token).status, 200);
  ASSERT_EQ(Post(JobPath(pending, "/cancel"), json::object(), alice_token_).status, 202);
  ExpectProblem(Get(JobPath(pending), token), 401, "has ended");
  ExpectProblem(Post(JobPath(pending, "/report"), {{"metrics", {{"x", 1}}}}, token), 401);
  // Its owner still reads it; reports on an ended job are refused.
  EXPECT_EQ(Get(JobPath(pending), alice_token_).status, 200);
  ExpectProblem(Post(JobPath(pending, "/report"), {{"metrics", {{"x", 1}}}}, alice_token_), 409);
}

TEST_F(JobChannelApiTest, ReportsAndCheckpointsShowInTheJobViewAndTheHistory) {
  ASSERT_EQ(Post(JobPath(job_, "/report"),
                 {{"metrics", {{"loss", 0.5}, {"step", 3}, {"phase", "warmup"}}}}, token_)
                .status,
            204);
  clock_.Advance(Seconds(10));
  ASSERT_EQ(Post(JobPath(job_, "/report"), {{"metrics", {{"loss", 0.25}}}}, alice_token_).status,
            204);
  ASSERT_EQ(
      Post(JobPath(job_, "/checkpoint"), {{"path", "/shared/checkpoints/c1"}, {"step", 3}}, token_)
          .status,
      204);
  const Answer view = Get(JobPath(job_), alice_token_);
  ASSERT_EQ(view.status, 200) << view;
  EXPECT_EQ(view.body["metrics"], json({{"loss", 0.25}, {"step", 3.0}, {"phase", "warmup"}}));
  EXPECT_EQ(view.body["metrics_at"], clock_.Now().value());
  EXPECT_EQ(
      view.body["checkpoint"],
      json({{"path", "/shared/checkpoints/c1"}, {"step", 3}, {"time", clock_.Now().value()}}));
  EXPECT_EQ(view.body["checkpoint_dir"], "/shared/checkpoints/" + std::to_string(job_));
  EXPECT_EQ(view.body["events"].back()["reason"], "checkpoint /shared/checkpoints/c1 (step 3)");
  const Answer series = Get(JobPath(job_, "/metrics"), alice_token_);
  const int64_t t = clock_.Now().value();
  EXPECT_EQ(series.body,
            json({{"series", {{"loss", {{t - 10, 0.5}, {t, 0.25}}}, {"step", {{t - 10, 3.0}}}}}}));
  // A job with nothing reported says so.
  const Answer quiet = Get(JobPath(other_), alice_token_);
  EXPECT_EQ(quiet.body["metrics"], json::object());
  EXPECT_TRUE(quiet.body["metrics_at"].is_null());
  EXPECT_TRUE(quiet.body["checkpoint"].is_null());
  // Bob sees neither the job nor its history; only the owner, the token or an admin report.
  ExpectProblem(Get(JobPath(job_, "/metrics"), bob_token_), 404);
  ExpectProblem(Post(JobPath(job_, "/report"), {{"metrics", {{"x", 1}}}}, bob_token_), 404);
}

TEST_F(JobChannelApiTest, EveryBoundIsA400NamingTheField) {
  const std::string report = JobPath(job_, "/report");
  json many = json::object();
  for (int i = 0; i < 33; ++i) many["k" + std::to_string(i)] = i;
  ExpectProblem(Post(report, {{"metrics", many}}, token_), 400, "field 'metrics'");
  ExpectProblem(Post(report, {{"metrics", json::object()}}, token_), 400, "field 'metrics'");
  ExpectProblem(Post(report, json::object(), token_), 400, "field 'metrics'");
  ExpectProblem(Post(report, {{"metrics", {{"a b", 1}}}}, token_), 400, "key 'a b'");
  ExpectProblem(Post(report, {{"metrics", {{std::string(65, 'k'), 1}}}}, token_), 400,
                "field 'metrics'");
  ExpectProblem(Post(report, {{"metrics", {{"x", std::string(257, 'y')}}}}, token_), 400,
                "field 'metrics.x'");
  ExpectProblem(Post(report, {{"metrics", {{"x", json::array()}}}}, token_), 400,
                "field 'metrics.x'");
  ExpectProblem(Post(report, {{"metrics", {{"x", true}}}}, token_), 400, "field 'metrics.x'");
  // 64 keys a job: the 65th is refused, and nothing of that report is kept.
  for (int r = 0; r < 2; ++r) {
    json keys = json::object();
    for (int i = 0; i < 32; ++i) keys["k" + std::to_string(r * 32 + i)] = i;
    ASSERT_EQ(Post(report, {{"metrics", keys}}, token_).status, 204);
  }
  ExpectProblem(Post(report, {{"metrics", {{"k0", 9}, {"new", 1}}}}, token_), 400,
                "field 'metrics'");
  EXPECT_EQ(Get(JobPath(job_), token_).body["metrics"]["k0"], 0.0);
  const std::string checkpoint = JobPath(job_, "/checkpoint");
  ExpectProblem(Post(checkpoint, {{"path", "relative/c1"}}, token_), 400, "field 'path'");
  ExpectProblem(Post(checkpoint, json::object(), token_), 400, "field 'path'");
  ExpectProblem(Post(checkpoint, {{"path", "/" + std::string(4096, 'p')}}, token_), 400,
                "field 'path'");
  ExpectProblem(Post(checkpoint, {{"path", "/c"}, {"step", -1}}, token_), 400, "field 'step'");
}

// Each job's reports and checkpoints together: bursts of ChannelRateLimiter::kBurst, then
// kPerSecond a second; over that, 429 with Retry-After, and nothing recorded.
TEST_F(JobChannelApiTest, AJobWritingTooFastIs429WithRetryAfter) {
  const int64_t burst = ChannelRateLimiter::kBurst;
  for (int64_t i = 0; i < burst; ++i) {
    const std::string rest = i % 2 ? "/report" : "/checkpoint";
    const json body = i % 2 ? json{{"metrics", {{"i", i}}}}
                            : json{{"path", "/shared/checkpoints/c" + std::to_string(i)}};
    ASSERT_EQ(Post(JobPath(job_, rest), body, token_).status, 204) << i;
  }
  const Answer over = Post(JobPath(job_, "/report"), {{"metrics", {{"i", -1}}}}, token_);
  ExpectProblem(over, 429, "faster than");
  ASSERT_EQ(over.headers.count("Retry-After"), 1u) << over;
  EXPECT_EQ(over.headers.find("Retry-After")->second, "1");
  ExpectProblem(Post(JobPath(job_, "/checkpoint"), {{"path", "/x"}}, alice_token_), 429);
  EXPECT_EQ(Get(JobPath(job_), token_).body["metrics"]["i"], burst - 1.0);
  // Another job has its own bucket; a second later this one has kPerSecond more.
  EXPECT_EQ(Post(JobPath(other_, "/report"), {{"metrics", {{"i", 1}}}}, alice_token_).status, 204);
  clock_.Advance(Seconds(1));
  for (int64_t i = 0; i < ChannelRateLimiter::kPerSecond; ++i) {
    ASSERT_EQ(Post(JobPath(job_, "/report"), {{"metrics", {{"i", i}}}}, token_).status, 204) << i;
  }
  ExpectProblem(Post(JobPath(job_, "/report"), {{"metrics", {{"i", 0}}}}, token_), 429);
}

// Without a session key (corral server --session-key unset) there is no job token: launches
// carry none and a crj_ token is refused.
class JobChannelWithoutKeyApiTest : public ApiTest {};

TEST_F(JobChannelWithoutKeyApiTest, NoJobTokenIsGivenNorAccepted) {
  const std::string node_token = RegisterNode("gpu-1", 1);
  const int64_t job = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const json launches = RunPendingJobs("gpu-1", node_token, 1);
  ASSERT_EQ(launches.size(), 1u) << launches;
  EXPECT_EQ(launches[0].value("job_token", ""), "") << launches;
  const std::string token =
      JobToken(kSessionKey, JobId(job), store().GetJob(JobId(job))->submit_time);
  const std::string path = "/api/v1/jobs/" + std::to_string(job);
  ExpectProblem(Get(path, token), 401, "gives no job tokens");
  ExpectProblem(Post(path + "/report", {{"metrics", {{"x", 1}}}}, token), 401);
  // The owner's own token still reports.
  EXPECT_EQ(Post(path + "/report", {{"metrics", {{"x", 1}}}}, alice_token_).status, 204);
}

}  // namespace
}  // namespace corral::server::api_testing
