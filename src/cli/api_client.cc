#include "cli/api_client.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <random>
#include <thread>

#include "common/http_attempt.h"
#include "common/json_parse.h"
#include "common/secret_file.h"
#include "common/strings.h"

namespace corral::cli {

namespace {

// The timeouts of every request (as the CLI had with cpp-httplib).
HttpClientOptions ClientOptions(const std::string& ca_cert) {
  HttpClientOptions options;
  options.connect_timeout = std::chrono::seconds(5);
  options.read_timeout = std::chrono::seconds(60);
  options.write_timeout = std::chrono::seconds(5);
  options.ca_cert = ca_cert;
  return options;
}

// An answer's error (Send() returns only answers).
Status ErrorOf(const HttpResponse& r) {
  std::string detail = r.body;
  // A problem+json's detail; any other body (a proxy's page) as it is.
  const nlohmann::json j = ParseJsonOrNull(r.body);
  if (j.is_object() && j.contains("detail") && j["detail"].is_string()) detail = j["detail"];
  switch (r.status) {
    case 400:
    case 413:
      return InvalidArgument(r.status == 413 ? "request too large" : detail);
    case 401:
      return Unauthenticated(detail);
    case 403:
      return PermissionDenied(detail);
    case 404:
      return NotFound(detail);
    case 409:
      return FailedPrecondition(detail);
    case 429: {  // a limit reached (a submit limit): the server says when to try again
      const std::optional<Seconds> after = ParseRetryAfter(r.Header("retry-after"));
      if (!after || after->value() <= 0) return Status(StatusCode::kResourceExhausted, detail);
      return ResourceExhausted(detail + " (try again in " + std::to_string(after->value()) + " s)",
                               *after);
    }
    case 503:  // a saturated server the command waited on for its budget (Send), or a 503 past it
      return Status(StatusCode::kUnavailable, "HTTP 503: " + detail);
    default:
      return Status(StatusCode::kInternal, "HTTP " + std::to_string(r.status) + ": " + detail);
  }
}

Result<Reply> ReplyOf(Result<HttpResponse> sent) {
  if (!sent.ok()) return sent.status();
  HttpResponse& r = *sent;
  if (r.status >= 300) return ErrorOf(r);
  Reply reply{std::move(r.body), {}};
  for (auto& [name, value] : r.headers) reply.headers.emplace(name, std::move(value));
  return reply;
}

Result<nlohmann::json> JsonOf(Result<HttpResponse> r) {
  if (r.ok() && r->status == 204) return nlohmann::json();  // No Content: null
  auto reply = ReplyOf(std::move(r));
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

Result<std::chrono::milliseconds> RetryTimeout() {
  const char* v = std::getenv("CORRAL_RETRY_TIMEOUT");
  if (v == nullptr || *v == '\0') return kDefaultRetryTimeout;
  const std::string_view text(v);
  double seconds = -1;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), seconds);
  if (err != std::errc() || end != text.data() + text.size() || !(seconds >= 0) || seconds > 3600) {
    return InvalidArgument("CORRAL_RETRY_TIMEOUT: expected seconds in 0..3600, got '" +
                           std::string(text) + "'");
  }
  return std::chrono::milliseconds(static_cast<int64_t>(seconds * 1000));
}

Result<ClientConfig> LoadClientConfig() {
  ClientConfig c;
  std::string servers, servers_from = ConfigPath();
  std::ifstream in(ConfigPath());
  if (in) {
    const std::string text((std::istreambuf_iterator<char>(in)), {});
    const nlohmann::json j = ParseJsonOrNull(text);
    if (j.is_object()) {
      servers = j.value("server", "");
      c.token = j.value("token", "");
      c.ca_cert = j.value("ca_cert", "");
    }
  }
  if (const char* v = std::getenv("CORRAL_SERVER"); v && *v) {
    servers = v;
    servers_from = "CORRAL_SERVER";
  }
  if (const char* v = std::getenv("CORRAL_TOKEN"); v && *v) c.token = v;
  if (const char* v = std::getenv("CORRAL_CA_CERT"); v && *v) c.ca_cert = v;
  Result<std::chrono::milliseconds> retry_timeout = RetryTimeout();
  if (!retry_timeout.ok()) return retry_timeout.status();
  c.retry_timeout = *retry_timeout;
  if (servers.empty()) {
    return InvalidArgument(
        "no server configured: run 'corral login --server URL[,URL...] --token T' or "
        "set CORRAL_SERVER and CORRAL_TOKEN");
  }
  Result<ServerList> list = ServerList::Parse(servers);
  if (!list.ok()) return InvalidArgument(servers_from + ": " + list.status().message());
  c.servers = *std::move(list);
  c.servers_from = servers_from;
  return c;
}

Status SaveClientConfig(const ClientConfig& config) {
  const std::string path = ConfigPath();
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(path).parent_path(), ec);
  nlohmann::json j = {{"server", config.servers.ToString()}, {"token", config.token}};
  if (!config.ca_cert.empty()) j["ca_cert"] = config.ca_cert;
  return WriteSecretFile(path, j.dump(2) + "\n");
}

ApiClient::ApiClient(ClientConfig config, std::ostream& notices)
    : config_(std::move(config)),
      notices_(notices),
      busy_(config_.busy_budget, kMaxRetriedLimitWait),
      jitter_(std::random_device()()) {
  // A server that refuses a body before reading it all (413) closes the connection while the
  // body is being sent: the write fails (EPIPE) and the answer is read, instead of SIGPIPE
  // ending the command. The CLI starts no processes that could inherit this.
  std::signal(SIGPIPE, SIG_IGN);
}

ApiClient::~ApiClient() = default;

Result<HttpClient*> ApiClient::ClientOf(const std::string& url) {
  std::unique_ptr<HttpClient>& http = clients_[url];
  if (!http) {
    Result<HttpOrigin> origin = HttpOrigin::Parse(url);
    if (!origin.ok()) return origin.status();
    http = std::make_unique<HttpClient>(*std::move(origin), ClientOptions(config_.ca_cert));
  }
  return http.get();
}

Result<HttpResponse> ApiClient::Send(Idempotency idempotency, HttpRequest request) {
  request.headers.emplace_back("Authorization", "Bearer " + config_.token);
  while (true) {
    Result<HttpResult> r = Search(idempotency, request);
    if (!r.ok()) return r.status();
    // A busy answer carried nothing out: the same request, to the same server, once it is due.
    const std::optional<BusyAnswer> busy = BusyAnswerOf(r->Outcome());
    if (!busy) return std::move(r->response);
    const std::optional<std::chrono::milliseconds> wait =
        busy_.Next(*busy, jitter_.UniformDouble());
    if (!wait && busy->status == 503) {
      return Status(StatusCode::kUnavailable,
                    busy->detail + " (still busy after this command waited " +
                        std::to_string(busy_.waited().count() / 1000) + " s)");
    }
    if (!wait) return std::move(r->response);  // a limit that clears later: shown (ErrorOf)
    const int64_t seconds = std::max<int64_t>((wait->count() + 500) / 1000, 1);
    notices_ << "corral: " << (busy->status == 503 ? "server busy" : busy->detail)
             << ", retrying in " << seconds << " s\n"
             << std::flush;
    std::this_thread::sleep_for(*wait);
  }
}

Result<HttpResult> ApiClient::Search(Idempotency idempotency, const HttpRequest& request) {
  const auto start = std::chrono::steady_clock::now();
  LeaderSearch search(config_.servers, answered_, idempotency, config_.retry_timeout);
  while (true) {
    Result<HttpClient*> http = ClientOf(search.url());
    if (!http.ok()) return http.status();
    HttpResult r = (*http)->Send(request);
    const LeaderSearch::Decision next =
        search.Next(AttemptOf(r.Outcome()), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                std::chrono::steady_clock::now() - start));
    switch (next.step) {
      case LeaderSearch::Step::kDone:
        answered_ = search.url();
        return r;
      case LeaderSearch::Step::kFailed:
        // Nothing listened at any address: say where the address came from and what to check.
        if (next.unreachable && !config_.servers_from.empty()) {
          return Status(next.error.code(),
                        next.error.message() + ". Is the server running there? (address from " +
                            config_.servers_from +
                            "; change it, or run 'corral login --server URL --token T')");
        }
        return next.error;
      case LeaderSearch::Step::kRetry:
        std::this_thread::sleep_for(next.wait);
        break;
    }
  }
}

namespace {

HttpRequest JsonRequest(std::string method, const std::string& path, const nlohmann::json& body) {
  return {std::move(method), path, {}, body.dump(), "application/json"};
}

}  // namespace

Result<nlohmann::json> ApiClient::Get(const std::string& path) {
  return JsonOf(Send(Idempotency::kIdempotent, {"GET", path, {}, "", ""}));
}

Result<nlohmann::json> ApiClient::Post(const std::string& path, const nlohmann::json& body) {
  return JsonOf(Send(Idempotency::kNotIdempotent, JsonRequest("POST", path, body)));
}

Result<nlohmann::json> ApiClient::Put(const std::string& path, const nlohmann::json& body) {
  return JsonOf(Send(Idempotency::kIdempotent, JsonRequest("PUT", path, body)));
}

Result<nlohmann::json> ApiClient::Delete(const std::string& path) {
  return JsonOf(Send(Idempotency::kIdempotent, {"DELETE", path, {}, "", ""}));
}

Result<Reply> ApiClient::GetReply(const std::string& path) {
  return ReplyOf(Send(Idempotency::kIdempotent, {"GET", path, {}, "", ""}));
}

namespace {

// An absolute http(s) URL split into its origin and its target ("/" when it has no path).
Result<std::pair<HttpOrigin, std::string>> SplitUrl(const std::string& url) {
  const size_t scheme = url.find("://");
  if (scheme == std::string::npos) return InvalidArgument("not an absolute URL: " + url);
  const size_t path = std::min(url.find('/', scheme + 3), url.size());
  Result<HttpOrigin> origin = HttpOrigin::Parse(url.substr(0, path));
  if (!origin.ok()) return origin.status();
  return std::pair{*std::move(origin), path < url.size() ? url.substr(path) : "/"};
}

}  // namespace

Result<int> ApiClient::GetStatusAt(const std::string& url) {
  auto split = SplitUrl(url);
  if (!split.ok()) return split.status();
  HttpClient http(split->first, ClientOptions(config_.ca_cert));
  const HttpResult r =
      http.Send({"GET", split->second, {{"Authorization", "Bearer " + config_.token}}, "", ""});
  if (!r.ok()) {
    return IoError("cannot reach " + url.substr(0, url.find('/', url.find("://") + 3)) + ": " +
                   AttemptOf(r.Outcome()).detail);
  }
  return r.response.status;
}

Result<HttpUpgrade> ApiClient::OpenWebSocketAt(const std::string& url, const std::string& key) {
  auto split = SplitUrl(url);
  if (!split.ok()) return split.status();
  HttpClient http(split->first, ClientOptions(config_.ca_cert));
  HttpUpgrade upgrade = http.Upgrade({"GET",
                                      split->second,
                                      {{"Authorization", "Bearer " + config_.token},
                                       {"Upgrade", "websocket"},
                                       {"Sec-WebSocket-Version", "13"},
                                       {"Sec-WebSocket-Key", key}},
                                      "",
                                      ""});
  if (!upgrade.answer.ok()) {
    return IoError("cannot reach " + url.substr(0, url.find('/', url.find("://") + 3)) + ": " +
                   AttemptOf(upgrade.answer.Outcome()).detail);
  }
  return upgrade;
}

}  // namespace corral::cli
