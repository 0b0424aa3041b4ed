// The jobs routes (jobs.cc) through real HTTP: submit, view, list, cancel, arrays, logs, the
// queue and the policy.
#include <filesystem>
#include <fstream>

#include "server/api/api_test_fixture.h"
#include "server/api/job_listing.h"

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

// The listing's query (job_listing.h): filters, sorts, the cursor.
class JobListingApiTest : public JobsApiTest {
 protected:
  static std::string Header(const Answer& a, const std::string& name) {
    auto it = a.headers.find(name);
    return it == a.headers.end() ? "" : it->second;
  }
  static std::vector<int64_t> Ids(const Answer& a) {
    std::vector<int64_t> ids;
    if (a.body.is_array()) {
      for (const json& j : a.body) ids.push_back(j["id"]);
    }
    return ids;
  }
  // Every page of `query` (limit `page`) as `token` sees it, following X-Corral-Next-Cursor.
  std::vector<int64_t> AllPages(const std::string& query, int page, const std::string& token) {
    std::vector<int64_t> out;
    std::string cursor;
    for (int pages = 0; pages < 100; ++pages) {
      const Answer a = Get("/api/v1/jobs?" + query + "&limit=" + std::to_string(page) +
                               (cursor.empty() ? "" : "&cursor=" + cursor),
                           token);
      EXPECT_EQ(a.status, 200) << a;
      for (int64_t id : Ids(a)) out.push_back(id);
      cursor = Header(a, "X-Corral-Next-Cursor");
      if (cursor.empty()) return out;
    }
    ADD_FAILURE() << "pages do not end";
    return out;
  }
};

TEST_F(JobListingApiTest, FiltersAndSortsPageThroughWithTheCursor) {
  std::vector<int64_t> ids;
  for (int gpus : {2, 0, 4, 2, 1, 4}) {
    json spec = TestJobSpec(gpus);
    spec["name"] = "sweep-" + std::to_string(ids.size());
    ids.push_back(SubmitJob(alice_token_, spec));
  }
  const int64_t other = SubmitJob(alice_token_, TestJobSpec(8));  // named "t"
  // Newest first by default, in pages that chain; the deprecated header only for that order.
  EXPECT_EQ(AllPages("", 2, alice_token_),
            (std::vector<int64_t>{other, ids[5], ids[4], ids[3], ids[2], ids[1], ids[0]}));
  // By GPUs, most first, ties by id (the same direction); the listing shows them.
  const Answer by_gpus = Get("/api/v1/jobs?sort=gpus&limit=3", alice_token_);
  ASSERT_EQ(by_gpus.status, 200) << by_gpus;
  EXPECT_EQ(Ids(by_gpus), (std::vector<int64_t>{other, ids[5], ids[2]}));
  EXPECT_EQ(by_gpus.body[0]["total_gpu_milli"], 8000);
  EXPECT_FALSE(Header(by_gpus, "X-Corral-Next-Cursor").empty());
  EXPECT_EQ(Header(by_gpus, "X-Corral-Next-Before"), "");
  EXPECT_EQ(AllPages("sort=gpus&order=asc", 2, alice_token_),
            (std::vector<int64_t>{ids[1], ids[4], ids[0], ids[3], ids[2], ids[5], other}));
  // Filters: a name prefix, states, since (both forms), user.
  EXPECT_EQ(AllPages("name=sweep-&sort=submit_time&order=asc", 4, alice_token_),
            (std::vector<int64_t>{ids[0], ids[1], ids[2], ids[3], ids[4], ids[5]}));
  EXPECT_EQ(Ids(Get("/api/v1/jobs?name=sweep-5", alice_token_)), std::vector<int64_t>{ids[5]});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?state=running", alice_token_)), std::vector<int64_t>{});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?since=2100-01-01T00:00:00Z", alice_token_)),
            std::vector<int64_t>{});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?since=0&limit=1", alice_token_)), std::vector<int64_t>{other});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?since=1970-01-01T01:00:00%2B01:00&limit=1", alice_token_)),
            std::vector<int64_t>{other});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?user=alice&limit=1", alice_token_)), std::vector<int64_t>{other});
  // Jobs without a start time come after those with one, in both orders.
  EXPECT_EQ(AllPages("sort=start_time", 3, alice_token_).size(), 7u);
  EXPECT_EQ(AllPages("sort=end_time&order=asc", 3, alice_token_).size(), 7u);
}

TEST_F(JobListingApiTest, FiltersNeverWidenWhatACallerSees) {
  const int64_t alices = SubmitJob(alice_token_, TestJobSpec(1, "vision"));
  const int64_t bobs = SubmitJob(bob_token_, TestJobSpec(1, "default"));
  // Without all=1 a member sees their own jobs: asking for another user's is an empty page.
  EXPECT_EQ(Ids(Get("/api/v1/jobs?user=bob", alice_token_)), std::vector<int64_t>{});
  // With all=1, the jobs of their projects: bob is not in vision.
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&user=alice", bob_token_)), std::vector<int64_t>{});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&project=vision", bob_token_)), std::vector<int64_t>{});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&user=bob", alice_token_)), std::vector<int64_t>{bobs});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&project=vision,default", bob_token_)),
            std::vector<int64_t>{bobs});
  // An admin sees every job with all=1.
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&project=vision", root_token_)),
            std::vector<int64_t>{alices});
  EXPECT_EQ(Ids(Get("/api/v1/jobs?all=1&user=alice,bob", root_token_)),
            (std::vector<int64_t>{bobs, alices}));
}

TEST_F(JobListingApiTest, BadParametersAndCursorsAre400sNamingThem) {
  SubmitJob(alice_token_);
  SubmitJob(alice_token_);
  ExpectProblem(Get("/api/v1/jobs?sort=priority", alice_token_), 400,
                "sort': must be one of id, submit_time, start_time, end_time, gpus");
  ExpectProblem(Get("/api/v1/jobs?order=up", alice_token_), 400, "order");
  ExpectProblem(Get("/api/v1/jobs?since=yesterday", alice_token_), 400, "since");
  ExpectProblem(Get("/api/v1/jobs?since=2024-02-30T00:00:00Z", alice_token_), 400, "since");
  ExpectProblem(Get("/api/v1/jobs?name=" + std::string(129, 'a'), alice_token_), 400, "name");
  ExpectProblem(Get("/api/v1/jobs?name=a%20b", alice_token_), 400, "name");
  ExpectProblem(Get("/api/v1/jobs?user=a,,b", alice_token_), 400, "user");
  std::string many = "p0";
  for (int i = 1; i <= 100; ++i) many += ",p" + std::to_string(i);
  ExpectProblem(Get("/api/v1/jobs?project=" + many, alice_token_), 400, "project");
  ExpectProblem(Get("/api/v1/jobs?cursor=not-a-cursor", alice_token_), 400, "cursor");
  ExpectProblem(Get("/api/v1/jobs?cursor=" + std::string(300, 'A'), alice_token_), 400, "cursor");
  // A cursor of another sort or order.
  const Answer page = Get("/api/v1/jobs?limit=1&sort=gpus", alice_token_);
  const std::string cursor = Header(page, "X-Corral-Next-Cursor");
  ASSERT_FALSE(cursor.empty()) << page;
  EXPECT_EQ(Get("/api/v1/jobs?limit=1&sort=gpus&cursor=" + cursor, alice_token_).status, 200);
  ExpectProblem(Get("/api/v1/jobs?sort=gpus&order=asc&cursor=" + cursor, alice_token_), 400,
                "cursor");
  ExpectProblem(Get("/api/v1/jobs?sort=submit_time&cursor=" + cursor, alice_token_), 400, "cursor");
  // The deprecated `before` only where it meant something, and not with a cursor.
  ExpectProblem(Get("/api/v1/jobs?sort=gpus&before=5", alice_token_), 400, "before");
  ExpectProblem(Get("/api/v1/jobs?order=asc&before=5", alice_token_), 400, "before");
  const std::string id_cursor =
      Header(Get("/api/v1/jobs?limit=1", alice_token_), "X-Corral-Next-Cursor");
  ASSERT_FALSE(id_cursor.empty());
  ExpectProblem(Get("/api/v1/jobs?before=5&cursor=" + id_cursor, alice_token_), 400, "before");
}

TEST(JobCursorTest, RoundTripsAndRefusesTamperedOnes) {
  using api_internal::DecodeJobCursor;
  using api_internal::EncodeJobCursor;
  for (auto [sort, key] : {std::pair{store::JobSortKey::kId, std::optional<int64_t>()},
                           std::pair{store::JobSortKey::kStartTime, std::optional<int64_t>()},
                           std::pair{store::JobSortKey::kStartTime, std::optional<int64_t>(17)},
                           std::pair{store::JobSortKey::kGpus, std::optional<int64_t>(0)}}) {
    const store::JobListPosition position{key, JobId(42)};
    const std::string cursor = EncodeJobCursor(sort, store::SortDirection::kAscending, position);
    EXPECT_EQ(cursor.find_first_of("+/="), std::string::npos) << cursor;  // base64url
    auto back = DecodeJobCursor(cursor, sort, store::SortDirection::kAscending);
    ASSERT_TRUE(back.ok()) << back.status().ToString();
    EXPECT_EQ(*back, position);
    EXPECT_FALSE(DecodeJobCursor(cursor, sort, store::SortDirection::kDescending).ok());
  }
  // A key where the sort has none, none where it needs one, a bad version or id.
  for (const char* text : {"1:id:asc:5:42", "1:gpus:asc::42", "2:id:asc::42", "1:id:asc::0",
                           "1:id:asc::x", "1:id:asc::42:9"}) {
    // Encode the raw text the way the codec does (base64url), to reach the checks behind it.
    static constexpr char kAlphabet[] =
        "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    std::string raw = text, out;
    int val = 0, bits = -6;
    for (unsigned char c : raw) {
      val = (val << 8) + c;
      bits += 8;
      while (bits >= 0) {
        out.push_back(kAlphabet[(val >> bits) & 0x3F]);
        bits -= 6;
      }
    }
    if (bits > -6) out.push_back(kAlphabet[((val << 8) >> (bits + 8)) & 0x3F]);
    const auto sort = std::string(text).find("gpus") != std::string::npos ? store::JobSortKey::kGpus
                                                                          : store::JobSortKey::kId;
    EXPECT_FALSE(DecodeJobCursor(out, sort, store::SortDirection::kAscending).ok()) << text;
  }
}

TEST(JobTimeParamTest, ReadsRfc3339AndUnixSeconds) {
  using api_internal::ParseTimeParam;
  EXPECT_EQ(*ParseTimeParam("1714564800", "since"), Seconds(1714564800));
  EXPECT_EQ(*ParseTimeParam("2024-05-01T12:00:00Z", "since"), Seconds(1714564800));
  EXPECT_EQ(*ParseTimeParam("2024-05-01t12:00:00.999z", "since"), Seconds(1714564800));
  EXPECT_EQ(*ParseTimeParam("2024-05-01T14:30:00+02:30", "since"), Seconds(1714564800));
  EXPECT_EQ(*ParseTimeParam("2024-05-01T09:00:00-03:00", "since"), Seconds(1714564800));
  for (const char* bad : {"", "-1", "2024-05-01", "2024-05-01T12:00:00", "2024-13-01T00:00:00Z",
                          "2023-02-29T00:00:00Z", "2024-05-01T12:00:00+2:00", "now"}) {
    EXPECT_FALSE(ParseTimeParam(bad, "since").ok()) << bad;
  }
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
  EXPECT_EQ(policy.body["placement"], "best");  // the default (sched::kDefaultPolicy)
  EXPECT_TRUE(policy.body["policy"].is_object());
  EXPECT_TRUE(policy.body["file_error"].is_null());
}

}  // namespace corral::server::api_testing
