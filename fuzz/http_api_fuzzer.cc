// Fuzzes the API server's request path without sockets: a request as libmicrohttpd hands it to
// HttpServer (method, decoded path, query parameters, headers, body), admitted by the real
// HttpApi::Admit and refused as HttpServer::Begin refuses (414, 415, 413), then run by
// HttpServer::Dispatch on the routes a real HttpApi registered over a real Controller on a SQLite
// store. Each input meets the same cluster (so that a crash reproduces from its input alone):
// projects "default" and "vision", users "root" (an admin) and "alice" (a member of both), node
// "n1" with 4 GPUs registered through the agent gateway, and job 1 (1 GPU, alice's) running on
// it.
//
// The input is a request in text, HTTP's own shape without the version:
//
//   POST /api/v1/jobs?x=1            the method, then the target (path and query, as sent)
//   Authorization: Bearer $ADMIN     headers, one a line, up to an empty line
//
//   {"name": "t", "command": ["true"]}   the body: the rest of the input
//
// $ADMIN, $MEMBER, $JOIN and $NODE, in a header's value or in the body, stand for root's and
// alice's API tokens, the join token and n1's node token (X-Corral-Node: n1 names it).
// fuzz/http_api.dict holds the routes, the headers and the body fields.
//
// What must hold, for any input: no crash, no leak, no ASan or UBSan report, bounded time (a
// heartbeat's long poll is shortened to none: see Run), and the answer is well formed: its status
// is not 500 (which Dispatch answers when a route throws), an error (4xx, 5xx) is
// application/problem+json whose body is a JSON object with that status, and a streamed answer's
// first piece can be produced.
#include <strings.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "common/clock.h"
#include "common/json_parse.h"
#include "protocol/agent_messages.h"
#include "server/api/http_api.h"
#include "server/control/controller.h"
#include "server/http/auth.h"
#include "server/http/http_server.h"
#include "server/monitoring/gpu_history.h"
#include "store/store.h"

namespace corral::server {
namespace {

void Check(bool holds) {
  if (!holds) std::abort();
}

// A store and logs on tmpfs when there is one: SQLite syncs every commit.
std::filesystem::path TempRoot() {
  std::error_code ec;
  if (std::filesystem::is_directory("/dev/shm", ec)) return "/dev/shm";
  return std::filesystem::temp_directory_path();
}

constexpr char kJoinToken[] = "join-token-of-the-http-fuzzer";
constexpr char kNodeId[] = "node-id-of-the-http-fuzzer";

// A server's state, from the store up to the routes, in a directory of its own.
class Cluster {
 public:
  Cluster()
      : dir_(TempRoot() / ("corral-http-fuzzer-" + std::to_string(::getpid()))),
        clock_(Seconds(1'700'000'000)) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    store_ = Must(store::OpenStore("sqlite:" + (dir_ / "corral.db").string()));
    ControllerConfig config;
    config.node_timeout = Seconds(int64_t{1} << 30);  // the clock never moves; nodes stay
    config.logs_dir = (dir_ / "logs").string();
    controller_ = Must(Controller::Create(config, *store_, clock_));
    Accounts& accounts = controller_->Accounts();
    Must(accounts.CreateProject("default", ""));
    Must(accounts.CreateProject("vision", ""));
    admin_token_ = Must(accounts.CreateUser("root", true, {"default"})).token;
    member_token_ = Must(accounts.CreateUser("alice", false, {"default", "vision"})).token;
    gpu_history_ =
        std::make_unique<GpuHistory>(controller_->Gpus(), *store_, clock_, GpuHistory::Options{});
    HttpApiConfig api_config;
    api_config.join_token_hash = HashToken(kJoinToken);
    api_config.gpu_history = gpu_history_.get();
    api_config.session_port = 18443;
    api_ = std::make_unique<HttpApi>(*controller_, clock_, api_config);
    HttpServerOptions options;
    options.admit = [this](const HttpRequest& head) { return api_->Admit(head); };
    // Never started: Dispatch needs no socket, but HttpServer is made with one.
    http_ = Must(HttpServer::Create(Must(Listen("127.0.0.1", 0, "--listen")), std::move(options)));
    api_->Register(*http_);

    const nlohmann::json registration = {{"protocol_version", protocol::kProtocolVersion},
                                         {"name", "n1"},
                                         {"node_id", kNodeId},
                                         {"inventory",
                                          {{"hostname", "n1"},
                                           {"cpu_milli", 64000},
                                           {"memory_mib", 262144},
                                           {"gpu_model", "A100"},
                                           {"gpus",
                                            {{{"uuid", "GPU-0"}, {"memory_mib", 81920}},
                                             {{"uuid", "GPU-1"}, {"memory_mib", 81920}},
                                             {{"uuid", "GPU-2"}, {"memory_mib", 81920}},
                                             {{"uuid", "GPU-3"}, {"memory_mib", 81920}}}}}}};
    HttpResponse registered =
        Serve("POST", "/api/v1/agent/register", kJoinToken, registration.dump());
    Check(registered.status == 200);
    node_token_ = nlohmann::json::parse(registered.body).at("node_token").get<std::string>();
    const nlohmann::json job = {{"name", "t"}, {"command", {"true"}}, {"resources", {{"gpus", 1}}}};
    Check(Serve("POST", "/api/v1/jobs", member_token_, job.dump()).status == 201);
    controller_->Tick();  // job 1 runs on n1
  }

  ~Cluster() {
    api_->Shutdown();
    http_.reset();
    api_.reset();
    gpu_history_.reset();
    controller_.reset();
    store_.reset();
    std::filesystem::remove_all(dir_);
  }

  // `text` with the placeholders replaced by the credentials they stand for.
  std::string WithCredentials(std::string text) const {
    for (const auto& [name, value] :
         {std::pair<std::string_view, std::string_view>{"$ADMIN", admin_token_},
          {"$MEMBER", member_token_},
          {"$JOIN", kJoinToken},
          {"$NODE", node_token_}}) {
      for (size_t at = text.find(name); at != std::string::npos;
           at = text.find(name, at + value.size())) {
        text.replace(at, name.size(), value);
      }
    }
    return text;
  }

  // What the server does with `request` once libmicrohttpd read its head: HttpServer::Begin's
  // admission and refusals (nullopt: refused, HttpServer's own answer), then, once the body
  // arrived within its limit, Dispatch.
  std::optional<HttpResponse> Run(HttpRequest& request) const {
    const HttpServerOptions limits;  // the server's defaults
    auto admitted = api_->Admit(request);
    if (!admitted.ok() || request.target.size() > limits.max_target_bytes) return std::nullopt;
    const std::string coding = request.Header("Content-Encoding");
    if (!coding.empty() && strcasecmp(coding.c_str(), "identity") != 0) return std::nullopt;
    if (request.body.size() > admitted->max_body_bytes) return std::nullopt;
    if (request.path == "/api/v1/agent/heartbeat") NoLongPoll(request);
    HttpResponse response;
    http_->Dispatch(request, response);
    return response;
  }

 private:
  template <typename T>
  static T Must(Result<T> result) {
    if (!result.ok()) {
      fprintf(stderr, "http_api_fuzzer: %s\n", result.status().ToString().c_str());
      std::abort();
    }
    return std::move(result).value();
  }

  HttpResponse Serve(std::string method, std::string path, const std::string& token,
                     std::string body) const {
    HttpRequest request;
    request.method = std::move(method);
    request.path = request.target = std::move(path);
    request.headers.emplace("Authorization", "Bearer " + token);
    request.body = std::move(body);
    request.client_address = "127.0.0.1";
    std::optional<HttpResponse> response = Run(request);
    Check(response.has_value());
    return *std::move(response);
  }

  // A heartbeat waits up to its wait_ms (30 s) for something to answer, by design: an input
  // must run in bounded time, so a positive wait_ms becomes 0 (anything else is left to the
  // codec to refuse).
  static void NoLongPoll(HttpRequest& request) {
    auto body = ParseJson(request.body, "request body");
    if (!body.ok() || !body->is_object() || !body->contains("wait_ms")) return;
    nlohmann::json& wait = (*body)["wait_ms"];
    if (!wait.is_number_integer() || wait <= 0) return;
    wait = 0;
    request.body = body->dump();
  }

  std::filesystem::path dir_;
  FakeClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<GpuHistory> gpu_history_;
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> http_;
  std::string admin_token_, member_token_, node_token_;
};

// libmicrohttpd's decoding of a target's path and query: %XX becomes the byte (other '%'s stay),
// and in the query '+' is a space; each is handed on as a C string, which ends at a NUL.
std::string Unescape(std::string_view text, bool plus_is_space) {
  auto hex = [](char c) -> int {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '%' && i + 2 < text.size() && hex(text[i + 1]) >= 0 && hex(text[i + 2]) >= 0) {
      out += static_cast<char>(hex(text[i + 1]) * 16 + hex(text[i + 2]));
      i += 2;
    } else {
      out += plus_is_space && text[i] == '+' ? ' ' : text[i];
    }
  }
  return out.substr(0, out.find('\0'));
}

// The request an input stands for (see the top of this file).
HttpRequest RequestOf(std::string_view input, const Cluster& cluster) {
  HttpRequest request;
  request.client_address = "127.0.0.1";
  auto next_line = [&input] {
    const size_t end = input.find('\n');
    std::string_view line = input.substr(0, end);
    input.remove_prefix(end == std::string_view::npos ? input.size() : end + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };
  const std::string_view request_line = next_line();
  const size_t space = request_line.find(' ');
  request.method = std::string(request_line.substr(0, space));
  request.method = request.method.substr(0, request.method.find('\0'));
  request.target =
      space == std::string_view::npos ? "" : std::string(request_line.substr(space + 1));
  const size_t query = request.target.find('?');
  request.path = Unescape(std::string_view(request.target).substr(0, query), false);
  if (query != std::string::npos) {
    std::string_view args = std::string_view(request.target).substr(query + 1);
    while (!args.empty()) {
      const size_t amp = args.find('&');
      const std::string_view arg = args.substr(0, amp);
      args.remove_prefix(amp == std::string_view::npos ? args.size() : amp + 1);
      if (arg.empty()) continue;
      const size_t eq = arg.find('=');
      request.params.emplace(
          Unescape(arg.substr(0, eq), true),
          eq == std::string_view::npos ? "" : Unescape(arg.substr(eq + 1), true));
    }
  }
  while (!input.empty()) {
    const std::string_view line = next_line();
    if (line.empty()) break;
    const size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    std::string_view value = line.substr(colon + 1);
    while (!value.empty() && (value.front() == ' ' || value.front() == '\t'))
      value.remove_prefix(1);
    std::string name(line.substr(0, colon));
    request.headers.emplace(
        name.substr(0, name.find('\0')),
        cluster.WithCredentials(std::string(value.substr(0, value.find('\0')))));
  }
  request.body = cluster.WithCredentials(std::string(input));
  return request;
}

// The answer is well formed (see the top of this file); else the answer is printed and the
// process aborts.
void CheckAnswer(HttpResponse& response) {
  auto problem = ParseJson(response.body, "problem");
  const auto type = response.headers.find("Content-Type");
  const bool well_formed =
      response.status >= 100 && response.status <= 599 && response.status != 500 &&
      (response.status < 400 ||
       (type != response.headers.end() && type->second.rfind("application/problem+json", 0) == 0 &&
        problem.ok() && problem->is_object() && problem->value("status", 0) == response.status));
  if (!well_formed) {
    fprintf(stderr, "http_api_fuzzer: a malformed answer: %d %s\n%s\n", response.status,
            type == response.headers.end() ? "(no Content-Type)" : type->second.c_str(),
            response.body.c_str());
    std::abort();
  }
  if (response.next_piece) {
    std::string piece;
    (void)response.next_piece(piece);
  }
}

}  // namespace
}  // namespace corral::server

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Making a cluster takes most of an input's time. GET and HEAD are safe methods (RFC 9110):
  // they change nothing a later request sees, so the cluster they ran on is kept for the next
  // input; after any other method it is made again.
  static std::unique_ptr<corral::server::Cluster> cluster;
  if (!cluster) cluster = std::make_unique<corral::server::Cluster>();
  corral::server::HttpRequest request = corral::server::RequestOf(
      std::string_view(reinterpret_cast<const char*>(data), size), *cluster);
  std::optional<corral::server::HttpResponse> response = cluster->Run(request);
  if (response) corral::server::CheckAnswer(*response);
  if (request.method != "GET" && request.method != "HEAD") cluster.reset();
  return 0;
}
