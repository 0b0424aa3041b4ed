#include "server/http/http_exchange.h"

#include <strings.h>

#include <algorithm>

namespace corral::server {

bool CaseInsensitiveLess::operator()(std::string_view a, std::string_view b) const {
  const int c = strncasecmp(a.data(), b.data(), std::min(a.size(), b.size()));
  return c < 0 || (c == 0 && a.size() < b.size());
}

std::string HttpRequest::Header(std::string_view name) const {
  const auto it = headers.find(std::string(name));
  return it == headers.end() ? "" : it->second;
}

bool HttpRequest::HasHeader(std::string_view name) const {
  return headers.count(std::string(name)) > 0;
}

std::string HttpRequest::Param(const std::string& name) const {
  const auto it = params.find(name);
  return it == params.end() ? "" : it->second;
}

bool HttpRequest::HasParam(const std::string& name) const { return params.count(name) > 0; }

void HttpResponse::SetContent(std::string content, std::string_view content_type) {
  body = std::move(content);
  SetHeader("Content-Type", std::string(content_type));
}

void HttpResponse::SetHeader(const std::string& name, std::string value) {
  headers.erase(name);
  headers.emplace(name, std::move(value));
}

bool HttpResponse::HasHeader(std::string_view name) const {
  return headers.count(std::string(name)) > 0;
}

void HttpResponse::Redirect(std::string location, int redirect_status) {
  status = redirect_status;
  body.clear();
  SetHeader("Location", std::move(location));
}

void HttpResponse::Stream(std::string_view content_type,
                          std::function<bool(std::string& piece)> next) {
  SetHeader("Content-Type", std::string(content_type));
  next_piece = std::move(next);
}

}  // namespace corral::server
