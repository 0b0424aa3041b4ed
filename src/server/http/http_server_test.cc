// HttpServer on loopback, spoken to over raw sockets (so that a test can send what no HTTP
// client library would: a head a byte at a time, a chunked body without end, a target of 9 KiB).
#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>

#include "common/http_attempt.h"
#include "common/json_parse.h"
#include "server/http/problem.h"

namespace corral::server {
namespace {

using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;

// A client connection from `from` (any 127/8 address is this host).
class Client {
 public:
  Client(int port, const char* from = "127.0.0.1") {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in local{};
    local.sin_family = AF_INET;
    inet_pton(AF_INET, from, &local.sin_addr);
    EXPECT_EQ(bind(fd_, reinterpret_cast<sockaddr*>(&local), sizeof local), 0);
    sockaddr_in to{};
    to.sin_family = AF_INET;
    to.sin_port = htons(port);
    inet_pton(AF_INET, "127.0.0.1", &to.sin_addr);
    EXPECT_EQ(connect(fd_, reinterpret_cast<sockaddr*>(&to), sizeof to), 0);
  }
  ~Client() { close(fd_); }

  bool Send(const std::string& bytes) {
    return send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL) ==
           static_cast<ssize_t>(bytes.size());
  }
  // Everything until the peer closes or `limit` passes; `closed` says whether it closed.
  std::string ReadAll(std::chrono::milliseconds limit, bool* closed = nullptr) {
    std::string got;
    const auto deadline = Clock::now() + limit;
    bool ended = false;
    while (Clock::now() < deadline) {
      pollfd p{fd_, POLLIN, 0};
      const int ms = static_cast<int>(
          std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count());
      if (poll(&p, 1, std::max(ms, 1)) <= 0) continue;
      char buffer[65536];
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) {
        ended = true;
        break;
      }
      got.append(buffer, n);
    }
    if (closed != nullptr) *closed = ended;
    return got;
  }
  // One whole answer with a Content-Length (or the peer closing).
  std::string ReadAnswer(std::chrono::milliseconds limit = 5000ms) {
    std::string got;
    const auto deadline = Clock::now() + limit;
    while (Clock::now() < deadline) {
      const size_t head_end = got.find("\r\n\r\n");
      if (head_end != std::string::npos) {
        const size_t at = got.find("Content-Length: ");
        if (at != std::string::npos && at < head_end) {
          const size_t length = std::stoul(got.substr(at + 16));
          if (got.size() >= head_end + 4 + length) return got;
        } else if (got.find("0\r\n\r\n", head_end) != std::string::npos) {
          return got;  // chunked, ended
        }
      }
      pollfd p{fd_, POLLIN, 0};
      if (poll(&p, 1, 50) <= 0) continue;
      char buffer[65536];
      const ssize_t n = recv(fd_, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      got.append(buffer, n);
    }
    return got;
  }

 private:
  int fd_ = -1;
};

int StatusOf(const std::string& answer) {
  return answer.size() > 12 ? std::stoi(answer.substr(9, 3)) : 0;
}
nlohmann::json BodyOf(const std::string& answer) {
  const size_t at = answer.find("\r\n\r\n");
  return nlohmann::json::parse(answer.substr(at + 4), nullptr, false);
}

class HttpServerTest : public ::testing::Test {
 protected:
  void Start(ConnectionLimits limits = {}, SaturationLimits saturation = {}) {
    auto socket = Listen("127.0.0.1", 0, "--listen");
    ASSERT_TRUE(socket.ok());
    port_ = socket->port;
    HttpServerOptions options;
    options.limits = limits;
    options.saturation = saturation;
    // "Authorization: yes" authenticates; "Authorization: no" is refused from the head;
    // "Authorization: agent" is an agent's; /forever is long-lived.
    options.admit = [](const HttpRequest& head) -> Result<Admission> {
      if (head.Header("Authorization") == "no") return Unauthenticated("refused from the head");
      if (head.Header("Authorization") == "agent") {
        return Admission{Caller::kAuthenticated, 1000, Load::kAgent};
      }
      const Load load = head.path == "/forever" ? Load::kUncounted : Load::kRegular;
      if (head.Header("Authorization") == "yes") {
        return Admission{Caller::kAuthenticated, 1000, load};
      }
      return Admission{Caller::kAnonymous, 100, load};
    };
    auto server = HttpServer::Create(*socket, std::move(options));
    ASSERT_TRUE(server.ok());
    server_ = std::move(server).value();
    server_->Get(R"(/things/(\d+))", [](const HttpRequest& req, HttpResponse& res) {
      res.SetContent("thing " + req.matches[1] + " q=" + req.Param("q"), "text/plain");
    });
    server_->Post("/echo", [](const HttpRequest& req, HttpResponse& res) {
      res.SetContent(req.body, "text/plain");
    });
    server_->Get("/throws",
                 [](const HttpRequest&, HttpResponse&) { throw std::runtime_error("boom"); });
    server_->Post("/parse", [](const HttpRequest& req, HttpResponse& res) {
      auto body = ParseJson(req.body, "request body");
      if (!body.ok()) return SendProblem(res, body.status());
      res.SetContent("parsed", "text/plain");
    });
    server_->Get("/stream", [](const HttpRequest&, HttpResponse& res) {
      auto n = std::make_shared<int>(0);
      res.Stream("text/plain", [n](std::string& piece) {
        if (++*n > 3) return false;
        piece = "piece" + std::to_string(*n) + ";";
        return true;
      });
    });
    // Both block until Release(): a route that is slow, and a long poll.
    for (const char* path : {"/block", "/forever"}) {
      server_->Get(path, [this](const HttpRequest&, HttpResponse& res) {
        std::unique_lock lock(mu_);
        ++blocked_;
        changed_.notify_all();
        changed_.wait(lock, [&] { return released_; });
        --blocked_;
        res.SetContent("released", "text/plain");
      });
    }
    ASSERT_TRUE(server_->Start().ok());
  }
  void TearDown() override {
    Release();
    server_.reset();
  }

  void Release() {
    std::lock_guard lock(mu_);
    released_ = true;
    changed_.notify_all();
  }
  // Waits (up to 10 s) until `n` requests are blocked in /block or /forever.
  bool WaitForBlocked(int n) {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, 10s, [&] { return blocked_ == n; });
  }

  int port_ = 0;
  std::unique_ptr<HttpServer> server_;
  std::mutex mu_;
  std::condition_variable changed_;
  int blocked_ = 0;
  bool released_ = false;
};

TEST_F(HttpServerTest, RoutesMatchTheWholePathWithCapturesAndTheDecodedQuery) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send("GET /things/42?q=a%20b HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 200);
  EXPECT_NE(answer.find("thing 42 q=a b"), std::string::npos) << answer;
  // The same connection serves the next request (keep-alive), and HEAD uses GET's route.
  ASSERT_TRUE(c.Send("HEAD /things/7 HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string head = c.ReadAll(500ms);
  EXPECT_EQ(StatusOf(head), 200) << head;
  EXPECT_EQ(head.find("thing 7"), std::string::npos) << "HEAD has no body: " << head;
}

TEST_F(HttpServerTest, NoRouteIs404AnotherMethodIs405AndAThrowIs500AllProblemJson) {
  Start();
  for (const auto& [request, status, words] :
       std::vector<std::tuple<std::string, int, std::string>>{
           {"GET /nope HTTP/1.1\r\nHost: x\r\n\r\n", 404, "no such route: GET /nope"},
           {"DELETE /things/1 HTTP/1.1\r\nHost: x\r\n\r\n", 405, "allowed: GET"},
           {"GET /throws HTTP/1.1\r\nHost: x\r\n\r\n", 500, "internal error answering GET /throws"},
       }) {
    Client c(port_);
    ASSERT_TRUE(c.Send(request));
    const std::string answer = c.ReadAnswer();
    EXPECT_EQ(StatusOf(answer), status) << answer;
    EXPECT_NE(answer.find("application/problem+json"), std::string::npos) << answer;
    EXPECT_NE(BodyOf(answer).value("detail", "").find(words), std::string::npos) << answer;
    if (status == 405) {
      EXPECT_NE(answer.find("Allow: GET"), std::string::npos) << answer;
    }
  }
}

// Found by fuzz/http_api_fuzzer.cc: the JSON parser's error quotes the bytes it stopped at, and
// dumping a problem whose detail was not UTF-8 threw, so that any caller's broken body was a 500.
TEST_F(HttpServerTest, AProblemQuotingBytesThatAreNotUtf8Is400NotA500) {
  Start();
  Client c(port_);
  const std::string body = "{\"name\":\xff\xfe}";
  ASSERT_TRUE(c.Send("POST /parse HTTP/1.1\r\nHost: x\r\nContent-Length: " +
                     std::to_string(body.size()) + "\r\n\r\n" + body));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 400) << answer;
  EXPECT_NE(answer.find("application/problem+json"), std::string::npos) << answer;
  const std::string detail = BodyOf(answer).value("detail", "");
  EXPECT_NE(detail.find("request body: not valid JSON"), std::string::npos) << answer;
  EXPECT_NE(detail.find("\xef\xbf\xbd"), std::string::npos) << "no U+FFFD: " << answer;
}

TEST(ProblemTest, UnavailableIs503WithRetryAfterSoThatClientsSendItAgain) {
  // A fenced write (the store's Unavailable): rolled back, so safe to send again.
  HttpResponse res;
  SendProblem(res, Unavailable("fenced: this server's epoch 4 is no longer the leader's (now 5)",
                               Seconds(1)));
  EXPECT_EQ(res.status, 503);
  ASSERT_TRUE(res.HasHeader("Retry-After"));
  EXPECT_EQ(res.headers.find("Retry-After")->second, "1");
  const nlohmann::json body = ParseJsonOrNull(res.body);
  EXPECT_EQ(body.value("title", ""), "unavailable");
  EXPECT_EQ(body.value("status", 0), 503);
  // A cap reached stays 429; a failure whose outcome is unknown stays 500 (not sent again).
  EXPECT_EQ(HttpStatusOf(StatusCode::kResourceExhausted), 429);
  EXPECT_EQ(HttpStatusOf(StatusCode::kIoError), 500);
}

TEST_F(HttpServerTest, AStreamedBodyIsSentInChunks) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send("GET /stream HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string answer = c.ReadAnswer();
  EXPECT_NE(answer.find("Transfer-Encoding: chunked"), std::string::npos) << answer;
  for (const char* piece : {"piece1;", "piece2;", "piece3;"}) {
    EXPECT_NE(answer.find(piece), std::string::npos) << answer;
  }
}

TEST_F(HttpServerTest, AChunkedBodyIsCountedAsItArrives) {
  Start();
  // Authenticated: 1000 bytes at most. 600 + 600 in two chunks is over, without a
  // Content-Length: 413 once the rest is drained.
  const std::string two_chunks =
      "258\r\n" + std::string(600, 'a') + "\r\n258\r\n" + std::string(600, 'b') + "\r\n0\r\n\r\n";
  Client c(port_);
  ASSERT_TRUE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\nTransfer-Encoding: chunked\r\n\r\n" +
      two_chunks));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 413) << answer;
  EXPECT_NE(BodyOf(answer).value("detail", "").find("over 1000 bytes"), std::string::npos);
  // Anonymous: 100 bytes; the same body is dropped (up to 64 KiB) and answered 413 too.
  Client d(port_);
  ASSERT_TRUE(
      d.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n" + two_chunks));
  const std::string refused = d.ReadAnswer();
  EXPECT_EQ(StatusOf(refused), 413) << refused;
  EXPECT_NE(BodyOf(refused).value("detail", "").find("over 100 bytes"), std::string::npos);
  // Within the limit, a chunked body passes whole.
  Client e(port_);
  ASSERT_TRUE(e.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\nTransfer-Encoding: chunked\r\n\r\n"
      "3c\r\n" +
      std::string(60, 'a') + "\r\n3c\r\n" + std::string(60, 'b') + "\r\n0\r\n\r\n"));
  const std::string echoed = e.ReadAnswer();
  EXPECT_EQ(StatusOf(echoed), 200) << echoed;
  EXPECT_NE(echoed.find(std::string(60, 'a') + std::string(60, 'b')), std::string::npos);
}

TEST_F(HttpServerTest, AnEndlessChunkedBodyIsCutOffNotStored) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n"));
  // An anonymous body over its limit is dropped up to 64 KiB; 1 MiB closes the connection.
  bool sent_all = true;
  const std::string chunk = "1000\r\n" + std::string(4096, 'x') + "\r\n";
  for (int i = 0; i < 256 && sent_all; ++i) sent_all = c.Send(chunk);
  bool closed = false;
  const std::string answer = c.ReadAll(3000ms, &closed);
  EXPECT_TRUE(closed || !sent_all) << "the server kept reading an endless body";
  EXPECT_EQ(answer.find("200 OK"), std::string::npos) << answer;
}

TEST_F(HttpServerTest, EveryRouteTakesTheLongestPathWithoutCrashingAndLongerIs414) {
  Start();
  // std::regex recurses per character: a path at the limit must not overflow a thread's stack.
  for (const std::string& path :
       {"/things/" + std::string(2040, '7'), "/" + std::string(2047, 'a')}) {
    Client c(port_);
    ASSERT_TRUE(c.Send("GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n"));
    const int status = StatusOf(c.ReadAnswer());
    EXPECT_TRUE(status == 200 || status == 404) << status;
  }
  Client c(port_);
  ASSERT_TRUE(c.Send("GET /things/" + std::string(7000, '7') + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 414) << answer;
  EXPECT_NE(BodyOf(answer).value("detail", "").find("path is over 2048 bytes"), std::string::npos);
}

TEST_F(HttpServerTest, AFloodFromManyAddressesCannotKeepANewcomerOut) {
  ConnectionLimits limits;
  limits.max_anonymous = 8;
  limits.head_timeout = 60s;
  Start(limits);
  // 16 addresses hold every anonymous place (and more), sending nothing.
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 16; ++i) {
    idle.push_back(std::make_unique<Client>(port_, ("127.0.1." + std::to_string(i + 1)).c_str()));
  }
  for (int i = 0; i < 200 && server_->connections().evicted < 8; ++i) {
    std::this_thread::sleep_for(10ms);  // polling the server's count, not waiting for time
  }
  EXPECT_GE(server_->connections().evicted, 8);
  // An agent's new connection gets in: the oldest idle one made room.
  Client agent(port_, "127.0.2.1");
  ASSERT_TRUE(agent.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n"));
  EXPECT_EQ(StatusOf(agent.ReadAnswer()), 200);
}

TEST_F(HttpServerTest, ABodyDeclaredTooLargeIsRefusedBeforeItIsSent) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 100000000\r\n\r\n"));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 413) << answer;
}

TEST_F(HttpServerTest, ACompressedBodyIs415) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send(
      "POST /echo HTTP/1.1\r\nHost: x\r\nContent-Encoding: gzip\r\nContent-Length: 4\r\n\r\nabcd"));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 415) << answer;
  EXPECT_NE(BodyOf(answer).value("detail", "").find("not accepted compressed"), std::string::npos);
}

TEST_F(HttpServerTest, ALongTargetIs414AndALargeHeadIs431) {
  Start();
  Client c(port_);
  ASSERT_TRUE(c.Send("GET /things/1?q=" + std::string(9000, 'a') + " HTTP/1.1\r\nHost: x\r\n\r\n"));
  const std::string long_target = c.ReadAnswer();
  EXPECT_EQ(StatusOf(long_target), 414) << long_target;
  EXPECT_NE(long_target.find("application/problem+json"), std::string::npos);
  Client d(port_);
  ASSERT_TRUE(d.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\nX-Big: " + std::string(70000, 'a') +
                     "\r\n\r\n"));
  const std::string large_head = d.ReadAnswer();
  EXPECT_EQ(StatusOf(large_head), 431) << large_head.substr(0, 200);
  EXPECT_NE(large_head.find("application/problem+json"), std::string::npos);
}

TEST_F(HttpServerTest, ARefusalFromTheHeadIsAnsweredWithoutReadingTheBody) {
  Start();
  Client c(port_);
  // The body never comes: the answer does.
  ASSERT_TRUE(
      c.Send("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: no\r\nContent-Length: "
             "50\r\n\r\n"));
  const std::string answer = c.ReadAnswer();
  EXPECT_EQ(StatusOf(answer), 401) << answer;
  EXPECT_NE(BodyOf(answer).value("detail", "").find("refused from the head"), std::string::npos);
}

TEST_F(HttpServerTest, AHeadSentAByteAtATimeIsCutOffAtItsDeadline) {
  ConnectionLimits limits;
  limits.head_timeout = 600ms;
  Start(limits);
  Client c(port_);
  const std::string head = "GET /things/1 HTTP/1.1\r\nHost: x\r\nX-Slow: " + std::string(100, 'a');
  const auto started = Clock::now();
  bool closed = false;
  for (size_t i = 0; i < head.size() && !closed; ++i) {
    if (!c.Send(head.substr(i, 1))) break;
    c.ReadAll(50ms, &closed);
  }
  EXPECT_TRUE(closed);
  EXPECT_LT(Clock::now() - started, 3s);
  EXPECT_GE(server_->connections().timed_out, 1);
}

TEST_F(HttpServerTest, AnIdleKeepAliveConnectionIsClosed) {
  ConnectionLimits limits;
  limits.head_timeout = 500ms;
  Start(limits);
  Client c(port_);
  ASSERT_TRUE(c.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(c.ReadAnswer()), 200);
  bool closed = false;
  c.ReadAll(3000ms, &closed);
  EXPECT_TRUE(closed);
}

TEST_F(HttpServerTest, AnAddressOverItsCapOfAnonymousConnectionsIsClosedOthersAreServed) {
  ConnectionLimits limits;
  limits.max_anonymous_per_address = 3;
  limits.head_timeout = 60s;
  Start(limits);
  std::vector<std::unique_ptr<Client>> idle;
  for (int i = 0; i < 3; ++i) idle.push_back(std::make_unique<Client>(port_, "127.0.0.2"));
  // Accepted connections are counted by the server's accepting thread: wait until it has.
  for (int i = 0; i < 100 && server_->connections().anonymous < 3; ++i) {
    std::this_thread::sleep_for(20ms);
  }
  ASSERT_EQ(server_->connections().anonymous, 3);
  Client over(port_, "127.0.0.2");
  bool closed = false;
  over.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\n\r\n");
  EXPECT_EQ(over.ReadAll(2000ms, &closed), "");
  EXPECT_TRUE(closed);
  EXPECT_GE(server_->connections().refused, 1);
  // Another address is served.
  Client other(port_, "127.0.0.3");
  ASSERT_TRUE(other.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_EQ(StatusOf(other.ReadAnswer()), 200);
}

TEST_F(HttpServerTest, AuthenticatedConnectionsDoNotCountAgainstTheAddressCap) {
  ConnectionLimits limits;
  limits.max_anonymous_per_address = 2;
  limits.head_timeout = 60s;
  Start(limits);
  std::vector<std::unique_ptr<Client>> clients;
  for (int i = 0; i < 5; ++i) {
    clients.push_back(std::make_unique<Client>(port_, "127.0.0.4"));
    ASSERT_TRUE(
        clients.back()->Send("GET /things/1 HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n"));
    EXPECT_EQ(StatusOf(clients.back()->ReadAnswer()), 200) << "connection " << i;
  }
  EXPECT_EQ(server_->connections().anonymous, 0);
  EXPECT_EQ(server_->connections().open, 5);
}

// Back-pressure (saturation_guard.h): with --max-requests-in-flight 2 handled, a third
// request waits its admission time and is answered 503 problem+json with Retry-After and
// Corral-Busy, the route not run; long-lived requests and agents' requests are not in that pool.
TEST_F(HttpServerTest, ASaturatedServerAnswers503WithRetryAfterNotATimeout) {
  Start({}, SaturationLimits{2, 1, 100ms});
  std::vector<std::unique_ptr<Client>> slow;
  for (int i = 0; i < 2; ++i) {
    slow.push_back(std::make_unique<Client>(port_));
    ASSERT_TRUE(slow.back()->Send("GET /block HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n"));
  }
  ASSERT_TRUE(WaitForBlocked(2));
  // Long polls come and stay: never counted, never refused.
  std::vector<std::unique_ptr<Client>> polls;
  for (int i = 0; i < 5; ++i) {
    polls.push_back(std::make_unique<Client>(port_));
    ASSERT_TRUE(
        polls.back()->Send("GET /forever HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n\r\n"));
  }
  ASSERT_TRUE(WaitForBlocked(7));
  EXPECT_EQ(server_->saturation().regular.in_flight, 2);

  Client over(port_);
  const auto sent = Clock::now();
  ASSERT_TRUE(
      over.Send("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n"
                "Content-Length: 5\r\n\r\nhello"));
  const std::string refused = over.ReadAnswer();
  EXPECT_GE(Clock::now() - sent, 100ms);
  EXPECT_EQ(StatusOf(refused), 503) << refused;
  EXPECT_NE(refused.find("application/problem+json"), std::string::npos) << refused;
  EXPECT_NE(refused.find("Retry-After: 1\r\n"), std::string::npos) << refused;
  EXPECT_NE(refused.find(std::string(kBusyHeader) + ": 1\r\n"), std::string::npos) << refused;
  EXPECT_EQ(refused.find("hello"), std::string::npos) << "the route ran: " << refused;
  const nlohmann::json problem = BodyOf(refused);
  EXPECT_EQ(problem.value("title", ""), "unavailable");
  EXPECT_EQ(problem.value("status", 0), 503);
  EXPECT_NE(problem.value("detail", "").find("server saturated: 2 requests in flight"),
            std::string::npos)
      << refused;

  // An agent's request has its own pool: served while the API's is full.
  Client agent(port_);
  ASSERT_TRUE(agent.Send("GET /things/3 HTTP/1.1\r\nHost: x\r\nAuthorization: agent\r\n\r\n"));
  EXPECT_EQ(StatusOf(agent.ReadAnswer()), 200);
  const SaturationGuard::Counts counts = server_->saturation();
  EXPECT_EQ(counts.regular.refused, 1);
  EXPECT_EQ(counts.agent.refused, 0);
  EXPECT_EQ(counts.agent.admitted, 1);

  // Room again: the same connection is served.
  Release();
  for (auto& c : slow) EXPECT_EQ(StatusOf(c->ReadAnswer()), 200);
  ASSERT_TRUE(
      over.Send("POST /echo HTTP/1.1\r\nHost: x\r\nAuthorization: yes\r\n"
                "Content-Length: 5\r\n\r\nhello"));
  const std::string served = over.ReadAnswer();
  EXPECT_EQ(StatusOf(served), 200) << served;
  EXPECT_NE(served.find("hello"), std::string::npos);
}

TEST_F(HttpServerTest, ARequestThatFindsASlotWithinItsWaitIsServed) {
  Start({}, SaturationLimits{1, 0, 10s});
  Client slow(port_);
  ASSERT_TRUE(slow.Send("GET /block HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(WaitForBlocked(1));
  Client next(port_);
  ASSERT_TRUE(next.Send("GET /things/1 HTTP/1.1\r\nHost: x\r\n\r\n"));
  for (int i = 0; i < 500 && server_->saturation().regular.waiting < 1; ++i) {
    std::this_thread::sleep_for(10ms);
  }
  ASSERT_EQ(server_->saturation().regular.waiting, 1);
  Release();
  EXPECT_EQ(StatusOf(next.ReadAnswer()), 200);
  EXPECT_EQ(server_->saturation().regular.waited, 1);
  EXPECT_EQ(server_->saturation().regular.refused, 0);
}

}  // namespace
}  // namespace corral::server
