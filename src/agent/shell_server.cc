#include "agent/shell_server.h"

#include <dirent.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <poll.h>
#include <pty.h>
#include <pwd.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/proc_stat.h"
#include "common/strings.h"
#include "common/websocket_frame.h"
#include "model/session.h"
#include "protocol/shell_messages.h"

namespace corral::agent {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxRequestHead = 16 * 1024;
constexpr auto kHeadTimeout = std::chrono::seconds(10);
// SIGHUP -> SIGKILL for the shell's session. Clearly shorter than the agent's kill grace (SIGTERM
// -> SIGKILL for the task, 10 s by default: the server's --kill-grace), so that a cancelled job's
// server outlives its shell's session: on a node without cgroups that session (forkpty's setsid
// puts it outside the task's process group) is not reached by the agent's kill.
constexpr auto kHangUpGrace = std::chrono::seconds(5);
// How long the shell's last output may take to reach the pty's master once the shell has ended,
// and how long at most it is relayed while its background jobs go on writing.
constexpr auto kDrainQuiet = std::chrono::milliseconds(50);
constexpr auto kDrainMax = std::chrono::seconds(1);
// Pings the client may leave unanswered: one more and it is taken for gone (a dead connection
// that no packet reports, e.g. a laptop that went to sleep).
constexpr int kMaxMissedPongs = 2;
// Bytes for the shell not yet written to the pty past which the client is not read.
constexpr size_t kMaxPendingInput = 256 * 1024;

struct ShellServerFlags {
  int attach_timeout_s = 300;
  int ping_interval_s = 30;
  std::vector<std::string> command;
};

// The write end of the pipe that signal handlers write the signal's number to (the self-pipe
// trick): the relay and the accept loop wait on its read end.
int g_signal_pipe = -1;

void OnSignal(int signal_number) {
  const int saved = errno;
  const char byte = static_cast<char>(signal_number);
  (void)!write(g_signal_pipe, &byte, 1);
  errno = saved;
}

// Signals that end the server (the agent cancelling the job): the shell is hung up.
bool EndsTheServer(int signal_number) {
  return signal_number == SIGTERM || signal_number == SIGINT || signal_number == SIGHUP;
}

// The catchable signals whose default would end the server, other than those above: they are
// passed on to the shell (`corral shell --signal`, a time limit's warning), since the agent sends
// them to the task's process group, which the server leads. Real-time signals too.
std::vector<int> ForwardedSignals() {
  std::vector<int> out = {SIGQUIT, SIGUSR1, SIGUSR2, SIGALRM, SIGVTALRM, SIGPROF, SIGPWR};
  for (int s = SIGRTMIN; s <= SIGRTMAX; ++s) out.push_back(s);
  return out;
}

// The signals written to the self-pipe since it was last read, oldest first.
std::vector<int> ReadSignals(int fd) {
  std::vector<int> out;
  char buffer[64];
  ssize_t n = 0;
  while ((n = read(fd, buffer, sizeof(buffer))) > 0 || (n < 0 && errno == EINTR)) {
    for (ssize_t i = 0; i < n; ++i) out.push_back(static_cast<unsigned char>(buffer[i]));
  }
  return out;
}

// The live (not zombie) processes of session `sid`, from /proc.
std::vector<pid_t> SessionMembers(pid_t sid) {
  std::vector<pid_t> out;
  DIR* proc = opendir("/proc");
  if (proc == nullptr) return out;
  while (const dirent* entry = readdir(proc)) {
    const pid_t pid = static_cast<pid_t>(std::atoi(entry->d_name));
    if (pid <= 0) continue;
    auto stat = ReadProcStat(pid);
    if (stat.ok() && stat->session == sid && stat->state != 'Z' && stat->state != 'X') {
      out.push_back(pid);
    }
  }
  closedir(proc);
  return out;
}

// `signal_number` to every process of session `sid` (its process groups are not all `sid`: a
// shell with job control puts each job in its own).
void SignalSession(pid_t sid, int signal_number) {
  kill(-sid, signal_number);
  for (pid_t pid : SessionMembers(sid)) kill(pid, signal_number);
}

int MillisecondsUntil(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

bool SendAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = send(fd, data.data(), data.size(), MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

void Answer(int fd, int status, std::string_view reason, std::string_view detail) {
  const std::string body = std::string(detail) + "\n";
  (void)SendAll(fd, "HTTP/1.1 " + std::to_string(status) + " " + std::string(reason) +
                        "\r\nContent-Type: text/plain\r\nContent-Length: " +
                        std::to_string(body.size()) + "\r\nConnection: close\r\n\r\n" + body);
}

// Compares without stopping at the first difference (the session's secret).
bool SameSecret(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

struct RequestHead {
  std::string method, target;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case

  std::string Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (n == name) return v;
    }
    return "";
  }
};

// Reads a request head from `fd` within kHeadTimeout (at most kMaxRequestHead); the bytes read
// past it go to `rest`. nullopt: the connection failed, was too slow, or sent no HTTP head.
std::optional<RequestHead> ReadHead(int fd, std::string* rest) {
  const Clock::time_point deadline = Clock::now() + kHeadTimeout;
  std::string buffer;
  size_t end = std::string::npos;
  while ((end = buffer.find("\r\n\r\n")) == std::string::npos) {
    if (buffer.size() > kMaxRequestHead) return std::nullopt;
    pollfd p{fd, POLLIN, 0};
    const int ready = poll(&p, 1, MillisecondsUntil(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) return std::nullopt;
    char chunk[4096];
    const ssize_t n = recv(fd, chunk, sizeof(chunk), 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return std::nullopt;
    buffer.append(chunk, static_cast<size_t>(n));
  }
  *rest = buffer.substr(end + 4);
  std::vector<std::string> lines = Split(buffer.substr(0, end), '\n');
  RequestHead head;
  std::vector<std::string> first = Split(std::string(Trim(lines[0])), ' ');
  if (first.size() != 3) return std::nullopt;
  head.method = first[0];
  head.target = first[1];
  for (size_t i = 1; i < lines.size(); ++i) {
    const size_t colon = lines[i].find(':');
    if (colon == std::string::npos) return std::nullopt;
    head.headers.emplace_back(Lower(Trim(lines[i].substr(0, colon))),
                              std::string(Trim(lines[i].substr(colon + 1))));
  }
  return head;
}

bool HasToken(const std::string& list, std::string_view token) {
  for (const std::string& item : Split(list, ',')) {
    if (Lower(Trim(item)) == token) return true;
  }
  return false;
}

// Checks a handshake (file comment); answers and returns false when it is refused.
bool AcceptHandshake(int fd, const RequestHead& head, const std::string& prefix,
                     const std::string& secret) {
  const std::string path = head.target.substr(0, head.target.find('?'));
  if (path != prefix) {
    Answer(fd, 404, "Not Found", "the shell is served at " + prefix);
    return false;
  }
  const std::string authorization = head.Header("authorization");
  if (!SameSecret(authorization, "token " + secret)) {
    Answer(fd, 401, "Unauthorized", "the session's token is required");
    return false;
  }
  const std::string key = head.Header("sec-websocket-key");
  if (head.method != "GET" || !HasToken(head.Header("connection"), "upgrade") ||
      Lower(head.Header("upgrade")) != "websocket" ||
      head.Header("sec-websocket-version") != "13" || key.empty() || key.size() > 64) {
    Answer(fd, 400, "Bad Request", "a WebSocket handshake (version 13) is required");
    return false;
  }
  return SendAll(fd,
                 "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\nConnection: "
                 "Upgrade\r\nSec-WebSocket-Accept: " +
                     WebSocketAccept(key) + "\r\n\r\n");
}

// Listens on `port` (all interfaces, IPv6 and IPv4); -1 with a message on stderr on failure.
int Listen(int port) {
  int fd = socket(AF_INET6, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd >= 0) {
    const int off = 0, on = 1;
    setsockopt(fd, IPPROTO_IPV6, IPV6_V6ONLY, &off, sizeof(off));
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_in6 a{};
    a.sin6_family = AF_INET6;
    a.sin6_addr = in6addr_any;
    a.sin6_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 8) == 0) return fd;
    close(fd);
  }
  fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);  // a host without IPv6
  if (fd >= 0) {
    const int on = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof(on));
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_ANY);
    a.sin_port = htons(static_cast<uint16_t>(port));
    if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 && listen(fd, 8) == 0) return fd;
    std::cerr << "corral shell: cannot listen on port " << port << ": " << std::strerror(errno)
              << "\n";
    close(fd);
  }
  return -1;
}

enum class Waited { kClient, kTimedOut, kSignalled };

// Accepts connections until one is a good handshake (its socket in `*client`, the bytes past the
// head in `*rest`), the deadline passes, or a signal comes.
Waited WaitForClient(int listener, int signals, Clock::time_point deadline,
                     const std::string& prefix, const std::string& secret, int* client,
                     std::string* rest) {
  while (true) {
    pollfd p[2] = {{listener, POLLIN, 0}, {signals, POLLIN, 0}};
    const int ready = poll(p, 2, MillisecondsUntil(deadline));
    if (ready < 0 && errno == EINTR) continue;
    if (ready == 0) return Waited::kTimedOut;
    if (p[1].revents != 0) {
      // A forwarded signal before there is a shell goes nowhere.
      const std::vector<int> arrived = ReadSignals(signals);
      if (std::any_of(arrived.begin(), arrived.end(), EndsTheServer)) return Waited::kSignalled;
      continue;
    }
    const int fd = accept4(listener, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) continue;
    // One connection at a time: the gateway opens one per attempt, and a second client must not
    // hold the first one's place for longer than kHeadTimeout.
    std::optional<RequestHead> head = ReadHead(fd, rest);
    if (head && AcceptHandshake(fd, *head, prefix, secret)) {
      *client = fd;
      return Waited::kClient;
    }
    close(fd);
  }
}

// The program the pty runs: `command`, or the login shell (file comment). Runs in the child.
[[noreturn]] void ExecShell(const std::vector<std::string>& command) {
  unsetenv(model::kSessionTokenEnv);
  std::vector<std::string> argv = command;
  std::string program;
  if (argv.empty()) {
    const passwd* pw = getpwuid(getuid());
    for (const std::string& candidate :
         {std::string(pw != nullptr && pw->pw_shell != nullptr ? pw->pw_shell : ""),
          std::string("/bin/bash"), std::string("/bin/sh")}) {
      if (!candidate.empty() && access(candidate.c_str(), X_OK) == 0) {
        program = candidate;
        break;
      }
    }
    if (program.empty()) program = "/bin/sh";
    setenv("SHELL", program.c_str(), 1);
    argv = {"-" + program.substr(program.rfind('/') + 1)};  // a login shell
  } else {
    program = argv[0];
  }
  std::vector<char*> args;
  for (std::string& a : argv) args.push_back(a.data());
  args.push_back(nullptr);
  execvp(program.c_str(), args.data());
  std::cerr << "corral shell: cannot run " << program << ": " << std::strerror(errno) << "\r\n";
  _exit(127);
}

// The relay between the client (a WebSocket) and the shell's pty (file comment).
class Relay {
 public:
  Relay(int client, int master, pid_t shell, int signals, std::chrono::seconds ping_interval)
      : client_(client),
        master_(master),
        shell_(shell),
        signals_(signals),
        ping_interval_(ping_interval),
        next_ping_(Clock::now() + ping_interval) {}

  // Relays until the shell ends or the client goes; returns the shell's exit code.
  int Run(const std::string& already_read) {
    decoder_.Append(already_read);
    if (!DecodeFrames()) return HangUp();
    while (true) {
      pollfd p[3] = {{master_, POLLIN, 0}, {client_, 0, 0}, {signals_, POLLIN, 0}};
      if (!pending_.empty()) p[0].events |= POLLOUT;
      if (pending_.size() < kMaxPendingInput) p[1].events |= POLLIN;
      const int ready = poll(p, 3, MillisecondsUntil(next_ping_));
      if (ready < 0 && errno == EINTR) continue;
      if (ready == 0) {
        if (!Ping()) return HangUp();
        continue;
      }
      if (ready < 0) return HangUp();
      if (p[2].revents != 0) {
        for (int s : ReadSignals(signals_)) {
          if (EndsTheServer(s)) return HangUp();
          if (s != SIGCHLD) {
            Forward(s);
          } else if (waitpid(shell_, &status_, WNOHANG) == shell_) {
            reaped_ = true;
            return ShellExited();
          }
        }
      }
      if ((p[0].revents & POLLOUT) != 0) WritePending();
      if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !ReadShell()) {
        return client_gone_ ? HangUp() : Ended();
      }
      if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 && !ReadClient()) return HangUp();
    }
  }

 private:
  // Terminal bytes to the client; false when the shell's side of the pty is closed (it ended).
  bool ReadShell() {
    char buffer[16 * 1024];  // < protocol::kMaxShellFrame
    const ssize_t n = read(master_, buffer, sizeof(buffer));
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;  // EIO: no process holds the pty any more
    const std::string frame = EncodeWebSocketFrame(
        WebSocketOpcode::kBinary, std::string_view(buffer, static_cast<size_t>(n)));
    if (SendAll(client_, frame)) return true;
    client_gone_ = true;
    return false;
  }

  void WritePending() {
    const ssize_t n = write(master_, pending_.data(), pending_.size());
    if (n > 0) pending_.erase(0, static_cast<size_t>(n));
  }

  // False when the client went away or broke the protocol.
  bool ReadClient() {
    char buffer[16 * 1024];
    const ssize_t n = recv(client_, buffer, sizeof(buffer), 0);
    if (n < 0 && (errno == EINTR || errno == EAGAIN)) return true;
    if (n <= 0) return false;
    decoder_.Append(std::string_view(buffer, static_cast<size_t>(n)));
    return DecodeFrames();
  }

  bool DecodeFrames() {
    while (true) {
      auto frame = decoder_.Next();
      if (!frame.ok()) {
        const uint16_t code = frame.status().code() == StatusCode::kResourceExhausted ? 1009 : 1002;
        Close(code, frame.status().message());
        return false;
      }
      if (!*frame) return true;
      WebSocketFrame& f = **frame;
      switch (f.opcode) {
        case WebSocketOpcode::kBinary:
          pending_ += f.payload;
          WritePending();
          break;
        case WebSocketOpcode::kText: {
          auto size = protocol::ParseResizeMessage(f.payload);
          if (!size.ok()) {
            Close(1002, size.status().message());
            return false;
          }
          winsize w{};
          w.ws_col = static_cast<unsigned short>(size->cols);
          w.ws_row = static_cast<unsigned short>(size->rows);
          ioctl(master_, TIOCSWINSZ, &w);  // the kernel sends the shell SIGWINCH
          break;
        }
        case WebSocketOpcode::kPing:
          (void)SendAll(client_, EncodeWebSocketFrame(WebSocketOpcode::kPong, f.payload));
          break;
        case WebSocketOpcode::kPong:
          unanswered_pings_ = 0;
          break;
        case WebSocketOpcode::kClose:
          Close(1000, "");
          return false;
      }
    }
  }

  void Close(uint16_t code, std::string_view reason) {
    if (client_gone_) return;
    (void)SendAll(client_, EncodeWebSocketFrame(WebSocketOpcode::kClose,
                                                WebSocketClosePayload(code, reason)));
    client_gone_ = true;
  }

  // Pings the client every ping_interval_; false when it left kMaxMissedPongs unanswered.
  bool Ping() {
    if (unanswered_pings_ >= kMaxMissedPongs) {
      client_gone_ = true;
      return false;
    }
    ++unanswered_pings_;
    next_ping_ = Clock::now() + ping_interval_;
    if (SendAll(client_, EncodeWebSocketFrame(WebSocketOpcode::kPing, ""))) return true;
    client_gone_ = true;
    return false;
  }

  // A signal for the shell: to the pty's foreground process group (the command running in the
  // shell, or the shell at its prompt), else to the shell's own.
  void Forward(int signal_number) {
    const pid_t group = tcgetpgrp(master_);
    kill(group > 0 ? -group : -shell_, signal_number);
  }

  // The client went away or a signal came: the shell's session is hung up.
  int HangUp() {
    EndSession();
    // A client still there (the server was signalled) learns how the shell ended.
    return Report(ExitCode(status_));
  }

  // The shell ended (reaped) while its background jobs may still hold the pty: what it wrote is
  // relayed, the client learns its code, and the rest of its session is hung up.
  int ShellExited() {
    const Clock::time_point deadline = Clock::now() + kDrainMax;
    while (!client_gone_) {
      pollfd p{master_, POLLIN, 0};
      const int wait_ms = static_cast<int>(std::min<int64_t>(
          MillisecondsUntil(deadline),
          std::chrono::duration_cast<std::chrono::milliseconds>(kDrainQuiet).count()));
      const int ready = poll(&p, 1, wait_ms);
      if (ready < 0 && errno == EINTR) continue;
      if (ready <= 0 || !ReadShell()) break;
    }
    const int code = Report(ExitCode(status_));
    EndSession();
    return code;
  }

  // The shell's side of the pty is closed: the rest of its output was read; its code goes to the
  // client.
  int Ended() {
    while (waitpid(shell_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
    const int code = Report(ExitCode(status_));
    EndSession();
    return code;
  }

  // Hangs up the shell's session: the pty closes, SIGHUP (and SIGCONT, for stopped jobs) to each
  // of its processes, SIGKILL to those left after kHangUpGrace; the shell is reaped (status_).
  void EndSession() {
    if (master_ >= 0) close(master_);  // the kernel hangs up the pty
    master_ = -1;
    SignalSession(shell_, SIGHUP);
    SignalSession(shell_, SIGCONT);
    const Clock::time_point deadline = Clock::now() + kHangUpGrace;
    while (true) {
      if (!reaped_) {
        const pid_t r = waitpid(shell_, &status_, WNOHANG);
        if (r == shell_ || (r < 0 && errno != EINTR)) reaped_ = true;
        if (r < 0 && errno != EINTR) status_ = SIGHUP;  // reads as ended by SIGHUP
      }
      if (reaped_ && SessionMembers(shell_).empty()) return;
      if (Clock::now() >= deadline) break;
      pollfd none{-1, 0, 0};
      poll(&none, 0, 20);  // a wait with a timeout
    }
    SignalSession(shell_, SIGKILL);
    while (!reaped_ && waitpid(shell_, &status_, 0) < 0 && errno == EINTR) {
    }
    reaped_ = true;
  }

  // Tells the client (if still there) how the shell ended, closes, and returns its code.
  int Report(const protocol::ShellExit& exit) {
    if (!client_gone_) {
      (void)SendAll(client_,
                    EncodeWebSocketFrame(WebSocketOpcode::kText, protocol::ExitMessage(exit)));
      Close(1000, "");
    }
    return exit.code;
  }

  static protocol::ShellExit ExitCode(int status) {
    if (WIFSIGNALED(status)) return {128 + WTERMSIG(status), WTERMSIG(status)};
    return {WIFEXITED(status) ? WEXITSTATUS(status) : 1, std::nullopt};
  }

  int client_;
  int master_;
  pid_t shell_;
  int signals_;
  std::chrono::seconds ping_interval_;
  Clock::time_point next_ping_;
  int unanswered_pings_ = 0;
  bool reaped_ = false;
  int status_ = 0;  // the shell's wait status, once reaped_
  bool client_gone_ = false;
  std::string pending_;  // bytes for the shell not yet written to the pty
  WebSocketDecoder decoder_{WebSocketPeer::kClient, protocol::kMaxShellFrame};
};

int RunShellServer(const ShellServerFlags& f) {
  const char* port_text = std::getenv(model::kSessionPortEnv);
  const char* prefix = std::getenv(model::kSessionUrlPrefixEnv);
  const char* secret = std::getenv(model::kSessionTokenEnv);
  const int port = port_text != nullptr ? std::atoi(port_text) : 0;
  if (port < 1 || port > 65535 || prefix == nullptr || secret == nullptr) {
    std::cerr << "corral shell: " << kShellServerCommand
              << " runs in an interactive shell's task (it needs the CORRAL_SESSION_* "
                 "variables)\n";
    return 2;
  }
  int pipe_fds[2];
  if (pipe2(pipe_fds, O_CLOEXEC | O_NONBLOCK) != 0) return 1;
  g_signal_pipe = pipe_fds[1];
  struct sigaction action {};
  action.sa_handler = OnSignal;
  sigemptyset(&action.sa_mask);
  // SIGCHLD: the shell ended, though its background jobs may keep the pty open.
  for (int s : {SIGTERM, SIGINT, SIGHUP, SIGCHLD}) sigaction(s, &action, nullptr);
  for (int s : ForwardedSignals()) sigaction(s, &action, nullptr);
  signal(SIGPIPE, SIG_IGN);

  const int listener = Listen(port);
  if (listener < 0) return 1;
  int client = -1;
  std::string rest;
  const Waited waited =
      WaitForClient(listener, pipe_fds[0], Clock::now() + std::chrono::seconds(f.attach_timeout_s),
                    prefix, secret, &client, &rest);
  close(listener);
  if (waited == Waited::kTimedOut) {
    std::cerr << "corral shell: no client attached within " << f.attach_timeout_s
              << " s: the shell ends\n";
    return 1;
  }
  if (waited == Waited::kSignalled) return 129;

  winsize size{};
  size.ws_col = 80;
  size.ws_row = 24;
  int master = -1;
  const pid_t shell = forkpty(&master, nullptr, nullptr, &size);
  if (shell < 0) {
    std::cerr << "corral shell: cannot open a pty: " << std::strerror(errno) << "\n";
    const std::string message = protocol::ExitMessage({1, std::nullopt});
    (void)SendAll(client, EncodeWebSocketFrame(WebSocketOpcode::kText, message));
    return 1;
  }
  if (shell == 0) {
    signal(SIGPIPE, SIG_DFL);  // exec resets handled signals, not ignored ones
    ExecShell(f.command);
  }
  fcntl(master, F_SETFL, fcntl(master, F_GETFL) | O_NONBLOCK);
  const int code =
      Relay(client, master, shell, pipe_fds[0], std::chrono::seconds(f.ping_interval_s)).Run(rest);
  shutdown(client, SHUT_WR);
  close(client);
  return code;
}

}  // namespace

std::string WebSocketAccept(const std::string& key) {
  const std::string text = key + "258EAFA5-E914-47DA-95CA-C5AB0DC85B11";  // RFC 6455's GUID
  unsigned char digest[SHA_DIGEST_LENGTH];
  SHA1(reinterpret_cast<const unsigned char*>(text.data()), text.size(), digest);
  unsigned char encoded[4 * ((SHA_DIGEST_LENGTH + 2) / 3) + 1];
  const int n = EVP_EncodeBlock(encoded, digest, SHA_DIGEST_LENGTH);
  return std::string(reinterpret_cast<char*>(encoded), static_cast<size_t>(n));
}

void AddShellServerCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ShellServerFlags>();
  CLI::App* c = app.add_subcommand(kShellServerCommand, "The pty server of `corral shell`");
  c->group("");  // hidden: the agent runs it
  c->add_option("--attach-timeout", f->attach_timeout_s,
                "Seconds to wait for a client before ending")
      ->check(CLI::Range(1, 86400));
  c->add_option("--ping-interval", f->ping_interval_s,
                "Seconds between pings to the client; two unanswered hang the shell up")
      ->check(CLI::Range(1, 3600));
  c->add_option("command", f->command, "The program and its arguments, after --");
  c->callback([f, exit_code] { *exit_code = RunShellServer(*f); });
}

}  // namespace corral::agent
