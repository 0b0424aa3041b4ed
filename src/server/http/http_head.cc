#include "server/http/http_head.h"

#include <vector>

namespace corral::server {

namespace {

// RFC 9110 5.6.2: tchar.
bool IsToken(std::string_view text) {
  if (text.empty()) return false;
  for (unsigned char c : text) {
    const bool ok = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') ||
                    std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
    if (!ok) return false;
  }
  return true;
}

// Visible ASCII, space and tab (obs-text, bytes over 0x7f, is allowed too: RFC 9110 5.5).
bool IsFieldValue(std::string_view text) {
  for (unsigned char c : text) {
    if ((c < 0x20 && c != '\t') || c == 0x7f) return false;
  }
  return true;
}

std::string_view TrimBlanks(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t')) text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t')) text.remove_suffix(1);
  return text;
}

// The head's lines without their CRLFs, the blank line and anything after it dropped.
Result<std::vector<std::string_view>> Lines(std::string_view head) {
  if (const size_t end = HeadEnd(head); end != std::string_view::npos) {
    head = head.substr(0, end - 2);  // keep the last line's CRLF
  }
  std::vector<std::string_view> lines;
  while (!head.empty()) {
    const size_t crlf = head.find("\r\n");
    if (crlf == std::string_view::npos) return InvalidArgument("a line does not end with CRLF");
    lines.push_back(head.substr(0, crlf));
    head.remove_prefix(crlf + 2);
  }
  if (lines.empty()) return InvalidArgument("empty head");
  return lines;
}

Result<HeaderList> Headers(const std::vector<std::string_view>& lines) {
  HeaderList headers;
  for (size_t i = 1; i < lines.size(); ++i) {
    const std::string_view line = lines[i];
    const size_t colon = line.find(':');
    // A name that is not a token also catches obsolete line folding (a line starting with a
    // blank), which a proxy must not pass on as is.
    if (colon == std::string_view::npos || !IsToken(line.substr(0, colon))) {
      return InvalidArgument("bad header line " + std::to_string(i + 1));
    }
    const std::string_view value = TrimBlanks(line.substr(colon + 1));
    if (!IsFieldValue(value)) {
      return InvalidArgument("bad value of header '" + std::string(line.substr(0, colon)) + "'");
    }
    headers.emplace_back(std::string(line.substr(0, colon)), std::string(value));
  }
  return headers;
}

bool IsVersion(std::string_view version) { return version == "HTTP/1.1" || version == "HTTP/1.0"; }

void AppendHeaders(const HeaderList& headers, std::string& out) {
  for (const auto& [name, value] : headers) out += name + ": " + value + "\r\n";
  out += "\r\n";
}

}  // namespace

size_t HeadEnd(std::string_view bytes) {
  const size_t at = bytes.find("\r\n\r\n");
  return at == std::string_view::npos ? std::string_view::npos : at + 4;
}

Result<RequestHead> ParseRequestHead(std::string_view head) {
  auto lines = Lines(head);
  if (!lines.ok()) return lines.status();
  const std::string_view line = (*lines)[0];
  const size_t first = line.find(' ');
  const size_t last = line.rfind(' ');
  if (first == std::string_view::npos || first == last) {
    return InvalidArgument("bad request line");
  }
  RequestHead out;
  out.method = line.substr(0, first);
  out.target = line.substr(first + 1, last - first - 1);
  out.version = line.substr(last + 1);
  if (!IsToken(out.method)) return InvalidArgument("bad method");
  if (out.target.empty() || out.target.find_first_of(" \t") != std::string::npos ||
      !IsFieldValue(out.target)) {
    return InvalidArgument("bad request target");
  }
  if (!IsVersion(out.version)) return InvalidArgument("not HTTP/1.0 or HTTP/1.1");
  auto headers = Headers(*lines);
  if (!headers.ok()) return headers.status();
  out.headers = std::move(headers).value();
  return out;
}

Result<ResponseHead> ParseResponseHead(std::string_view head) {
  auto lines = Lines(head);
  if (!lines.ok()) return lines.status();
  const std::string_view line = (*lines)[0];
  ResponseHead out;
  out.version = line.substr(0, line.find(' '));
  if (!IsVersion(out.version)) return InvalidArgument("not HTTP/1.0 or HTTP/1.1");
  const std::string_view rest = line.substr(std::min(line.size(), out.version.size() + 1));
  const std::string_view code = rest.substr(0, 3);
  if (code.size() != 3 || code.find_first_not_of("0123456789") != std::string_view::npos ||
      (rest.size() > 3 && rest[3] != ' ')) {
    return InvalidArgument("bad status line");
  }
  out.status = std::stoi(std::string(code));
  if (out.status < 100 || out.status > 599) return InvalidArgument("bad status code");
  out.reason = rest.size() > 4 ? std::string(rest.substr(4)) : "";
  if (!IsFieldValue(out.reason)) return InvalidArgument("bad reason phrase");
  auto headers = Headers(*lines);
  if (!headers.ok()) return headers.status();
  out.headers = std::move(headers).value();
  return out;
}

std::string FormatRequestHead(const RequestHead& head) {
  std::string out = head.method + " " + head.target + " " + head.version + "\r\n";
  AppendHeaders(head.headers, out);
  return out;
}

std::string FormatResponseHead(const ResponseHead& head) {
  std::string out = head.version + " " + std::to_string(head.status) + " " + head.reason + "\r\n";
  AppendHeaders(head.headers, out);
  return out;
}

}  // namespace corral::server
