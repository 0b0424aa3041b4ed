#include "server/http/socket_stream.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <utility>
#include <vector>

namespace corral::server {

namespace {

void MakeNonBlocking(int fd) {
  const int flags = fcntl(fd, F_GETFL, 0);
  if (flags >= 0) fcntl(fd, F_SETFL, flags | O_NONBLOCK);
}

// Milliseconds from now to `deadline` for poll(): -1 for none, 0 once it passed.
int PollTimeout(std::optional<SteadyTime> deadline) {
  if (!deadline) return -1;
  const auto left =
      std::chrono::ceil<std::chrono::milliseconds>(*deadline - std::chrono::steady_clock::now());
  return static_cast<int>(std::clamp<int64_t>(left.count(), 0, 24 * 3600 * 1000));
}

std::string OpenSslError() {
  const unsigned long code = ERR_get_error();
  if (code == 0) return "unknown error";
  char text[256];
  ERR_error_string_n(code, text, sizeof text);
  return text;
}

}  // namespace

Result<std::unique_ptr<TlsContext>> TlsContext::Create(const std::string& cert_path,
                                                       const std::string& key_path) {
  SSL_CTX* ctx = SSL_CTX_new(TLS_server_method());
  if (ctx == nullptr) return Status(StatusCode::kInternal, "TLS: " + OpenSslError());
  std::unique_ptr<TlsContext> out(new TlsContext(ctx));
  SSL_CTX_set_min_proto_version(ctx, TLS1_2_VERSION);
  // A peer that closes without close_notify ends its stream like any TCP close: HTTP frames
  // its own messages, and WebSockets their own closing.
  SSL_CTX_set_options(ctx, SSL_OP_IGNORE_UNEXPECTED_EOF);
  SSL_CTX_set_mode(ctx, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  if (SSL_CTX_use_certificate_chain_file(ctx, cert_path.c_str()) != 1 ||
      SSL_CTX_use_PrivateKey_file(ctx, key_path.c_str(), SSL_FILETYPE_PEM) != 1 ||
      SSL_CTX_check_private_key(ctx) != 1) {
    return InvalidArgument("--tls-cert " + cert_path + " / --tls-key " + key_path +
                           ": cannot load the certificate or key (" + OpenSslError() + ")");
  }
  return out;
}

TlsContext::~TlsContext() { SSL_CTX_free(ctx_); }

SocketStream::SocketStream(int fd, SSL_CTX* tls) : fd_(fd) {
  MakeNonBlocking(fd_);
  const int one = 1;
  setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);  // heads and frames go out at once
  if (tls != nullptr) {
    ssl_ = SSL_new(tls);
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd_) != 1) {
      close(fd_);  // never plain text where TLS was asked for: the stream is failed
      fd_ = -1;
      return;
    }
    SSL_set_accept_state(ssl_);
  }
}

SocketStream::SocketStream(SocketStream&& other) noexcept
    : fd_(std::exchange(other.fd_, -1)),
      ssl_(std::exchange(other.ssl_, nullptr)),
      write_shut_(other.write_shut_) {}

SocketStream::~SocketStream() {
  if (ssl_ != nullptr) SSL_free(ssl_);
  if (fd_ >= 0) close(fd_);
}

IoResult SocketStream::TlsResult(int ret) {
  switch (SSL_get_error(ssl_, ret)) {
    case SSL_ERROR_WANT_READ:
      return {Io::kWantRead};
    case SSL_ERROR_WANT_WRITE:
      return {Io::kWantWrite};
    case SSL_ERROR_ZERO_RETURN:
      return {Io::kClosed};
    case SSL_ERROR_SYSCALL:
      return {errno == 0 ? Io::kClosed : Io::kFailed};
    default:
      return {Io::kFailed};
  }
}

Io SocketStream::Handshake() {
  if (fd_ < 0) return Io::kFailed;
  if (ssl_ == nullptr) return Io::kDone;
  ERR_clear_error();
  errno = 0;
  const int ret = SSL_do_handshake(ssl_);
  return ret == 1 ? Io::kDone : TlsResult(ret).io;
}

IoResult SocketStream::Read(char* buffer, size_t size) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    const int n = SSL_read(ssl_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
    return n > 0 ? IoResult{Io::kDone, static_cast<size_t>(n)} : TlsResult(n);
  }
  while (true) {
    const ssize_t n = recv(fd_, buffer, size, 0);
    if (n > 0) return {Io::kDone, static_cast<size_t>(n)};
    if (n == 0) return {Io::kClosed};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantRead};
    return {errno == ECONNRESET ? Io::kClosed : Io::kFailed};
  }
}

IoResult SocketStream::Write(std::string_view data) {
  if (ssl_ != nullptr) {
    ERR_clear_error();
    errno = 0;
    const int n =
        SSL_write(ssl_, data.data(), static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
    if (n > 0) return {Io::kDone, static_cast<size_t>(n)};
    const IoResult result = TlsResult(n);
    return result.io == Io::kFailed && (errno == EPIPE || errno == ECONNRESET)
               ? IoResult{Io::kClosed}
               : result;
  }
  while (true) {
    const ssize_t n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
    if (n >= 0) return {Io::kDone, static_cast<size_t>(n)};
    if (errno == EINTR) continue;
    if (errno == EAGAIN || errno == EWOULDBLOCK) return {Io::kWantWrite};
    return {errno == EPIPE || errno == ECONNRESET ? Io::kClosed : Io::kFailed};
  }
}

void SocketStream::ShutdownWrite() {
  if (write_shut_ || fd_ < 0) return;
  write_shut_ = true;
  if (ssl_ != nullptr) {
    ERR_clear_error();
    SSL_shutdown(ssl_);  // close_notify, best effort: the TCP shutdown below ends the stream
  }
  shutdown(fd_, SHUT_WR);
}

Wait WaitFor(std::span<pollfd> fds, std::optional<SteadyTime> deadline, int wake_fd) {
  std::vector<pollfd> all(fds.begin(), fds.end());
  all.push_back({wake_fd, POLLIN, 0});
  while (true) {
    for (pollfd& p : all) p.revents = 0;
    const int n = poll(all.data(), all.size(), PollTimeout(deadline));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return Wait::kWoken;  // poll itself failed: give the connection up
    if (all.back().revents != 0) return Wait::kWoken;
    if (n == 0) {
      if (deadline && std::chrono::steady_clock::now() >= *deadline) return Wait::kTimedOut;
      continue;
    }
    for (size_t i = 0; i < fds.size(); ++i) fds[i].revents = all[i].revents;
    return Wait::kReady;
  }
}

Wait WaitFor(const SocketStream& stream, Io io, std::optional<SteadyTime> deadline, int wake_fd) {
  pollfd p{stream.fd(), static_cast<short>(io == Io::kWantWrite ? POLLOUT : POLLIN), 0};
  return WaitFor(std::span<pollfd>(&p, 1), deadline, wake_fd);
}

Status WriteAll(SocketStream& stream, std::string_view data, SteadyTime deadline, int wake_fd) {
  while (!data.empty()) {
    const IoResult done = stream.Write(data);
    if (done.io == Io::kDone) {
      data.remove_prefix(done.bytes);
      continue;
    }
    if (done.io != Io::kWantRead && done.io != Io::kWantWrite) {
      return IoError("the peer is gone");
    }
    const Wait wait = WaitFor(stream, done.io, deadline, wake_fd);
    if (wait == Wait::kTimedOut) return IoError("timed out");
    if (wait == Wait::kWoken) return IoError("stopping");
  }
  return Status::Ok();
}

Result<int> ConnectTcp(const std::string& host, int port, std::chrono::milliseconds timeout,
                       int wake_fd) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int err = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found);
      err != 0) {
    return IoError(where + ": " + gai_strerror(err));
  }
  const SteadyTime deadline = std::chrono::steady_clock::now() + timeout;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int err = connect(fd, a->ai_addr, a->ai_addrlen) == 0 ? 0 : errno;
    if (err == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const Wait wait = WaitFor(std::span<pollfd>(&p, 1), deadline, wake_fd);
      socklen_t len = sizeof err;
      if (wait == Wait::kReady) {
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &err, &len);
      } else {
        err = wait == Wait::kTimedOut ? ETIMEDOUT : ECANCELED;
      }
    }
    if (err == 0) {
      freeaddrinfo(found);
      return fd;
    }
    why = std::strerror(err);
    close(fd);
    if (err == ETIMEDOUT || err == ECANCELED) break;  // the time is spent
  }
  freeaddrinfo(found);
  return IoError(where + ": " + why);
}

}  // namespace corral::server
