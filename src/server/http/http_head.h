// The heads of HTTP/1.x messages as the session gateway reads and writes them: the request
// line or status line and the header fields, never the body (the gateway copies bodies as they
// were sent). Pure and stateless; RFC 9112 sections 2-5, strictly: a head the gateway cannot
// read unambiguously is refused, not guessed at.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

#include "common/status.h"
#include "server/gateway/session_proxy.h"

namespace corral::server {

// Where a head ends: the index just past its blank line ("\r\n\r\n"), or npos when `bytes` do
// not hold a whole head yet.
size_t HeadEnd(std::string_view bytes);

struct RequestHead {
  std::string method;   // "GET", as sent (a token)
  std::string target;   // the raw request target, as sent ("/sessions/7/lab?a=%2B")
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  HeaderList headers;   // in order, names as sent
};

struct ResponseHead {
  std::string version;  // "HTTP/1.1" or "HTTP/1.0"
  int status = 0;       // 100-599
  std::string reason;   // may be empty
  HeaderList headers;
};

// Parses a request head (up to and including its blank line, or without it). InvalidArgument
// saying what is wrong: a malformed request line, a version other than HTTP/1.0 and 1.1, a
// header line without a colon or with a name that is not a token (so also obsolete line
// folding), or bytes outside visible ASCII, space and tab in a value.
Result<RequestHead> ParseRequestHead(std::string_view head);
// Parses a response head likewise; the status must be three digits from 100 to 599.
Result<ResponseHead> ParseResponseHead(std::string_view head);

// The head as bytes, ending with its blank line.
std::string FormatRequestHead(const RequestHead& head);
std::string FormatResponseHead(const ResponseHead& head);

}  // namespace corral::server
