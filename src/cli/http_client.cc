#include "cli/http_client.h"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstring>
#include <optional>

#include "cli/tls_library.h"
#include "common/strings.h"

namespace corral::cli {

namespace {

using Clock = std::chrono::steady_clock;

// The most reserved ahead for a body, whatever its Content-Length says (it may still grow).
constexpr size_t kMaxReservedBody = size_t{16} << 20;
constexpr size_t kReadChunk = size_t{64} << 10;
constexpr int kMaxInterimAnswers = 8;  // 1xx answers skipped before an answer (then an error)

// A socket timeout of `d`, at least 1 ms (a zero timeval means none).
timeval TimevalOf(std::chrono::milliseconds d) {
  const int64_t ms = std::max<int64_t>(d.count(), 1);
  return {static_cast<time_t>(ms / 1000), static_cast<suseconds_t>((ms % 1000) * 1000)};
}
// A chunk-size line ("1a2b;ext\r\n") longer than this is refused.
constexpr size_t kMaxChunkLine = 1024;

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  return std::equal(a.begin(), a.end(), b.begin(), b.end(), [](char x, char y) {
    return std::tolower(static_cast<unsigned char>(x)) ==
           std::tolower(static_cast<unsigned char>(y));
  });
}

HttpResult Failed(HttpFailure failure, std::string detail) {
  HttpResult r;
  r.failure = failure;
  r.detail = std::move(detail);
  return r;
}

int MillisecondsUntil(Clock::time_point deadline) {
  const auto left =
      std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()).count();
  return static_cast<int>(std::clamp<int64_t>(left, 0, 1 << 30));
}

enum class Wait { kReady, kTimedOut, kFailed };

// Waits until `fd` is ready for `events` or `deadline` passes.
Wait WaitFor(int fd, short events, Clock::time_point deadline) {
  while (true) {
    pollfd p{fd, events, 0};
    const int n = poll(&p, 1, MillisecondsUntil(deadline));
    if (n > 0) return Wait::kReady;
    if (n == 0) return Wait::kTimedOut;
    if (errno != EINTR) return Wait::kFailed;
  }
}

bool IsIpAddress(const std::string& host) {
  in6_addr a6;
  in_addr a4;
  return inet_pton(AF_INET, host.c_str(), &a4) == 1 || inet_pton(AF_INET6, host.c_str(), &a6) == 1;
}

// A TCP connection to `origin`, within `timeout`; the socket is blocking afterwards.
Result<int> Connect(const HttpOrigin& origin, std::chrono::milliseconds timeout,
                    HttpFailure* failure) {
  *failure = HttpFailure::kConnect;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  const std::string port = std::to_string(origin.port);
  if (const int e = getaddrinfo(origin.host.c_str(), port.c_str(), &hints, &found); e != 0) {
    return IoError("cannot resolve " + origin.host + ": " + gai_strerror(e));
  }
  const Clock::time_point deadline = Clock::now() + timeout;
  std::string why = "no address";
  bool timed_out = false;
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd =
        socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) {
      why = std::strerror(errno);
      continue;
    }
    int error = 0;
    if (connect(fd, a->ai_addr, a->ai_addrlen) != 0) {
      error = errno;
      if (error == EINPROGRESS) {
        if (WaitFor(fd, POLLOUT, deadline) != Wait::kReady) {
          timed_out = true;
          close(fd);
          break;  // the time is spent: no other address gets any
        }
        socklen_t length = sizeof(error);
        if (getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &length) != 0) error = errno;
      }
    }
    if (error != 0) {
      why = std::strerror(error);
      close(fd);
      continue;
    }
    fcntl(fd, F_SETFL, fcntl(fd, F_GETFL) & ~O_NONBLOCK);
    const int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    freeaddrinfo(found);
    return fd;
  }
  freeaddrinfo(found);
  if (timed_out) {
    *failure = HttpFailure::kConnectTimeout;
    return IoError("no connection within " + std::to_string(timeout.count()) + " ms");
  }
  return IoError(why);
}

// The last OpenSSL error queued, as text ("" when none).
std::string TlsErrorText(const TlsLibrary& ssl) {
  const unsigned long e = ssl.ERR_get_error();
  if (e == 0) return "";
  char text[256];
  ssl.ERR_error_string_n(e, text, sizeof(text));
  return text;
}

}  // namespace

// One connection (plain or TLS): reads and writes with deadlines. (Outside the unnamed
// namespace: an HttpStream owns one.)
class Connection {
 public:
  Connection(int fd, const TlsLibrary* ssl, SSL* tls) : fd_(fd), ssl_(ssl), tls_(tls) {}
  ~Connection() {
    if (tls_ != nullptr) {
      if (handshaken_) ssl_->SSL_shutdown(tls_);  // close_notify, only on an open session
      ssl_->SSL_free(tls_);
    }
    close(fd_);
  }
  // The TLS handshake succeeded: the session is closed with a close_notify.
  void Handshaken() { handshaken_ = true; }
  Connection(const Connection&) = delete;
  Connection& operator=(const Connection&) = delete;

  // Writes all of `data` by `deadline`; false when the connection failed or the time ran out.
  bool Write(std::string_view data, Clock::time_point deadline) {
    while (!data.empty()) {
      if (WaitFor(fd_, POLLOUT, deadline) != Wait::kReady) return false;
      ssize_t n;
      if (tls_ != nullptr) {
        n = ssl_->SSL_write(tls_, data.data(),
                            static_cast<int>(std::min<size_t>(data.size(), 1 << 30)));
      } else {
        n = send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
        if (n < 0 && errno == EINTR) continue;
      }
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  int fd() const { return fd_; }
  // TLS holds decrypted bytes not read yet.
  bool Pending() const { return tls_ != nullptr && ssl_->SSL_pending(tls_) > 0; }

  // Reads at most `size` bytes by `deadline`: the count, 0 at the end of the connection, -1 on a
  // failure (`timed_out` says whether the time ran out).
  ssize_t Read(char* buffer, size_t size, Clock::time_point deadline, bool* timed_out) {
    *timed_out = false;
    while (true) {
      const bool buffered = tls_ != nullptr && ssl_->SSL_pending(tls_) > 0;
      if (!buffered) {
        const Wait wait = WaitFor(fd_, POLLIN, deadline);
        if (wait != Wait::kReady) {
          *timed_out = wait == Wait::kTimedOut;
          return -1;
        }
      }
      if (tls_ != nullptr) {
        const int n =
            ssl_->SSL_read(tls_, buffer, static_cast<int>(std::min<size_t>(size, 1 << 30)));
        if (n > 0) return n;
        const int e = ssl_->SSL_get_error(tls_, n);
        if (e == SSL_ERROR_ZERO_RETURN) return 0;
        if (e == SSL_ERROR_WANT_READ || e == SSL_ERROR_WANT_WRITE) continue;
        if (e == SSL_ERROR_SYSCALL && n == 0) return 0;  // closed without close_notify
        return -1;
      }
      const ssize_t n = recv(fd_, buffer, size, 0);
      if (n >= 0) return n;
      if (errno == EINTR || errno == EAGAIN) continue;
      return -1;
    }
  }

 private:
  int fd_;
  const TlsLibrary* ssl_;
  SSL* tls_;
  bool handshaken_ = false;
};

namespace {

// Reads an answer from a Connection, with the limits and deadlines of the file comment.
class AnswerReader {
 public:
  AnswerReader(Connection& connection, const HttpClientOptions& options)
      : connection_(connection), options_(options) {}

  // The answer, skipping at most kMaxInterimAnswers 1xx ones.
  HttpResult Read() {
    for (int interim = 0; interim <= kMaxInterimAnswers; ++interim) {
      HttpResult r = ReadHead();
      if (!r.ok()) return r;
      if (r.response.status >= 200) return ReadBody(std::move(r));
    }
    return Failed(HttpFailure::kOther,
                  "more than " + std::to_string(kMaxInterimAnswers) + " interim (1xx) answers");
  }

  // The answer to an upgrade: a 101's head alone (what follows is the new protocol's), or any
  // other final answer whole; other 1xx answers skipped as Read() does.
  HttpResult ReadUpgrade() {
    for (int interim = 0; interim <= kMaxInterimAnswers; ++interim) {
      HttpResult r = ReadHead();
      if (!r.ok() || r.response.status == 101) return r;
      if (r.response.status >= 200) return ReadBody(std::move(r));
    }
    return Failed(HttpFailure::kOther,
                  "more than " + std::to_string(kMaxInterimAnswers) + " interim (1xx) answers");
  }

  // The bytes read past what was parsed (after a 101: the new protocol's first bytes).
  std::string TakeBuffered() {
    std::string rest = buffer_.substr(pos_);
    buffer_.clear();
    pos_ = 0;
    return rest;
  }

 private:
  // Fills the buffer by `deadline`; a failure result, or nullopt when bytes came.
  std::optional<HttpResult> Fill(Clock::time_point deadline, const char* reading) {
    char chunk[kReadChunk];
    bool timed_out = false;
    const ssize_t n = connection_.Read(chunk, sizeof(chunk), deadline, &timed_out);
    if (n > 0) {
      if (pos_ > 0) {
        buffer_.erase(0, pos_);
        pos_ = 0;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
      return std::nullopt;
    }
    if (timed_out) {
      return Failed(HttpFailure::kRead, std::string("read timed out (") + reading + ")");
    }
    if (n == 0) {
      return Failed(HttpFailure::kRead, std::string("connection closed (") + reading + ")");
    }
    return Failed(HttpFailure::kRead, std::string("connection reset (") + reading + ")");
  }

  // One line without its CRLF (a bare LF is accepted), at most `limit` bytes with it; past it,
  // a failure naming `reading` and `reported_limit`.
  std::optional<HttpResult> ReadLine(std::string* line, size_t limit, Clock::time_point deadline,
                                     const char* reading, size_t reported_limit) {
    while (true) {
      const size_t end = buffer_.find('\n', pos_);
      if (end != std::string::npos) {
        if (end + 1 - pos_ > limit) break;
        size_t stop = end;
        if (stop > pos_ && buffer_[stop - 1] == '\r') --stop;
        line->assign(buffer_, pos_, stop - pos_);
        pos_ = end + 1;
        return std::nullopt;
      }
      if (buffer_.size() - pos_ > limit) break;
      if (auto failed = Fill(deadline, reading)) return failed;
    }
    return Failed(HttpFailure::kOther, std::string("the answer's ") + reading + " exceed " +
                                           std::to_string(reported_limit) + " bytes");
  }

  HttpResult ReadHead() {
    const Clock::time_point deadline = Clock::now() + options_.read_timeout;
    HttpResult r;
    std::string line;
    size_t left = options_.limits.max_header_bytes;
    if (auto failed = ReadLine(&line, left, deadline, "status line and headers",
                               options_.limits.max_header_bytes))
      return *failed;
    left -= std::min(left, line.size() + 2);
    // "HTTP/1.1 200 OK"
    int status = 0;
    if (line.size() < 12 || line.compare(0, 7, "HTTP/1.") != 0 || line[8] != ' ' ||
        (line.size() > 12 && line[12] != ' ') ||
        std::from_chars(line.data() + 9, line.data() + 12, status).ptr != line.data() + 12 ||
        status < 100 || status > 999) {
      return Failed(HttpFailure::kOther, "not an HTTP/1 answer: '" + line.substr(0, 40) + "'");
    }
    r.response.status = status;
    while (true) {
      if (auto failed = ReadLine(&line, left, deadline, "status line and headers",
                                 options_.limits.max_header_bytes))
        return *failed;
      left -= std::min(left, line.size() + 2);
      if (line.empty()) return r;
      if (r.response.headers.size() >= options_.limits.max_headers) {
        return Failed(
            HttpFailure::kOther,
            "the answer has more than " + std::to_string(options_.limits.max_headers) + " headers");
      }
      const size_t colon = line.find(':');
      // No name, a name with blanks ("Content-Length : 5") or a folded line: refused, as
      // RFC 9112 section 5 asks of a recipient.
      if (colon == std::string::npos || colon == 0 || line.find_first_of(" \t") < colon) {
        return Failed(HttpFailure::kOther,
                      "a malformed header in the answer: '" + line.substr(0, 40) + "'");
      }
      r.response.headers.emplace_back(Lower(Trim(line.substr(0, colon))),
                                      std::string(Trim(line.substr(colon + 1))));
    }
  }

  // Appends `length` bytes of body (some may be buffered already).
  std::optional<HttpResult> ReadExactly(size_t length, std::string* body) {
    while (length > 0) {
      if (pos_ == buffer_.size()) {
        buffer_.clear();
        pos_ = 0;
        if (auto failed = Fill(Clock::now() + options_.read_timeout, "body")) return failed;
      }
      const size_t n = std::min(length, buffer_.size() - pos_);
      body->append(buffer_, pos_, n);
      pos_ += n;
      length -= n;
    }
    return std::nullopt;
  }

  std::optional<HttpResult> TooLarge(size_t size) const {
    return Failed(HttpFailure::kOther,
                  "the answer's body (" + std::to_string(size) + " bytes or more) exceeds " +
                      std::to_string(options_.limits.max_body_bytes) + " bytes");
  }

  std::optional<HttpResult> ReadChunked(std::string* body) {
    std::string line;
    while (true) {
      const Clock::time_point deadline = Clock::now() + options_.read_timeout;
      if (auto failed = ReadLine(&line, kMaxChunkLine, deadline, "chunk size line", kMaxChunkLine))
        return failed;
      const std::string_view digits = std::string_view(line).substr(0, line.find(';'));
      const std::string hex = Trim(digits);  // a string: Trim returns one (no view of it)
      uint64_t size = 0;
      auto [end, err] = std::from_chars(hex.data(), hex.data() + hex.size(), size, 16);
      if (hex.empty() || err != std::errc() || end != hex.data() + hex.size()) {
        return Failed(HttpFailure::kOther, "a malformed chunk size in the answer");
      }
      if (size > options_.limits.max_body_bytes - body->size())
        return TooLarge(body->size() + size);
      if (size == 0) break;
      if (auto failed = ReadExactly(static_cast<size_t>(size), body)) return failed;
      if (auto failed = ReadLine(&line, 2, Clock::now() + options_.read_timeout, "chunk end", 2)) {
        return failed;
      }
      if (!line.empty()) return Failed(HttpFailure::kOther, "a chunk without its CRLF");
    }
    // Trailers, up to an empty line, counted against the header limit.
    size_t left = options_.limits.max_header_bytes;
    const Clock::time_point deadline = Clock::now() + options_.read_timeout;
    do {
      if (auto failed =
              ReadLine(&line, left, deadline, "trailers", options_.limits.max_header_bytes))
        return failed;
      left -= std::min(left, line.size() + 2);
    } while (!line.empty());
    return std::nullopt;
  }

  std::optional<HttpResult> ReadToEnd(std::string* body) {
    while (true) {
      body->append(buffer_, pos_, std::string::npos);
      buffer_.clear();
      pos_ = 0;
      if (body->size() > options_.limits.max_body_bytes) return TooLarge(body->size());
      char chunk[kReadChunk];
      bool timed_out = false;
      const ssize_t n =
          connection_.Read(chunk, sizeof(chunk), Clock::now() + options_.read_timeout, &timed_out);
      if (n == 0) return std::nullopt;
      if (n < 0) {
        return Failed(HttpFailure::kRead,
                      timed_out ? "read timed out (body)" : "connection reset (body)");
      }
      body->append(chunk, static_cast<size_t>(n));
    }
  }

  HttpResult ReadBody(HttpResult r) {
    const int status = r.response.status;
    if (status == 204 || status == 304) return r;
    std::string& body = r.response.body;
    std::optional<HttpResult> failed;
    const std::string encoding = Lower(r.response.Header("transfer-encoding"));
    const std::string length = r.response.Header("content-length");
    if (!encoding.empty() && encoding != "identity") {
      if (encoding != "chunked") {
        return Failed(HttpFailure::kOther, "an answer in transfer encoding '" + encoding + "'");
      }
      failed = ReadChunked(&body);
    } else if (r.response.HasHeader("content-length")) {
      uint64_t size = 0;
      auto [end, err] = std::from_chars(length.data(), length.data() + length.size(), size);
      if (length.empty() || err != std::errc() || end != length.data() + length.size()) {
        return Failed(HttpFailure::kOther, "a malformed Content-Length in the answer");
      }
      if (size > options_.limits.max_body_bytes) return *TooLarge(static_cast<size_t>(size));
      body.reserve(std::min<size_t>(static_cast<size_t>(size), kMaxReservedBody));
      failed = ReadExactly(static_cast<size_t>(size), &body);
    } else {
      failed = ReadToEnd(&body);
    }
    if (failed) return *std::move(failed);
    return r;
  }

  Connection& connection_;
  const HttpClientOptions& options_;
  std::string buffer_;
  size_t pos_ = 0;  // the first unread byte of buffer_
};

// The request target with the bytes a request line cannot carry percent-encoded: controls,
// space, DEL and non-ASCII, and (as cpp-httplib did) '+', ',', ';' and '\''. '%' is kept: a
// value QueryValue() encoded stays as it is.
std::string EncodedTarget(std::string_view target) {
  static constexpr char kHex[] = "0123456789ABCDEF";
  std::string out;
  out.reserve(target.size());
  for (unsigned char c : target) {
    if (c <= 0x20 || c >= 0x7f || c == '+' || c == ',' || c == ';' || c == '\'') {
      out += {'%', kHex[c >> 4], kHex[c & 15]};
    } else {
      out.push_back(static_cast<char>(c));
    }
  }
  return out;
}

// True when no header name or value could end its line early (CR, LF, NUL).
bool HeadersAreOneLineEach(const HttpRequest& request) {
  auto clean = [](std::string_view v) {
    return v.find_first_of(std::string_view("\r\n\0", 3)) == std::string_view::npos;
  };
  for (const auto& [name, value] : request.headers) {
    if (!clean(name) || !clean(value)) return false;
  }
  return clean(request.content_type);
}

// `upgrade`: the request asks for another protocol (its Upgrade header is among its headers).
std::string RequestHead(const HttpOrigin& origin, const HttpRequest& request, bool upgrade) {
  std::string head = request.method + " " + EncodedTarget(request.target) +
                     " HTTP/1.1\r\nHost: " + origin.HostHeader() + "\r\nAccept: */*\r\n" +
                     (upgrade ? "Connection: Upgrade\r\n" : "Connection: close\r\n");
  for (const auto& [name, value] : request.headers) head += name + ": " + value + "\r\n";
  if (!request.content_type.empty()) head += "Content-Type: " + request.content_type + "\r\n";
  if (!request.body.empty() || request.method == "POST" || request.method == "PUT") {
    head += "Content-Length: " + std::to_string(request.body.size()) + "\r\n";
  }
  head += "\r\n";
  return head;
}

}  // namespace

std::string HttpResponse::Header(std::string_view name) const {
  for (const auto& [n, value] : headers) {
    if (EqualsIgnoreCase(n, name)) return value;
  }
  return "";
}

bool HttpResponse::HasHeader(std::string_view name) const {
  for (const auto& header : headers) {
    if (EqualsIgnoreCase(header.first, name)) return true;
  }
  return false;
}

HttpOutcome HttpResult::Outcome() const {
  HttpOutcome outcome;
  outcome.failure = failure;
  outcome.failure_detail = detail;
  if (failure != HttpFailure::kNone) return outcome;
  outcome.status = response.status;
  outcome.body = response.body;
  outcome.busy = response.HasHeader(kBusyHeader);
  outcome.leader = response.Header(kLeaderHeader);
  outcome.retry_after = response.Header("retry-after");
  return outcome;
}

Result<HttpOrigin> HttpOrigin::Parse(std::string_view url) {
  HttpOrigin origin;
  std::string_view rest;
  if (url.substr(0, 7) == "http://") {
    rest = url.substr(7);
  } else if (url.substr(0, 8) == "https://") {
    origin.tls = true;
    rest = url.substr(8);
  } else {
    return InvalidArgument("not an http:// or https:// URL: " + std::string(url));
  }
  if (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  if (rest.find('/') != std::string_view::npos) {
    return InvalidArgument("a server URL has no path: " + std::string(url));
  }
  std::string_view port;
  if (!rest.empty() && rest.front() == '[') {
    const size_t close = rest.find(']');
    if (close == std::string_view::npos)
      return InvalidArgument("bad IPv6 address: " + std::string(url));
    origin.host = std::string(rest.substr(1, close - 1));
    rest.remove_prefix(close + 1);
    if (!rest.empty()) {
      if (rest.front() != ':') return InvalidArgument("bad URL: " + std::string(url));
      port = rest.substr(1);
    }
  } else {
    const size_t colon = rest.find(':');
    origin.host = std::string(rest.substr(0, colon));
    if (colon != std::string_view::npos) port = rest.substr(colon + 1);
  }
  if (origin.host.empty()) return InvalidArgument("no host in URL: " + std::string(url));
  // Only what a host name or an address holds: nothing that would change the Host header's
  // meaning (user info, a query, a fragment, blanks, line breaks).
  for (unsigned char c : origin.host) {
    if (!std::isalnum(c) && c != '-' && c != '.' && c != ':' && c != '_' && c != '%') {
      return InvalidArgument("bad host in URL: " + std::string(url));
    }
  }
  origin.port = origin.tls ? 443 : 80;
  if (!port.empty()) {
    unsigned value = 0;
    auto [end, err] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (err != std::errc() || end != port.data() + port.size() || value == 0 || value > 65535) {
      return InvalidArgument("bad port in URL: " + std::string(url));
    }
    origin.port = static_cast<uint16_t>(value);
  }
  return origin;
}

std::string HttpOrigin::HostHeader() const {
  const std::string name = host.find(':') != std::string::npos ? "[" + host + "]" : host;
  if (port == (tls ? 443 : 80)) return name;
  return name + ":" + std::to_string(port);
}

// The TLS context: OpenSSL loaded, the CA store read, peer verification on.
class HttpClient::Tls {
 public:
  static std::unique_ptr<Tls> Make(const HttpClientOptions& options, HttpResult* failed) {
    Result<const TlsLibrary*> loaded = LoadTls();
    if (!loaded.ok()) {
      *failed = Failed(HttpFailure::kTlsHandshake, loaded.status().message());
      return nullptr;
    }
    const TlsLibrary& ssl = **loaded;
    SSL_CTX* context = ssl.SSL_CTX_new(ssl.TLS_client_method());
    if (context == nullptr) {
      *failed =
          Failed(HttpFailure::kTlsHandshake, "cannot make a TLS context: " + TlsErrorText(ssl));
      return nullptr;
    }
    auto tls = std::unique_ptr<Tls>(new Tls(ssl, context));
    ssl.SSL_CTX_ctrl(context, SSL_CTRL_SET_MIN_PROTO_VERSION, TLS1_2_VERSION, nullptr);
    ssl.SSL_CTX_set_verify(context, SSL_VERIFY_PEER, nullptr);
    const int loaded_cas = options.ca_cert.empty() ? ssl.SSL_CTX_set_default_verify_paths(context)
                                                   : ssl.SSL_CTX_load_verify_locations(
                                                         context, options.ca_cert.c_str(), nullptr);
    if (loaded_cas != 1) {
      *failed = Failed(HttpFailure::kCaCertificates,
                       "cannot load the CA certificates" +
                           (options.ca_cert.empty() ? std::string() : " of " + options.ca_cert) +
                           ": " + TlsErrorText(ssl));
      return nullptr;
    }
    return tls;
  }

  ~Tls() { ssl_.SSL_CTX_free(context_); }

  // The handshake on `fd` (owned by the Connection made, or closed on failure).
  std::unique_ptr<Connection> Handshake(int fd, const HttpOrigin& origin,
                                        Clock::time_point deadline, HttpResult* failed) {
    ssl_.ERR_clear_error();
    SSL* tls = ssl_.SSL_new(context_);
    if (tls == nullptr) {
      close(fd);
      *failed = Failed(HttpFailure::kTlsHandshake, TlsErrorText(ssl_));
      return nullptr;
    }
    auto connection = std::make_unique<Connection>(fd, &ssl_, tls);
    ssl_.SSL_set_fd(tls, fd);
    if (!IsIpAddress(origin.host)) {  // SNI names a host, never an address (RFC 6066)
      ssl_.SSL_ctrl(tls, SSL_CTRL_SET_TLSEXT_HOSTNAME, TLSEXT_NAMETYPE_host_name,
                    const_cast<char*>(origin.host.c_str()));
    }
    if (ssl_.SSL_set1_host(tls, origin.host.c_str()) != 1) {  // an IP address is checked as one
      *failed = Failed(HttpFailure::kCertificate, "cannot set the name to verify: " + origin.host);
      return nullptr;
    }
    // The handshake on the blocking socket, bounded by SO_RCVTIMEO/SO_SNDTIMEO.
    const timeval tv = TimevalOf(std::chrono::milliseconds(MillisecondsUntil(deadline)));
    setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
    setsockopt(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv));
    if (ssl_.SSL_connect(tls) != 1) {
      const long verified = ssl_.SSL_get_verify_result(tls);
      if (verified != X509_V_OK) {
        *failed = Failed(HttpFailure::kCertificate, ssl_.X509_verify_cert_error_string(verified));
      } else {
        const std::string why = TlsErrorText(ssl_);
        *failed = Failed(HttpFailure::kTlsHandshake,
                         why.empty() ? "the connection ended during the handshake" : why);
      }
      return nullptr;
    }
    connection->Handshaken();
    return connection;
  }

 private:
  Tls(const TlsLibrary& ssl, SSL_CTX* context) : ssl_(ssl), context_(context) {}
  const TlsLibrary& ssl_;
  SSL_CTX* context_;
};

HttpClient::HttpClient(HttpOrigin origin, HttpClientOptions options)
    : origin_(std::move(origin)), options_(std::move(options)) {}

HttpClient::~HttpClient() = default;

// An upgraded connection: the Connection, and the bytes read past the 101's head.
struct HttpStream::Impl {
  std::unique_ptr<Connection> connection;
  std::string buffered;
  int fd = -1;
  std::chrono::milliseconds write_timeout;
};

HttpStream::HttpStream(std::unique_ptr<Impl> impl) : impl_(std::move(impl)) {}
HttpStream::~HttpStream() = default;

int HttpStream::fd() const { return impl_->fd; }

bool HttpStream::Buffered() const {
  return !impl_->buffered.empty() || impl_->connection->Pending();
}

bool HttpStream::Write(std::string_view data) {
  return impl_->connection->Write(data, Clock::now() + impl_->write_timeout);
}

ssize_t HttpStream::Read(char* buffer, size_t size) {
  if (!impl_->buffered.empty()) {
    const size_t n = std::min(size, impl_->buffered.size());
    std::memcpy(buffer, impl_->buffered.data(), n);
    impl_->buffered.erase(0, n);
    return static_cast<ssize_t>(n);
  }
  bool timed_out = false;
  // Called when poll() said the socket is readable (or TLS holds bytes): a short deadline
  // only bounds a partial TLS record.
  return impl_->connection->Read(buffer, size, Clock::now() + std::chrono::seconds(5), &timed_out);
}

HttpUpgrade HttpClient::Upgrade(const HttpRequest& request) {
  HttpUpgrade out;
  std::unique_ptr<Connection> connection;
  out.answer = Exchange(request, /*upgrade=*/true, &connection);
  if (!out.answer.ok() || out.answer.response.status != 101) return out;
  auto impl = std::make_unique<HttpStream::Impl>();
  impl->buffered = std::move(out.answer.response.body);
  out.answer.response.body.clear();
  impl->fd = connection->fd();
  impl->connection = std::move(connection);
  impl->write_timeout = options_.write_timeout;
  out.stream = std::unique_ptr<HttpStream>(new HttpStream(std::move(impl)));
  return out;
}

HttpResult HttpClient::Send(const HttpRequest& request) {
  std::unique_ptr<Connection> connection;
  return Exchange(request, /*upgrade=*/false, &connection);
}

HttpResult HttpClient::Exchange(const HttpRequest& request, bool upgrade,
                                std::unique_ptr<Connection>* kept) {
  if (!HeadersAreOneLineEach(request)) {  // a value with a line break would add headers
    return Failed(HttpFailure::kOther, "a request header holds a line break or NUL");
  }
  HttpFailure connect_failure = HttpFailure::kConnect;
  Result<int> fd = Connect(origin_, options_.connect_timeout, &connect_failure);
  if (!fd.ok()) return Failed(connect_failure, fd.status().message());
  std::unique_ptr<Connection> connection;
  if (origin_.tls) {
    HttpResult failed;
    if (!tls_) tls_ = Tls::Make(options_, &failed);
    if (!tls_) {
      close(*fd);
      return failed;
    }
    connection = tls_->Handshake(*fd, origin_, Clock::now() + options_.connect_timeout, &failed);
    if (!connection) return failed;
    // Past the handshake every wait is poll()'s; these only bound a partial TLS record.
    const timeval read_tv = TimevalOf(options_.read_timeout);
    const timeval write_tv = TimevalOf(options_.write_timeout);
    setsockopt(*fd, SOL_SOCKET, SO_RCVTIMEO, &read_tv, sizeof(read_tv));
    setsockopt(*fd, SOL_SOCKET, SO_SNDTIMEO, &write_tv, sizeof(write_tv));
  } else {
    connection = std::make_unique<Connection>(*fd, nullptr, nullptr);
  }
  const Clock::time_point write_deadline = Clock::now() + options_.write_timeout;
  const bool written = connection->Write(RequestHead(origin_, request, upgrade), write_deadline) &&
                       connection->Write(request.body, write_deadline);
  // A server that refuses a body before reading it all (413) may close while it is sent: its
  // answer is read all the same, and only when there is none is the write the failure.
  AnswerReader reader(*connection, options_);
  HttpResult answer = upgrade ? reader.ReadUpgrade() : reader.Read();
  if (!written && !answer.ok()) {
    return Failed(HttpFailure::kWrite, "connection lost while sending");
  }
  if (upgrade && answer.ok() && answer.response.status == 101) {
    answer.response.body = reader.TakeBuffered();  // Upgrade() moves it to the stream
    *kept = std::move(connection);
  }
  return answer;
}

}  // namespace corral::cli
