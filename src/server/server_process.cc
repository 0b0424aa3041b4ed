#include "server/server_process.h"

#include <httplib.h>

#include <filesystem>
#include <fstream>
#include <iostream>

#include "common/secret_file.h"
#include "server/auth.h"
#include "server/session_proxy.h"

namespace corral::server {

namespace {

// HTTP threads beyond those waiting heartbeats may hold: API requests and short heartbeats.
constexpr int kApiThreads = 16;
// Requests through the session proxy wait for apps, each holding one of those threads: at most
// half of them, and 4 for one session (ProxyLimiter), so that slow apps leave the API threads.
constexpr int kProxiedRequests = kApiThreads / 2;
constexpr int kProxiedRequestsPerSession = 4;

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
  auto admin = store.CreateUserWithToken("admin", true, {"default"}, "admin-bootstrap",
                                         HashToken(*token), clock.Now());
  if (!admin.ok()) return admin.status();
  return *token;
}

Result<std::pair<std::string, int>> ParseListen(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  if (colon == std::string::npos) return InvalidArgument("--listen: expected HOST:PORT");
  const std::string port = listen.substr(colon + 1);
  if (port.empty() || port.size() > 5 ||
      port.find_first_not_of("0123456789") != std::string::npos || std::stoi(port) > 65535) {
    return InvalidArgument("--listen: bad port '" + port + "'");
  }
  return std::make_pair(listen.substr(0, colon), std::stoi(port));
}

}  // namespace

std::string DefaultEnvsDir() {
  std::error_code ec;
  return std::filesystem::is_directory(CORRAL_SOURCE_ENVS_DIR, ec) ? CORRAL_SOURCE_ENVS_DIR : "";
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
  auto listen = ParseListen(options.listen);
  if (!listen.ok()) return listen.status();
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

  ControllerConfig config;
  config.policy = options.policy;
  config.node_timeout = Seconds(options.node_timeout_s);
  config.logs_dir = options.data_dir + "/logs";
  config.policy_file = options.policy_file;
  config.kill_grace = Seconds(options.kill_grace_s);
  config.session_idle_timeout = Seconds(options.session_idle_timeout_s);
  config.session_idle_warning = Seconds(options.session_idle_warning_s);
  p->session_app_probe_ = std::make_unique<HttpSessionAppProbe>();
  config.session_app_probe = p->session_app_probe_.get();
  auto controller = Controller::Create(config, *p->store_, p->clock_);
  if (!controller.ok()) return controller.status();
  p->controller_ = std::move(controller).value();
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

  if (!options.tls_cert.empty()) {
    p->http_ =
        std::make_unique<httplib::SSLServer>(options.tls_cert.c_str(), options.tls_key.c_str());
    if (!p->http_->is_valid()) {
      return InvalidArgument("--tls-cert/--tls-key: cannot load the certificate or key");
    }
  } else {
    p->http_ = std::make_unique<httplib::Server>();
  }
  HttpApiConfig api_config;
  api_config.join_token_hash = HashToken(p->join_token_);
  api_config.public_url = options.public_url;
  api_config.tls = !options.tls_cert.empty();
  api_config.proxy_limits.total = kProxiedRequests;
  api_config.proxy_limits.per_session = kProxiedRequestsPerSession;
  api_config.proxy_read_timeout = std::chrono::seconds(options.session_proxy_timeout_s);
  p->api_ = std::make_unique<HttpApi>(*p->controller_, *p->store_, p->clock_, api_config);
  p->api_->Register(*p->http_);
  // Answers go out in two writes (headers, body): without this, Nagle holds the body until the
  // client's delayed ACK, ~40 ms per request on keep-alive connections.
  p->http_->set_tcp_nodelay(true);
  // Waiting heartbeats hold a thread each (at most Controller::kMaxWaitingHeartbeats); the rest
  // of the pool always serves the API.
  p->http_->new_task_queue = [] {
    return new httplib::ThreadPool(Controller::kMaxWaitingHeartbeats + kApiThreads);
  };
  auto [host, port] = *listen;
  int bound = -1;
  const int tries = options.next_free_port ? 20 : 1;
  for (int i = 0; i < tries && bound < 0; ++i) {
    if (port == 0) {
      bound = p->http_->bind_to_any_port(host);
    } else if (p->http_->bind_to_port(host, port + i)) {
      bound = port + i;
    }
  }
  if (bound < 0) return IoError("--listen: cannot bind " + options.listen);
  p->url_ = std::string(options.tls_cert.empty() ? "http" : "https") + "://" + host + ":" +
            std::to_string(bound);
  return p;
}

void ServerProcess::Start() {
  controller_->Start();
  serve_ = std::thread([this] { http_->listen_after_bind(); });
}

void ServerProcess::Stop() {
  if (http_) http_->stop();
  if (serve_.joinable()) serve_.join();
  if (controller_) controller_->Stop();
}

ServerProcess::~ServerProcess() { Stop(); }

}  // namespace corral::server
