// The CLI's HTTP/1.1 client (api_client.h sends every request through it): one connection per
// request ("Connection: close"), blocking sockets with a connect, a read and a write timeout,
// https through OpenSSL loaded at run time (tls_library.h) only when a URL is https, with the
// certificate and the host name verified (SNI sent for names, not for IP addresses).
//
// Every answer is hostile until parsed: the status line and headers are limited in size
// (HttpLimits::max_header_bytes, together) and count, and must arrive within the read timeout in
// all; a body (Content-Length, chunked, or up to the end of the connection) is limited in size and
// each read waits at most the read timeout. Anything past a limit, malformed, or late ends the
// request with a failure naming what happened (HttpResult), never a hang.
//
// The caller ignores SIGPIPE (ApiClient does): OpenSSL writes to the socket with write(), which
// raises it on a connection the server closed. Plain connections send with MSG_NOSIGNAL.
//
// Thread safety: one HttpClient per thread.
#pragma once

#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/http_attempt.h"
#include "common/status.h"

namespace corral::cli {

struct HttpLimits {
  size_t max_header_bytes = size_t{64} << 10;  // status line, headers and chunked trailers
  size_t max_headers = 128;
  size_t max_body_bytes = size_t{1} << 30;  // a page of 1,000 jobs is a few MB
};

struct HttpClientOptions {
  std::chrono::milliseconds connect_timeout{5'000};
  std::chrono::milliseconds read_timeout{60'000};
  std::chrono::milliseconds write_timeout{5'000};
  std::string ca_cert;  // PEM bundle that verifies an https server; "": the system's store
  HttpLimits limits;
};

struct HttpRequest {
  std::string method;  // GET, POST, PUT, DELETE
  std::string target;  // the path and query: /api/v1/jobs?limit=10
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;          // sent with Content-Length for POST and PUT
  std::string content_type;  // "" for none
};

struct HttpResponse {
  int status = 0;
  std::vector<std::pair<std::string, std::string>> headers;  // names in lower case, in order
  std::string body;

  // The first value of the header `name` (any case); "" when absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
};

// How a request ended: failure kNone and the response, or why there is none.
struct HttpResult {
  HttpFailure failure = HttpFailure::kNone;
  std::string detail;  // what failed, for people ("the answer's headers exceed 65536 bytes")
  HttpResponse response;

  bool ok() const { return failure == HttpFailure::kNone; }
  // As common/http_attempt.h reads it (borrows the body).
  HttpOutcome Outcome() const;
};

// "http(s)://host[:port]" (no path; IPv6 in brackets).
struct HttpOrigin {
  bool tls = false;
  std::string host;  // without brackets
  uint16_t port = 0;

  // InvalidArgument for another scheme, a missing host, a bad port, or a path.
  static Result<HttpOrigin> Parse(std::string_view url);
  // The Host header's value: the host, and the port when not the scheme's default.
  std::string HostHeader() const;
};

class Connection;

// A connection upgraded to another protocol (HttpClient::Upgrade: a WebSocket), plain or TLS:
// the caller frames the bytes. Owns the connection; closes it when destroyed.
class HttpStream {
 public:
  struct Impl;
  explicit HttpStream(std::unique_ptr<Impl> impl);
  ~HttpStream();
  HttpStream(const HttpStream&) = delete;
  HttpStream& operator=(const HttpStream&) = delete;

  // The socket, to poll for POLLIN before Read() (but see Buffered()).
  int fd() const;
  // Bytes that Read() returns without the socket being readable (read past the answer's head,
  // or decrypted by TLS and not yet taken): read them before polling.
  bool Buffered() const;
  // Writes all of `data` within the client's write timeout; false when the connection failed.
  bool Write(std::string_view data);
  // Reads at most `size` bytes: the count, 0 at the end of the connection, -1 on a failure.
  // Waits for bytes (at most 5 s): call it when fd() polled readable or Buffered().
  ssize_t Read(char* buffer, size_t size);

 private:
  std::unique_ptr<Impl> impl_;
};

// The answer to an upgrade request, and the stream when it was a 101.
struct HttpUpgrade {
  HttpResult answer;                   // a 101's head, or another answer whole
  std::unique_ptr<HttpStream> stream;  // set with a 101 only
};

class HttpClient {
 public:
  HttpClient(HttpOrigin origin, HttpClientOptions options);
  ~HttpClient();
  HttpClient(const HttpClient&) = delete;
  HttpClient& operator=(const HttpClient&) = delete;

  // Sends `request` on a new connection and reads the whole answer (1xx answers skipped).
  HttpResult Send(const HttpRequest& request);
  // Sends `request`, which carries its own `Upgrade` header (and Sec-WebSocket-* ones), with
  // `Connection: Upgrade`, and reads the answer: on a 101 the connection goes on as the stream.
  HttpUpgrade Upgrade(const HttpRequest& request);

 private:
  class Tls;  // the TLS context (CA store loaded once), made on the first https request
  HttpOrigin origin_;
  HttpClientOptions options_;
  // One request on a new connection; with `upgrade` and a 101, the connection in `kept`.
  HttpResult Exchange(const HttpRequest& request, bool upgrade, std::unique_ptr<Connection>* kept);

  std::unique_ptr<Tls> tls_;
};

}  // namespace corral::cli
