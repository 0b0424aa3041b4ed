// HttpClient against a raw socket server on loopback that answers as a script says: well-formed
// answers (Content-Length, chunked, to the end of the connection) and hostile ones (an endless
// header, a huge Content-Length, a body that never ends, nothing at all), each of which must end
// in a clear failure within the read timeout.
#include "cli/http_client.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <csignal>
#include <functional>
#include <string>
#include <thread>

namespace corral::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Clock = std::chrono::steady_clock;

// Accepts connections on a loopback port; for each, reads the request head (and a body of its
// Content-Length) into `request`, then runs the script on the socket, then closes it.
class RawServer {
 public:
  using Script = std::function<void(int fd, const std::atomic<bool>& stopping)>;

  explicit RawServer(Script script) : script_(std::move(script)) {
    signal(SIGPIPE, SIG_IGN);  // as ApiClient does: a write to a closed peer is an error
    listener_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    EXPECT_EQ(bind(listener_, reinterpret_cast<sockaddr*>(&address), sizeof(address)), 0);
    socklen_t length = sizeof(address);
    getsockname(listener_, reinterpret_cast<sockaddr*>(&address), &length);
    port_ = ntohs(address.sin_port);
    listen(listener_, 8);
    thread_ = std::thread([this] { Serve(); });
  }
  ~RawServer() {
    stopping_ = true;
    shutdown(listener_, SHUT_RDWR);
    thread_.join();
    close(listener_);
  }

  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  HttpOrigin origin() const { return *HttpOrigin::Parse(url()); }
  std::string request() const {
    std::lock_guard lock(mu_);
    return request_;
  }

 private:
  void Serve() {
    while (!stopping_) {
      const int fd = accept(listener_, nullptr, nullptr);
      if (fd < 0) return;
      std::string got;
      char buffer[4096];
      while (got.find("\r\n\r\n") == std::string::npos) {
        const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
        if (n <= 0) break;
        got.append(buffer, static_cast<size_t>(n));
      }
      const size_t length_at = got.find("Content-Length: ");
      if (length_at != std::string::npos) {
        const size_t want = got.find("\r\n\r\n") + 4 + std::stoul(got.substr(length_at + 16));
        while (got.size() < want) {
          const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
          if (n <= 0) break;
          got.append(buffer, static_cast<size_t>(n));
        }
      }
      {
        std::lock_guard lock(mu_);
        request_ = got;
      }
      script_(fd, stopping_);
      close(fd);
    }
  }

  Script script_;
  int listener_ = -1;
  int port_ = 0;
  std::atomic<bool> stopping_{false};
  std::thread thread_;
  mutable std::mutex mu_;
  std::string request_;
};

void SendAll(int fd, const std::string& text) {
  size_t sent = 0;
  while (sent < text.size()) {
    const ssize_t n = send(fd, text.data() + sent, text.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return;
    sent += static_cast<size_t>(n);
  }
}

// Waits until the client hangs up or the server stops.
void HoldUntilClosed(int fd, const std::atomic<bool>& stopping) {
  char buffer[256];
  while (!stopping) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) > 0 && recv(fd, buffer, sizeof(buffer), 0) <= 0) return;
  }
}

HttpClientOptions Short() {
  HttpClientOptions options;
  options.connect_timeout = std::chrono::milliseconds(500);
  options.read_timeout = std::chrono::milliseconds(300);
  options.write_timeout = std::chrono::milliseconds(500);
  options.limits.max_header_bytes = 1024;
  options.limits.max_headers = 8;
  options.limits.max_body_bytes = 1 << 20;
  return options;
}

TEST(HttpOriginTest, ParsesSchemesHostsAndPorts) {
  Result<HttpOrigin> plain = HttpOrigin::Parse("http://example.org");
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->tls);
  EXPECT_EQ(plain->port, 80);
  EXPECT_EQ(plain->HostHeader(), "example.org");
  Result<HttpOrigin> tls = HttpOrigin::Parse("https://[::1]:8443/");
  ASSERT_TRUE(tls.ok());
  EXPECT_TRUE(tls->tls);
  EXPECT_EQ(tls->host, "::1");
  EXPECT_EQ(tls->HostHeader(), "[::1]:8443");
  EXPECT_FALSE(HttpOrigin::Parse("ftp://x").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://x:0").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://x:99999").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://x/api").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://user@evil.example").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://a b:80").ok());
  EXPECT_FALSE(HttpOrigin::Parse("http://x?y").ok());
  EXPECT_TRUE(HttpOrigin::Parse("http://[fe80::1%25eth0]:8080").ok());
}

TEST(HttpClientTest, SendsTheRequestAndReadsAContentLengthAnswer) {
  RawServer server([](int fd, const std::atomic<bool>&) {
    SendAll(fd,
            "HTTP/1.1 201 Created\r\nContent-Type: application/json\r\nRetry-After: 3\r\n"
            "Content-Length: 9\r\n\r\n{\"id\": 7}");
  });
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send(
      {"POST", "/api/v1/jobs?x=1", {{"Authorization", "Bearer t"}}, "{}", "application/json"});
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(r.response.status, 201);
  EXPECT_EQ(r.response.body, "{\"id\": 7}");
  EXPECT_EQ(r.response.Header("RETRY-AFTER"), "3");
  const std::string request = server.request();
  EXPECT_THAT(request, StartsWith("POST /api/v1/jobs?x=1 HTTP/1.1\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nHost: 127.0.0.1:"));
  EXPECT_THAT(request, HasSubstr("\r\nAuthorization: Bearer t\r\n"));
  EXPECT_THAT(request, HasSubstr("\r\nContent-Length: 2\r\n"));
  EXPECT_THAT(request, testing::EndsWith("\r\n\r\n{}"));
}

TEST(HttpClientTest, AnUpgradeKeepsTheConnectionWithTheBytesPastThe101) {
  RawServer server([](int fd, const std::atomic<bool>& stopping) {
    // The new protocol's first bytes in the same packet as the head: the stream has them.
    SendAll(fd, "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\nearly");
    char buffer[64];
    pollfd p{fd, POLLIN, 0};
    while (!stopping && poll(&p, 1, 20) == 0) {
    }
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n > 0) SendAll(fd, "echo:" + std::string(buffer, static_cast<size_t>(n)));
    HoldUntilClosed(fd, stopping);
  });
  HttpClient http(server.origin(), Short());
  HttpUpgrade upgrade = http.Upgrade({"GET", "/sessions/7/", {{"Upgrade", "websocket"}}, "", ""});
  ASSERT_TRUE(upgrade.answer.ok()) << upgrade.answer.detail;
  EXPECT_EQ(upgrade.answer.response.status, 101);
  ASSERT_TRUE(upgrade.stream);
  EXPECT_THAT(server.request(), HasSubstr("\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"));
  EXPECT_THAT(server.request(), Not(HasSubstr("Connection: close")));
  EXPECT_TRUE(upgrade.stream->Buffered());
  char buffer[64];
  ssize_t n = upgrade.stream->Read(buffer, sizeof(buffer));
  EXPECT_EQ(std::string(buffer, static_cast<size_t>(std::max<ssize_t>(n, 0))), "early");
  EXPECT_FALSE(upgrade.stream->Buffered());
  ASSERT_TRUE(upgrade.stream->Write("ping"));
  std::string echoed;
  while (echoed.size() < 9 && (n = upgrade.stream->Read(buffer, sizeof(buffer))) > 0) {
    echoed.append(buffer, static_cast<size_t>(n));
  }
  EXPECT_EQ(echoed, "echo:ping");

  // Any other answer is read whole, and there is no stream.
  RawServer refusing([](int fd, const std::atomic<bool>&) {
    SendAll(fd, "HTTP/1.1 404 Not Found\r\nContent-Length: 4\r\n\r\nnope");
  });
  HttpClient other(refusing.origin(), Short());
  HttpUpgrade refused = other.Upgrade({"GET", "/sessions/8/", {{"Upgrade", "websocket"}}, "", ""});
  ASSERT_TRUE(refused.answer.ok()) << refused.answer.detail;
  EXPECT_EQ(refused.answer.response.status, 404);
  EXPECT_EQ(refused.answer.response.body, "nope");
  EXPECT_FALSE(refused.stream);
}

TEST(HttpClientTest, ReadsChunkedAndToTheEndAnswersAndSkips100Continue) {
  RawServer chunked([](int fd, const std::atomic<bool>&) {
    SendAll(fd,
            "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
            "5;x=y\r\nhello\r\n1\r\n \r\n5\r\nworld\r\n0\r\nTrailer: t\r\n\r\n");
  });
  HttpClient http(chunked.origin(), Short());
  HttpResult r = http.Send({"GET", "/", {}, "", ""});
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(r.response.body, "hello world");

  RawServer to_end(
      [](int fd, const std::atomic<bool>&) { SendAll(fd, "HTTP/1.0 200 OK\r\n\r\nall of it"); });
  HttpClient http2(to_end.origin(), Short());
  r = http2.Send({"GET", "/", {}, "", ""});
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_EQ(r.response.body, "all of it");
}

// A name with a space, a line break or UTF-8 travels percent-encoded in the request line, as
// cpp-httplib sent it: it can neither split the request nor add a header.
TEST(HttpClientTest, TheTargetIsEncodedAndHeadersCannotBeInjected) {
  RawServer server(
      [](int fd, const std::atomic<bool>&) { SendAll(fd, "HTTP/1.1 204 No Content\r\n\r\n"); });
  HttpClient http(server.origin(), Short());
  HttpResult r =
      http.Send({"GET", "/api/v1/projects/a b\r\nX-Evil: 1/sharing?q=%2B+\xc3\xa9", {}, "", ""});
  ASSERT_TRUE(r.ok()) << r.detail;
  EXPECT_THAT(server.request(), StartsWith("GET /api/v1/projects/a%20b%0D%0AX-Evil:%201/"
                                           "sharing?q=%2B%2B%C3%A9 HTTP/1.1\r\n"));
  EXPECT_THAT(server.request(), testing::Not(HasSubstr("\r\nX-Evil")));
  r = http.Send({"GET", "/", {{"Authorization", "Bearer t\r\nX-Evil: 1"}}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("line break"));
}

TEST(HttpClientTest, AMalformedStatusOrHeaderNameIsRefused) {
  for (const char* answer :
       {"HTTP/1.1 2000 OK\r\n\r\n", "HTTP/1.1 200 OK\r\nContent-Length : 5\r\n\r\nhello",
        "HTTP/1.1 200 OK\r\nA: b\r\n folded\r\n\r\n"}) {
    RawServer server([answer](int fd, const std::atomic<bool>&) { SendAll(fd, answer); });
    HttpClient http(server.origin(), Short());
    const HttpResult r = http.Send({"GET", "/", {}, "", ""});
    EXPECT_EQ(r.failure, HttpFailure::kOther) << answer;
  }
}

TEST(HttpClientTest, EndlessInterimAnswersAreRefused) {
  RawServer server([](int fd, const std::atomic<bool>& stopping) {
    for (int i = 0; i < 100 && !stopping; ++i) SendAll(fd, "HTTP/1.1 100 Continue\r\n\r\n");
  });
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("interim (1xx) answers"));
}

TEST(HttpClientTest, NothingAtAllIsAReadTimeout) {
  RawServer server(HoldUntilClosed);
  HttpClient http(server.origin(), Short());
  const auto start = Clock::now();
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_THAT(r.detail, HasSubstr("read timed out"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(HttpClientTest, AClosedConnectionWithoutAnswerIsARead) {
  RawServer server([](int, const std::atomic<bool>&) {});
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_THAT(r.detail, HasSubstr("connection closed"));
}

TEST(HttpClientTest, AnEndlessHeaderIsRefusedAtTheLimit) {
  RawServer server([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nX-Endless: ");
    const std::string more(512, 'a');
    while (!stopping && send(fd, more.data(), more.size(), MSG_NOSIGNAL) > 0) {
    }
  });
  HttpClient http(server.origin(), Short());
  const auto start = Clock::now();
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("headers exceed 1024 bytes"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(HttpClientTest, TooManyHeadersAreRefused) {
  RawServer server([](int fd, const std::atomic<bool>&) {
    std::string answer = "HTTP/1.1 200 OK\r\n";
    for (int i = 0; i < 20; ++i) answer += "X-" + std::to_string(i) + ": v\r\n";
    SendAll(fd, answer + "\r\n");
  });
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("more than 8 headers"));
}

TEST(HttpClientTest, AHeaderDrippedSlowlyEndsWithinTheReadTimeout) {
  RawServer server([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\n");
    while (!stopping && send(fd, "X", 1, MSG_NOSIGNAL) > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
  });
  HttpClientOptions options = Short();
  options.limits.max_header_bytes = 1 << 20;
  HttpClient http(server.origin(), options);
  const auto start = Clock::now();
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_THAT(r.detail, HasSubstr("read timed out (status line and headers)"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));
}

TEST(HttpClientTest, AHugeContentLengthIsRefusedBeforeReading) {
  RawServer server([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 99999999999999999\r\n\r\nx");
    HoldUntilClosed(fd, stopping);
  });
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("exceeds 1048576 bytes"));

  RawServer garbage([](int fd, const std::atomic<bool>&) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 12x\r\n\r\n");
  });
  HttpClient http2(garbage.origin(), Short());
  EXPECT_THAT(http2.Send({"GET", "/", {}, "", ""}).detail, HasSubstr("malformed Content-Length"));
}

TEST(HttpClientTest, ABodyThatNeverEndsIsAReadTimeoutOrTooLarge) {
  RawServer stalled([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\nonly this");
    HoldUntilClosed(fd, stopping);
  });
  HttpClient http(stalled.origin(), Short());
  const auto start = Clock::now();
  HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kRead);
  EXPECT_THAT(r.detail, HasSubstr("read timed out (body)"));
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(2));

  // Chunks for ever, and a body without length for ever: the body limit ends both.
  RawServer endless_chunks([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n");
    const std::string chunk = "1000\r\n" + std::string(4096, 'c') + "\r\n";
    while (!stopping && send(fd, chunk.data(), chunk.size(), MSG_NOSIGNAL) > 0) {
    }
  });
  HttpClient http2(endless_chunks.origin(), Short());
  r = http2.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("exceeds 1048576 bytes"));

  RawServer endless([](int fd, const std::atomic<bool>& stopping) {
    SendAll(fd, "HTTP/1.1 200 OK\r\n\r\n");
    const std::string more(4096, 'b');
    while (!stopping && send(fd, more.data(), more.size(), MSG_NOSIGNAL) > 0) {
    }
  });
  HttpClient http3(endless.origin(), Short());
  r = http3.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("exceeds 1048576 bytes"));
}

TEST(HttpClientTest, NotHttpIsAClearFailure) {
  RawServer server([](int fd, const std::atomic<bool>&) { SendAll(fd, "SSH-2.0-OpenSSH\r\n"); });
  HttpClient http(server.origin(), Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kOther);
  EXPECT_THAT(r.detail, HasSubstr("not an HTTP/1 answer"));
}

TEST(HttpClientTest, ARefusedConnectionIsConnect) {
  int port = 0;
  {
    RawServer gone([](int, const std::atomic<bool>&) {});
    port = gone.origin().port;
  }
  HttpClient http(*HttpOrigin::Parse("http://127.0.0.1:" + std::to_string(port)), Short());
  EXPECT_EQ(http.Send({"GET", "/", {}, "", ""}).failure, HttpFailure::kConnect);
}

TEST(HttpClientTest, HttpsToAServerThatIsNotTlsFailsTheHandshake) {
  RawServer server([](int fd, const std::atomic<bool>&) {
    SendAll(fd, "HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n");
  });
  HttpOrigin origin = server.origin();
  origin.tls = true;
  HttpClient http(origin, Short());
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kTlsHandshake) << r.detail;
}

TEST(HttpClientTest, AMissingCaFileIsCaCertificates) {
  RawServer server([](int, const std::atomic<bool>&) {});
  HttpOrigin origin = server.origin();
  origin.tls = true;
  HttpClientOptions options = Short();
  options.ca_cert = "/nonexistent/ca.pem";
  HttpClient http(origin, options);
  const HttpResult r = http.Send({"GET", "/", {}, "", ""});
  EXPECT_EQ(r.failure, HttpFailure::kCaCertificates);
  EXPECT_THAT(r.detail, HasSubstr("/nonexistent/ca.pem"));
}

}  // namespace
}  // namespace corral::cli
