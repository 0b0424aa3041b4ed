// ApiClient over real HTTP on loopback: a list of servers of which one is dead, one a follower
// that answers 503 naming the leader (docs/control-plane.md), one the leader.
#include "cli/api_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <sstream>
#include <thread>

#include "common/http_attempt.h"

namespace corral::cli {
namespace {

using ::testing::HasSubstr;

// An httplib server on a loopback port, counting the requests it got.
class TestServer {
 public:
  TestServer() {
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    while (!server_.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  ~TestServer() {
    server_.stop();
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }

  // Answers everything as the leader: 201 for a POST, 200 for the rest.
  void Lead() {
    auto answer = [this](const httplib::Request& req, httplib::Response& res) {
      ++requests;
      if (req.method == "POST") ++posts;
      res.status = req.method == "POST" ? 201 : 200;
      res.set_content(R"({"id": 7, "user": "admin"})", "application/json");
    };
    server_.Get(".*", answer);
    server_.Post(".*", answer);
  }
  // Answers everything 503 as a follower, naming `leader` ("": no leader yet).
  void Follow(const std::string& leader) {
    auto answer = [this, leader](const httplib::Request&, httplib::Response& res) {
      ++requests;
      res.status = 503;
      res.set_header("Retry-After", "1");
      if (!leader.empty()) res.set_header(kLeaderHeader, leader);
      res.set_content(R"({"type":"about:blank","title":"Service Unavailable","status":503,)"
                      R"("detail":"this server is not the leader; the leader is )" +
                          (leader.empty() ? std::string("unknown") : leader) + "\"}",
                      "application/problem+json");
    };
    server_.Get(".*", answer);
    server_.Post(".*", answer);
  }

  // Answers the first `times` requests `status` with `retry_after` ("": none), as a saturated
  // server (503 with Corral-Busy) or a limit (429) does, and the rest as the leader.
  void BusyThenLead(int times, int status, const std::string& retry_after) {
    auto answer = [this, times, status, retry_after](const httplib::Request& req,
                                                     httplib::Response& res) {
      ++requests;
      if (req.method == "POST") ++posts;
      if (requests <= times) {
        res.status = status;
        if (!retry_after.empty()) res.set_header("Retry-After", retry_after);
        if (status == 503) res.set_header(kBusyHeader, "1");
        res.set_content(R"({"type":"about:blank","title":"unavailable","status":)" +
                            std::to_string(status) + R"(,"detail":")" +
                            (status == 503 ? "server saturated: 64 requests in flight"
                                           : "user 'alice': at most 10 submissions a minute") +
                            "\"}",
                        "application/problem+json");
        return;
      }
      res.status = req.method == "POST" ? 201 : 200;
      res.set_content(R"({"id": 7, "user": "admin"})", "application/json");
    };
    server_.Get(".*", answer);
    server_.Post(".*", answer);
  }

  std::atomic<int> requests{0};
  std::atomic<int> posts{0};

 private:
  httplib::Server server_;
  int port_ = 0;
  std::thread thread_;
};

// A port where something accepts a connection, reads the request and closes without answering:
// a server that died with the request in hand.
class Swallower {
 public:
  Swallower() {
    fd_ = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    bind(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
    socklen_t len = sizeof addr;
    getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len);
    port_ = ntohs(addr.sin_port);
    listen(fd_, 8);
    thread_ = std::thread([this] {
      while (true) {
        const int conn = accept(fd_, nullptr, nullptr);
        if (conn < 0) return;
        char buf[4096];
        if (recv(conn, buf, sizeof buf, 0) > 0) ++requests;
        close(conn);
      }
    });
  }
  ~Swallower() {
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    thread_.join();
  }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  std::atomic<int> requests{0};

 private:
  int fd_ = -1;
  int port_ = 0;
  std::thread thread_;
};

// A loopback URL where nothing listens (connection refused).
std::string DeadUrl() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr);
  socklen_t len = sizeof addr;
  getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len);
  close(fd);
  return "http://127.0.0.1:" + std::to_string(ntohs(addr.sin_port));
}

ClientConfig Config(const std::vector<std::string>& urls,
                    std::chrono::milliseconds retry_timeout = std::chrono::seconds(10)) {
  std::string list;
  for (const std::string& url : urls) list += (list.empty() ? "" : ",") + url;
  Result<ServerList> servers = ServerList::Parse(list);
  EXPECT_TRUE(servers.ok()) << servers.status().ToString();
  return ClientConfig{*servers, "token", "", retry_timeout};
}

TEST(ApiClientTest, ASubmissionThroughADeadServerAndAFollowerReachesTheLeaderOnce) {
  TestServer leader, follower;
  leader.Lead();
  follower.Follow(leader.url());
  ApiClient client(Config({DeadUrl(), follower.url(), leader.url()}));
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ((*job)["id"], 7);
  EXPECT_EQ(leader.posts, 1);
  EXPECT_EQ(follower.requests, 1);
  // The next request goes to the leader straight away.
  ASSERT_TRUE(client.Get("/api/v1/jobs").ok());
  EXPECT_EQ(follower.requests, 1);
  EXPECT_EQ(leader.requests, 2);
}

TEST(ApiClientTest, ALeaderOutsideTheListIsFollowed) {
  TestServer leader, follower;
  leader.Lead();
  follower.Follow(leader.url());
  ApiClient client(Config({DeadUrl(), follower.url()}));
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(leader.posts, 1);
}

TEST(ApiClientTest, ASubmissionLostAfterSendingIsNotSentAgainButAReadIs) {
  Swallower swallower;
  TestServer leader;
  leader.Lead();
  ApiClient client(Config({swallower.url(), leader.url()}));
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  EXPECT_EQ(job.status().code(), StatusCode::kIoError);
  EXPECT_THAT(job.status().message(),
              HasSubstr("no answer from " + swallower.url() + " once the request was sent"));
  EXPECT_THAT(job.status().message(), HasSubstr("not sent again"));
  EXPECT_EQ(swallower.requests, 1);
  EXPECT_EQ(leader.requests, 0);
  // A GET may be sent twice: the leader answers it.
  ASSERT_TRUE(client.Get("/api/v1/jobs").ok());
  EXPECT_EQ(leader.requests, 1);
}

TEST(ApiClientTest, NoLeaderWithinTheTimeoutNamesEachUrlAndItsAnswer) {
  TestServer follower;
  follower.Follow("");
  const std::string dead = DeadUrl();
  ApiClient client(Config({dead, follower.url()}, std::chrono::milliseconds(700)));
  const auto start = std::chrono::steady_clock::now();
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  const auto took = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(job.status().code(), StatusCode::kIoError);
  EXPECT_THAT(job.status().message(), HasSubstr("cannot reach a leader within 700 ms: tried " +
                                                dead + " (could not connect, "));
  EXPECT_THAT(job.status().message(),
              HasSubstr(follower.url() + " (503: this server is not the leader; the leader is "
                                         "unknown, "));
  EXPECT_LT(took, std::chrono::milliseconds(1500));
  // 0, 100, 200 and 400 ms waits fit in 700 ms: five attempts, no POST reached anyone.
  EXPECT_GE(follower.requests, 2);
}

// A server of the list that answers 503 with half a megabyte of detail: the error quotes 200 bytes.
TEST(ApiClientTest, AHostileFollowerCannotFillTheErrorMessage) {
  httplib::Server server;
  server.Get(".*", [](const httplib::Request&, httplib::Response& res) {
    res.status = 503;
    res.set_content(nlohmann::json{{"detail", std::string(512 << 10, 'x')}}.dump(),
                    "application/problem+json");
  });
  const int port = server.bind_to_any_port("127.0.0.1");
  std::thread thread([&] { server.listen_after_bind(); });
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ApiClient client(Config({"http://127.0.0.1:" + std::to_string(port)}, std::chrono::seconds(0)));
  auto jobs = client.Get("/api/v1/jobs");
  server.stop();
  thread.join();
  EXPECT_EQ(jobs.status().code(), StatusCode::kIoError);
  EXPECT_THAT(jobs.status().message(), HasSubstr("(503: " + std::string(200, 'x') + ")"));
  EXPECT_LT(jobs.status().message().size(), 400u);
}

// Back-pressure (docs/control-plane.md): a saturated server's 503 carried nothing out, so a
// submission is sent again, to the same server (not the next URL, as for a follower), once its
// Retry-After has passed, and the user is told.
TEST(ApiClientTest, ASaturatedServerIsWaitedOutAndTheSubmissionSentAgainThere) {
  TestServer busy, other;
  busy.BusyThenLead(1, 503, "1");
  other.Lead();
  std::ostringstream notices;
  ApiClient client(Config({busy.url(), other.url()}), notices);
  const auto start = std::chrono::steady_clock::now();
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  const auto took = std::chrono::steady_clock::now() - start;
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ((*job)["id"], 7);
  EXPECT_GE(took, std::chrono::seconds(1));  // never before the server asked
  EXPECT_EQ(notices.str(), "corral: server busy, retrying in 1 s\n");
  EXPECT_EQ(busy.posts, 2);  // refused, then accepted
  EXPECT_EQ(other.requests, 0);
}

TEST(ApiClientTest, ALimitThatClearsSoonIsWaitedOutOneThatClearsLaterIsShown) {
  {
    TestServer limited;
    limited.BusyThenLead(1, 429, "1");
    std::ostringstream notices;
    ApiClient client(Config({limited.url()}), notices);
    auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(limited.posts, 2);
    EXPECT_EQ(notices.str(),
              "corral: user 'alice': at most 10 submissions a minute, retrying in 1 s\n");
  }
  TestServer limited;
  limited.BusyThenLead(1, 429, "10");
  std::ostringstream notices;
  ApiClient client(Config({limited.url()}), notices);
  auto job = client.Post("/api/v1/jobs", {{"command", {"true"}}});
  EXPECT_EQ(job.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(job.status().message(),
            "user 'alice': at most 10 submissions a minute (try again in 10 s)");
  EXPECT_EQ(job.status().retry_after(), Seconds(10));
  EXPECT_EQ(limited.posts, 1);
  EXPECT_EQ(notices.str(), "");
}

TEST(ApiClientTest, AServerBusyPastTheCommandsBudgetIsShown) {
  TestServer busy;
  busy.BusyThenLead(1000, 503, "1");
  std::ostringstream notices;
  ClientConfig config = Config({busy.url()});
  config.busy_budget = std::chrono::milliseconds(1500);
  ApiClient client(config, notices);
  auto jobs = client.Get("/api/v1/jobs");
  EXPECT_EQ(jobs.status().code(), StatusCode::kUnavailable);
  EXPECT_EQ(jobs.status().message(),
            "server saturated: 64 requests in flight (still busy after this command waited 1 s)");
  EXPECT_EQ(busy.requests, 2);  // one wait of 1 to 1.2 s fits in 1.5 s, a second does not
  EXPECT_EQ(notices.str(), "corral: server busy, retrying in 1 s\n");
}

}  // namespace
}  // namespace corral::cli
