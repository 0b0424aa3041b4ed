#include "server/http/http_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <fstream>
#include <optional>
#include <sstream>
#include <utility>

#include "common/http_attempt.h"
#include "server/http/mhd_library.h"
#include "server/http/problem.h"

namespace corral::server {

namespace {

using SteadyClock = std::chrono::steady_clock;

// A refused body is read and dropped up to this many bytes in all (Exchange::refusal): an
// authenticated caller's, and an anonymous one's.
constexpr size_t kDrainLimit = 8 << 20;
constexpr size_t kAnonymousDrainLimit = 64 << 10;
// Paths longer than this are refused (414) before any route's pattern sees them: std::regex
// matches recursively, a stack frame per character.
constexpr size_t kMaxPathBytes = 2048;
// The stack of a connection's thread (virtual; only what is touched is resident).
constexpr size_t kThreadStackBytes = 8 << 20;

// Turns anything a callback throws into `failed`: no exception may cross into libmicrohttpd.
template <typename F, typename R>
R NoThrow(F&& f, R failed) {
  try {
    return f();
  } catch (...) {
    return failed;
  }
}

void ShutDownSocket(int fd) {
  // The connection's thread sees its peer gone and closes it.
  if (fd >= 0) shutdown(fd, SHUT_RDWR);
}

// An answer the server writes itself.
HttpResponse ProblemAnswer(int status, std::string_view title, std::string_view detail) {
  HttpResponse response;
  response.status = status;
  response.SetContent(
      Problem(status, title, detail).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace),
      "application/problem+json");
  return response;
}

Result<std::string> ReadPem(const std::string& path, const char* flag) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream text;
  text << in.rdbuf();
  if (!in || text.str().empty()) {
    return InvalidArgument(std::string(flag) + " " + path + ": cannot read it");
  }
  return text.str();
}

// A connection's own data (libmicrohttpd's socket context).
struct ConnectionContext {
  ConnectionGuard::Id id = 0;
  std::string address;          // AddressText
  std::string counted_address;  // CountedAddress
};

}  // namespace

// One request (libmicrohttpd's request context): from its request line to its answer.
struct HttpServer::Exchange {
  HttpRequest request;
  ConnectionGuard::Id connection = 0;
  bool begun = false;     // the head was read and admitted
  bool answered = false;  // an answer is queued
  size_t max_body_bytes = 0;
  // A refusal decided before the body ended (from the head, or the body over its limit): the
  // rest of the body is read and dropped, up to DrainLimit bytes in all, so that a client still
  // sending reads the answer instead of a reset connection; beyond, the connection is closed
  // unanswered.
  std::optional<HttpResponse> refusal;
  Caller caller = Caller::kAnonymous;
  bool body_arriving = false;  // a part of the body was handed over (no answer may be queued)
  size_t dropped = 0;
  HttpHandler handler;         // HttpServerOptions::divert's, answering instead of the routes
  Load load = Load::kRegular;  // Admission::load
  size_t DrainLimit() const {
    return caller == Caller::kAuthenticated ? kDrainLimit : kAnonymousDrainLimit;
  }
};

// A streamed body being sent (libmicrohttpd's content reader context).
namespace {
struct StreamState {
  std::function<bool(std::string&)> next_piece;
  std::string piece;
  size_t offset = 0;
};

ssize_t ReadStream(void* cls, uint64_t, char* buffer, size_t max) {
  auto& s = *static_cast<StreamState*>(cls);
  while (s.offset == s.piece.size()) {
    s.piece.clear();
    s.offset = 0;
    try {
      if (!s.next_piece(s.piece)) return MHD_CONTENT_READER_END_OF_STREAM;
    } catch (...) {
      return MHD_CONTENT_READER_END_WITH_ERROR;
    }
  }
  const size_t n = std::min(max, s.piece.size() - s.offset);
  std::memcpy(buffer, s.piece.data() + s.offset, n);
  s.offset += n;
  return static_cast<ssize_t>(n);
}

void FreeStream(void* cls) { delete static_cast<StreamState*>(cls); }

MHD_Result CollectHeader(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<HttpHeaders*>(cls)->emplace(key, value == nullptr ? "" : value);
  return MHD_YES;
}

MHD_Result CollectParam(void* cls, MHD_ValueKind, const char* key, const char* value) {
  static_cast<std::multimap<std::string, std::string>*>(cls)->emplace(
      key, value == nullptr ? "" : value);
  return MHD_YES;
}

ConnectionContext* ContextOf(MHD_Connection* connection) {
  const MHD_ConnectionInfo* info =
      Mhd().MHD_get_connection_info(connection, MHD_CONNECTION_INFO_SOCKET_CONTEXT);
  return info == nullptr ? nullptr : static_cast<ConnectionContext*>(info->socket_context);
}
}  // namespace

struct HttpServer::Callbacks {
  static MHD_Result OnAccept(void* self, const sockaddr* address, socklen_t) {
    return NoThrow(
        [&] {
          return static_cast<HttpServer*>(self)->guard_.MayAccept(CountedAddress(address),
                                                                  &ShutDownSocket)
                     ? MHD_YES
                     : MHD_NO;
        },
        MHD_NO);
  }

  static void OnConnection(void* self, MHD_Connection* connection, void** context,
                           MHD_ConnectionNotificationCode what) {
    auto& server = *static_cast<HttpServer*>(self);
    if (what == MHD_CONNECTION_NOTIFY_STARTED) {
      const MHD_ConnectionInfo* fd =
          Mhd().MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CONNECTION_FD);
      const MHD_ConnectionInfo* from =
          Mhd().MHD_get_connection_info(connection, MHD_CONNECTION_INFO_CLIENT_ADDRESS);
      const sockaddr* address = from == nullptr ? nullptr : from->client_addr;
      *context = NoThrow(
          [&] {
            auto c = std::make_unique<ConnectionContext>();
            c->address = AddressText(address);
            c->counted_address = CountedAddress(address);
            c->id = server.guard_.Opened(c->counted_address, fd == nullptr ? -1 : fd->connect_fd,
                                         SteadyClock::now());
            return c.release();
          },
          static_cast<ConnectionContext*>(nullptr));
    } else if (what == MHD_CONNECTION_NOTIFY_CLOSED) {
      auto* c = static_cast<ConnectionContext*>(*context);
      if (c != nullptr) server.guard_.Closed(c->id);
      delete c;
      *context = nullptr;
    }
  }

  static void* OnRequestLine(void*, const char* uri, MHD_Connection*) {
    return NoThrow(
        [&] {
          auto e = std::make_unique<Exchange>();
          e->request.target = uri == nullptr ? "" : uri;
          return e.release();
        },
        static_cast<Exchange*>(nullptr));
  }

  static void OnCompleted(void* self, MHD_Connection* connection, void** exchange,
                          MHD_RequestTerminationCode) {
    delete static_cast<Exchange*>(*exchange);
    *exchange = nullptr;
    if (ConnectionContext* c = ContextOf(connection)) {
      static_cast<HttpServer*>(self)->guard_.Entered(c->id, ConnectionPhase::kAwaitingHead,
                                                     SteadyClock::now());
    }
  }

  static MHD_Result OnRequest(void* self, MHD_Connection* connection, const char* url,
                              const char* method, const char*, const char* upload,
                              size_t* upload_size, void** exchange) {
    return NoThrow(
        [&] {
          return static_cast<HttpServer*>(self)->OnRequest(connection, url, method, upload,
                                                           upload_size, exchange)
                     ? MHD_YES
                     : MHD_NO;
        },
        MHD_NO);
  }
};

bool HttpServer::OnRequest(MHD_Connection* connection, const char* url, const char* method,
                           const char* upload, size_t* upload_size, void** exchange) {
  if (*exchange == nullptr) *exchange = new Exchange;  // no request line callback (defensive)
  Exchange& e = *static_cast<Exchange*>(*exchange);
  if (!e.begun) return Begin(connection, e, url, method);
  if (*upload_size > 0) {
    const size_t size = std::exchange(*upload_size, 0);
    if (e.answered) return true;  // answered from its head: what still arrives is dropped
    e.body_arriving = true;
    if (!e.refusal && e.request.body.size() + size > e.max_body_bytes) {
      e.dropped = e.request.body.size();
      std::string().swap(e.request.body);
      Refuse(connection, e, 413,
             "the request body is over " + std::to_string(e.max_body_bytes) + " bytes");
    }
    if (!e.refusal) {
      e.request.body.append(upload, size);
      return true;
    }
    e.dropped += size;
    return e.dropped <= e.DrainLimit();  // false: closed, unanswered
  }
  if (e.answered) return true;
  if (e.refusal) {
    HttpResponse refusal = *std::move(e.refusal);
    e.refusal.reset();
    return Queue(connection, e, std::move(refusal));
  }
  guard_.Entered(e.connection, ConnectionPhase::kAnswering, SteadyClock::now());
  return Queue(connection, e, Answer(e));
}

HttpResponse HttpServer::Answer(Exchange& e) {
  HttpResponse response;
  if (e.handler) {
    try {
      e.handler(e.request, response);
    } catch (...) {
      response = ProblemAnswer(
          500, "internal", "internal error answering " + e.request.method + " " + e.request.path);
    }
    return response;
  }
  // Held while the route runs; a streamed answer is sent without it.
  Result<SaturationGuard::Slot> slot = saturation_.Enter(e.load);
  if (!slot.ok()) {
    SendProblem(response, slot.status());  // 503 with Retry-After
    response.SetHeader(kBusyHeader, "1");
    return response;
  }
  Dispatch(e.request, response);
  return response;
}

HttpServer::HttpServer(ListenSocket socket, HttpServerOptions options)
    : options_(std::move(options)),
      listen_fd_(socket.fd),
      port_(socket.port),
      guard_(options_.limits),
      saturation_(options_.saturation) {}

Result<std::unique_ptr<HttpServer>> HttpServer::Create(ListenSocket socket,
                                                       HttpServerOptions options) {
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    close(socket.fd);
    return InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  if (!options.admit) {
    close(socket.fd);
    return InvalidArgument("HttpServer: no admission rule");
  }
  return std::unique_ptr<HttpServer>(new HttpServer(socket, std::move(options)));
}

HttpServer::~HttpServer() {
  Stop();
  if (listen_fd_ >= 0) close(listen_fd_);  // never started
}

void HttpServer::Add(std::string method, const std::string& pattern, HttpHandler handler) {
  routes_.push_back(Route{std::move(method), std::regex(pattern), std::move(handler)});
}
void HttpServer::Get(const std::string& p, HttpHandler h) { Add("GET", p, std::move(h)); }
void HttpServer::Post(const std::string& p, HttpHandler h) { Add("POST", p, std::move(h)); }
void HttpServer::Put(const std::string& p, HttpHandler h) { Add("PUT", p, std::move(h)); }
void HttpServer::Patch(const std::string& p, HttpHandler h) { Add("PATCH", p, std::move(h)); }
void HttpServer::Delete(const std::string& p, HttpHandler h) { Add("DELETE", p, std::move(h)); }
void HttpServer::Options(const std::string& p, HttpHandler h) { Add("OPTIONS", p, std::move(h)); }

Status HttpServer::Start() {
  if (Result<const MhdLibrary*> mhd = LoadMhd(); !mhd.ok()) return mhd.status();
  std::string cert, key;
  unsigned int flags =
      MHD_USE_THREAD_PER_CONNECTION | MHD_USE_INTERNAL_POLLING_THREAD | MHD_USE_POLL | MHD_USE_ITC;
  if (!options_.tls_cert.empty()) {
    auto c = ReadPem(options_.tls_cert, "--tls-cert");
    if (!c.ok()) return c.status();
    auto k = ReadPem(options_.tls_key, "--tls-key");
    if (!k.ok()) return k.status();
    cert = *std::move(c);
    key = *std::move(k);
    flags |= MHD_USE_TLS;
  }
  std::vector<MHD_OptionItem> items = {
      {MHD_OPTION_LISTEN_SOCKET, listen_fd_, nullptr},
      {MHD_OPTION_CONNECTION_LIMIT, options_.max_connections, nullptr},
      {MHD_OPTION_CONNECTION_TIMEOUT, static_cast<intptr_t>(options_.stall_timeout.count()),
       nullptr},
      // The head and the read buffer; a head over max_head_bytes is refused (431) before this.
      {MHD_OPTION_CONNECTION_MEMORY_LIMIT,
       static_cast<intptr_t>(options_.max_head_bytes + (64 << 10)), nullptr},
      {MHD_OPTION_THREAD_STACK_SIZE, static_cast<intptr_t>(kThreadStackBytes), nullptr},
      {MHD_OPTION_NOTIFY_CONNECTION, reinterpret_cast<intptr_t>(&Callbacks::OnConnection), this},
      {MHD_OPTION_NOTIFY_COMPLETED, reinterpret_cast<intptr_t>(&Callbacks::OnCompleted), this},
      {MHD_OPTION_URI_LOG_CALLBACK, reinterpret_cast<intptr_t>(&Callbacks::OnRequestLine), this},
  };
  static char kTlsPriorities[] = "NORMAL:-VERS-SSL3.0:-VERS-TLS1.0:-VERS-TLS1.1";  // TLS >= 1.2
  if (!cert.empty()) {
    items.push_back({MHD_OPTION_HTTPS_MEM_KEY, 0, key.data()});
    items.push_back({MHD_OPTION_HTTPS_MEM_CERT, 0, cert.data()});
    items.push_back({MHD_OPTION_HTTPS_PRIORITIES, 0, kTlsPriorities});
  }
  items.push_back({MHD_OPTION_END, 0, nullptr});
  daemon_ = Mhd().MHD_start_daemon(flags, 0, &Callbacks::OnAccept, this, &Callbacks::OnRequest,
                                   this, MHD_OPTION_ARRAY, items.data(), MHD_OPTION_END);
  listen_fd_ = -1;  // libmicrohttpd's now: it closes it when it stops, or when it cannot start
  if (daemon_ == nullptr) {
    return IoError(cert.empty() ? "cannot start the HTTP server"
                                : "cannot start the HTTPS server: is --tls-cert/--tls-key a PEM "
                                  "certificate and its key?");
  }
  sweeper_ = std::thread([this] { SweepOverdue(); });
  return Status::Ok();
}

void HttpServer::Stop() {
  {
    std::lock_guard lock(mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  saturation_.Stop();  // requests waiting for a slot are answered now
  if (sweeper_.joinable()) sweeper_.join();
  if (daemon_ != nullptr) {
    Mhd().MHD_stop_daemon(daemon_);  // closes the listening socket and every connection
    daemon_ = nullptr;
  }
}

void HttpServer::SweepOverdue() {
  std::unique_lock lock(mu_);
  while (!wake_.wait_for(lock, std::chrono::milliseconds(250), [this] { return stopping_; })) {
    guard_.ShutDownOverdue(SteadyClock::now(), &ShutDownSocket);
  }
}

bool HttpServer::Begin(MHD_Connection* connection, Exchange& e, const char* url,
                       const char* method) {
  e.begun = true;
  HttpRequest& r = e.request;
  r.method = method;
  r.path = url;
  if (ConnectionContext* c = ContextOf(connection)) {
    e.connection = c->id;
    r.client_address = c->address;
    r.counted_address = c->counted_address;
  }
  guard_.Entered(e.connection, ConnectionPhase::kReadingBody, SteadyClock::now());
  Mhd().MHD_get_connection_values(connection, MHD_HEADER_KIND, &CollectHeader, &r.headers);
  Mhd().MHD_get_connection_values(connection, MHD_GET_ARGUMENT_KIND, &CollectParam, &r.params);
  if (options_.vouch) {
    if (std::optional<VouchedAddress> vouched = options_.vouch(r)) {
      r.client_address = std::move(vouched->address);
      r.counted_address = std::move(vouched->counted);
      guard_.Authenticated(e.connection);
    }
  }
  if (options_.divert) e.handler = options_.divert(r);
  if (options_.gate && !e.handler) {
    if (std::optional<HttpResponse> answer = options_.gate(r)) {
      return Queue(connection, e, std::move(*answer));
    }
  }
  // Who it is first: a caller the head does not admit gets its answer now, the body unread.
  auto admitted = options_.admit(r);
  if (!admitted.ok()) {
    HttpResponse refusal;
    SendProblem(refusal, admitted.status());
    return Queue(connection, e, std::move(refusal));
  }
  e.caller = admitted->caller;
  e.load = admitted->load;
  if (e.caller == Caller::kAuthenticated) guard_.Authenticated(e.connection);
  e.max_body_bytes = admitted->max_body_bytes;
  if (r.target.size() > options_.max_target_bytes) {
    return Refuse(
        connection, e, 414,
        "the request target is over " + std::to_string(options_.max_target_bytes) + " bytes");
  }
  if (r.path.size() > kMaxPathBytes) {
    return Refuse(connection, e, 414,
                  "the request path is over " + std::to_string(kMaxPathBytes) + " bytes");
  }
  const MHD_ConnectionInfo* head =
      Mhd().MHD_get_connection_info(connection, MHD_CONNECTION_INFO_REQUEST_HEADER_SIZE);
  if (head != nullptr && head->header_size > options_.max_head_bytes) {
    return Refuse(connection, e, 431,
                  "the request head is over " + std::to_string(options_.max_head_bytes) + " bytes");
  }
  if (const std::string coding = r.Header("Content-Encoding");
      !coding.empty() && strcasecmp(coding.c_str(), "identity") != 0) {
    return Refuse(connection, e, 415,
                  "request bodies are not accepted compressed (Content-Encoding: " + coding + ")");
  }
  if (const std::string length = r.Header("Content-Length"); !length.empty()) {
    char* end = nullptr;
    const unsigned long long n = std::strtoull(length.c_str(), &end, 10);
    if (*end == '\0' && n > e.max_body_bytes) {
      return Refuse(connection, e, 413,
                    "the request body is over " + std::to_string(e.max_body_bytes) + " bytes");
    }
  }
  return true;
}

bool HttpServer::Refuse(MHD_Connection* connection, Exchange& e, int status,
                        const std::string& detail) {
  // The titles of StatusCodeName, which clients match on.
  const char* title = status == 413 ? "resource_exhausted" : "invalid_argument";
  HttpResponse refusal = ProblemAnswer(status, title, detail);
  // While the body arrives no answer may be queued: it is sent once the body has been dropped
  // (up to DrainLimit). Before, a client that waits (Expect: 100-continue), or whose body is
  // longer than it may send, gets the answer now, and its connection is closed after it.
  const std::string length = e.request.Header("Content-Length");
  const bool waits = strcasecmp(e.request.Header("Expect").c_str(), "100-continue") == 0;
  const bool too_long =
      !length.empty() && std::strtoull(length.c_str(), nullptr, 10) > e.DrainLimit();
  if (!e.body_arriving && (waits || too_long)) return Queue(connection, e, std::move(refusal));
  e.refusal = std::move(refusal);
  return true;
}

bool HttpServer::Queue(MHD_Connection* connection, Exchange& e, HttpResponse response) {
  e.answered = true;
  MHD_Response* answer = nullptr;
  if (response.next_piece) {
    answer = Mhd().MHD_create_response_from_callback(
        MHD_SIZE_UNKNOWN, 16 << 10, &ReadStream,
        new StreamState{std::move(response.next_piece), {}, 0}, &FreeStream);
  } else {
    answer = Mhd().MHD_create_response_from_buffer(response.body.size(), response.body.data(),
                                                   MHD_RESPMEM_MUST_COPY);
  }
  if (answer == nullptr) return false;
  for (const auto& [name, value] : response.headers) {
    Mhd().MHD_add_response_header(answer, name.c_str(), value.c_str());
  }
  const MHD_Result queued =
      Mhd().MHD_queue_response(connection, static_cast<unsigned int>(response.status), answer);
  Mhd().MHD_destroy_response(answer);
  return queued == MHD_YES;
}

void HttpServer::Dispatch(HttpRequest& request, HttpResponse& response) const {
  const std::string& method = request.method == "HEAD" ? std::string("GET") : request.method;
  std::vector<std::string> allowed;
  std::smatch match;
  for (const Route& route : routes_) {
    if (!std::regex_match(request.path, match, route.pattern)) continue;
    if (route.method != method) {
      allowed.push_back(route.method);
      continue;
    }
    request.matches.assign(match.begin(), match.end());
    try {
      route.handler(request, response);
    } catch (...) {
      response = ProblemAnswer(500, "internal",
                               "internal error answering " + request.method + " " + request.path);
    }
    return;
  }
  if (allowed.empty()) {
    response =
        ProblemAnswer(404, "not_found", "no such route: " + request.method + " " + request.path);
    return;
  }
  std::string allow;
  for (const std::string& m : allowed) allow += (allow.empty() ? "" : ", ") + m;
  response = ProblemAnswer(405, "invalid_argument",
                           request.method + " " + request.path + ": allowed: " + allow);
  response.SetHeader("Allow", allow);
}

}  // namespace corral::server
