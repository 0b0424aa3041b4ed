// The sockets of the session gateway (session_gateway.h): a TCP connection as a non-blocking
// byte stream, with TLS (OpenSSL) on the client side when the server has a certificate, and
// waits on it bounded by a deadline and by a wake-up file descriptor that the gateway makes
// readable when it stops, so that no connection's thread ever blocks past a stop.
// Thread safety: a TlsContext may be shared by any threads; a SocketStream belongs to one
// connection's thread.
#pragma once

#include <poll.h>

#include <chrono>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "common/status.h"

typedef struct ssl_ctx_st SSL_CTX;
typedef struct ssl_st SSL;

namespace corral::server {

using SteadyTime = std::chrono::steady_clock::time_point;

// A server-side TLS configuration: a PEM certificate (chain) and its private key, TLS 1.2 or
// later. Immutable once created.
class TlsContext {
 public:
  // InvalidArgument naming the files when they cannot be loaded or do not match.
  static Result<std::unique_ptr<TlsContext>> Create(const std::string& cert_path,
                                                    const std::string& key_path);
  ~TlsContext();
  TlsContext(const TlsContext&) = delete;
  TlsContext& operator=(const TlsContext&) = delete;

  SSL_CTX* get() const { return ctx_; }

 private:
  explicit TlsContext(SSL_CTX* ctx) : ctx_(ctx) {}
  SSL_CTX* ctx_;  // owned
};

// What one read or write on a SocketStream did.
enum class Io {
  kDone,       // `bytes` were moved (at least one)
  kWantRead,   // nothing now: try again when the socket is readable
  kWantWrite,  // nothing now: try again when the socket is writable
  kClosed,     // the peer closed its side (reads), or is gone (writes)
  kFailed,     // a socket or TLS error: the connection is unusable
};
struct IoResult {
  Io io = Io::kFailed;
  size_t bytes = 0;
};

// How a wait ended.
enum class Wait { kReady, kTimedOut, kWoken };

// One end of a connection. Owns its socket (closed when destroyed) and, with TLS, its session.
// Move-only.
class SocketStream {
 public:
  // Makes `fd` non-blocking and takes it; with `tls` non-null the stream is the server side of a
  // TLS connection (Handshake first).
  SocketStream(int fd, SSL_CTX* tls);
  SocketStream(SocketStream&& other) noexcept;
  SocketStream& operator=(SocketStream&&) = delete;
  ~SocketStream();

  // Advances the TLS handshake: kDone when it is complete (at once without TLS), kWantRead or
  // kWantWrite to be called again, kFailed.
  Io Handshake();
  IoResult Read(char* buffer, size_t size);
  IoResult Write(std::string_view data);
  // No more writes: sends TLS close_notify, then shuts the socket's write side.
  void ShutdownWrite();
  int fd() const { return fd_; }

 private:
  IoResult TlsResult(int ret);

  int fd_ = -1;
  SSL* ssl_ = nullptr;
  bool write_shut_ = false;
};

// Waits until one of `fds` is ready for its events (revents set), `deadline` passes (none:
// no limit) or `wake_fd` is readable, whichever comes first.
Wait WaitFor(std::span<pollfd> fds, std::optional<SteadyTime> deadline, int wake_fd);
// The wait for what `io` (kWantRead, kWantWrite) asks of `stream`.
Wait WaitFor(const SocketStream& stream, Io io, std::optional<SteadyTime> deadline, int wake_fd);

// Writes all of `data` before `deadline`. IoError saying why not: timed out, stopping, the peer
// is gone.
Status WriteAll(SocketStream& stream, std::string_view data, SteadyTime deadline, int wake_fd);

// A TCP connection to `host` (a name or an IP address) and `port`, non-blocking, connected
// within `timeout`. Errors name the address and the reason ("connection refused", "timed out").
Result<int> ConnectTcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                       int wake_fd);

}  // namespace corral::server
