#include "server/gateway/session_gateway.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <iterator>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "common/strings.h"
#include "model/states.h"
#include "server/api/http_api.h"
#include "server/gateway/session_proxy.h"
#include "server/http/http_head.h"
#include "server/http/listener.h"
#include "server/http/problem.h"

namespace corral::server {

namespace {

using nlohmann::json;

constexpr size_t kBufferBytes = 64 << 10;  // read at once, per direction
// How long the gateway's own short answers (errors, redirects) may take to go out, and how long
// it then reads what the client still sends, so that closing does not reset the connection
// before the client has read the answer.
constexpr std::chrono::seconds kAnswerTime{2};
constexpr size_t kMaxDrainBytes = 1 << 20;

SteadyTime Now() { return std::chrono::steady_clock::now(); }

const char* ReasonOf(int status) {
  switch (status) {
    case 101:
      return "Switching Protocols";
    case 200:
      return "OK";
    case 301:
      return "Moved Permanently";
    case 303:
      return "See Other";
    case 400:
      return "Bad Request";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 404:
      return "Not Found";
    case 408:
      return "Request Timeout";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 502:
      return "Bad Gateway";
    case 503:
      return "Service Unavailable";
    default:
      return "";
  }
}

// A whole answer of the gateway's own; it always closes the connection.
std::string Answer(int status, HeaderList headers, const std::string& content_type = "",
                   const std::string& body = "") {
  ResponseHead head{"HTTP/1.1", status, ReasonOf(status), std::move(headers)};
  if (!content_type.empty()) head.headers.emplace_back("Content-Type", content_type);
  head.headers.emplace_back("Content-Length", std::to_string(body.size()));
  head.headers.emplace_back("Connection", "close");
  return FormatResponseHead(head) + body;
}

std::string ProblemAnswer(const json& problem, HeaderList headers = {}) {
  return Answer(problem.value("status", 500), std::move(headers), "application/problem+json",
                problem.dump(-1, ' ', false, json::error_handler_t::replace));
}

std::string ProblemAnswer(const Status& s, HeaderList headers = {}) {
  return ProblemAnswer(Problem(HttpStatusOf(s.code()), StatusCodeName(s.code()), s.message()),
                       std::move(headers));
}

// Percent-encodes all but RFC 3986's unreserved characters (for a URL in a query parameter).
std::string PercentEncode(std::string_view text) {
  static const char kHex[] = "0123456789ABCDEF";
  std::string out;
  for (unsigned char c : text) {
    if (std::isalnum(c) || c == '-' || c == '.' || c == '_' || c == '~') {
      out += static_cast<char>(c);
    } else {
      out += '%';
      out += kHex[c >> 4];
      out += kHex[c & 15];
    }
  }
  return out;
}

std::string WithoutTrailingSlashes(std::string url) {
  while (!url.empty() && url.back() == '/') url.pop_back();
  return url;
}

// The session a request target names: "/sessions/<id>" followed by nothing, "/..." or "?...".
struct SessionTarget {
  int64_t id = 0;
  bool slash = false;  // "/sessions/<id>/...": under the app's base URL
};
std::optional<SessionTarget> SessionTargetOf(std::string_view target) {
  constexpr std::string_view kPrefix = "/sessions/";
  if (target.substr(0, kPrefix.size()) != kPrefix) return std::nullopt;
  target.remove_prefix(kPrefix.size());
  const size_t digits = std::min(target.find_first_not_of("0123456789"), target.size());
  if (digits == 0 || digits > 18) return std::nullopt;
  if (digits < target.size() && target[digits] != '/' && target[digits] != '?') {
    return std::nullopt;
  }
  return SessionTarget{std::stoll(std::string(target.substr(0, digits))),
                       digits < target.size() && target[digits] == '/'};
}

// The app's side of a connection: reads the app's response heads out of its byte stream and
// passes each on through DownstreamHeaders, interim ones (1xx) included, until the final one
// (or a 101 to an upgrade); after it, bytes pass unchanged.
class ResponseHeads {
 public:
  ResponseHeads(bool upgrade_asked, size_t max_bytes)
      : upgrade_asked_(upgrade_asked), max_bytes_(max_bytes) {}

  // What to send the client for `bytes` from the app. InvalidArgument for a head that is over
  // the limit or malformed, or a 101 to a request that asked for no upgrade.
  Result<std::string> Feed(std::string_view bytes) {
    if (!in_head_) return std::string(bytes);
    pending_.append(bytes);
    std::string out;
    while (in_head_) {
      const size_t end = HeadEnd(pending_);
      if (end == std::string::npos ? pending_.size() > max_bytes_ : end > max_bytes_ + 4) {
        return InvalidArgument("a head over " + std::to_string(max_bytes_) + " bytes");
      }
      if (end == std::string::npos) return out;
      auto head = ParseResponseHead(std::string_view(pending_).substr(0, end));
      if (!head.ok()) return head.status();
      ResponseHead down = *head;
      down.version = "HTTP/1.1";  // what the gateway speaks to the client
      down.headers = DownstreamHeaders(head->headers);
      if (down.status == 101) {
        if (!upgrade_asked_) return InvalidArgument("101 Switching Protocols unasked");
        down.headers.emplace_back("Connection", "Upgrade");
        down.headers.emplace_back("Upgrade", HeaderValue(head->headers, "Upgrade"));
        upgraded_ = true;
        in_head_ = false;
      } else if (down.status >= 200) {
        down.headers.emplace_back("Connection", "close");  // one request per connection
        in_head_ = false;
      }
      out += FormatResponseHead(down);
      pending_.erase(0, end);
    }
    out += pending_;
    pending_.clear();
    return out;
  }

  bool in_head() const { return in_head_; }    // the final head has not passed yet
  bool upgraded() const { return upgraded_; }  // the app switched protocols

 private:
  const bool upgrade_asked_;
  const size_t max_bytes_;
  std::string pending_;  // the part of a head read so far
  bool in_head_ = true;
  bool upgraded_ = false;
};

// Bytes one way through a connection: read from a source when empty, written to a sink.
struct Flow {
  std::string pending;
  size_t written = 0;
  bool eof = false;   // the source is done
  bool shut = false;  // and the sink was told (ShutdownWrite)
  bool Empty() const { return written == pending.size(); }
  std::string_view Rest() const { return std::string_view(pending).substr(written); }
};

short EventsFor(Io io) { return io == Io::kWantWrite ? POLLOUT : io == Io::kWantRead ? POLLIN : 0; }

// Takes one of the `max` places of `key` in `open` (connections per key; no zeros are kept);
// false when they are all taken.
template <typename Key>
bool TakePlace(std::map<Key, int>& open, const Key& key, int max) {
  auto it = open.find(key);
  if ((it == open.end() ? 0 : it->second) >= max) return false;
  ++open[key];
  return true;
}

// Gives back a place TakePlace took.
template <typename Key>
void ReturnPlace(std::map<Key, int>& open, const Key& key) {
  auto it = open.find(key);
  if (it != open.end() && --it->second <= 0) open.erase(it);
}

}  // namespace

// One client connection, on its own thread: read, admit, connect, carry, close.
class SessionGateway::Connection {
 public:
  // Whether the connection was counted in gateway.pending_ (by Accept, under its
  // CountedAddress) and counts there until its request head arrives.
  enum class Pending { kCounted, kNotCounted };
  // `peer`: the client's full address (X-Forwarded-For).
  Connection(SessionGateway& gateway, int fd, std::string peer, std::string counted_address,
             Pending pending)
      : gateway_(gateway),
        options_(gateway.options_),
        client_(fd, gateway.tls_ ? gateway.tls_->get() : nullptr),
        peer_(std::move(peer)),
        counted_address_(std::move(counted_address)),
        pending_(pending == Pending::kCounted) {}

  void Serve() {
    const SteadyTime head_deadline = Now() + options_.head_timeout;
    if (!Handshake(head_deadline)) return;
    std::string bytes;
    size_t end = std::string::npos;
    std::vector<char> buffer(16 << 10);
    while ((end = HeadEnd(bytes)) == std::string::npos) {
      if (bytes.size() > options_.max_head_bytes) break;
      const IoResult r = client_.Read(buffer.data(), buffer.size());
      if (r.io == Io::kDone) {
        bytes.append(buffer.data(), r.bytes);
      } else if (r.io == Io::kWantRead || r.io == Io::kWantWrite) {
        const Wait wait = WaitFor(client_, r.io, head_deadline, gateway_.wake_read_fd_);
        if (wait == Wait::kTimedOut) {
          return Send(
              ProblemAnswer(Problem(408, "request_timeout",
                                    "no whole request head within " +
                                        std::to_string(options_.head_timeout.count()) + " ms")));
        }
        if (wait == Wait::kWoken) return;
      } else {
        return;  // closed before a request
      }
    }
    RequestArrived();  // before any answer: a client that read one sees the place free
    if (end == std::string::npos || end > options_.max_head_bytes + 4) {
      return Send(ProblemAnswer(
          Problem(431, "request_header_fields_too_large",
                  "request head over " + std::to_string(options_.max_head_bytes) + " bytes")));
    }
    auto head = ParseRequestHead(std::string_view(bytes).substr(0, end));
    if (!head.ok()) {
      return Send(ProblemAnswer(InvalidArgument("request head: " + head.status().message())));
    }
    const std::optional<SessionTarget> target = SessionTargetOf(head->target);
    if (!target) {
      return Send(ProblemAnswer(NotFound("only /sessions/<id>/... is served here")));
    }
    Admission admission = Admit(*head, *target);
    if (!admission.answer.empty()) return Send(admission.answer);
    if (!gateway_.EnterSession(target->id)) {
      return Send(ProblemAnswer(
          Problem(503, "unavailable",
                  "session " + std::to_string(target->id) + " has " +
                      std::to_string(options_.max_connections_per_session) +
                      " connections open, the most one session may; try again shortly"),
          {{"Retry-After", "1"}}));
    }
    Carry(*head, bytes.substr(end), admission.endpoint, JobId(target->id));
    gateway_.LeaveSession(target->id);
  }

 private:
  // The decision on a request: pass it to `endpoint`, or send `answer` and close.
  struct Admission {
    std::string answer;
    Controller::SessionEndpoint endpoint;
  };

  bool Handshake(SteadyTime deadline) {
    while (true) {
      const Io io = client_.Handshake();
      if (io == Io::kDone) return true;
      if (io != Io::kWantRead && io != Io::kWantWrite) return false;
      if (WaitFor(client_, io, deadline, gateway_.wake_read_fd_) != Wait::kReady) return false;
    }
  }

  // The gateway's URL for this request: --session-public-url (or what --public-url makes of
  // it), else the scheme and the request's Host.
  std::string GatewayUrl(const RequestHead& head) const {
    if (!options_.public_url.empty()) return WithoutTrailingSlashes(options_.public_url);
    return UrlOfHost(HeaderValue(head.headers, "Host"), gateway_.tls_ != nullptr);
  }

  // The API server's URL for this request (its login page): --public-url, else the scheme,
  // the request's host and the API's port.
  std::string ApiUrl(const RequestHead& head) const {
    if (!options_.api_url.empty()) return WithoutTrailingSlashes(options_.api_url);
    return WithPort(UrlOfHost(HeaderValue(head.headers, "Host"), gateway_.tls_ != nullptr),
                    options_.api_port);
  }

  // Who passes: not a cross-site request that may change something or opens a WebSocket, the
  // session's owner (bearer token or cookie), a running session, under its base URL.
  Admission Admit(const RequestHead& head, const SessionTarget& target) {
    std::vector<std::string> own = {
        UrlOfHost(HeaderValue(head.headers, "Host"), gateway_.tls_ != nullptr)};
    if (!options_.public_url.empty()) own.push_back(options_.public_url);
    const RequestKind kind =
        WantsUpgrade(head.headers) ? RequestKind::kUpgrade : RequestKind::kPlain;
    if (const std::string refused =
            CrossSiteRefusal(head.method, HeaderValue(head.headers, "Origin"),
                             HeaderValue(head.headers, "Sec-Fetch-Site"), own, kind);
        !refused.empty()) {
      return {ProblemAnswer(PermissionDenied(refused))};
    }
    Result<std::string> token = SessionTokenOf(head.headers);
    if (!token.ok()) return {LoginNeeded(head, token.status().message())};
    if (token->empty()) return {LoginNeeded(head, "not logged in")};
    Result<Principal> who = gateway_.directory_->Authenticate(*token);
    if (!who.ok()) {
      if (who.status().code() != StatusCode::kUnauthenticated) {
        return {ProblemAnswer(who.status())};
      }
      return {LoginNeeded(head, who.status().message())};
    }
    auto endpoint = gateway_.directory_->Endpoint(*who, JobId(target.id));
    if (!endpoint.ok()) return {ProblemAnswer(endpoint.status())};
    if (!endpoint->Serving()) {
      const std::string state =
          endpoint->stopping ? "stopping" : std::string(model::ToString(endpoint->state));
      json problem =
          Problem(503, "unavailable",
                  "session " + std::to_string(target.id) + " is " + state + ", not running");
      problem["state"] = state;
      return {ProblemAnswer(problem, {{"Retry-After", "5"}})};
    }
    const std::string prefix = "/sessions/" + std::to_string(target.id) + "/";
    if (!target.slash) {  // "/sessions/7": the app's base URL ends with '/'
      const size_t query = head.target.find('?');
      return {Answer(
          301,
          {{"Location", prefix + (query == std::string::npos ? "" : head.target.substr(query))}})};
    }
    return {"", *std::move(endpoint)};
  }

  // No valid credentials: a browser's GET goes to the API server's login page, coming back
  // here; anything else gets 401.
  std::string LoginNeeded(const RequestHead& head, const std::string& why) const {
    const std::string api = ApiUrl(head);
    const bool browser = (head.method == "GET" || head.method == "HEAD") &&
                         HeaderValue(head.headers, "Accept").find("text/html") != std::string::npos;
    if (browser && !api.empty()) {
      return Answer(303, {{"Location",
                           api + "/login?next=" + PercentEncode(GatewayUrl(head) + head.target)}});
    }
    return ProblemAnswer(Unauthenticated(why + ": log in at " + api +
                                         "/login (or send 'Authorization: Bearer <token>')"),
                         {{"WWW-Authenticate", "Bearer"}});
  }

  // Connects to the app, sends the request's head rewritten and `rest` (the start of its body
  // or, after a handshake, of the new protocol), then carries bytes both ways.
  void Carry(const RequestHead& head, std::string rest, const Controller::SessionEndpoint& app,
             JobId session) {
    const std::string where = app.address + ":" + std::to_string(app.port);
    auto fd = ConnectTcp(app.address, app.port, options_.connect_timeout, gateway_.wake_read_fd_);
    if (!fd.ok()) {
      return Send(ProblemAnswer(Problem(502, "bad_gateway",
                                        "the session's app does not answer on " +
                                            fd.status().message() + "; it may still be starting")));
    }
    SocketStream upstream(*fd, nullptr);
    const bool upgrade = WantsUpgrade(head.headers);
    RequestHead up = head;
    up.headers = UpstreamHeaders(head.headers);
    const std::string host = HeaderValue(head.headers, "Host");
    if (host.empty()) up.headers.emplace_back("Host", where);
    // The app trusts the gateway through the session's secret (Jupyter reads "token <secret>").
    up.headers.emplace_back("Authorization", "token " + app.token);
    up.headers.emplace_back("X-Forwarded-For", peer_);
    up.headers.emplace_back("X-Forwarded-Proto", gateway_.tls_ ? "https" : "http");
    if (!host.empty()) up.headers.emplace_back("X-Forwarded-Host", host);
    if (upgrade) {
      up.headers.emplace_back("Connection", "Upgrade");
      up.headers.emplace_back("Upgrade", HeaderValue(head.headers, "Upgrade"));
    } else {
      up.headers.emplace_back("Connection", "close");  // one request per connection
    }
    Pump(upstream, FormatRequestHead(up) + rest, ResponseHeads(upgrade, options_.max_head_bytes),
         session, where);
  }

  // Moves bytes both ways until the app is done (its answer passed on) or either side fails,
  // the connection is idle too long (not upgraded), or the gateway stops.
  void Pump(SocketStream& upstream, std::string first, ResponseHeads heads, JobId session,
            const std::string& where) {
    Flow up{std::move(first)}, down;
    bool answered = false;  // the client got bytes from the app
    SteadyTime last_io = Now(), last_use = last_io;
    std::vector<char> buffer(kBufferBytes);
    while (true) {
      bool moved = false;
      short client_events = 0, upstream_events = 0;
      if (up.Empty() && !up.eof) {
        const IoResult r = client_.Read(buffer.data(), buffer.size());
        if (r.io == Io::kDone) {
          up.pending.assign(buffer.data(), r.bytes);
          up.written = 0;
          moved = true;
        } else if (r.io == Io::kClosed) {
          up.eof = moved = true;
        } else if (r.io == Io::kFailed) {
          return;
        }
        client_events |= EventsFor(r.io);
      }
      if (!up.Empty()) {
        const IoResult w = upstream.Write(up.Rest());
        if (w.io == Io::kDone) {
          up.written += w.bytes;
          moved = true;
        } else if (w.io == Io::kClosed || w.io == Io::kFailed) {
          up = Flow{"", 0, true, true};  // the app stopped reading: it may still answer
          moved = true;
        }
        upstream_events |= EventsFor(w.io);
      }
      if (up.eof && up.Empty() && !up.shut) {
        upstream.ShutdownWrite();
        up.shut = true;
      }
      if (down.Empty() && !down.eof) {
        const IoResult r = upstream.Read(buffer.data(), buffer.size());
        if (r.io == Io::kDone) {
          auto out = heads.Feed(std::string_view(buffer.data(), r.bytes));
          if (!out.ok()) {
            if (answered) return;
            return Send(ProblemAnswer(
                Problem(502, "bad_gateway",
                        "the session's app on " + where + " answered " + out.status().message())));
          }
          down.pending = std::move(out).value();
          down.written = 0;
          moved = true;
        } else if (r.io == Io::kClosed || r.io == Io::kFailed) {
          if (heads.in_head() && !answered) {
            return Send(ProblemAnswer(
                Problem(502, "bad_gateway",
                        "the session's app on " + where + " closed without an answer")));
          }
          down.eof = moved = true;
        }
        upstream_events |= EventsFor(r.io);
      }
      if (!down.Empty()) {
        const IoResult w = client_.Write(down.Rest());
        if (w.io == Io::kDone) {
          down.written += w.bytes;
          answered = moved = true;
        } else if (w.io == Io::kClosed || w.io == Io::kFailed) {
          return;
        }
        client_events |= EventsFor(w.io);
      }
      if (down.eof && down.Empty()) {
        return Linger(Now() + kAnswerTime);  // the app is done, and so is the connection
      }
      const SteadyTime now = Now();
      if (moved) {
        last_io = now;
        if (now - last_use >= options_.use_interval) {
          gateway_.directory_->NoteUse(session);
          last_use = now;
        }
        continue;
      }
      std::optional<SteadyTime> deadline;
      if (!heads.upgraded()) deadline = last_io + options_.idle_timeout;
      // A descriptor with nothing to wait for is left out: poll would report its hangup again
      // and again.
      pollfd fds[2] = {{client_events ? client_.fd() : -1, client_events, 0},
                       {upstream_events ? upstream.fd() : -1, upstream_events, 0}};
      const Wait wait = WaitFor(fds, deadline, gateway_.wake_read_fd_);
      if (wait == Wait::kWoken) return;
      if (wait == Wait::kTimedOut) {
        if (answered) return;
        return Send(
            ProblemAnswer(Problem(502, "bad_gateway",
                                  "the session's app on " + where + " did not answer within " +
                                      std::to_string(options_.idle_timeout.count() / 1000) +
                                      " s (--session-proxy-timeout)")));
      }
    }
  }

  // Sends one of the gateway's own answers before `deadline`, then closes (Linger).
  void Send(const std::string& answer, SteadyTime deadline = Now() + kAnswerTime) {
    if (WriteAll(client_, answer, deadline, gateway_.wake_read_fd_).ok()) Linger(deadline);
  }

  // Closes gently: shuts the write side, then reads and drops what the client still sends
  // until it closes or `deadline`, so that closing with unread bytes does not reset the
  // connection before the client has read the answer.
  void Linger(SteadyTime deadline) {
    client_.ShutdownWrite();
    std::vector<char> buffer(16 << 10);
    for (size_t drained = 0; drained < kMaxDrainBytes;) {
      const IoResult r = client_.Read(buffer.data(), buffer.size());
      if (r.io == Io::kDone) {
        drained += r.bytes;
      } else if (r.io != Io::kWantRead && r.io != Io::kWantWrite) {
        return;
      } else if (WaitFor(client_, r.io, deadline, gateway_.wake_read_fd_) != Wait::kReady) {
        return;
      }
    }
  }

  // The connection no longer counts against its address's pending ones. Idempotent.
  void RequestArrived() {
    if (pending_) gateway_.LeavePending(counted_address_);
    pending_ = false;
  }

  friend class SessionGateway;
  SessionGateway& gateway_;
  const SessionGatewayOptions& options_;
  SocketStream client_;
  const std::string peer_;
  const std::string counted_address_;
  bool pending_;  // counted in gateway_.pending_
};

Result<std::unique_ptr<SessionGateway>> SessionGateway::Create(
    const SessionGatewayOptions& options) {
  std::unique_ptr<SessionGateway> g(new SessionGateway(options));
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  if (!options.tls_cert.empty()) {
    auto tls = TlsContext::Create(options.tls_cert, options.tls_key);
    if (!tls.ok()) return tls.status();
    g->tls_ = std::move(tls).value();
  }
  auto listening = Listen(options.host, options.port, "--session-listen");
  if (!listening.ok()) return listening.status();
  g->listen_fd_ = listening->fd;
  g->port_ = listening->port;
  int wake[2];
  if (pipe2(wake, O_CLOEXEC | O_NONBLOCK) != 0) {
    return IoError(std::string("session gateway: pipe: ") + std::strerror(errno));
  }
  g->wake_read_fd_ = wake[0];
  g->wake_write_fd_ = wake[1];
  return g;
}

SessionGateway::~SessionGateway() {
  Stop();
  for (int fd : {listen_fd_, wake_read_fd_, wake_write_fd_}) {
    if (fd >= 0) close(fd);
  }
}

std::string SessionGateway::url() const {
  return std::string(tls_ ? "https" : "http") + "://" + options_.host + ":" + std::to_string(port_);
}

void SessionGateway::Start(SessionDirectory& directory) {
  directory_ = &directory;
  accept_ = std::thread([this] { Accept(); });
}

void SessionGateway::Stop() {
  {
    std::lock_guard lock(mu_);
    if (!stopped_) {
      stopped_ = true;
      const char byte = 'x';
      if (write(wake_write_fd_, &byte, 1) != 1) {
        // Nothing to do: the pipe is new and holds nothing, so this does not happen.
      }
    }
  }
  if (accept_.joinable()) accept_.join();
  std::unique_lock lock(mu_);
  all_finished_.wait(lock, [&] { return connections_ == 0; });
}

void SessionGateway::Accept() {
  // Writes to a TLS client that is gone raise SIGPIPE (OpenSSL writes with write(2)): this
  // thread and the connections' threads, which inherit its mask, get EPIPE instead.
  sigset_t pipe;
  sigemptyset(&pipe);
  sigaddset(&pipe, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe, nullptr);
  while (true) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (WaitFor(std::span<pollfd>(&p, 1), std::nullopt, wake_read_fd_) != Wait::kReady) return;
    sockaddr_storage from{};
    socklen_t len = sizeof from;
    const int fd = accept4(listen_fd_, reinterpret_cast<sockaddr*>(&from), &len, SOCK_CLOEXEC);
    if (fd < 0) {
      // Out of descriptors: the pending connection stays readable, so back off instead of
      // spinning until connections end. (A client that gave up meanwhile: try again at once.)
      if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
        pollfd none{-1, 0, 0};
        WaitFor(std::span<pollfd>(&none, 1),
                std::chrono::steady_clock::now() + std::chrono::milliseconds(100), wake_read_fd_);
      }
      continue;
    }
    char address[INET6_ADDRSTRLEN] = "";
    if (from.ss_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<sockaddr_in*>(&from)->sin_addr, address, sizeof address);
    } else if (from.ss_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<sockaddr_in6*>(&from)->sin6_addr, address,
                sizeof address);
    }
    const std::string peer = address;
    const std::string counted = CountedAddress(reinterpret_cast<const sockaddr*>(&from));
    if (!EnterPending(counted)) {
      close(fd);  // cheaply: this address already holds its share of places without a request
      continue;
    }
    bool admitted = false;
    {
      std::lock_guard lock(mu_);
      if (connections_ < options_.max_connections) {
        ++connections_;
        admitted = true;
      }
    }
    if (!admitted) {
      LeavePending(counted);
      Refuse(fd);
      continue;
    }
    try {
      std::thread([this, fd, peer, counted] {
        {
          Connection connection(*this, fd, peer, counted, Connection::Pending::kCounted);
          connection.Serve();
          connection.RequestArrived();  // or it never will: either way it no longer counts
        }
        Finished();
      }).detach();
    } catch (const std::system_error&) {  // no thread to be had: as over the cap
      LeavePending(counted);
      Finished();
      Refuse(fd);
    }
  }
}

int SessionGateway::OpenConnections() {
  std::lock_guard lock(mu_);
  return connections_;
}

void SessionGateway::Refuse(int fd) {
  Connection refused(*this, fd, "", "", Connection::Pending::kNotCounted);
  const SteadyTime deadline = Now() + std::chrono::seconds(1);
  if (!refused.Handshake(deadline)) return;
  refused.Send(
      ProblemAnswer(Problem(503, "unavailable",
                            "the session gateway has " + std::to_string(options_.max_connections) +
                                " connections open, the most it takes; try again shortly"),
                    {{"Retry-After", "1"}}),
      deadline);
}

bool SessionGateway::EnterSession(int64_t session) {
  std::lock_guard lock(mu_);
  return TakePlace(per_session_, session, options_.max_connections_per_session);
}

void SessionGateway::LeaveSession(int64_t session) {
  std::lock_guard lock(mu_);
  ReturnPlace(per_session_, session);
}

bool SessionGateway::EnterPending(const std::string& address) {
  std::lock_guard lock(mu_);
  return TakePlace(pending_, address, options_.max_pending_per_address);
}

void SessionGateway::LeavePending(const std::string& address) {
  std::lock_guard lock(mu_);
  ReturnPlace(pending_, address);
}

void SessionGateway::Finished() {
  // Notified under the lock: Stop() may destroy the gateway as soon as it sees zero.
  std::lock_guard lock(mu_);
  --connections_;
  all_finished_.notify_all();
}

}  // namespace corral::server
