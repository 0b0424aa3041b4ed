#include "agent/shell_server.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "agent/proc_stat.h"
#include "common/websocket_frame.h"
#include "protocol/shell_messages.h"

namespace corral::agent {
namespace {

using Clock = std::chrono::steady_clock;

const std::string kSecret(64, 'b');
constexpr char kKey[] = "dGhlIHNhbXBsZSBub25jZQ==";

TEST(ShellServerTest, HandshakeAcceptIsTheRfcsExample) {
  // RFC 6455, section 1.3.
  EXPECT_EQ(WebSocketAccept(kKey), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

int FreePort() {
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t size = sizeof(a);
  getsockname(fd, reinterpret_cast<sockaddr*>(&a), &size);
  close(fd);
  return ntohs(a.sin_port);
}

// `corral-daemon __shell ARGS` with the session variables of job 7 on `port`.
pid_t StartServer(int port, const std::vector<std::string>& args) {
  const pid_t pid = fork();
  if (pid == 0) {
    setenv("CORRAL_SESSION_PORT", std::to_string(port).c_str(), 1);
    setenv("CORRAL_SESSION_URL_PREFIX", "/sessions/7/", 1);
    setenv("CORRAL_SESSION_TOKEN", kSecret.c_str(), 1);
    std::vector<std::string> argv = {CORRAL_BINARY, kShellServerCommand};
    argv.insert(argv.end(), args.begin(), args.end());
    std::vector<char*> raw;
    for (std::string& a : argv) raw.push_back(a.data());
    raw.push_back(nullptr);
    execv(CORRAL_BINARY, raw.data());
    _exit(127);
  }
  return pid;
}

// A connection to the server, once it listens (within 10 s); -1 if it never does.
int Connect(int port) {
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0) return fd;
    close(fd);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));  // polling for the listener
  }
  return -1;
}

// Everything the server sends until it closes the connection (at most 10 s).
std::string ReadAll(int fd) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

int ExitCodeOf(pid_t pid) {
  int status = 0;
  waitpid(pid, &status, 0);
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

std::string Handshake(const std::string& path, const std::string& token) {
  return "GET " + path + " HTTP/1.1\r\nHost: x\r\nAuthorization: token " + token +
         "\r\nConnection: Upgrade\r\nUpgrade: websocket\r\nSec-WebSocket-Version: 13\r\n"
         "Sec-WebSocket-Key: " +
         kKey + "\r\n\r\n";
}

TEST(ShellServerTest, RefusesStrangersThenRunsTheCommandForTheSessionsClient) {
  const int port = FreePort();
  const pid_t server =
      StartServer(port, {"--", "sh", "-c", "read line; echo \"got $line\"; exit 7"});
  // A wrong token, a wrong path, a request that is no handshake: refused, and it goes on.
  for (const auto& [request, status] : std::vector<std::pair<std::string, std::string>>{
           {Handshake("/sessions/7/", std::string(64, 'c')), "401"},
           {Handshake("/sessions/8/", kSecret), "404"},
           {"GET /sessions/7/ HTTP/1.1\r\nAuthorization: token " + kSecret + "\r\n\r\n", "400"}}) {
    const int fd = Connect(port);
    ASSERT_GE(fd, 0);
    ASSERT_EQ(send(fd, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
    EXPECT_EQ(ReadAll(fd).substr(9, 3), status) << request;
    close(fd);
  }
  const int fd = Connect(port);
  ASSERT_GE(fd, 0);
  const std::string hello =
      Handshake("/sessions/7/", kSecret) +
      EncodeWebSocketFrame(WebSocketOpcode::kText, protocol::ResizeMessage({100, 30}), 1u) +
      EncodeWebSocketFrame(WebSocketOpcode::kBinary, "hello\n", 2u);
  ASSERT_EQ(send(fd, hello.data(), hello.size(), 0), static_cast<ssize_t>(hello.size()));
  const std::string answer = ReadAll(fd);
  close(fd);
  const size_t head = answer.find("\r\n\r\n");
  ASSERT_NE(head, std::string::npos) << answer;
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 101");
  EXPECT_NE(answer.find("Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo="), std::string::npos);
  WebSocketDecoder decoder(WebSocketPeer::kServer, protocol::kMaxShellFrame);
  decoder.Append(answer.substr(head + 4));
  std::string terminal;
  std::optional<protocol::ShellExit> exit;
  bool closed = false;
  while (true) {
    auto frame = decoder.Next();
    ASSERT_TRUE(frame.ok()) << frame.status().message();
    if (!*frame) break;
    if ((*frame)->opcode == WebSocketOpcode::kBinary) terminal += (*frame)->payload;
    if ((*frame)->opcode == WebSocketOpcode::kText) {
      auto parsed = protocol::ParseExitMessage((*frame)->payload);
      ASSERT_TRUE(parsed.ok());
      exit = *parsed;
    }
    if ((*frame)->opcode == WebSocketOpcode::kClose) closed = true;
  }
  EXPECT_NE(terminal.find("got hello"), std::string::npos) << terminal;
  ASSERT_TRUE(exit.has_value());
  EXPECT_EQ(exit->code, 7);
  EXPECT_TRUE(closed);
  EXPECT_EQ(ExitCodeOf(server), 7);
}

// What the server sent after its handshake's answer: the terminal's bytes, the exit message.
struct Transcript {
  std::string terminal;
  std::optional<protocol::ShellExit> exit;
};

Transcript Decode(const std::string& answer) {
  Transcript out;
  const size_t head = answer.find("\r\n\r\n");
  EXPECT_EQ(answer.substr(0, 12), "HTTP/1.1 101") << answer;
  if (head == std::string::npos) return out;
  WebSocketDecoder decoder(WebSocketPeer::kServer, protocol::kMaxShellFrame);
  decoder.Append(answer.substr(head + 4));
  while (true) {
    auto frame = decoder.Next();
    EXPECT_TRUE(frame.ok()) << frame.status().message();
    if (!frame.ok() || !*frame) return out;
    if ((*frame)->opcode == WebSocketOpcode::kBinary) out.terminal += (*frame)->payload;
    if ((*frame)->opcode == WebSocketOpcode::kText) {
      auto parsed = protocol::ParseExitMessage((*frame)->payload);
      EXPECT_TRUE(parsed.ok());
      if (parsed.ok()) out.exit = *parsed;
    }
  }
}

// A client attached to a server running `command` on `port` (-1 if it never listens).
int Attach(int port) {
  const int fd = Connect(port);
  if (fd < 0) return -1;
  const std::string hello = Handshake("/sessions/7/", kSecret);
  if (send(fd, hello.data(), hello.size(), 0) != static_cast<ssize_t>(hello.size())) return -1;
  return fd;
}

// What the server sends until `needle` shows (at most 10 s).
std::string ReadUntil(int fd, const std::string& needle) {
  std::string out;
  const auto deadline = Clock::now() + std::chrono::seconds(10);
  while (Clock::now() < deadline && out.find(needle) == std::string::npos) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 100) <= 0) continue;
    char buffer[4096];
    const ssize_t n = recv(fd, buffer, sizeof(buffer), 0);
    if (n <= 0) break;
    out.append(buffer, static_cast<size_t>(n));
  }
  return out;
}

// The pid the terminal shows after "job " (a background job's $!).
pid_t JobPid(const std::string& terminal) {
  const size_t at = terminal.find("job ");
  return at == std::string::npos ? 0 : static_cast<pid_t>(std::atoi(terminal.c_str() + at + 4));
}

bool IsLive(pid_t pid) {
  auto stat = ReadProcStat(pid);
  return stat.ok() && stat->state != 'Z' && stat->state != 'X';
}

TEST(ShellServerTest, TheShellsExitEndsItThoughABackgroundJobHoldsThePty) {
  const int port = FreePort();
  const pid_t server = StartServer(port, {"--", "sh", "-c", "sleep 600 & echo \"job $!\"; exit 4"});
  const int fd = Attach(port);
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  const Transcript t = Decode(ReadAll(fd));
  close(fd);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(4));  // not the hang-up grace, not 600 s
  ASSERT_TRUE(t.exit.has_value()) << t.terminal;
  EXPECT_EQ(t.exit->code, 4);
  EXPECT_EQ(ExitCodeOf(server), 4);
  const pid_t job = JobPid(t.terminal);
  ASSERT_GT(job, 0) << t.terminal;
  EXPECT_FALSE(IsLive(job));  // hung up with the shell's session
}

TEST(ShellServerTest, OtherSignalsReachTheShellAndTheServerSurvives) {
  const int port = FreePort();
  const pid_t server = StartServer(
      port,
      {"--", "sh", "-c", "trap 'echo warned; exit 5' USR1; echo ready; while :; do sleep 1; done"});
  const int fd = Attach(port);
  ASSERT_GE(fd, 0);
  std::string answer = ReadUntil(fd, "ready");
  ASSERT_NE(answer.find("ready"), std::string::npos) << answer;
  kill(server, SIGUSR1);  // as the agent's `corral shell --signal USR1@90` does
  answer += ReadAll(fd);
  close(fd);
  const Transcript t = Decode(answer);
  EXPECT_NE(t.terminal.find("warned"), std::string::npos) << t.terminal;
  ASSERT_TRUE(t.exit.has_value()) << t.terminal;
  EXPECT_EQ(t.exit->code, 5);
  EXPECT_EQ(ExitCodeOf(server), 5);
}

TEST(ShellServerTest, TerminatingItKillsTheShellsWholeSessionAfterTheGrace) {
  const int port = FreePort();
  const pid_t server =
      StartServer(port, {"--", "sh", "-c", "trap '' HUP; sleep 600 & echo \"job $! ready\"; wait"});
  const int fd = Attach(port);
  ASSERT_GE(fd, 0);
  std::string answer = ReadUntil(fd, "ready");
  ASSERT_NE(answer.find("ready"), std::string::npos) << answer;
  const auto start = Clock::now();
  kill(server, SIGTERM);  // the agent cancelling the job; the shell and its job ignore SIGHUP
  answer += ReadAll(fd);
  close(fd);
  const Transcript t = Decode(answer);
  ASSERT_TRUE(t.exit.has_value()) << t.terminal;
  EXPECT_EQ(t.exit->code, 128 + SIGKILL);
  EXPECT_EQ(ExitCodeOf(server), 128 + SIGKILL);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(9));  // within the agent's kill grace
  const pid_t job = JobPid(t.terminal);
  ASSERT_GT(job, 0) << t.terminal;
  EXPECT_FALSE(IsLive(job));
}

TEST(ShellServerTest, AClientLeavingTwoPingsUnansweredHangsTheShellUp) {
  const int port = FreePort();
  const pid_t server = StartServer(port, {"--ping-interval", "1", "--", "sleep", "600"});
  const int fd = Attach(port);
  ASSERT_GE(fd, 0);
  const auto start = Clock::now();
  const std::string answer = ReadAll(fd);  // and never a pong
  close(fd);
  EXPECT_LT(Clock::now() - start, std::chrono::seconds(8));
  const size_t head = answer.find("\r\n\r\n");
  ASSERT_NE(head, std::string::npos) << answer;
  WebSocketDecoder decoder(WebSocketPeer::kServer, protocol::kMaxShellFrame);
  decoder.Append(answer.substr(head + 4));
  int pings = 0;
  while (true) {
    auto frame = decoder.Next();
    ASSERT_TRUE(frame.ok()) << frame.status().message();
    if (!*frame) break;
    if ((*frame)->opcode == WebSocketOpcode::kPing) ++pings;
  }
  EXPECT_EQ(pings, 2);
  EXPECT_EQ(ExitCodeOf(server), 128 + SIGHUP);
}

TEST(ShellServerTest, NobodyAttachingEndsItAfterTheAttachTimeout) {
  const pid_t server = StartServer(FreePort(), {"--attach-timeout", "1", "--", "true"});
  EXPECT_EQ(ExitCodeOf(server), 1);
}

}  // namespace
}  // namespace corral::agent
