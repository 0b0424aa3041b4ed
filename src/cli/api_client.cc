#include "cli/api_client.h"

#include <httplib.h>

#include <algorithm>
#include <cctype>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "common/json_parse.h"
#include "common/secret_file.h"
#include "common/strings.h"

namespace corral::cli {

namespace {

Status ErrorOf(const httplib::Result& r) {
  if (!r) return IoError("cannot reach the server: " + httplib::to_string(r.error()));
  std::string detail = r->body;
  // A problem+json's detail; any other body (a proxy's page) as it is.
  const nlohmann::json j = ParseJsonOrNull(r->body);
  if (j.is_object() && j.contains("detail") && j["detail"].is_string()) detail = j["detail"];
  switch (r->status) {
    case 400:
    case 413:
      return InvalidArgument(r->status == 413 ? "request too large" : detail);
    case 401:
      return Unauthenticated(detail);
    case 403:
      return PermissionDenied(detail);
    case 404:
      return NotFound(detail);
    case 409:
      return FailedPrecondition(detail);
    case 429: {  // a limit reached (a submit limit): the server says when to try again
      const std::string after = r->get_header_value("Retry-After");
      const int64_t seconds = std::atoll(after.c_str());
      if (seconds <= 0) return Status(StatusCode::kResourceExhausted, detail);
      return ResourceExhausted(detail + " (try again in " + std::to_string(seconds) + " s)",
                               Seconds(seconds));
    }
    default:
      return Status(StatusCode::kInternal, "HTTP " + std::to_string(r->status) + ": " + detail);
  }
}

Result<Reply> ReplyOf(const httplib::Result& r) {
  if (!r || r->status >= 300) return ErrorOf(r);
  Reply reply{r->body, {}};
  for (const auto& [name, value] : r->headers) reply.headers[Lower(name)] = value;
  return reply;
}

Result<nlohmann::json> JsonOf(const httplib::Result& r) {
  auto reply = ReplyOf(r);
  if (!reply.ok()) return reply.status();
  return reply->Json();
}

}  // namespace

std::string Reply::Header(std::string name) const {
  auto it = headers.find(Lower(std::move(name)));
  return it == headers.end() ? "" : it->second;
}

Result<nlohmann::json> Reply::Json() const {
  auto j = ParseJson(body, "the server's answer", kServerAnswerLimits);
  if (!j.ok()) return Status(StatusCode::kInternal, j.status().message());
  return j;
}

std::string ConfigPath() {
  if (const char* xdg = std::getenv("XDG_CONFIG_HOME"); xdg && *xdg) {
    return std::string(xdg) + "/corral/config";
  }
  const char* home = std::getenv("HOME");
  return std::string(home ? home : ".") + "/.config/corral/config";
}

Result<ClientConfig> LoadClientConfig() {
  ClientConfig c;
  std::ifstream in(ConfigPath());
  if (in) {
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const nlohmann::json j = ParseJsonOrNull(text);
    if (j.is_object()) {
      c.server = j.value("server", "");
      c.token = j.value("token", "");
      c.ca_cert = j.value("ca_cert", "");
    }
  }
  if (const char* v = std::getenv("CORRAL_SERVER"); v && *v) c.server = v;
  if (const char* v = std::getenv("CORRAL_TOKEN"); v && *v) c.token = v;
  if (const char* v = std::getenv("CORRAL_CA_CERT"); v && *v) c.ca_cert = v;
  if (c.server.empty()) {
    return InvalidArgument(
        "no server configured: run 'corral login --server URL --token T' or "
        "set CORRAL_SERVER and CORRAL_TOKEN");
  }
  return c;
}

Status SaveClientConfig(const ClientConfig& config) {
  const std::string path = ConfigPath();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  nlohmann::json j = {{"server", config.server}, {"token", config.token}};
  if (!config.ca_cert.empty()) j["ca_cert"] = config.ca_cert;
  return WriteSecretFile(path, j.dump(2) + "\n");
}

ApiClient::ApiClient(ClientConfig config)
    : token_(std::move(config.token)), ca_cert_(config.ca_cert) {
  // A server that refuses a body before reading it all (413) closes the connection while the
  // body is being sent: the write fails (EPIPE) and the answer is read, instead of SIGPIPE
  // ending the command. The CLI starts no processes that could inherit this.
  std::signal(SIGPIPE, SIG_IGN);
  http_ = std::make_unique<httplib::Client>(config.server);
  http_->set_connection_timeout(5);
  http_->set_read_timeout(60);
  if (!config.ca_cert.empty()) http_->set_ca_cert_path(config.ca_cert.c_str());
  http_->enable_server_certificate_verification(true);
}

ApiClient::~ApiClient() = default;

Result<nlohmann::json> ApiClient::Get(const std::string& path) {
  return JsonOf(http_->Get(path, {{"Authorization", "Bearer " + token_}}));
}

Result<nlohmann::json> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return JsonOf(
      http_->Post(path, {{"Authorization", "Bearer " + token_}}, body.dump(), "application/json"));
}

Result<nlohmann::json> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  return JsonOf(
      http_->Put(path, {{"Authorization", "Bearer " + token_}}, body.dump(), "application/json"));
}

Result<nlohmann::json> ApiClient::Delete(const std::string& path) {
  return JsonOf(http_->Delete(path, {{"Authorization", "Bearer " + token_}}));
}

Result<Reply> ApiClient::GetReply(const std::string& path) {
  return ReplyOf(http_->Get(path, {{"Authorization", "Bearer " + token_}}));
}

Result<int> ApiClient::GetStatusAt(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return InvalidArgument("not an absolute URL: " + url);
  const size_t path = std::min(url.find('/', scheme + 3), url.size());
  httplib::Client http(url.substr(0, path));
  http.set_connection_timeout(5);
  http.set_read_timeout(60);
  if (!ca_cert_.empty()) http.set_ca_cert_path(ca_cert_.c_str());
  http.enable_server_certificate_verification(true);
  auto r =
      http.Get(path < url.size() ? url.substr(path) : "/", {{"Authorization", "Bearer " + token_}});
  if (!r) {
    return IoError("cannot reach " + url.substr(0, path) + ": " + httplib::to_string(r.error()));
  }
  return r->status;
}

Result<int> ApiClient::GetStatus(const std::string& path) {
  auto r = http_->Get(path, {{"Authorization", "Bearer " + token_}});
  if (!r) return IoError("cannot reach the server: " + httplib::to_string(r.error()));
  return r->status;
}

}  // namespace corral::cli
