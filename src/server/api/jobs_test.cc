// The jobs routes (jobs.cc) through real HTTP: submit, view, list, cancel, arrays, logs, the
// queue and the policy.
#include <filesystem>
#include <fstream>

#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {

class JobsApiTest : public ApiTest {};

TEST_F(JobsApiTest, SubmitAnswersTheJobAndItsViewShowsIt) {
  const Answer submitted = Post("/api/v1/jobs", TestJobSpec(2, "vision"), alice_token_);
  ASSERT_EQ(submitted.status, 201) << submitted;
  EXPECT_TRUE(submitted.IsJson()) << submitted;
  EXPECT_EQ(submitted.body["state"], "pending");
  EXPECT_EQ(submitted.body["project"], "vision");
  EXPECT_EQ(submitted.body["user"], "alice");
  const int64_t id = submitted.body["id"];
  ASSERT_GT(id, 0);

  const Answer view = Get("/api/v1/jobs/" + std::to_string(id), alice_token_);
  ASSERT_EQ(view.status, 200) << view;
  EXPECT_TRUE(view.IsJson());
  EXPECT_EQ(view.body["id"], id);
  EXPECT_EQ(view.body["name"], "t");
  EXPECT_EQ(view.body["state"], "pending");
  EXPECT_EQ(view.body["spec"]["command"], json({"true"}));
  EXPECT_EQ(view.body["spec"]["resources"]["gpus"], 2);
  EXPECT_TRUE(view.body["tasks"].is_array());
  EXPECT_FALSE(view.body["events"].empty());
  // No node yet: it waits, and says why.
  EXPECT_TRUE(view.body["pending_reason"].is_object()) << view;
}

TEST_F(JobsApiTest, EveryRouteNeedsAValidToken) {
  const int64_t id = SubmitJob(alice_token_);
  const std::string job = "/api/v1/jobs/" + std::to_string(id);
  for (const std::string& token : {std::string(), std::string("not-a-token")}) {
    SCOPED_TRACE(token.empty() ? "no token" : "an unknown token");
    ExpectProblem(Get("/api/v1/jobs", token), 401);
    ExpectProblem(Get(job, token), 401);
    ExpectProblem(Get(job + "/logs", token), 401);
    ExpectProblem(Post("/api/v1/jobs", TestJobSpec(), token), 401);
    ExpectProblem(Post(job + "/cancel", json::object(), token), 401);
    ExpectProblem(Get("/api/v1/queue", token), 401);
  }
  // Nothing was cancelled on the way.
  EXPECT_EQ(Get(job, alice_token_).body["state"], "pending");
}

TEST_F(JobsApiTest, AMemberSeesOnlyTheJobsOfTheirProjects) {
  const int64_t mine = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const int64_t shared = SubmitJob(alice_token_, TestJobSpec(1, "default"));
  const std::string path = "/api/v1/jobs/" + std::to_string(mine);

  // bob is not in "vision": the job is as if it did not exist.
  ExpectProblem(Get(path, bob_token_), 404, "not found");
  ExpectProblem(Post(path + "/cancel", json::object(), bob_token_), 404);
  ExpectProblem(Get(path + "/logs", bob_token_), 404);
  const Answer bobs = Get("/api/v1/jobs?all=1", bob_token_);
  ASSERT_EQ(bobs.status, 200) << bobs;
  std::vector<int64_t> ids;
  for (const json& j : bobs.body) ids.push_back(j["id"]);
  EXPECT_EQ(ids, std::vector<int64_t>{shared});
  const Answer queue = Get("/api/v1/queue", bob_token_);
  ASSERT_EQ(queue.status, 200) << queue;
  ids.clear();
  for (const json& j : queue.body) ids.push_back(j["id"]);
  EXPECT_EQ(ids, std::vector<int64_t>{shared});

  // Its owner and an admin see it.
  EXPECT_EQ(Get(path, alice_token_).status, 200);
  EXPECT_EQ(Get(path, root_token_).status, 200);
  const Answer all = Get("/api/v1/jobs?all=1", root_token_);
  ASSERT_EQ(all.status, 200) << all;
  EXPECT_EQ(all.body.size(), 2u);
}

TEST_F(JobsApiTest, OnlyTheOwnerOrAnAdminCancels) {
  const int64_t id = SubmitJob(alice_token_);  // in "default", which bob sees too
  const std::string path = "/api/v1/jobs/" + std::to_string(id);
  ExpectProblem(Post(path + "/cancel", json::object(), bob_token_), 403, "alice");
  EXPECT_EQ(Get(path, bob_token_).body["state"], "pending");

  const Answer cancelled = Post(path + "/cancel", json::object(), alice_token_);
  EXPECT_EQ(cancelled.status, 202) << cancelled;
  EXPECT_EQ(cancelled.body["status"], "cancelling");
  EXPECT_EQ(Get(path, alice_token_).body["state"], "cancelled");  // a pending job ends at once
  ExpectProblem(Post(path + "/cancel", json::object(), root_token_), 409, "already ended");
}

TEST_F(JobsApiTest, ABadSpecIsA400NamingTheField) {
  json no_command = TestJobSpec();
  no_command.erase("command");
  ExpectProblem(Post("/api/v1/jobs", no_command, alice_token_), 400, "command");
  json negative = TestJobSpec();
  negative["resources"]["gpus"] = -1;
  ExpectProblem(Post("/api/v1/jobs", negative, alice_token_), 400, "resources.gpus");
  json unknown = TestJobSpec();
  unknown["colour"] = "red";
  ExpectProblem(Post("/api/v1/jobs", unknown, alice_token_), 400, "colour");
  ExpectProblem(PostText("/api/v1/jobs", "{not json", alice_token_), 400, "request body");
  ExpectProblem(Post("/api/v1/jobs", json::array(), alice_token_), 400, "request body");
  // A project the caller is not a member of.
  ExpectProblem(Post("/api/v1/jobs", TestJobSpec(1, "vision"), bob_token_), 403, "vision");
  // None of them was stored.
  EXPECT_TRUE(Get("/api/v1/jobs?all=1", root_token_).body.empty());
}

TEST_F(JobsApiTest, ABadJobNameIsA400NamingTheFieldAndTheRule) {
  using namespace std::string_literals;  // "\0"s keeps the NUL
  for (const std::string path : {"/api/v1/jobs", "/api/v1/sessions"}) {
    for (const std::string& name : {"tr\0ain"s, "a\tb"s, "../x"s, "x\x1b[2Jy"s, "-rf"s,
                                    "x\xe2\x80\xae"s
                                    "y",
                                    std::string(100'000, 'j')}) {
      SCOPED_TRACE(path + " " + name.substr(0, 16));
      json spec = TestJobSpec();
      spec["name"] = name;
      ExpectProblem(Post(path, spec, alice_token_), 400,
                    "field 'name': a job name must be at most 128 letters");
    }
  }
  EXPECT_TRUE(Get("/api/v1/jobs?all=1", root_token_).body.empty());
  // What sweeps name their runs with passes, and so does no name.
  json sweep = TestJobSpec();
  sweep["name"] = "lr=0.1,bs=64";
  EXPECT_EQ(Post("/api/v1/jobs", sweep, alice_token_).status, 201);
  sweep.erase("name");
  EXPECT_EQ(Post("/api/v1/jobs", sweep, alice_token_).status, 201);
}

TEST_F(JobsApiTest, ListsNewestFirstAPageAtATime) {
  const int64_t a = SubmitJob(alice_token_);
  const int64_t b = SubmitJob(alice_token_);
  const int64_t c = SubmitJob(alice_token_);
  const Answer first = Get("/api/v1/jobs?limit=2", alice_token_);
  ASSERT_EQ(first.status, 200) << first;
  ASSERT_EQ(first.body.size(), 2u);
  EXPECT_EQ(first.body[0]["id"], c);
  EXPECT_EQ(first.body[1]["id"], b);
  const std::string next = first.headers.count("X-Corral-Next-Before")
                               ? first.headers.find("X-Corral-Next-Before")->second
                               : "";
  EXPECT_EQ(next, std::to_string(b));
  const Answer second = Get("/api/v1/jobs?limit=2&before=" + next, alice_token_);
  ASSERT_EQ(second.status, 200) << second;
  ASSERT_EQ(second.body.size(), 1u);
  EXPECT_EQ(second.body[0]["id"], a);
  EXPECT_EQ(second.headers.count("X-Corral-Next-Before"), 0u);

  ASSERT_EQ(
      Post("/api/v1/jobs/" + std::to_string(b) + "/cancel", json::object(), alice_token_).status,
      202);
  const Answer cancelled = Get("/api/v1/jobs?state=cancelled", alice_token_);
  ASSERT_EQ(cancelled.status, 200) << cancelled;
  ASSERT_EQ(cancelled.body.size(), 1u);
  EXPECT_EQ(cancelled.body[0]["id"], b);
}

TEST_F(JobsApiTest, ABadQueryIsA400NamingTheParameter) {
  ExpectProblem(Get("/api/v1/jobs?limit=0", alice_token_), 400, "limit");
  ExpectProblem(Get("/api/v1/jobs?limit=1001", alice_token_), 400, "limit");
  ExpectProblem(Get("/api/v1/jobs?limit=ten", alice_token_), 400, "limit");
  ExpectProblem(Get("/api/v1/jobs?before=-3", alice_token_), 400, "before");
  ExpectProblem(Get("/api/v1/jobs?array=x", alice_token_), 400, "array");
  ExpectProblem(Get("/api/v1/jobs?state=sleeping", alice_token_), 400, "state");
  ExpectProblem(Get("/api/v1/queue?limit=0", alice_token_), 400, "limit");
}

TEST_F(JobsApiTest, UnknownJobsAre404) {
  ExpectProblem(Get("/api/v1/jobs/999", alice_token_), 404, "999");
  ExpectProblem(Post("/api/v1/jobs/999/cancel", json::object(), root_token_), 404, "999");
  ExpectProblem(Get("/api/v1/jobs/999/logs", root_token_), 404, "999");
  ExpectProblem(Post("/api/v1/arrays/999/cancel", json::object(), root_token_), 404, "999");
  // An id past int64 is not found either (not a 500).
  ExpectProblem(Get("/api/v1/jobs/99999999999999999999", root_token_), 404);
}

TEST_F(JobsApiTest, ArraysAreSubmittedAndCancelledWhole) {
  json spec = TestJobSpec();
  spec["array"] = {{"indices", {0, 1, 2}}};
  const Answer submitted = Post("/api/v1/jobs", spec, alice_token_);
  ASSERT_EQ(submitted.status, 201) << submitted;
  const int64_t array = submitted.body["array_id"];
  ASSERT_EQ(submitted.body["ids"].size(), 3u);
  EXPECT_EQ(submitted.body["ids"][0], array);
  const Answer elements = Get("/api/v1/jobs?array=" + std::to_string(array), alice_token_);
  ASSERT_EQ(elements.status, 200) << elements;
  EXPECT_EQ(elements.body.size(), 3u);

  spec["array"] = {{"indices", {0, 0}}};
  ExpectProblem(Post("/api/v1/jobs", spec, alice_token_), 400, "array.indices[1]");

  const std::string cancel = "/api/v1/arrays/" + std::to_string(array) + "/cancel";
  ExpectProblem(Post(cancel, json::object(), bob_token_), 403);
  // An element that is not the first is not an array's id.
  ExpectProblem(
      Post("/api/v1/arrays/" + std::to_string(array + 1) + "/cancel", json::object(), alice_token_),
      404);
  const Answer cancelled = Post(cancel, json::object(), alice_token_);
  ASSERT_EQ(cancelled.status, 202) << cancelled;
  EXPECT_EQ(cancelled.body["ids"], submitted.body["ids"]);
  EXPECT_TRUE(Get("/api/v1/jobs?state=pending", alice_token_).body.empty());
}

TEST_F(JobsApiTest, LogsArePagedFromTheTasksFile) {
  const int64_t id = SubmitJob(alice_token_);
  const std::string path = "/api/v1/jobs/" + std::to_string(id) + "/logs";
  // Not written yet: empty.
  const Answer none = Get(path, alice_token_);
  ASSERT_EQ(none.status, 200) << none;
  EXPECT_EQ(none.text, "");

  // Where the controller keeps task logs: <logs_dir>/<job>/<task>-g<generation>.<stream>.
  const std::filesystem::path dir = logs_dir() / std::to_string(id);
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "0-g1.stdout") << "hello\nworld\n";
  std::ofstream(dir / "0-g1.stderr") << "oops\n";

  const Answer all = Get(path, alice_token_);
  ASSERT_EQ(all.status, 200) << all;
  EXPECT_EQ(all.content_type.rfind("text/plain", 0), 0u) << all;
  EXPECT_EQ(all.text, "hello\nworld\n");
  EXPECT_EQ(all.headers.find("X-Corral-Log-Offset")->second, "12");
  EXPECT_EQ(all.headers.find("X-Corral-Log-Size")->second, "12");
  const Answer rest = Get(path + "?offset=6", alice_token_);
  EXPECT_EQ(rest.text, "world\n");
  EXPECT_EQ(Get(path + "?offset=100", alice_token_).text, "");
  EXPECT_EQ(Get(path + "?stream=stderr", bob_token_).text, "oops\n");  // bob is in "default"

  ExpectProblem(Get(path + "?stream=stdin", alice_token_), 400, "stream");
  ExpectProblem(Get(path + "?offset=-1", alice_token_), 400, "offset");
  ExpectProblem(Get(path + "?generation=2", alice_token_), 404, "generation");
}

TEST_F(JobsApiTest, ASubmissionOverASubmitLimitIs429WithRetryAfter) {
  ASSERT_EQ(Put("/api/v1/users/alice/limits", {{"max_pending_jobs", 2}}, root_token_).status, 200);
  SubmitJob(alice_token_);
  json array = TestJobSpec();
  array["array"] = {{"indices", {0, 1}}};
  const Answer over = Post("/api/v1/jobs", array, alice_token_);  // 1 pending + 2 > 2: whole
  ExpectProblem(over, 429,
                "user 'alice' may have at most 2 jobs pending (max_pending_jobs) and has 1; this "
                "submission adds 2");
  ASSERT_EQ(over.headers.count("Retry-After"), 1u) << over;
  EXPECT_EQ(over.headers.find("Retry-After")->second, "10");
  EXPECT_EQ(Get("/api/v1/jobs", alice_token_).body.size(), 1u);  // no element was stored
  SubmitJob(bob_token_);                                         // others are served
  SubmitJob(alice_token_);
  array["array"] = {{"indices", {0, 1, 2}}};
  const Answer never = Post("/api/v1/jobs", array, alice_token_);  // can never fit: 400
  ExpectProblem(never, 400, "may ever have pending (max_pending_jobs is 2)");
  EXPECT_EQ(never.headers.count("Retry-After"), 0u) << never;
  // A project's rate: the wait is until its oldest submission leaves the minute.
  ASSERT_EQ(Put("/api/v1/users/alice/limits", json::object(), root_token_).status, 200);
  ASSERT_EQ(
      Put("/api/v1/projects/vision/limits", {{"max_submits_per_minute", 1}}, root_token_).status,
      200);
  SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  clock_.Advance(Seconds(15));
  const Answer rate = Post("/api/v1/jobs", TestJobSpec(1, "vision"), alice_token_);
  ExpectProblem(rate, 429, "project 'vision' may submit at most 1 job a minute");
  EXPECT_EQ(rate.headers.find("Retry-After")->second, "45");
  // Sessions are jobs: the same limits, the same answer.
  const Answer session = Post("/api/v1/sessions", TestJobSpec(1, "vision"), alice_token_);
  ExpectProblem(session, 429, "max_submits_per_minute");
  EXPECT_EQ(session.headers.find("Retry-After")->second, "45");
  clock_.Advance(Seconds(45));
  SubmitJob(alice_token_, TestJobSpec(1, "vision"));
}

TEST_F(JobsApiTest, ThePolicyIsReadable) {
  const Answer policy = Get("/api/v1/policy", bob_token_);
  ASSERT_EQ(policy.status, 200) << policy;
  EXPECT_EQ(policy.body["placement"], "fgd");
  EXPECT_TRUE(policy.body["policy"].is_object());
  EXPECT_TRUE(policy.body["file_error"].is_null());
}

}  // namespace corral::server::api_testing
