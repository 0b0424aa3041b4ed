// The session gateway (docs/sessions.md): the server's listener for sessions, on an origin of
// its own (another port than the API's), that carries requests to sessions' apps as byte
// streams, so that WebSockets (Jupyter's kernels) and long or large answers pass. The API
// server answers /sessions/<id>/... with a redirect here.
//
// A connection gets one thread. It reads one request head (bounded in size and time), lets
// through only /sessions/<id>/... from the session's owner (SessionTokenOf, CrossSiteRefusal
// with the gateway's own origin, SessionDirectory), connects to the app, sends the head
// rewritten (UpstreamHeaders, the session's token, `Connection: close`, or the Upgrade for a
// handshake) and then copies bytes both ways, bodies included, without parsing them; the app's
// response heads pass through DownstreamHeaders. One request per connection: routing and
// authentication are never reused. Caps on connections in all and per session answer 503.
//
// Thread safety: Create, Start and Stop from one thread; everything else is internal.
#pragma once

#include <sys/socket.h>

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "common/status.h"
#include "server/control/controller.h"
#include "server/http/auth.h"
#include "server/http/socket_stream.h"

namespace corral::server {

// What the gateway asks of the rest of the server. Implementations are thread-safe: every
// connection's thread calls them.
class SessionDirectory {
 public:
  virtual ~SessionDirectory() = default;
  // Who an API token belongs to (the API's own lookup); Unauthenticated when unknown or revoked.
  virtual Result<Principal> Authenticate(const std::string& token) = 0;
  // Where session `id`'s app listens, for `who`: Controller::ProxyTarget (its owner only,
  // NotFound for anyone else; asking counts as use of a running session).
  virtual Result<Controller::SessionEndpoint> Endpoint(const Principal& who, JobId id) = 0;
  // Bytes moved on a connection to session `id` (throttled by the gateway): counts as use.
  virtual void NoteUse(JobId id) = 0;
};

struct SessionGatewayOptions {
  std::string host = "127.0.0.1";  // where to listen
  int port = 0;                    // 0: any free port
  std::string tls_cert, tls_key;   // both: the gateway speaks TLS (the API's certificate)
  // The gateway's URL as users reach it ("https://corral.example:8081"), its own origin for the
  // cross-site checks and the base of login redirects; "": the scheme and each request's Host.
  std::string public_url;
  // The API server's URL as users reach it, for the login page; "": the scheme, the host of
  // each request's Host and `api_port`.
  std::string api_url;
  int api_port = 0;
  int max_connections = 256;             // open at once, all sessions (over it: 503)
  int max_connections_per_session = 32;  // open at once to one session (over it: 503)
  // Open at once from one client address (CountedAddress) without a whole request head yet (in
  // the TLS handshake or the head): over it, a new connection from that address is closed at
  // once, so one client cannot hold every place with connections that send nothing.
  int max_pending_per_address = 16;
  size_t max_head_bytes = 64 << 10;  // a request's or an answer's head (over it: 431, 502)
  std::chrono::milliseconds head_timeout{30000};     // to read a request's head (TLS included)
  std::chrono::milliseconds connect_timeout{10000};  // to connect to an app (then 502)
  // A connection that is not upgraded and moves no byte either way this long is closed (before
  // the app's answer: 502). Upgraded ones (WebSockets) have no idle limit.
  std::chrono::milliseconds idle_timeout{60000};
  // NoteUse is called at most this often per connection.
  std::chrono::milliseconds use_interval{10000};
};

class SessionGateway {
 public:
  // Binds the listener (and loads the certificate). Errors name the address or the files.
  static Result<std::unique_ptr<SessionGateway>> Create(const SessionGatewayOptions& options);
  ~SessionGateway();  // Stop()

  // Accepts connections on a thread of its own until Stop(), asking `directory` (borrowed
  // until Stop() returns) who passes. At most once.
  void Start(SessionDirectory& directory);
  // Closes the listener and every connection (their threads notice at once, wherever they
  // wait), and returns when all of them have ended. Idempotent.
  void Stop();

  int port() const { return port_; }
  // Connections admitted and not yet finished (their threads still run): what max_connections
  // caps. A closed client's connection counts until its thread has noticed.
  int OpenConnections();
  // "http(s)://host:port" as bound (the public URL may differ).
  std::string url() const;

 private:
  explicit SessionGateway(SessionGatewayOptions options) : options_(std::move(options)) {}
  class Connection;

  void Accept();
  // Answers a connection over max_connections with 503 on the accepting thread, within a
  // second.
  void Refuse(int fd);
  // A place for a connection to `session`; false when it has max_connections_per_session.
  bool EnterSession(int64_t session);
  void LeaveSession(int64_t session);
  // A place for a connection from `address` (CountedAddress) that has not sent its request
  // head; false when the address has max_pending_per_address.
  bool EnterPending(const std::string& address);
  void LeavePending(const std::string& address);
  void Finished();

  const SessionGatewayOptions options_;
  SessionDirectory* directory_ = nullptr;  // set by Start
  std::unique_ptr<TlsContext> tls_;        // null: plain http
  int listen_fd_ = -1;
  int port_ = 0;
  // Readable once Stop() began: every wait of every connection includes it.
  int wake_read_fd_ = -1, wake_write_fd_ = -1;
  std::thread accept_;

  std::mutex mu_;
  std::condition_variable all_finished_;
  int connections_ = 0;                 // guarded by mu_: threads running
  std::map<int64_t, int> per_session_;  // guarded by mu_: session -> connections; no zeros
  // Guarded by mu_: CountedAddress -> connections without a request head yet; no zeros.
  std::map<std::string, int> pending_;
  bool stopped_ = false;  // guarded by mu_
};

}  // namespace corral::server
