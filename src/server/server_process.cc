#include "server/server_process.h"

#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>

#include "common/random_id.h"
#include "common/secret_file.h"
#include "server/control/reconcile.h"
#include "server/gateway/session_proxy.h"
#include "server/http/auth.h"

namespace corral::server {

namespace {

// The session gateway's questions, answered by the API's token lookup and the controller.
class ServerSessionDirectory final : public SessionDirectory {
 public:
  ServerSessionDirectory(HttpApi& api, Controller& controller)
      : api_(api), controller_(controller) {}
  Result<Principal> Authenticate(const std::string& token) override {
    return api_.AuthenticateToken(token);
  }
  Result<Controller::SessionEndpoint> Endpoint(const Principal& who, JobId id) override {
    return controller_.ProxyTarget(who, id);
  }
  void NoteUse(JobId id) override { controller_.NoteSessionUse(id); }

 private:
  HttpApi& api_;
  Controller& controller_;
};

std::string ReadFirstLine(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  return line;
}

// First start: the default project every user belongs to, then the admin user with its
// membership and token in one transaction, so that a failed start leaves no admin without a
// token (the next start tries again).
Result<std::string> Bootstrap(store::Store& store, Clock& clock) {
  auto users = store.ListUsers();
  if (!users.ok()) return users.status();
  if (!users->empty()) return std::string();
  auto project = store.CreateProject("default", "jobs that name no project", clock.Now());
  if (!project.ok() && project.status().code() != StatusCode::kAlreadyExists) {
    return project.status();
  }
  auto token = GenerateToken();
  if (!token.ok()) return token.status();
  // Never expires, whatever --default-token-expiry says: it is the way back in.
  auto admin = store.CreateUserWithToken("admin", true, {"default"}, "admin-bootstrap",
                                         HashToken(*token), clock.Now(), std::nullopt);
  if (!admin.ok()) return admin.status();
  return *token;
}

// HOST:PORT as given to `flag` (--listen, --session-listen).
Result<std::pair<std::string, int>> ParseListen(const std::string& listen,
                                                const std::string& flag) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgument(flag + ": expected HOST:PORT");
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    return InvalidArgument(flag + ": bad port '" + port + "'");
  }
  return std::make_pair(listen.substr(0, colon), std::stoi(port));
}

}  // namespace

std::string DefaultEnvsDir() {
  std::error_code ec;
  return std::filesystem::is_directory(CORRAL_SOURCE_ENVS_DIR, ec) ? CORRAL_SOURCE_ENVS_DIR : "";
}

std::string DefaultWebDir() {
  std::error_code ec;
  const std::string dir = CORRAL_SOURCE_WEB_DIST_DIR;
  return std::filesystem::is_regular_file(dir + "/index.html", ec) ? dir : "";
}

Result<std::unique_ptr<ServerProcess>> ServerProcess::Create(const ServerOptions& options) {
  std::unique_ptr<ServerProcess> p(new ServerProcess());
  if (options.data_dir.empty()) return InvalidArgument("--data-dir: required");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/logs", ec);
  if (ec) return IoError("cannot create '" + options.data_dir + "': " + ec.message());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  auto listen = ParseListen(options.listen, "--listen");
  if (!listen.ok()) return listen.status();
  std::optional<std::pair<std::string, int>> session_listen;
  if (!options.session_listen.empty()) {
    auto parsed = ParseListen(options.session_listen, "--session-listen");
    if (!parsed.ok()) return parsed.status();
    session_listen = *parsed;
  }
  if (options.session_max_connections < 1 || options.session_max_connections_per_session < 1 ||
      options.session_max_pending_per_address < 1) {
    return InvalidArgument(
        "--session-max-connections, --session-max-connections-per-session, "
        "--session-max-pending-per-address: must be at least 1");
  }
  const reconcile::NodeTimings timings{
      Seconds(options.node_timeout_s), Seconds(options.fence_after_s),
      Seconds(options.kill_grace_s), Seconds(options.node_give_up_s)};
  CORRAL_RETURN_IF_ERROR(reconcile::CheckNodeTimings(timings));
  if (options.session_idle_timeout_s < 0) {
    return InvalidArgument("--session-idle-timeout: must be 0 (never) or a number of seconds");
  }
  if (options.session_idle_warning_s < 0) {
    return InvalidArgument("--session-idle-warning: must be a number of seconds (>= 0)");
  }
  if (options.session_proxy_timeout_s < 1) {
    return InvalidArgument("--session-proxy-timeout: must be at least 1 second");
  }
  if (!options.public_url.empty() && options.public_url.rfind("http://", 0) != 0 &&
      options.public_url.rfind("https://", 0) != 0) {
    return InvalidArgument("--public-url: must start with http:// or https://");
  }
  if (!options.session_public_url.empty() && OriginOf(options.session_public_url).empty()) {
    return InvalidArgument("--session-public-url: must be an http:// or https:// URL");
  }

  auto store = store::OpenStore(options.store_url);
  if (!store.ok()) return store.status();
  p->store_ = std::move(store).value();
  auto admin_token = Bootstrap(*p->store_, p->clock_);
  if (!admin_token.ok()) return admin_token.status();
  p->new_admin_token_ = *admin_token;
  if (!p->new_admin_token_.empty()) {
    CORRAL_RETURN_IF_ERROR(
        WriteSecretFile(options.data_dir + "/admin.token", p->new_admin_token_ + "\n"));
  }

  p->join_token_ = options.join_token;
  const std::string join_path = options.data_dir + "/join.token";
  if (p->join_token_.empty()) p->join_token_ = ReadFirstLine(join_path);
  if (p->join_token_.empty()) {
    auto token = GenerateToken();
    if (!token.ok()) return token.status();
    p->join_token_ = *token;
    CORRAL_RETURN_IF_ERROR(WriteSecretFile(join_path, p->join_token_ + "\n"));
  }

  // The key sessions' secrets are derived from: every server of the cluster must have the same.
  const std::string key_path = options.session_key_file.empty() ? options.data_dir + "/session.key"
                                                                : options.session_key_file;
  std::string session_key = ReadFirstLine(key_path);
  if (session_key.empty() && options.session_key_file.empty()) {
    auto key = RandomHexId(kSecretBytes);
    if (!key.ok()) return key.status();
    session_key = *key;
    CORRAL_RETURN_IF_ERROR(WriteSecretFile(key_path, session_key + "\n"));
  }
  if (session_key.size() < 32) {
    return InvalidArgument("--session-key-file " + key_path +
                           ": the first line must hold a key of at least 32 characters");
  }

  ControllerConfig config;
  config.session_key = session_key;
  config.policy = options.policy;
  config.node_timeout = Seconds(options.node_timeout_s);
  config.logs_dir = options.data_dir + "/logs";
  config.max_log_bytes = options.max_log_bytes;
  config.max_pending_jobs = options.max_pending_jobs;
  if (options.default_token_expiry_s > 0) {
    config.default_token_expiry = Seconds(options.default_token_expiry_s);
  }
  config.policy_file = options.policy_file;
  config.kill_grace = Seconds(options.kill_grace_s);
  config.fence_after = Seconds(options.fence_after_s);
  config.node_give_up = Seconds(options.node_give_up_s);
  config.session_idle_timeout = Seconds(options.session_idle_timeout_s);
  config.session_idle_warning = Seconds(options.session_idle_warning_s);
  p->session_app_probe_ = std::make_unique<HttpSessionAppProbe>();
  config.session_app_probe = p->session_app_probe_.get();
  config.gpu_monitor.idle_threshold_percent = options.gpu_idle_threshold_percent;
  config.gpu_monitor.idle_after_ms = int64_t{options.gpu_idle_after_s} * 1000;
  config.notify_idle_gpus = options.gpu_idle_events;
  config.resource_defaults.cpus_per_gpu = options.default_cpus_per_gpu;
  config.resource_defaults.memory_per_cpu = MemoryMib(options.default_memory_per_cpu_mib);
  config.work_visibility =
      options.show_all_work ? WorkVisibility::kAll : WorkVisibility::kOwnProjects;
  auto controller = Controller::Create(config, *p->store_, p->clock_);
  if (!controller.ok()) return controller.status();
  p->controller_ = std::move(controller).value();
  GpuHistory::Options history;
  history.fine_retention = Seconds(options.metrics_fine_retention_s);
  history.coarse_retention = Seconds(options.metrics_coarse_retention_s);
  p->gpu_history_ =
      std::make_unique<GpuHistory>(p->controller_->Gpus(), *p->store_, p->clock_, history);
  if (!options.envs_dir.empty()) {
    auto builtins = LoadEnvironmentDir(options.envs_dir);
    if (!builtins.ok()) {
      return Status(builtins.status().code(), "--envs-dir: " + builtins.status().message());
    }
    auto loaded = p->controller_->Environments().LoadBuiltins(*builtins);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "--envs-dir " + options.envs_dir + ": " + loaded.status().message());
    }
    for (const std::string& skipped : loaded->skipped) {
      std::cerr << "corral server: warning: --envs-dir " << options.envs_dir << ": " << skipped
                << "\n";
    }
  }

  auto [host, port] = *listen;
  Result<ListenSocket> socket = IoError("");
  const int tries = options.next_free_port ? 20 : 1;
  for (int i = 0; i < tries; ++i) {
    socket = Listen(host, port == 0 ? 0 : port + i, "--listen");
    if (socket.ok()) break;
  }
  if (!socket.ok()) return socket.status();
  const int bound = socket->port;
  const std::string scheme = options.tls_cert.empty() ? "http" : "https";
  p->url_ = scheme + "://" + host + ":" + std::to_string(bound);

  // The session gateway: by default next to the API (its port + 1; a free one in tests).
  SessionGatewayOptions gateway;
  gateway.host = session_listen ? session_listen->first : host;
  gateway.tls_cert = options.tls_cert;
  gateway.tls_key = options.tls_key;
  gateway.api_url = options.public_url;
  gateway.api_port = bound;
  gateway.max_connections = options.session_max_connections;
  gateway.max_connections_per_session = options.session_max_connections_per_session;
  gateway.max_pending_per_address = options.session_max_pending_per_address;
  gateway.idle_timeout = std::chrono::seconds(options.session_proxy_timeout_s);
  const int gateway_port = session_listen ? session_listen->second : port == 0 ? 0 : bound + 1;
  for (int i = 0; i < (session_listen ? 1 : tries) && !p->gateway_; ++i) {
    gateway.port = gateway_port == 0 ? 0 : gateway_port + i;
    // Without --session-public-url: --public-url's with the gateway's port (unknown yet for
    // port 0, in tests: then the gateway and the API derive it from each request).
    gateway.public_url = !options.session_public_url.empty() ? options.session_public_url
                         : gateway.port != 0 ? WithPort(options.public_url, gateway.port)
                                             : "";
    auto created = SessionGateway::Create(gateway);
    if (created.ok()) {
      p->gateway_ = std::move(created).value();
    } else if (i + 1 == (session_listen ? 1 : tries)) {
      return created.status();
    }
  }

  HttpApiConfig api_config;
  api_config.join_token_hash = HashToken(p->join_token_);
  api_config.gpu_history = p->gpu_history_.get();
  if (!options.metrics_token_file.empty()) {
    const std::string token = ReadFirstLine(options.metrics_token_file);
    if (token.size() < 16) {
      return InvalidArgument("--metrics-token-file " + options.metrics_token_file +
                             ": the first line must hold a token of at least 16 characters");
    }
    api_config.metrics_token_hash = HashToken(token);
  }
  api_config.public_url = options.public_url;
  api_config.tls = !options.tls_cert.empty();
  api_config.session_url = gateway.public_url;
  api_config.session_port = p->gateway_->port();
  if (!options.web_dir.empty()) {
    auto web = WebAssets::Create(options.web_dir);
    if (!web.ok()) return web.status();
    api_config.web_assets = std::move(web).value();
  }
  p->api_ = std::make_unique<HttpApi>(*p->controller_, p->clock_, api_config);
  HttpServerOptions http;
  http.tls_cert = options.tls_cert;
  http.tls_key = options.tls_key;
  http.limits.max_anonymous_per_address = options.max_anonymous_connections_per_address;
  http.limits.max_anonymous = options.max_anonymous_connections;
  http.limits.head_timeout = std::chrono::seconds(options.request_head_timeout_s);
  http.limits.body_timeout = std::chrono::seconds(options.request_body_timeout_s);
  http.max_connections = options.max_connections;
  HttpApi* api = p->api_.get();
  http.admit = [api](const HttpRequest& head) { return api->Admit(head); };
  auto server = HttpServer::Create(*socket, std::move(http));
  if (!server.ok()) return server.status();
  p->http_ = std::move(server).value();
  p->api_->Register(*p->http_);
  p->session_directory_ = std::make_unique<ServerSessionDirectory>(*p->api_, *p->controller_);
  return p;
}

Status ServerProcess::Start() {
  controller_->Start();
  gpu_history_->Start();
  if (Status started = http_->Start(); !started.ok()) return started;
  gateway_->Start(*session_directory_);
  return Status::Ok();
}

void ServerProcess::Stop() {
  if (gateway_) gateway_->Stop();  // its connections end now, WebSockets included
  if (api_) api_->Shutdown();      // live event streams end now, not at their next event
  if (http_) http_->Stop();
  if (controller_) controller_->Stop();
  if (gpu_history_) gpu_history_->Stop();  // stores what the monitor still holds
}

ServerProcess::~ServerProcess() { Stop(); }

}  // namespace corral::server
