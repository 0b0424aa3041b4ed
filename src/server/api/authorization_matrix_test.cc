// The authorisation matrix (docs/security.md, "Who can reach what"): every route the API
// registers, asked by every kind of caller, against the rule it must follow. The routes are read
// from the sources that register them (src/server/api/*.cc): a route added there and not here
// fails EveryRegisteredRouteIsInTheMatrix, so no route goes untested.
//
// Callers: nobody (no credentials), a member (alice, of "default" and "vision", who owns the
// resources the routes name: a job, an array, a session, an environment, a token, all in
// "vision"), a member of another project (bob, of "default" only), an admin (root), an agent
// (its node token and node name), the cluster's join token and the job token of alice's job (as
// its launch carries it: docs/in-job.md), which may use only its own job's channel routes
// (Rule::kAlicesJobOrAdmin) and the public ones: 403 elsewhere.
//
// Besides the status, every answer bob gets is searched for alice's work: no route may name her
// or her project to him (the exposure rule of docs/security.md, "What others can see").
#include <fstream>
#include <regex>
#include <set>

#include "server/api/api_test_fixture.h"

namespace corral::server::api_testing {
namespace {

enum class Caller { kNobody, kMember, kOtherProject, kAdmin, kAgent, kJoinToken, kJobToken };
constexpr Caller kCallers[] = {Caller::kNobody,   Caller::kAgent,        Caller::kJoinToken,
                               Caller::kJobToken, Caller::kOtherProject, Caller::kMember,
                               Caller::kAdmin};

const char* NameOf(Caller c) {
  switch (c) {
    case Caller::kNobody:
      return "nobody";
    case Caller::kMember:
      return "a member (alice)";
    case Caller::kOtherProject:
      return "a member of another project (bob)";
    case Caller::kAdmin:
      return "an admin";
    case Caller::kAgent:
      return "an agent (node token)";
    case Caller::kJoinToken:
      return "the join token";
    case Caller::kJobToken:
      return "the job token of alice's job";
  }
  return "?";
}

// Who may use a route.
enum class Rule {
  kPublic,         // anyone, with or without credentials
  kAnyUser,        // any user's API token
  kAdminOnly,      // an admin's token; a member's is 403
  kAlicesOrAdmin,  // alice's resource: her, or an admin; bob does not learn it exists (404)
  // alice's job's channel (docs/in-job.md): as kAlicesOrAdmin, and its job token too
  kAlicesJobOrAdmin,
  kOwnToken,  // the caller's own token: bob's and the admin's are 404 too
  kMetrics,   // an admin's token (or the metrics token); a member's is 403
  kJoin,      // the join token only
  kNode,      // the node's own token and name only
};

// What a caller gets: through (the route ran: 2xx, 3xx, or 409 when a caller before it already
// did what it asks: cancelled the array, took the name), or refused with 401, 403 or 404.
enum class Expect { kThrough, k401, k403, k404 };

Expect Expected(Rule rule, Caller c) {
  const bool user = c == Caller::kMember || c == Caller::kOtherProject || c == Caller::kAdmin;
  if (c == Caller::kJobToken) {
    // Authenticated, but scoped to its job's channel; the agents' routes know no API token.
    if (rule == Rule::kPublic || rule == Rule::kAlicesJobOrAdmin) return Expect::kThrough;
    return rule == Rule::kJoin || rule == Rule::kNode ? Expect::k401 : Expect::k403;
  }
  switch (rule) {
    case Rule::kPublic:
      return Expect::kThrough;
    case Rule::kAnyUser:
      return user ? Expect::kThrough : Expect::k401;
    case Rule::kAdminOnly:
    case Rule::kMetrics:
      return !user ? Expect::k401 : c == Caller::kAdmin ? Expect::kThrough : Expect::k403;
    case Rule::kAlicesOrAdmin:
    case Rule::kAlicesJobOrAdmin:
      return !user ? Expect::k401 : c == Caller::kOtherProject ? Expect::k404 : Expect::kThrough;
    case Rule::kOwnToken:
      return !user ? Expect::k401 : c == Caller::kMember ? Expect::kThrough : Expect::k404;
    case Rule::kJoin:
      return c == Caller::kJoinToken ? Expect::kThrough : Expect::k401;
    case Rule::kNode:
      return c == Caller::kAgent ? Expect::kThrough : Expect::k401;
  }
  return Expect::k401;
}

// One route: its method and pattern as registered, the path asked (with {job}, {array},
// {session}, {token} for alice's resources, {bob_job} for bob's job), a body, and its rule.
struct Route {
  std::string method;
  std::string pattern;
  std::string path;
  json body;
  Rule rule;
  bool stream = false;  // an endless answer: only its status is read
};

void PrintTo(const Route& route, std::ostream* os) { *os << route.method << " " << route.path; }

std::vector<Route> Matrix() {
  const json job = TestJobSpec(1, "default");
  const json env = {{"name", "mine"}, {"image", "ubuntu:24.04"}};
  std::vector<Route> m = {
      {"GET", "/healthz", "/healthz", nullptr, Rule::kPublic},
      {"GET", "/", "/", nullptr, Rule::kPublic},
      {"GET", "/assets/.*", "/assets/app.js", nullptr, Rule::kPublic},
      {"GET", "/login", "/login", nullptr, Rule::kPublic},
      {"POST", "/api/v1/login", "/api/v1/login", {{"token", "{bob_token}"}}, Rule::kPublic},
      {"POST", "/api/v1/logout", "/api/v1/logout", json::object(), Rule::kPublic},
      {"GET", "/api/v1/whoami", "/api/v1/whoami", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/summary", "/api/v1/summary", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/summary/history", "/api/v1/summary/history", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/events/stream", "/api/v1/events/stream", nullptr, Rule::kAnyUser, true},
      {"POST", "/api/v1/jobs", "/api/v1/jobs", job, Rule::kAnyUser},
      {"GET", "/api/v1/jobs", "/api/v1/jobs?all=1", nullptr, Rule::kAnyUser},
      {"GET", R"(/api/v1/jobs/(\d+))", "/api/v1/jobs/{job}", nullptr, Rule::kAlicesJobOrAdmin},
      {"POST",
       R"(/api/v1/jobs/(\d+)/report)",
       "/api/v1/jobs/{job}/report",
       {{"metrics", {{"loss", 0.5}}}},
       Rule::kAlicesJobOrAdmin},
      {"POST",
       R"(/api/v1/jobs/(\d+)/checkpoint)",
       "/api/v1/jobs/{job}/checkpoint",
       {{"path", "/checkpoints/c1"}},
       Rule::kAlicesJobOrAdmin},
      {"GET", R"(/api/v1/jobs/(\d+)/metrics)", "/api/v1/jobs/{job}/metrics", nullptr,
       Rule::kAlicesJobOrAdmin},
      {"POST", R"(/api/v1/jobs/(\d+)/cancel)", "/api/v1/jobs/{job}/cancel", json::object(),
       Rule::kAlicesOrAdmin},
      {"GET", R"(/api/v1/jobs/(\d+)/logs)", "/api/v1/jobs/{job}/logs", nullptr,
       Rule::kAlicesJobOrAdmin},
      {"GET", R"(/api/v1/jobs/(\d+)/gpus)", "/api/v1/jobs/{job}/gpus", nullptr,
       Rule::kAlicesOrAdmin},
      // Bob's job, in "default" (alice is a member too), on the GPU it shares with hers.
      {"GET", R"(/api/v1/jobs/(\d+)/gpus)", "/api/v1/jobs/{bob_job}/gpus", nullptr, Rule::kAnyUser},
      {"GET", R"(/api/v1/jobs/(\d+)/gpu-history)", "/api/v1/jobs/{job}/gpu-history", nullptr,
       Rule::kAlicesOrAdmin},
      {"POST", R"(/api/v1/arrays/(\d+)/cancel)", "/api/v1/arrays/{array}/cancel", json::object(),
       Rule::kAlicesOrAdmin},
      {"GET", "/api/v1/queue", "/api/v1/queue", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/policy", "/api/v1/policy", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/partitions", "/api/v1/partitions", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/environments", "/api/v1/environments", nullptr, Rule::kAnyUser},
      {"POST", "/api/v1/environments", "/api/v1/environments", env, Rule::kAnyUser},
      {"GET", R"(/api/v1/environments/([^/]+))", "/api/v1/environments/torch", nullptr,
       Rule::kAlicesOrAdmin},
      {"POST",
       R"(/api/v1/environments/([^/]+)/clone)",
       "/api/v1/environments/torch/clone",
       {{"name", "copy"}},
       Rule::kAlicesOrAdmin},
      {"POST",
       R"(/api/v1/environments/([^/]+)/share)",
       "/api/v1/environments/torch/share",
       {{"project", "default"}},
       Rule::kAlicesOrAdmin},
      {"GET", "/api/v1/nodes", "/api/v1/nodes", nullptr, Rule::kAnyUser},
      {"POST", R"(/api/v1/nodes/([^/]+)/(cordon|uncordon|drain|remove))",
       "/api/v1/nodes/gpu-1/drain", json::object(), Rule::kAdminOnly},
      {"GET", "/api/v1/projects", "/api/v1/projects", nullptr, Rule::kAnyUser},
      {"POST", "/api/v1/projects", "/api/v1/projects", {{"name", "new"}}, Rule::kAdminOnly},
      {"PUT",
       R"(/api/v1/users/([^/]+)/limits)",
       "/api/v1/users/alice/limits",
       {{"max_pending_jobs", 5}},
       Rule::kAdminOnly},
      {"PUT",
       R"(/api/v1/projects/([^/]+)/limits)",
       "/api/v1/projects/vision/limits",
       {{"max_pending_jobs", 5}},
       Rule::kAdminOnly},
      {"PUT",
       R"(/api/v1/projects/([^/]+)/sharing)",
       "/api/v1/projects/vision/sharing",
       {{"weight", 2}},
       Rule::kAdminOnly},
      {"POST",
       R"(/api/v1/projects/([^/]+)/members)",
       "/api/v1/projects/vision/members",
       {{"user", "bob"}},
       Rule::kAdminOnly},
      {"GET", "/api/v1/users", "/api/v1/users", nullptr, Rule::kAdminOnly},
      {"POST", "/api/v1/users", "/api/v1/users", {{"name", "carol"}}, Rule::kAdminOnly},
      {"GET", "/api/v1/tokens", "/api/v1/tokens", nullptr, Rule::kAnyUser},
      {"POST", "/api/v1/tokens", "/api/v1/tokens", {{"name", "ci"}}, Rule::kAnyUser},
      {"DELETE", R"(/api/v1/tokens/(\d+))", "/api/v1/tokens/{token}", nullptr, Rule::kOwnToken},
      {"POST", "/api/v1/sessions", "/api/v1/sessions", job, Rule::kAnyUser},
      {"GET", "/api/v1/sessions", "/api/v1/sessions", nullptr, Rule::kAnyUser},
      {"GET", R"(/api/v1/sessions/(\d+))", "/api/v1/sessions/{session}", nullptr,
       Rule::kAlicesOrAdmin},
      {"DELETE", R"(/api/v1/sessions/(\d+))", "/api/v1/sessions/{session}", nullptr,
       Rule::kAlicesOrAdmin},
      {"GET", "/metrics", "/metrics", nullptr, Rule::kMetrics},
      {"GET", "/api/v1/gpus", "/api/v1/gpus", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/gpus", "/api/v1/gpus?idle=1", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/usage", "/api/v1/usage", nullptr, Rule::kAnyUser},
      {"GET", "/api/v1/capacity/forecast", "/api/v1/capacity/forecast", nullptr, Rule::kAnyUser},
      {"POST", "/api/v1/capacity/what-if", "/api/v1/capacity/what-if", json::object(),
       Rule::kAdminOnly},
      {"POST",
       "/api/v1/agent/register",
       "/api/v1/agent/register",
       {{"protocol_version", protocol::kProtocolVersion},
        {"name", "gpu-2"},
        {"node_id", "node-id-fedcba9876543210"},
        {"inventory", TestInventory(2)}},
       Rule::kJoin},
      {"POST",
       "/api/v1/agent/heartbeat",
       "/api/v1/agent/heartbeat",
       {{"seq", 1000}, {"wait_ms", 0}, {"tasks", json::array()}, {"logs", json::array()}},
       Rule::kNode},
  };
  // Old session links go to the session gateway, which authenticates: any method, anyone.
  for (const char* method : {"GET", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}) {
    m.push_back({method, R"(/sessions/(\d+)(/.*)?)", "/sessions/{session}/lab",
                 std::string(method) == "GET" || std::string(method) == "DELETE" ||
                         std::string(method) == "OPTIONS"
                     ? json(nullptr)
                     : json::object(),
                 Rule::kPublic});
  }
  return m;
}

std::string ReadFile(const std::filesystem::path& path) {
  std::ifstream in(path);
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

// Every route the API's sources register, as "METHOD PATTERN": calls `http.Get(`, `.Post(`,
// `.Put(`, `.Patch(`, `.Delete(`, `.Options(` (the server every Register* function is given is
// `http`) whose first argument is a string literal (plain or raw) or a name a literal is bound
// to (`NAME = "..."`) in the same file or in a header of src/server/api/. A registration
// written otherwise is not found, and EveryRegisteredRouteIsInTheMatrix says so.
std::set<std::string> RegisteredRoutes() {
  const std::filesystem::path dir = std::filesystem::path(CORRAL_SOURCE_DIR) / "src/server/api";
  std::vector<std::pair<std::string, std::string>> sources;  // (file name, text)
  std::string headers;
  for (const auto& entry : std::filesystem::directory_iterator(dir)) {
    const std::string file = entry.path().filename().string();
    if (entry.path().extension() == ".h") headers += ReadFile(entry.path());
    if (entry.path().extension() == ".cc" && file.find("_test") == std::string::npos) {
      sources.emplace_back(file, ReadFile(entry.path()));
    }
  }
  const std::regex call(
      R"re(\bhttp\.(Get|Post|Put|Patch|Delete|Options)\(\s*(?:R"\(([^\n]*?)\)"|"([^"\n]*)"|([A-Za-z_]\w*)\s*,))re");
  std::set<std::string> routes;
  for (const auto& [file, text] : sources) {
    for (std::sregex_iterator it(text.begin(), text.end(), call), end; it != end; ++it) {
      std::string method = (*it)[1].str();
      for (char& ch : method) ch = static_cast<char>(std::toupper(static_cast<unsigned char>(ch)));
      std::string pattern = (*it)[2].matched ? (*it)[2].str() : (*it)[3].str();
      if ((*it)[4].matched) {
        const std::regex binding("\\b" + (*it)[4].str() +
                                 R"re(\s*=\s*(?:R"\(([^\n]*?)\)"|"([^"\n]*)"))re");
        std::smatch bound;
        if (!std::regex_search(text, bound, binding) &&
            !std::regex_search(headers, bound, binding)) {
          ADD_FAILURE() << file << ": route bound to '" << (*it)[4] << "', which is not a literal";
          continue;
        }
        pattern = bound[1].matched ? bound[1].str() : bound[2].str();
      }
      routes.insert(method + " " + pattern);
    }
  }
  return routes;
}

class AuthorizationMatrixTest : public ApiTest, public ::testing::WithParamInterface<Route> {
 protected:
  void ConfigureApi(HttpApiConfig& config) override {
    // A dashboard to serve at / and under /assets/.
    const std::filesystem::path web = test_dir() / "web";
    std::filesystem::create_directories(web / "assets");
    std::ofstream(web / "index.html") << "<!doctype html><title>corral</title>";
    std::ofstream(web / "assets" / "app.js") << "console.log(1);";
    auto assets = WebAssets::Create(web.string());
    ASSERT_TRUE(assets.ok()) << assets.status().ToString();
    config.web_assets = std::move(assets).value();
  }

  // Alice's work, in "vision": a running job, a pending array, a pending session, an
  // environment, a second token; bob's running job in "default", sharing a GPU with hers.
  void SetUp() override {
    ApiTest::SetUp();
    node_token_ = RegisterNode("gpu-1", 2);
    ASSERT_FALSE(node_token_.empty());
    json half = TestJobSpec(1, "vision");
    half["resources"]["gpu_milli"] = 500;
    job_ = SubmitJob(alice_token_, half);
    half["project"] = "default";
    bob_job_ = SubmitJob(bob_token_, half);
    const json launches = RunPendingJobs("gpu-1", node_token_, 2);
    ASSERT_EQ(launches.size(), 2u);
    for (const json& launch : launches) {
      if (launch["job_id"] == job_) job_token_ = launch["job_token"];
    }
    ASSERT_EQ(job_token_.rfind("crj_", 0), 0u) << launches;
    json array = TestJobSpec(2, "vision");
    array["array"] = {{"indices", {0, 1}}};
    const Answer arrays = Post("/api/v1/jobs", array, alice_token_);
    ASSERT_EQ(arrays.status, 201) << arrays;
    array_ = arrays.body["array_id"];
    const Answer session = Post("/api/v1/sessions", TestJobSpec(1, "vision"), alice_token_);
    ASSERT_EQ(session.status, 201) << session;
    session_ = session.body["id"];
    ASSERT_EQ(Post("/api/v1/environments", {{"name", "torch"}, {"image", "pytorch/pytorch"}},
                   alice_token_)
                  .status,
              201);
    const Answer token = Post("/api/v1/tokens", {{"name", "second"}}, alice_token_);
    ASSERT_EQ(token.status, 201) << token;
    token_ = token.body["id"];
  }

  std::string Fill(std::string text) const {
    const std::pair<std::string, std::string> fills[] = {
        {"{job}", std::to_string(job_)},     {"{bob_job}", std::to_string(bob_job_)},
        {"{array}", std::to_string(array_)}, {"{session}", std::to_string(session_)},
        {"{token}", std::to_string(token_)}, {"{bob_token}", bob_token_}};
    for (const auto& [from, to] : fills) {
      for (size_t at; (at = text.find(from)) != std::string::npos;)
        text.replace(at, from.size(), to);
    }
    return text;
  }

  httplib::Headers CredentialsOf(Caller c) const {
    switch (c) {
      case Caller::kNobody:
        return {};
      case Caller::kMember:
        return {{"Authorization", "Bearer " + alice_token_}};
      case Caller::kOtherProject:
        return {{"Authorization", "Bearer " + bob_token_}};
      case Caller::kAdmin:
        return {{"Authorization", "Bearer " + root_token_}};
      case Caller::kAgent:
        return {{"Authorization", "Bearer " + node_token_}, {protocol::kNodeHeader, "gpu-1"}};
      case Caller::kJoinToken:
        return {{"Authorization", std::string("Bearer ") + kJoinToken}};
      case Caller::kJobToken:
        return {{"Authorization", "Bearer " + job_token_}};
    }
    return {};
  }

  // The route asked by `caller`: status and body (a stream: its status only).
  Answer Ask(const Route& route, Caller caller) {
    httplib::Client client("127.0.0.1", port());
    client.set_read_timeout(30, 0);
    const std::string path = Fill(route.path);
    const httplib::Headers headers = CredentialsOf(caller);
    Answer a;
    if (route.stream) {
      client.Get(
          path, headers,
          [&](const httplib::Response& r) {
            a.status = r.status;
            a.content_type = r.get_header_value("Content-Type");
            return false;  // the headers are enough; the stream would go on for minutes
          },
          [](const char*, size_t) { return false; });
      return a;
    }
    const std::string body = route.body.is_null() ? "" : Fill(route.body.dump());
    httplib::Result r =
        route.method == "GET"       ? client.Get(path, headers)
        : route.method == "DELETE"  ? client.Delete(path, headers, body, "application/json")
        : route.method == "OPTIONS" ? client.Options(path, headers)
                                    : client.send([&] {
                                        httplib::Request req;
                                        req.method = route.method;
                                        req.path = path;
                                        req.headers = headers;
                                        req.body = body;
                                        req.set_header("Content-Type", "application/json");
                                        return req;
                                      }());
    if (!r) {
      ADD_FAILURE() << "no answer: " << httplib::to_string(r.error());
      return a;
    }
    a.status = r->status;
    a.content_type = r->get_header_value("Content-Type");
    a.text = r->body;
    return a;
  }

  void Configure(ControllerConfig& config) override {
    config.session_key = "the-matrix-session-key-0123456789abcdef";
  }

  std::string node_token_;
  std::string job_token_;
  int64_t job_ = 0, bob_job_ = 0, array_ = 0, session_ = 0, token_ = 0;
};

TEST_P(AuthorizationMatrixTest, EachCallerGetsWhatTheRuleSays) {
  const Route& route = GetParam();
  for (Caller caller : kCallers) {
    SCOPED_TRACE(route.method + " " + Fill(route.path) + " by " + NameOf(caller));
    const Answer a = Ask(route, caller);
    switch (Expected(route.rule, caller)) {
      case Expect::kThrough:
        EXPECT_TRUE(a.status < 400 || a.status == 409) << a;
        break;
      case Expect::k401:
        EXPECT_EQ(a.status, 401) << a;
        break;
      case Expect::k403:
        EXPECT_EQ(a.status, 403) << a;
        break;
      case Expect::k404:
        EXPECT_EQ(a.status, 404) << a;
        break;
    }
    if (a.status >= 400 && !route.stream) {
      EXPECT_EQ(a.content_type.rfind("application/problem+json", 0), 0u) << a;
    }
    if (caller == Caller::kOtherProject) {
      // Nothing of alice's work reaches bob: neither her name, nor her project, nor her job.
      for (const std::string& secret :
           {std::string("alice"), std::string("vision"), "\"job\":" + std::to_string(job_) + ","}) {
        EXPECT_EQ(a.text.find(secret), std::string::npos) << "bob read '" << secret << "': " << a;
      }
    }
  }
}

std::string RouteName(const ::testing::TestParamInfo<Route>& info) {
  std::string name = info.param.method + "_" + info.param.path;
  for (char& c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  }
  return name + "_" + std::to_string(info.index);
}

INSTANTIATE_TEST_SUITE_P(Routes, AuthorizationMatrixTest, ::testing::ValuesIn(Matrix()), RouteName);

TEST(AuthorizationMatrix, EveryRegisteredRouteIsInTheMatrix) {
  const std::set<std::string> registered = RegisteredRoutes();
  ASSERT_GE(registered.size(), 40u) << "the route registrations were not found where expected";
  std::set<std::string> matrix;
  for (const Route& r : Matrix()) matrix.insert(r.method + " " + r.pattern);
  for (const std::string& route : registered) {
    EXPECT_TRUE(matrix.count(route)) << route << " is registered but not in the matrix: add it";
  }
  for (const std::string& route : matrix) {
    EXPECT_TRUE(registered.count(route)) << route << " is in the matrix but not registered";
  }
}

}  // namespace
}  // namespace corral::server::api_testing
