// The sessions routes (sessions.cc) through real HTTP: create, list, view and stop sessions;
// log in and out by cookie; the login page and the redirect of old session links.
#include <fstream>

#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {

class SessionsApiTest : public ApiTest {
 protected:
  static json SessionSpec() {
    return {{"name", "lab"},
            {"command", {"python3", "-m", "http.server"}},
            {"resources", {{"gpus", 1}}}};
  }
  // Creates a session of the owner of `token`: its id (0 on failure).
  int64_t CreateSession(const std::string& token) {
    const Answer a = Post("/api/v1/sessions", SessionSpec(), token);
    EXPECT_EQ(a.status, 201) << a;
    return a.body.is_object() ? a.body.value("id", int64_t{0}) : 0;
  }
  // The corral_token cookie a Set-Cookie header sets, as a Cookie header sends it back.
  static std::string CookieOf(const Answer& a) {
    auto it = a.headers.find("Set-Cookie");
    if (it == a.headers.end()) return "";
    return it->second.substr(0, it->second.find(';'));
  }
};

TEST_F(SessionsApiTest, CreateAnswersTheSessionWithItsUrls) {
  const Answer created = Post("/api/v1/sessions", SessionSpec(), alice_token_);
  ASSERT_EQ(created.status, 201) << created;
  const int64_t id = created.body["id"];
  const std::string path = "/sessions/" + std::to_string(id) + "/";
  EXPECT_EQ(created.body["state"], "pending");
  EXPECT_EQ(created.body["user"], "alice");
  EXPECT_EQ(created.body["path"], path);
  EXPECT_EQ(created.body["url"], "http://127.0.0.1:" + std::to_string(kSessionPort) + path);
  EXPECT_TRUE(created.body["direct_url"].is_null());      // not running: no node, no port
  EXPECT_FALSE(created.body.value("token", "").empty());  // its owner sees the secret

  // It is a job too, whose view hides the secret.
  const Answer job = Get("/api/v1/jobs/" + std::to_string(id), alice_token_);
  ASSERT_EQ(job.status, 200) << job;
  EXPECT_EQ(job.text.find(created.body["token"].get<std::string>()), std::string::npos);
}

TEST_F(SessionsApiTest, OnlyItsOwnerOrAnAdminSeesASession) {
  const int64_t id = CreateSession(alice_token_);  // in "default", which bob shares
  const std::string path = "/api/v1/sessions/" + std::to_string(id);
  ExpectProblem(Get(path, bob_token_), 404);
  ExpectProblem(Delete(path, bob_token_), 404);
  EXPECT_TRUE(Get("/api/v1/sessions", bob_token_).body.empty());
  ExpectProblem(Get(path, ""), 401);
  ExpectProblem(Get("/api/v1/sessions", ""), 401);
  ExpectProblem(Post("/api/v1/sessions", SessionSpec(), ""), 401);

  const Answer admin = Get(path, root_token_);
  ASSERT_EQ(admin.status, 200) << admin;
  EXPECT_EQ(admin.body["user"], "alice");
  EXPECT_FALSE(admin.body.contains("token")) << "the secret is its owner's only";
  const Answer list = Get("/api/v1/sessions", alice_token_);
  ASSERT_EQ(list.status, 200) << list;
  ASSERT_EQ(list.body.size(), 1u);
  EXPECT_EQ(list.body[0]["id"], id);
}

TEST_F(SessionsApiTest, StoppingEndsItOnce) {
  const int64_t id = CreateSession(alice_token_);
  const std::string path = "/api/v1/sessions/" + std::to_string(id);
  const Answer stopped = Delete(path, alice_token_);
  ASSERT_EQ(stopped.status, 202) << stopped;
  EXPECT_EQ(stopped.body, json({{"status", "stopping"}, {"id", id}}));
  EXPECT_EQ(Get(path, alice_token_).body["state"], "cancelled");
  EXPECT_TRUE(Get("/api/v1/sessions", alice_token_).body.empty());  // ended ones are not listed
  ExpectProblem(Delete(path, alice_token_), 409);
}

TEST_F(SessionsApiTest, BadSpecsAndUnknownIdsAreRefused) {
  json array = SessionSpec();
  array["array"] = {{"indices", {0, 1}}};
  ExpectProblem(Post("/api/v1/sessions", array, alice_token_), 400, "array");
  json no_command = SessionSpec();
  no_command.erase("command");
  ExpectProblem(Post("/api/v1/sessions", no_command, alice_token_), 400, "command");
  ExpectProblem(PostText("/api/v1/sessions", "[1]", alice_token_), 400, "request body");
  ExpectProblem(Get("/api/v1/sessions/999", alice_token_), 404);
  ExpectProblem(Delete("/api/v1/sessions/999", alice_token_), 404);
  // A plain job is no session.
  const int64_t job = SubmitJob(alice_token_);
  ExpectProblem(Get("/api/v1/sessions/" + std::to_string(job), alice_token_), 404);
  ExpectProblem(Delete("/api/v1/sessions/" + std::to_string(job), alice_token_), 404);
  EXPECT_EQ(Get("/api/v1/jobs/" + std::to_string(job), alice_token_).body["state"], "pending");
}

TEST_F(SessionsApiTest, LoginSetsACookieForTheDashboardsRequestsOnly) {
  ExpectProblem(Post("/api/v1/login", {{"token", "wrong"}}, ""), 401);
  ExpectProblem(Post("/api/v1/login", json::object(), ""), 400, "field 'token'");
  ExpectProblem(
      Post("/api/v1/login", {{"token", alice_token_}}, "", {{"Origin", "https://evil.example"}}),
      403);
  const Answer login = Post("/api/v1/login", {{"token", alice_token_}, {"next", "/"}}, "");
  ASSERT_EQ(login.status, 200) << login;
  EXPECT_EQ(login.body["user"], "alice");
  EXPECT_EQ(login.body["next"], "/");
  const std::string cookie = CookieOf(login);
  ASSERT_EQ(cookie.rfind("corral_token=", 0), 0u) << cookie;
  EXPECT_NE(login.headers.find("Set-Cookie")->second.find("HttpOnly"), std::string::npos);

  // The cookie opens the dashboard's reads, not the token routes.
  EXPECT_EQ(Get("/api/v1/whoami", "", {{"Cookie", cookie}}).body["user"], "alice");
  ExpectProblem(Get("/api/v1/tokens", "", {{"Cookie", cookie}}), 401);
  // Logging out clears it.
  const Answer logout = Post("/api/v1/logout", json::object(), "");
  ASSERT_EQ(logout.status, 200) << logout;
  EXPECT_EQ(CookieOf(logout), "corral_token=");

  const Answer page = Get("/login", "");
  EXPECT_EQ(page.status, 200);
  EXPECT_EQ(page.content_type.rfind("text/html", 0), 0u) << page.content_type;
}

// With a dashboard that has a login page, /login is that page (its script from /assets/, so
// the page's policy allows no inline script); without one, the plain built-in page.
class DashboardLoginTest : public SessionsApiTest {
 protected:
  void ConfigureApi(HttpApiConfig& config) override {
    const std::filesystem::path web = test_dir() / "web";
    std::filesystem::create_directories(web / "assets");
    std::ofstream(web / "index.html") << "<!doctype html><title>corral</title>";
    std::ofstream(web / "login.html") << "<!doctype html><title>corral: log in</title>styled";
    auto assets = WebAssets::Create(web.string());
    ASSERT_TRUE(assets.ok()) << assets.status().ToString();
    config.web_assets = std::move(assets).value();
  }
};

TEST_F(DashboardLoginTest, TheDashboardsLoginPageIsServed) {
  const Answer page = Get("/login", "");
  ASSERT_EQ(page.status, 200) << page;
  EXPECT_NE(page.text.find("styled"), std::string::npos) << page.text;
  EXPECT_EQ(page.content_type.rfind("text/html", 0), 0u) << page.content_type;
  const std::string csp = page.headers.find("Content-Security-Policy")->second;
  EXPECT_EQ(csp.find("unsafe-inline"), std::string::npos) << csp;
  EXPECT_EQ(page.headers.find("Cache-Control")->second, "no-cache");
}

TEST_F(SessionsApiTest, WithoutADashboardTheLoginPageIsTheBuiltInOne) {
  const Answer page = Get("/login", "");
  ASSERT_EQ(page.status, 200) << page;
  EXPECT_NE(page.text.find("id=\"token\""), std::string::npos) << page.text;
}

TEST_F(SessionsApiTest, OldSessionLinksGoToTheGateway) {
  const Answer moved = Get("/sessions/7/lab?x=1", "");
  EXPECT_EQ(moved.status, 307);
  auto location = moved.headers.find("Location");
  ASSERT_NE(location, moved.headers.end());
  EXPECT_EQ(location->second,
            "http://127.0.0.1:" + std::to_string(kSessionPort) + "/sessions/7/lab?x=1");
}

}  // namespace corral::server::api_testing
