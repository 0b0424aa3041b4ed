// The session gateway with real sockets on loopback: a raw-socket fake app behind it and raw
// clients (plain and TLS) in front; plus the HTTP head parser it relies on. The directory is a
// fake with the controller's owner-only rule (controller_test.cc tests the real one).
#include "server/gateway/session_gateway.h"

#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <filesystem>
#include <functional>
#include <mutex>
#include <thread>

#include "server/http/http_head.h"

namespace corral::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;
using Header = std::pair<std::string, std::string>;

// --- The head parser ----------------------------------------------------------------------

TEST(HttpHeadTest, ParsesRequestAndResponseHeads) {
  auto request = ParseRequestHead(
      "GET /sessions/7/lab?a=%2B HTTP/1.1\r\nHost: corral:8081\r\nX-A:  1 \r\n\r\nbody");
  ASSERT_TRUE(request.ok()) << request.status().ToString();
  EXPECT_EQ(request->method, "GET");
  EXPECT_EQ(request->target, "/sessions/7/lab?a=%2B");
  EXPECT_EQ(request->version, "HTTP/1.1");
  EXPECT_THAT(request->headers,
              ::testing::ElementsAre(Header{"Host", "corral:8081"}, Header{"X-A", "1"}));
  EXPECT_EQ(FormatRequestHead(*request),
            "GET /sessions/7/lab?a=%2B HTTP/1.1\r\nHost: corral:8081\r\nX-A: 1\r\n\r\n");
  auto response =
      ParseResponseHead("HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n\r\n");
  ASSERT_TRUE(response.ok());
  EXPECT_EQ(response->status, 101);
  EXPECT_EQ(response->reason, "Switching Protocols");
  EXPECT_EQ(ParseResponseHead("HTTP/1.0 200\r\n\r\n")->status, 200);
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\n\r\nrest"), 18u);
  EXPECT_EQ(HeadEnd("GET / HTTP/1.1\r\n"), std::string::npos);
}

TEST(HttpHeadTest, RefusesWhatItCannotReadUnambiguously) {
  for (const std::string bad :
       {"GET /\r\n\r\n", "GET / HTTP/2\r\n\r\n", "GET  / HTTP/1.1\r\n\r\n",
        "G(T / HTTP/1.1\r\n\r\n", "GET / HTTP/1.1\r\nNo colon\r\n\r\n",
        "GET / HTTP/1.1\r\nA: 1\r\n folded\r\n\r\n", "GET / HTTP/1.1\r\nBad Name: 1\r\n\r\n",
        "GET / HTTP/1.1\r\nA: x\x01y\r\n\r\n", "GET / HTTP/1.1\nA: 1\n\n"}) {
    EXPECT_FALSE(ParseRequestHead(bad).ok()) << bad;
  }
  for (const std::string bad : {"HTTP/1.1 20 OK\r\n\r\n", "HTTP/1.1 600 X\r\n\r\n",
                                "HTTP/1.1 200OK\r\n\r\n", "ICY 200 OK\r\n\r\n"}) {
    EXPECT_FALSE(ParseResponseHead(bad).ok()) << bad;
  }
}

// --- Fakes --------------------------------------------------------------------------------

// Who is who, and where sessions are: alice owns session 7 (running) and 8 (pending); bob is
// another user, root an admin. Endpoint applies the controller's rule: the owner only.
class FakeDirectory final : public SessionDirectory {
 public:
  int app_port = 0;
  std::atomic<int> uses{0};

  Result<Principal> Authenticate(const std::string& token) override {
    if (token == "crl_alice") return Principal{1, "alice", false, {"default"}};
    if (token == "crl_bob") return Principal{2, "bob", false, {"default"}};
    if (token == "crl_root") return Principal{3, "root", true, {"default"}};
    return Unauthenticated("unknown or revoked token");
  }
  Result<Controller::SessionEndpoint> Endpoint(const Principal& who, JobId id) override {
    if ((id.value() != 7 && id.value() != 8) || who.name != "alice") {
      return NotFound("session " + std::to_string(id.value()) + " not found");
    }
    if (id.value() == 8)
      return Controller::SessionEndpoint{model::JobState::kPending, false, "", 0, ""};
    return Controller::SessionEndpoint{model::JobState::kRunning, false, "127.0.0.1", app_port,
                                       "tok"};
  }
  void NoteUse(JobId) override { ++uses; }
};

int ListenOnLoopback(int* port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), len) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    ADD_FAILURE() << "cannot listen on loopback";
  }
  *port = ntohs(addr.sin_port);
  return fd;
}

void SetTimeouts(int fd) {
  timeval tv{10, 0};  // a test that goes wrong fails instead of hanging
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n <= 0) return false;
    data.remove_prefix(n);
  }
  return true;
}

// Reads up to and including the blank line ending a head; what came after it stays in `rest`.
std::string ReadHead(const std::function<ssize_t(char*, size_t)>& read, std::string& rest) {
  std::string bytes = std::move(rest);
  char buffer[4096];
  while (HeadEnd(bytes) == std::string::npos) {
    const ssize_t n = read(buffer, sizeof buffer);
    if (n <= 0) break;
    bytes.append(buffer, n);
  }
  const size_t end = HeadEnd(bytes);
  if (end == std::string::npos) {
    rest.clear();
    return bytes;
  }
  rest = bytes.substr(end);
  return bytes.substr(0, end);
}

// An app on loopback: runs `serve(fd, head, rest)` for each connection on a thread of its own,
// after reading the request head, and keeps the heads. Its connections are closed when the
// handler returns; `Release()` lets handlers that wait for it go on.
class FakeApp {
 public:
  using Serve =
      std::function<void(FakeApp& app, int fd, const std::string& head, std::string rest)>;
  explicit FakeApp(Serve serve) : serve_(std::move(serve)) {
    fd_ = ListenOnLoopback(&port_);
    accept_ = std::thread([this] {
      while (true) {
        const int client = accept(fd_, nullptr, nullptr);
        if (client < 0) return;
        SetTimeouts(client);
        std::lock_guard lock(mu_);
        threads_.emplace_back([this, client] {
          std::string rest;
          const std::string head =
              ReadHead([client](char* b, size_t n) { return recv(client, b, n, 0); }, rest);
          {
            std::lock_guard lock(mu_);
            heads_.push_back(head);
          }
          serve_(*this, client, head, rest);
          close(client);
        });
      }
    });
  }
  ~FakeApp() {
    Release();
    shutdown(fd_, SHUT_RDWR);
    accept_.join();
    // Joined without the lock: a connection's thread takes it to note its head and to wait.
    std::vector<std::thread> threads;
    {
      std::lock_guard lock(mu_);
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
    close(fd_);
  }
  int port() const { return port_; }
  std::vector<std::string> heads() {
    std::lock_guard lock(mu_);
    return heads_;
  }
  void Release() {
    {
      std::lock_guard lock(mu_);
      released_ = true;
    }
    cv_.notify_all();
  }
  void WaitForRelease() {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(10), [&] { return released_; });
  }

 private:
  Serve serve_;
  int fd_ = -1;
  int port_ = 0;
  std::thread accept_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool released_ = false;
  std::vector<std::thread> threads_;
  std::vector<std::string> heads_;
};

// Answers "ok" to anything.
void AnswerOk(FakeApp&, int fd, const std::string&, std::string) {
  SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 2\r\nContent-Type: text/plain\r\n\r\nok");
}

// A WebSocket-style app: 101, then echoes every byte until the client closes.
void SwitchAndEcho(FakeApp&, int fd, const std::string&, std::string rest) {
  SendAll(fd,
          "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
          "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n\r\n" +
              rest);
  char buffer[4096];
  ssize_t n;
  while ((n = recv(fd, buffer, sizeof buffer, 0)) > 0) {
    if (!SendAll(fd, std::string_view(buffer, n))) return;
  }
}

// A client connection to the gateway, plain or TLS (then it does not check the certificate:
// the test made it).
class Client {
 public:
  Client(int port, SSL_CTX* tls = nullptr) {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    SetTimeouts(fd_);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(port);
    if (connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      ADD_FAILURE() << "cannot connect to the gateway";
    }
    if (tls != nullptr) {
      ssl_ = SSL_new(tls);
      SSL_set_fd(ssl_, fd_);
      if (SSL_connect(ssl_) != 1) ADD_FAILURE() << "TLS handshake failed";
    }
  }
  ~Client() {
    if (ssl_ != nullptr) SSL_free(ssl_);
    close(fd_);
  }
  bool Send(std::string_view data) {
    if (ssl_ == nullptr) return SendAll(fd_, data);
    return SSL_write(ssl_, data.data(), static_cast<int>(data.size())) ==
           static_cast<int>(data.size());
  }
  ssize_t Read(char* buffer, size_t size) {
    if (ssl_ == nullptr) return recv(fd_, buffer, size, 0);
    const int n = SSL_read(ssl_, buffer, static_cast<int>(size));
    return n > 0 ? n : 0;
  }
  std::string Head() {
    return ReadHead([this](char* b, size_t n) { return Read(b, n); }, rest_);
  }
  // Exactly `size` bytes after the head (fewer if the connection closes first).
  std::string Bytes(size_t size) {
    std::string out = rest_.substr(0, size);
    rest_.erase(0, out.size());
    char buffer[65536];
    while (out.size() < size) {
      const ssize_t n = Read(buffer, std::min(sizeof buffer, size - out.size()));
      if (n <= 0) break;
      out.append(buffer, n);
    }
    return out;
  }
  // Everything until the gateway closes.
  std::string Rest() {
    std::string out = std::move(rest_);
    rest_.clear();
    char buffer[65536];
    ssize_t n;
    while ((n = Read(buffer, sizeof buffer)) > 0) out.append(buffer, n);
    return out;
  }
  // The whole answer to `request`: its head, then the rest until close.
  std::pair<std::string, std::string> Exchange(const std::string& request) {
    Send(request);
    std::string head = Head();
    return {head, Rest()};
  }
  int fd() const { return fd_; }

 private:
  int fd_ = -1;
  SSL* ssl_ = nullptr;
  std::string rest_;
};

std::string Get(const std::string& target, const std::string& headers = "",
                const std::string& host = "127.0.0.1") {
  return "GET " + target + " HTTP/1.1\r\nHost: " + host + "\r\n" + headers + "\r\n";
}

const std::string kAlice = "Authorization: Bearer crl_alice\r\n";

class SessionGatewayTest : public ::testing::Test {
 protected:
  void StartGateway(SessionGatewayOptions options = {}) {
    options.host = "127.0.0.1";
    options.port = 0;
    options.api_port = 8080;
    options.use_interval = std::chrono::milliseconds(0);
    auto gateway = SessionGateway::Create(options);
    ASSERT_TRUE(gateway.ok()) << gateway.status().ToString();
    gateway_ = std::move(gateway).value();
    gateway_->Start(directory_);
  }
  void UseApp(FakeApp& app) { directory_.app_port = app.port(); }
  int port() const { return gateway_->port(); }
  // Whether the gateway's open connections reach `count` within 10 s.
  bool OpenConnectionsBecome(int count) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (gateway_->OpenConnections() != count) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }

  FakeDirectory directory_;
  std::unique_ptr<SessionGateway> gateway_;
};

// --- Requests -----------------------------------------------------------------------------

TEST_F(SessionGatewayTest, StreamsALargeAnswerInOrderWithTheHeaderRules) {
  constexpr size_t kSize = 4 << 20;
  std::string body(kSize, '\0');
  for (size_t i = 0; i < kSize; ++i) body[i] = static_cast<char>((i * 7 + i / 4096) % 251);
  // The app sends the first MiB, then waits until the client has it: a gateway that buffered
  // whole answers would never pass it on.
  FakeApp app([&](FakeApp& self, int fd, const std::string&, std::string) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(kSize) +
                    "\r\nContent-Type: application/octet-stream\r\nX-App: 1\r\n"
                    "Set-Cookie: corral_token=crl_app; Path=/\r\nSet-Cookie: theme=dark\r\n"
                    "Clear-Site-Data: \"cookies\"\r\nService-Worker-Allowed: /\r\n"
                    "Connection: keep-alive\r\n\r\n");
    SendAll(fd, std::string_view(body).substr(0, 1 << 20));
    self.WaitForRelease();
    SendAll(fd, std::string_view(body).substr(1 << 20));
  });
  UseApp(app);
  StartGateway();
  Client client(port());
  client.Send(
      "GET /sessions/7/big?x=%2B HTTP/1.1\r\nHost: corral:8081\r\n"
      "Cookie: a=1; corral_token=crl_alice\r\nConnection: keep-alive\r\n"
      "X-Forwarded-For: 6.6.6.6\r\n\r\n");
  const std::string head = client.Head();
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(head, HasSubstr("X-App: 1\r\n"));
  EXPECT_THAT(head, HasSubstr("Set-Cookie: theme=dark\r\n"));
  EXPECT_THAT(head, HasSubstr("Content-Length: " + std::to_string(kSize) + "\r\n"));
  EXPECT_THAT(head, HasSubstr("Connection: close\r\n"));
  for (const char* gone : {"corral_token", "Clear-Site-Data", "Service-Worker", "keep-alive"}) {
    EXPECT_THAT(head, Not(HasSubstr(gone)));
  }
  const std::string first = client.Bytes(1 << 20);
  app.Release();
  const std::string whole = first + client.Rest();
  EXPECT_EQ(whole.size(), kSize);
  EXPECT_TRUE(whole == body) << "the body changed on the way";

  ASSERT_EQ(app.heads().size(), 1u);
  const std::string up = app.heads()[0];
  EXPECT_THAT(up, StartsWith("GET /sessions/7/big?x=%2B HTTP/1.1\r\n"));
  EXPECT_THAT(up, HasSubstr("\r\nHost: corral:8081\r\n"));
  EXPECT_THAT(up, HasSubstr("\r\nX-Forwarded-Host: corral:8081\r\n"));
  EXPECT_THAT(up, HasSubstr("Authorization: token tok\r\n"));
  EXPECT_THAT(up, HasSubstr("Cookie: a=1\r\n"));
  EXPECT_THAT(up, HasSubstr("X-Forwarded-For: 127.0.0.1\r\n"));
  EXPECT_THAT(up, HasSubstr("X-Forwarded-Proto: http\r\n"));
  EXPECT_THAT(up, HasSubstr("Connection: close\r\n"));
  for (const char* gone : {"crl_alice", "keep-alive", "6.6.6.6"}) {
    EXPECT_THAT(up, Not(HasSubstr(gone)));
  }
}

TEST_F(SessionGatewayTest, CopiesAChunkedRequestBodyAsSent) {
  const std::string chunked = "5\r\nhello\r\n6\r\n world\r\n0\r\n\r\n";
  FakeApp app([&](FakeApp&, int fd, const std::string&, std::string rest) {
    char buffer[4096];
    while (rest.find("0\r\n\r\n") == std::string::npos) {
      const ssize_t n = recv(fd, buffer, sizeof buffer, 0);
      if (n <= 0) break;
      rest.append(buffer, n);
    }
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: " + std::to_string(rest.size()) + "\r\n\r\n" +
                    rest);
  });
  UseApp(app);
  StartGateway();
  Client client(port());
  client.Send("POST /sessions/7/api/contents HTTP/1.1\r\nHost: x\r\n" + kAlice +
              "Transfer-Encoding: chunked\r\n\r\n" + chunked.substr(0, 10));
  client.Send(chunked.substr(10));
  const std::string head = client.Head();
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200 OK"));
  EXPECT_EQ(client.Rest(), chunked);
  ASSERT_EQ(app.heads().size(), 1u);
  EXPECT_THAT(app.heads()[0], HasSubstr("Transfer-Encoding: chunked\r\n"));
}

TEST_F(SessionGatewayTest, OnlyTheOwnerPasses) {
  FakeApp app(AnswerOk);
  UseApp(app);
  StartGateway();
  struct Case {
    std::string what, request, status, in_answer;
  };
  const std::vector<Case> cases = {
      {"bearer", Get("/sessions/7/", kAlice), "200", "ok"},
      {"cookie", Get("/sessions/7/", "Cookie: x=1; corral_token=crl_alice\r\n"), "200", "ok"},
      {"two cookies",
       Get("/sessions/7/", "Cookie: corral_token=crl_bob; corral_token=crl_alice\r\n"), "401",
       "more than one corral_token"},
      {"another user", Get("/sessions/7/", "Authorization: Bearer crl_bob\r\n"), "404",
       "not found"},
      {"an admin", Get("/sessions/7/", "Authorization: Bearer crl_root\r\n"), "404", "not found"},
      {"a bad token", Get("/sessions/7/", "Authorization: Bearer crl_x\r\n"), "401", "unknown"},
      {"no token", Get("/sessions/7/"), "401", "log in at http://127.0.0.1:8080/login"},
      {"no such session", Get("/sessions/9/", kAlice), "404", "not found"},
      {"not a session", Get("/api/v1/jobs", kAlice), "404", "only /sessions/"},
      {"not running", Get("/sessions/8/", kAlice), "503", "\"state\":\"pending\""},
      {"no slash", Get("/sessions/7?a=1", kAlice), "301", "Location: /sessions/7/?a=1"},
      {"cross-site POST",
       "POST /sessions/7/x HTTP/1.1\r\nHost: 127.0.0.1\r\nOrigin: https://evil.example\r\n" +
           kAlice + "Content-Length: 0\r\n\r\n",
       "403", "not this server's"},
      {"cross-site WebSocket",
       Get("/sessions/7/api/kernels/1/channels",
           kAlice +
               "Origin: https://evil.example\r\nConnection: Upgrade\r\nUpgrade: websocket\r\n"),
       "403", "may not open a WebSocket"},
      {"bad head", "GET /sessions/7/ HTTP/1.1\r\nBad Header\r\n\r\n", "400", "bad header line"},
  };
  for (const Case& c : cases) {
    Client client(port());
    const auto [head, body] = client.Exchange(c.request);
    EXPECT_THAT(head, StartsWith("HTTP/1.1 " + c.status)) << c.what;
    EXPECT_THAT(head + body, HasSubstr(c.in_answer)) << c.what << ": " << head << body;
    EXPECT_THAT(head, HasSubstr("Connection: close")) << c.what;
  }
  EXPECT_EQ(app.heads().size(), 2u) << "only the owner's two requests reach the app";
  Client client(port());
  const auto [head, body] = client.Exchange(Get("/sessions/8/", kAlice));
  EXPECT_THAT(head, HasSubstr("Retry-After: 5\r\n"));
}

TEST_F(SessionGatewayTest, ABrowserWithoutCredentialsGoesToTheLoginPage) {
  SessionGatewayOptions options;
  options.public_url = "https://corral.example:8081";
  options.api_url = "https://corral.example";
  StartGateway(options);
  Client client(port());
  const auto [head, body] =
      client.Exchange(Get("/sessions/7/lab?a=1", "Accept: text/html,application/xhtml+xml\r\n"));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 303"));
  EXPECT_THAT(head, HasSubstr("Location: https://corral.example/login?next=https%3A%2F%2Fcorral."
                              "example%3A8081%2Fsessions%2F7%2Flab%3Fa%3D1\r\n"));
}

TEST_F(SessionGatewayTest, AnOversizedHeadIs431) {
  SessionGatewayOptions options;
  options.max_head_bytes = 1024;
  StartGateway(options);
  Client client(port());
  const auto [head, body] =
      client.Exchange(Get("/sessions/7/", "X-Big: " + std::string(2000, 'x') + "\r\n"));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 431"));
}

// --- WebSockets, caps, timeouts, shutdown, TLS ---------------------------------------------

// A WebSocket handshake as a browser sends it from a page of the gateway's own origin.
std::string Handshake(int port, const std::string& scheme = "http") {
  const std::string host = "127.0.0.1:" + std::to_string(port);
  return Get("/sessions/7/api/kernels/1/channels",
             kAlice + "Origin: " + scheme + "://" + host +
                 "\r\nConnection: keep-alive, Upgrade\r\nUpgrade: websocket\r\n"
                 "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n",
             host);
}

TEST_F(SessionGatewayTest, AWebSocketUpgradeCarriesBytesBothWaysWithoutIdleLimit) {
  FakeApp app(SwitchAndEcho);
  UseApp(app);
  SessionGatewayOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);
  StartGateway(options);
  Client client(port());
  client.Send(Handshake(port()));
  const std::string head = client.Head();
  EXPECT_THAT(head, StartsWith("HTTP/1.1 101 Switching Protocols\r\n"));
  EXPECT_THAT(head, HasSubstr("Upgrade: websocket\r\n"));
  EXPECT_THAT(head, HasSubstr("Connection: Upgrade\r\n"));
  EXPECT_THAT(head, HasSubstr("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"));
  const int uses = directory_.uses;
  client.Send("ping 1");
  EXPECT_EQ(client.Bytes(6), "ping 1");
  // Longer than the idle timeout of plain requests: an upgraded connection stays.
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const std::string frame(100000, 'w');
  client.Send(frame);
  EXPECT_TRUE(client.Bytes(frame.size()) == frame);
  EXPECT_GT(directory_.uses, uses) << "traffic counts as use of the session";
  ASSERT_EQ(app.heads().size(), 1u);
  EXPECT_THAT(app.heads()[0], HasSubstr("Connection: Upgrade\r\nUpgrade: websocket\r\n"));
  EXPECT_THAT(app.heads()[0], HasSubstr("Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"));
  EXPECT_THAT(app.heads()[0], Not(HasSubstr("keep-alive")));
}

TEST_F(SessionGatewayTest, AnAppThatSwitchesProtocolsUnaskedIsA502) {
  FakeApp app(SwitchAndEcho);
  UseApp(app);
  StartGateway();
  Client client(port());
  const auto [head, body] = client.Exchange(Get("/sessions/7/", kAlice));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 502"));
  EXPECT_THAT(body, HasSubstr("unasked"));
}

TEST_F(SessionGatewayTest, CapsConnectionsPerSessionAndInAll) {
  FakeApp app(SwitchAndEcho);
  UseApp(app);
  SessionGatewayOptions options;
  options.max_connections = 2;
  options.max_connections_per_session = 1;
  StartGateway(options);
  Client socket(port());
  socket.Send(Handshake(port()));
  EXPECT_THAT(socket.Head(), StartsWith("HTTP/1.1 101"));
  {
    Client second(port());  // the second connection in all, the session's second
    const auto [head, body] = second.Exchange(Get("/sessions/7/", kAlice));
    EXPECT_THAT(head, StartsWith("HTTP/1.1 503"));
    EXPECT_THAT(head, HasSubstr("Retry-After: 1\r\n"));
    EXPECT_THAT(body, HasSubstr("session 7 has 1 connections open"));
  }
  // `second` counts until its thread has seen it closed; `idle` from its accept on.
  ASSERT_TRUE(OpenConnectionsBecome(1));
  Client idle(port());  // holds the second place in all, sending nothing
  ASSERT_TRUE(OpenConnectionsBecome(2));
  Client third(port());
  const std::string head = third.Exchange(Get("/sessions/9/", kAlice)).first;
  EXPECT_THAT(head, StartsWith("HTTP/1.1 503"));
  EXPECT_THAT(head, HasSubstr("Retry-After: 1\r\n"));
}

TEST_F(SessionGatewayTest, OneAddressCannotHoldManyConnectionsWithoutARequest) {
  FakeApp app(SwitchAndEcho);
  UseApp(app);
  SessionGatewayOptions options;
  options.max_pending_per_address = 2;
  StartGateway(options);
  Client first(port());
  Client second(port());
  {
    Client third(port());  // accepted after the two that send nothing: closed at once
    char buffer[16];
    const ssize_t n = third.Read(buffer, sizeof buffer);
    EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << errno;
  }
  // Once its request head arrived, a connection no longer counts: another gets in.
  first.Send(Handshake(port()));
  EXPECT_THAT(first.Head(), StartsWith("HTTP/1.1 101"));
  {
    Client fourth(port());
    EXPECT_THAT(fourth.Exchange(Get("/sessions/9/", kAlice)).first, StartsWith("HTTP/1.1 404"));
  }
  // Nor does one that was answered without passing (here 401).
  {
    Client refused(port());
    EXPECT_THAT(refused.Exchange(Get("/sessions/7/")).first, StartsWith("HTTP/1.1 401"));
  }
  Client fifth(port());
  EXPECT_THAT(fifth.Exchange(Get("/sessions/9/", kAlice)).first, StartsWith("HTTP/1.1 404"));
}

// Whether a request from a new connection gets through (here 404: no session 9) before
// `limit` has passed: a pending place freed by another connection's thread, which the test
// cannot see, is freed soon after.
bool AdmittedWithin(int port, std::chrono::seconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (std::chrono::steady_clock::now() < deadline) {
    Client client(port);
    if (client.Exchange(Get("/sessions/9/", kAlice)).first.rfind("HTTP/1.1 404", 0) == 0) {
      return true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return false;
}

TEST_F(SessionGatewayTest, APendingPlaceIsFreedWhenItsClientLeavesOrTimesOut) {
  SessionGatewayOptions options;
  options.max_pending_per_address = 1;
  options.head_timeout = std::chrono::milliseconds(300);
  StartGateway(options);
  { Client gone(port()); }  // closes without a request head
  EXPECT_TRUE(AdmittedWithin(port(), std::chrono::seconds(5)));
  // One that sends nothing holds the place until its head times out (408) and it is closed.
  {
    Client silent(port());
    {
      Client refused(port());  // accepted after `silent`: closed at once
      char buffer[16];
      const ssize_t n = refused.Read(buffer, sizeof buffer);
      EXPECT_TRUE(n == 0 || (n < 0 && errno == ECONNRESET)) << n << " " << errno;
    }
    EXPECT_THAT(silent.Head(), StartsWith("HTTP/1.1 408"));
  }
  EXPECT_TRUE(AdmittedWithin(port(), std::chrono::seconds(5)));
}

TEST_F(SessionGatewayTest, AnIdleConnectionIsClosed) {
  FakeApp silent(
      [](FakeApp& self, int, const std::string&, std::string) { self.WaitForRelease(); });
  UseApp(silent);
  SessionGatewayOptions options;
  options.idle_timeout = std::chrono::milliseconds(200);
  StartGateway(options);
  {
    Client client(port());
    const auto [head, body] = client.Exchange(Get("/sessions/7/poll", kAlice));
    EXPECT_THAT(head, StartsWith("HTTP/1.1 502"));
    EXPECT_THAT(body, HasSubstr("did not answer within 0 s"));
  }
  silent.Release();
  FakeApp half([](FakeApp& self, int fd, const std::string&, std::string) {
    SendAll(fd, "HTTP/1.1 200 OK\r\nContent-Length: 10\r\n\r\nhello");
    self.WaitForRelease();
  });
  UseApp(half);
  Client client(port());
  const auto start = std::chrono::steady_clock::now();
  const auto [head, body] = client.Exchange(Get("/sessions/7/slow", kAlice));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
  EXPECT_EQ(body, "hello");  // then closed, idle
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(5));
  half.Release();
}

TEST_F(SessionGatewayTest, AnAppThatIsNotThereIsA502) {
  int closed_port = 0;
  close(ListenOnLoopback(&closed_port));
  directory_.app_port = closed_port;
  StartGateway();
  Client client(port());
  const auto [head, body] = client.Exchange(Get("/sessions/7/", kAlice));
  EXPECT_THAT(head, StartsWith("HTTP/1.1 502"));
  EXPECT_THAT(body, HasSubstr("does not answer on 127.0.0.1:" + std::to_string(closed_port)));
}

TEST_F(SessionGatewayTest, StoppingClosesOpenWebSocketsPromptly) {
  FakeApp app(SwitchAndEcho);
  UseApp(app);
  StartGateway();
  Client client(port());
  client.Send(Handshake(port()));
  ASSERT_THAT(client.Head(), StartsWith("HTTP/1.1 101"));
  client.Send("x");
  ASSERT_EQ(client.Bytes(1), "x");
  const auto start = std::chrono::steady_clock::now();
  gateway_->Stop();
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(2));
  EXPECT_EQ(client.Rest(), "") << "the client sees the connection end";
}

// A self-signed certificate for localhost from the openssl CLI, in `dir`; false when there is
// no CLI.
bool MakeCertificate(const std::filesystem::path& dir) {
  if (std::system("command -v openssl >/dev/null 2>&1") != 0) return false;
  const std::string command =
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -keyout " +
      (dir / "key.pem").string() + " -out " + (dir / "cert.pem").string() + " >/dev/null 2>&1";
  return std::system(command.c_str()) == 0;
}

TEST_F(SessionGatewayTest, SpeaksTlsWithTheServersCertificate) {
  const auto dir =
      std::filesystem::temp_directory_path() / ("corral-gateway-tls-" + std::to_string(getpid()));
  std::filesystem::create_directories(dir);
  if (!MakeCertificate(dir)) GTEST_SKIP() << "no openssl CLI to make a test certificate";
  FakeApp app([](FakeApp& self, int fd, const std::string& head, std::string rest) {
    if (head.find("Upgrade: websocket") != std::string::npos)
      return SwitchAndEcho(self, fd, head, rest);
    AnswerOk(self, fd, head, rest);
  });
  UseApp(app);
  SessionGatewayOptions options;
  options.tls_cert = (dir / "cert.pem").string();
  options.tls_key = (dir / "key.pem").string();
  StartGateway(options);
  EXPECT_THAT(gateway_->url(), StartsWith("https://"));
  SSL_CTX* ctx = SSL_CTX_new(TLS_client_method());
  {
    Client client(port(), ctx);
    const auto [head, body] = client.Exchange(Get("/sessions/7/", kAlice));
    EXPECT_THAT(head, StartsWith("HTTP/1.1 200"));
    EXPECT_EQ(body, "ok");
  }
  {
    Client client(port(), ctx);
    client.Send(Handshake(port(), "https"));
    EXPECT_THAT(client.Head(), StartsWith("HTTP/1.1 101"));
    const std::string frame(300000, 't');
    client.Send(frame);
    EXPECT_TRUE(client.Bytes(frame.size()) == frame);
  }
  ASSERT_GE(app.heads().size(), 1u);
  EXPECT_THAT(app.heads()[0], HasSubstr("X-Forwarded-Proto: https\r\n"));
  {
    Client plain(port());  // plain text to a TLS listener: no answer, closed
    plain.Send(Get("/sessions/7/", kAlice));
    EXPECT_THAT(plain.Rest(), Not(HasSubstr("ok")));
  }
  SSL_CTX_free(ctx);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace corral::server
