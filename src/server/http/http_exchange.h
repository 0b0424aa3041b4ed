// One HTTP request and its answer, as the API's routes see them (http_server.h reads the first
// from the wire and writes the second): plain data, no sockets. Header names compare without
// case; a request's query parameters and path are already percent-decoded.
#pragma once

#include <functional>
#include <map>
#include <string>
#include <string_view>
#include <vector>

namespace corral::server {

// Header names compare case-insensitively (RFC 9110); one name may repeat.
struct CaseInsensitiveLess {
  bool operator()(std::string_view a, std::string_view b) const;
};
using HttpHeaders = std::multimap<std::string, std::string, CaseInsensitiveLess>;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string path;    // percent-decoded, without the query: "/api/v1/jobs/7"
  std::string target;  // as sent: path and query, not decoded ("/sessions/7/?a=b%20c")
  HttpHeaders headers;
  std::multimap<std::string, std::string> params;  // the query's, decoded
  // What the route's pattern captured: [0] the whole path, [1..] its groups.
  std::vector<std::string> matches;
  std::string body;             // within the server's body limit, never compressed
  std::string client_address;   // the peer's IP address ("127.0.0.1", "::1")
  std::string counted_address;  // what per-address limits count it as (CountedAddress)

  // The first value of header `name`; "" when it is absent.
  std::string Header(std::string_view name) const;
  bool HasHeader(std::string_view name) const;
  // The first value of query parameter `name`; "" when it is absent.
  std::string Param(const std::string& name) const;
  bool HasParam(const std::string& name) const;
};

struct HttpResponse {
  int status = 200;
  HttpHeaders headers;
  std::string body;
  // A streamed body (Stream): called for each next piece of the body until it returns false.
  // It may block (each connection has its own thread); the body ends when it returns false.
  std::function<bool(std::string& piece)> next_piece;

  // `body` as the whole answer, with its Content-Type.
  void SetContent(std::string content, std::string_view content_type);
  // Sets header `name` to `value` (replacing any earlier value).
  void SetHeader(const std::string& name, std::string value);
  bool HasHeader(std::string_view name) const;
  // A redirect to `location` (302, 303 or 307) with an empty body.
  void Redirect(std::string location, int redirect_status);
  // A body of unknown length sent in chunks as `next_piece` produces them.
  void Stream(std::string_view content_type, std::function<bool(std::string& piece)> next_piece);
};

}  // namespace corral::server
