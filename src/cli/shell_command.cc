#include "cli/shell_command.h"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <iostream>
#include <optional>
#include <random>
#include <string>
#include <thread>

#include "common/websocket_frame.h"
#include "model/states.h"
#include "protocol/api_session.h"
#include "protocol/shell_messages.h"

namespace corral::cli {

namespace {

using nlohmann::json;

constexpr auto kPollInterval = std::chrono::milliseconds(500);
constexpr unsigned char kEndOfTransmission = 0x04;  // Ctrl-D
constexpr auto kEndOfInputRepeat = std::chrono::milliseconds(500);

// The pipe that the signal handlers write the signal's number to (the self-pipe trick).
int g_signal_pipe[2] = {-1, -1};

void OnSignal(int signal) {
  const int saved = errno;
  const char byte = static_cast<char>(signal);
  (void)!write(g_signal_pipe[1], &byte, 1);
  errno = saved;
}

// Catches `signals` into g_signal_pipe for its lifetime, then puts back what was there.
class CaughtSignals {
 public:
  explicit CaughtSignals(std::initializer_list<int> signals) {
    if (g_signal_pipe[0] < 0 && pipe2(g_signal_pipe, O_CLOEXEC | O_NONBLOCK) != 0) return;
    struct sigaction action {};
    action.sa_handler = OnSignal;
    sigemptyset(&action.sa_mask);
    for (int s : signals) {
      struct sigaction old {};
      sigaction(s, &action, &old);
      saved_.emplace_back(s, old);
    }
  }
  ~CaughtSignals() {
    for (const auto& [s, old] : saved_) sigaction(s, &old, nullptr);
  }
  CaughtSignals(const CaughtSignals&) = delete;
  CaughtSignals& operator=(const CaughtSignals&) = delete;

  // The next signal caught, if any (does not wait).
  static std::optional<int> Take() {
    char byte = 0;
    if (read(g_signal_pipe[0], &byte, 1) == 1) return static_cast<unsigned char>(byte);
    return std::nullopt;
  }
  static int fd() { return g_signal_pipe[0]; }

 private:
  std::vector<std::pair<int, struct sigaction>> saved_;
};

// The local terminal in raw mode while it lives (when stdin is a tty), put back as it was by the
// destructor, which every way out of the relay passes (signals come through the self-pipe).
class RawTerminal {
 public:
  RawTerminal() {
    if (!isatty(STDIN_FILENO) || tcgetattr(STDIN_FILENO, &saved_) != 0) return;
    termios raw = saved_;
    cfmakeraw(&raw);
    // TCSADRAIN, not TCSAFLUSH: what was typed while waiting goes to the shell.
    raw_ = tcsetattr(STDIN_FILENO, TCSADRAIN, &raw) == 0;
  }
  ~RawTerminal() {
    if (raw_) tcsetattr(STDIN_FILENO, TCSADRAIN, &saved_);
  }
  RawTerminal(const RawTerminal&) = delete;
  RawTerminal& operator=(const RawTerminal&) = delete;

  bool is_tty() const { return raw_; }

  // The window's size; 80x24 without a tty.
  protocol::TerminalSize Size() const {
    winsize w{};
    if (raw_ && ioctl(STDIN_FILENO, TIOCGWINSZ, &w) == 0 && w.ws_col > 0 && w.ws_row > 0) {
      return {w.ws_col, w.ws_row};
    }
    return {80, 24};
  }

 private:
  termios saved_{};
  bool raw_ = false;
};

std::string Base64(std::string_view bytes) {
  static constexpr char kDigits[] =
      "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  for (size_t i = 0; i < bytes.size(); i += 3) {
    uint32_t n = static_cast<uint8_t>(bytes[i]) << 16;
    if (i + 1 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 1]) << 8;
    if (i + 2 < bytes.size()) n |= static_cast<uint8_t>(bytes[i + 2]);
    out += kDigits[(n >> 18) & 63];
    out += kDigits[(n >> 12) & 63];
    out += i + 1 < bytes.size() ? kDigits[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.size() ? kDigits[n & 63] : '=';
  }
  return out;
}

bool WriteAll(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The gateway's refusal of the handshake as a Status (the problem's detail when it has one).
Status Refusal(const HttpResponse& answer) {
  std::string detail = "HTTP " + std::to_string(answer.status);
  json problem = json::parse(answer.body, nullptr, /*allow_exceptions=*/false);
  if (problem.is_object() && problem.contains("detail") && problem["detail"].is_string()) {
    detail += ": " + problem["detail"].get<std::string>();
  }
  const std::string message = "the session gateway refused the shell's connection (" + detail + ")";
  switch (answer.status) {
    case 401:
      return Status(StatusCode::kUnauthenticated, message);
    case 403:
      return Status(StatusCode::kPermissionDenied, message);
    case 404:
      return NotFound(message);
    default:
      return Status(StatusCode::kInternal, message);
  }
}

// The relay between the terminal and the shell's WebSocket (file comment of the header).
class ShellRelay {
 public:
  explicit ShellRelay(HttpStream& stream) : stream_(stream), rng_(std::random_device{}()) {}

  Result<int> Run() {
    CaughtSignals caught({SIGWINCH, SIGTERM, SIGHUP, SIGINT, SIGQUIT});
    RawTerminal terminal;
    if (!Send(WebSocketOpcode::kText, protocol::ResizeMessage(terminal.Size()))) return Lost();
    bool stdin_open = true;
    // After a pipe's end, Ctrl-D is sent again every kEndOfInputRepeat: the pty's line
    // discipline may have taken the first before the shell's line editor started (a pipe at its
    // end reads as the end again and again, too).
    std::optional<std::chrono::steady_clock::time_point> end_sent;
    while (true) {
      pollfd p[3] = {{stdin_open ? STDIN_FILENO : -1, POLLIN, 0},
                     {stream_.fd(), POLLIN, 0},
                     {CaughtSignals::fd(), POLLIN, 0}};
      int timeout = end_sent ? static_cast<int>(kEndOfInputRepeat.count()) : -1;
      if (stream_.Buffered()) timeout = 0;
      const int ready = poll(p, 3, timeout);
      if (end_sent && std::chrono::steady_clock::now() - *end_sent >= kEndOfInputRepeat) {
        if (!Send(WebSocketOpcode::kBinary, std::string(1, kEndOfTransmission))) return Lost();
        end_sent = std::chrono::steady_clock::now();
      }
      if (ready < 0 && errno != EINTR) return IoError("poll: " + std::string(strerror(errno)));
      while (std::optional<int> signal = CaughtSignals::Take()) {
        // Another signal ends the relay (the terminal is restored on the way out) and the
        // closed connection hangs the remote shell up.
        if (*signal != SIGWINCH) return 128 + *signal;
        if (!Send(WebSocketOpcode::kText, protocol::ResizeMessage(terminal.Size()))) {
          return Lost();
        }
      }
      if (ready <= 0 && !stream_.Buffered()) continue;
      if (stdin_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR)) != 0) {
        char buffer[16 * 1024];  // < protocol::kMaxShellFrame
        const ssize_t n = read(STDIN_FILENO, buffer, sizeof(buffer));
        if (n > 0) {
          if (!Send(WebSocketOpcode::kBinary, std::string_view(buffer, static_cast<size_t>(n)))) {
            return Lost();
          }
        } else if (n == 0 || (errno != EINTR && errno != EAGAIN)) {
          stdin_open = false;
          // A pipe's end: Ctrl-D to the pty, which ends a shell waiting at its prompt.
          if (!terminal.is_tty()) {
            if (!Send(WebSocketOpcode::kBinary, std::string(1, kEndOfTransmission))) {
              return Lost();
            }
            end_sent = std::chrono::steady_clock::now();
          }
        }
      }
      if ((p[1].revents & (POLLIN | POLLHUP | POLLERR)) != 0 || stream_.Buffered()) {
        char buffer[16 * 1024];
        const ssize_t n = stream_.Read(buffer, sizeof(buffer));
        if (n <= 0) return exit_ ? Result<int>(exit_->code) : Lost();
        decoder_.Append(std::string_view(buffer, static_cast<size_t>(n)));
        auto done = DecodeFrames();
        if (!done.ok()) return done.status();
        if (*done) return exit_ ? Result<int>(exit_->code) : Lost();
      }
    }
  }

 private:
  // True once the server closed the WebSocket.
  Result<bool> DecodeFrames() {
    while (true) {
      auto frame = decoder_.Next();
      if (!frame.ok()) return IoError("the shell's connection: " + frame.status().message());
      if (!*frame) return false;
      WebSocketFrame& f = **frame;
      switch (f.opcode) {
        case WebSocketOpcode::kBinary:
          if (!WriteAll(STDOUT_FILENO, f.payload)) return IoError("cannot write to stdout");
          break;
        case WebSocketOpcode::kText: {
          auto exit = protocol::ParseExitMessage(f.payload);
          if (!exit.ok()) return IoError("the shell's server: " + exit.status().message());
          exit_ = *exit;
          break;
        }
        case WebSocketOpcode::kPing:
          (void)Send(WebSocketOpcode::kPong, f.payload);
          break;
        case WebSocketOpcode::kPong:
          break;
        case WebSocketOpcode::kClose:
          (void)Send(WebSocketOpcode::kClose, f.payload.substr(0, 2));
          return true;
      }
    }
  }

  // A client's frame, masked (RFC 6455, 5.3).
  bool Send(WebSocketOpcode opcode, std::string_view payload) {
    return stream_.Write(EncodeWebSocketFrame(opcode, payload, static_cast<uint32_t>(rng_())));
  }

  Status Lost() const {
    return IoError("the connection to the shell was lost before it said how it ended");
  }

  HttpStream& stream_;
  std::mt19937 rng_;
  WebSocketDecoder decoder_{WebSocketPeer::kServer, protocol::kMaxShellFrame};
  std::optional<protocol::ShellExit> exit_;
};

// Waits until session `id` runs and its pty server takes the WebSocket: the stream. SIGINT or
// SIGTERM meanwhile cancels the job (Cancelled).
Result<std::unique_ptr<HttpStream>> Attach(ApiClient& client, int64_t id) {
  CaughtSignals caught({SIGINT, SIGTERM, SIGHUP});
  std::mt19937 rng(std::random_device{}());
  std::string said;  // the last waiting line printed
  while (true) {
    if (std::optional<int> signal = CaughtSignals::Take()) {
      (void)client.Delete("/api/v1/sessions/" + std::to_string(id));
      return FailedPrecondition("interrupted by signal " + std::to_string(*signal) + ": job " +
                                std::to_string(id) + " cancelled");
    }
    auto answer = client.Get("/api/v1/sessions/" + std::to_string(id));
    if (!answer.ok()) return answer.status();
    auto s = protocol::ParseSessionView(*answer);
    if (!s.ok()) return s.status();
    if (model::IsFinal(s->state)) {
      return FailedPrecondition("job " + std::to_string(id) + " ended (" +
                                std::string(model::ToString(s->state)) + ") before its shell " +
                                "was reached: " + s->reason);
    }
    std::string waiting;
    if (s->state == model::JobState::kPending) {
      waiting = "waiting for resources: " +
                (s->pending_reason ? s->pending_reason->message : std::string("pending"));
    } else if (s->state == model::JobState::kRunning) {
      std::string nonce(16, '\0');
      for (char& c : nonce) c = static_cast<char>(rng());
      auto upgrade = client.OpenWebSocketAt(s->url, Base64(nonce));
      if (!upgrade.ok()) return upgrade.status();
      const int status = upgrade->answer.response.status;
      if (status == 101) return std::move(upgrade->stream);
      // 502: the pty server is not listening yet; 503: the gateway's view is not running yet.
      if (status != 502 && status != 503) return Refusal(upgrade->answer.response);
      waiting = "starting the shell";
    } else {
      waiting = std::string(model::ToString(s->state));
    }
    if (waiting != said) {
      std::cerr << "corral shell: job " << id << ": " << waiting << "\n";
      said = waiting;
    }
    std::this_thread::sleep_for(kPollInterval);
  }
}

}  // namespace

json ShellSession() { return json{{"shell", true}, {"idle_timeout_s", 0}}; }

Result<int> RunShell(ApiClient& client, const json& spec) {
  auto answer = client.Post("/api/v1/sessions", spec);
  if (!answer.ok()) return answer.status();
  auto s = protocol::ParseSessionView(*answer);
  if (!s.ok()) return s.status();
  std::cerr << "corral shell: job " << s->id.value() << " submitted\n";
  auto stream = Attach(client, s->id.value());
  if (!stream.ok()) return stream.status();
  std::cerr << "corral shell: job " << s->id.value() << ": attached\n";
  return ShellRelay(**stream).Run();
}

}  // namespace corral::cli
