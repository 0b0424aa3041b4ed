#include "store/store_url.h"

#include <cctype>

namespace corral::store {
namespace {

constexpr std::string_view kRedacted = "***";

// [begin, end) of the password in "scheme://user:PASSWORD@host/...", or npos.
std::pair<size_t, size_t> UserinfoPassword(std::string_view url) {
  size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) return {std::string_view::npos, 0};
  size_t start = scheme_end + 3;
  size_t authority_end = url.find_first_of("/?#", start);
  if (authority_end == std::string_view::npos) authority_end = url.size();
  std::string_view authority = url.substr(start, authority_end - start);
  size_t at = authority.rfind('@');
  if (at == std::string_view::npos) return {std::string_view::npos, 0};
  size_t colon = authority.substr(0, at).find(':');
  if (colon == std::string_view::npos) return {std::string_view::npos, 0};
  return {start + colon + 1, start + at};
}

// [begin, end) of the value of a "password=" query parameter, or npos.
std::pair<size_t, size_t> QueryPassword(std::string_view url) {
  size_t query = url.find('?');
  while (query != std::string_view::npos) {
    size_t key = query + 1;
    if (url.substr(key, 9) == "password=") {
      size_t end = url.find('&', key);
      return {key + 9, end == std::string_view::npos ? url.size() : end};
    }
    query = url.find('&', key);
  }
  return {std::string_view::npos, 0};
}

std::string PercentDecode(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(static_cast<unsigned char>(s[i + 1])) &&
        std::isxdigit(static_cast<unsigned char>(s[i + 2]))) {
      out += static_cast<char>(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

std::string_view UrlScheme(std::string_view url) {
  size_t colon = url.find(':');
  return colon == std::string_view::npos ? std::string_view() : url.substr(0, colon);
}

std::string RedactUrl(std::string_view url) {
  std::string out(url);
  // Query first: its offsets lie after the userinfo, so redacting it does not move the other.
  if (auto [b, e] = QueryPassword(out); b != std::string::npos) out.replace(b, e - b, kRedacted);
  if (auto [b, e] = UserinfoPassword(out); b != std::string::npos) {
    out.replace(b, e - b, kRedacted);
  }
  return out;
}

std::string UrlPassword(std::string_view url) {
  if (auto [b, e] = UserinfoPassword(url); b != std::string::npos) {
    return PercentDecode(url.substr(b, e - b));
  }
  if (auto [b, e] = QueryPassword(url); b != std::string::npos) {
    return PercentDecode(url.substr(b, e - b));
  }
  return "";
}

std::string Scrub(std::string message, std::string_view secret) {
  if (secret.empty()) return message;
  for (size_t pos = message.find(secret); pos != std::string::npos;
       pos = message.find(secret, pos + kRedacted.size())) {
    message.replace(pos, secret.size(), kRedacted);
  }
  return message;
}

std::string SqlitePath(std::string_view url) {
  std::string_view path = url.substr(url.find(':') + 1);
  if (path.rfind("//", 0) == 0) path.remove_prefix(2);
  return std::string(path);
}

}  // namespace corral::store
