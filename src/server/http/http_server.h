// The API server's HTTP/1.1 listener (docs/decisions.md, "The API's HTTP server"), on GNU
// libmicrohttpd: one thread per connection (routes may block: a heartbeat's long poll, an event
// stream), with the connection model of connection_guard.h (caps on anonymous connections
// per address and in all, deadlines on heads and bodies) and these rules for every request:
// - the target is at most `max_target_bytes` and the path 2 KiB (else 414), the head
//   `max_head_bytes` (431);
// - a body is never accepted compressed (a Content-Encoding other than identity: 415);
// - `admit` decides from the head alone, before a byte of the body is read, whether the caller
//   is authenticated and how large a body may be (a refusal is answered at once, the body
//   unread); the body is counted as it arrives, chunked or not (over the limit: 413, once the
//   rest is dropped: up to 8 MiB for an authenticated caller, 64 KiB for an anonymous one, the
//   connection closed unanswered beyond);
// - once its body has arrived, a request waits for a slot of the saturation guard
//   (saturation_guard.h) by the load `admit` gave it; none within the guard's wait: 503
//   problem+json with Retry-After and kBusyHeader, the route not run (requests `divert` or
//   `gate` answer are not counted: the leader they go to has its own guard);
// - routes are regular expressions matched against the whole decoded path; HEAD uses GET's;
//   a path no route has: 404, a path with routes for other methods only: 405 with Allow;
// - every answer the server writes itself, and an exception a route throws (500), is
//   application/problem+json.
// libmicrohttpd's own answers to requests it cannot parse at all (a broken request line or chunk
// framing, a head over its buffer of `max_head_bytes` + 64 KiB) are its short HTML pages.
//
// Thread safety: routes are added before Start; Start and Stop from one thread; routes run on
// the connections' threads, concurrently.
#pragma once

#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "common/status.h"
#include "server/http/connection_guard.h"
#include "server/http/http_exchange.h"
#include "server/http/listener.h"
#include "server/http/peer_signature.h"
#include "server/http/saturation_guard.h"

struct MHD_Daemon;
struct MHD_Connection;

namespace corral::server {

using HttpHandler = std::function<void(const HttpRequest&, HttpResponse&)>;

// Who sent a request, as far as its head says.
enum class Caller {
  kAnonymous,      // no credential the route takes: the anonymous caps and limits apply
  kAuthenticated,  // its connection leaves the anonymous caps for good
};
// What may be read of a request, decided from its head (method, path, target, headers, query,
// client address; no body yet).
struct Admission {
  Caller caller = Caller::kAnonymous;
  size_t max_body_bytes = 0;   // over it: 413
  Load load = Load::kRegular;  // the saturation guard's pool
};
// A refusal is answered at once as problem+json, and the body is not read.
using Admitter = std::function<Result<Admission>(const HttpRequest& head)>;

struct HttpServerOptions {
  std::string tls_cert, tls_key;  // PEM files, both or neither
  ConnectionLimits limits;
  int max_connections = 4096;  // open at once, authenticated or not
  // Requests handled at once, by load (saturation_guard.h); the defaults cap nothing.
  SaturationLimits saturation;
  size_t max_target_bytes = 8 << 10;
  size_t max_head_bytes = 64 << 10;
  // While answering, a connection that moves no byte this long is closed (a client that does
  // not read its answer); longer than any route blocks between bytes.
  std::chrono::seconds stall_timeout{300};
  Admitter admit;  // required
  // When set, asked first for every request's head: the client's addresses that a peer server
  // of the cluster vouches for (peer_signature.h). They replace the connection's in the request
  // (client_address, counted_address), and the connection leaves the anonymous caps: it is a
  // peer's, carrying its clients' requests (each capped by the peer's own guard).
  std::function<std::optional<VouchedAddress>(const HttpRequest& head)> vouch;
  // When set, asked next, from the head alone (before `gate`): a handler it gives answers the
  // request instead of the routes, once `admit` has admitted it and its body has arrived within
  // the same limits. A follower forwards so (leader_proxy.h).
  std::function<HttpHandler(const HttpRequest& head)> divert;
  // When set, asked from the head alone unless `divert` gave a handler: an answer it gives is
  // sent at once instead of the route's (and before `admit`), the body unread. A server that does
  // not lead answers so (leader_lease.h).
  std::function<std::optional<HttpResponse>(const HttpRequest& head)> gate;
};

class HttpServer {
 public:
  // Serves on `socket` (taken: closed with the server) once started.
  static Result<std::unique_ptr<HttpServer>> Create(ListenSocket socket, HttpServerOptions options);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  void Get(const std::string& pattern, HttpHandler handler);
  void Post(const std::string& pattern, HttpHandler handler);
  void Put(const std::string& pattern, HttpHandler handler);
  void Patch(const std::string& pattern, HttpHandler handler);
  void Delete(const std::string& pattern, HttpHandler handler);
  void Options(const std::string& pattern, HttpHandler handler);

  // Accepts connections on threads of its own until Stop.
  Status Start();
  // Stops accepting, closes the connections and waits for their routes to return.
  void Stop();

  // Runs the route for a request already read and admitted (what a connection's thread does
  // once the body has arrived): 404, 405 and 500 are answered here. Thread-safe once routes are
  // added; fuzzers call it directly, without a socket.
  void Dispatch(HttpRequest& request, HttpResponse& response) const;

  int port() const { return port_; }
  ConnectionGuard::Counts connections() { return guard_.counts(); }
  // The saturation guard's pools now: caps, slots held, requests in line, refusals.
  SaturationGuard::Counts saturation() { return saturation_.counts(); }

 private:
  struct Route {
    std::string method;
    std::regex pattern;
    HttpHandler handler;
  };
  struct Exchange;

  HttpServer(ListenSocket socket, HttpServerOptions options);
  void Add(std::string method, const std::string& pattern, HttpHandler handler);
  // Shuts down connections past their deadlines until Stop.
  void SweepOverdue();
  // Reads the head into `e` and admits it; queues a refusal (and returns its result) when it is
  // not admitted. False: the connection is closed.
  bool Begin(MHD_Connection* connection, Exchange& e, const char* url, const char* method);
  // Answers `e` with problem+json `status` naming `detail`: for an authenticated caller once
  // the body that is arriving has been dropped (up to a limit), else at once. False: the
  // connection is closed.
  bool Refuse(MHD_Connection* connection, Exchange& e, int status, const std::string& detail);
  bool Queue(MHD_Connection* connection, Exchange& e, HttpResponse response);
  // Runs the route for `e` (its body arrived) once the saturation guard gives it a slot; else
  // answers 503 (the route not run).
  HttpResponse Answer(Exchange& e);

  // What a connection's thread does with each call of libmicrohttpd's access handler; false
  // closes the connection.
  bool OnRequest(MHD_Connection* connection, const char* url, const char* method,
                 const char* upload, size_t* upload_size, void** exchange);
  struct Callbacks;  // libmicrohttpd's, with its types (http_server.cc)
  friend struct Callbacks;

  const HttpServerOptions options_;
  int listen_fd_;
  int port_;
  std::vector<Route> routes_;
  ConnectionGuard guard_;
  SaturationGuard saturation_;
  MHD_Daemon* daemon_ = nullptr;

  std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;  // guarded by mu_
  std::thread sweeper_;
};

}  // namespace corral::server
