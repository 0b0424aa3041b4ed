#include "server/server_process.h"

#include <fcntl.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <optional>
#include <tuple>

#include "common/config_file.h"
#include "common/random_id.h"
#include "common/secret_file.h"
#include "protocol/agent_messages.h"
#include "protocol/api_partitions.h"
#include "server/control/reconcile.h"
#include "server/gateway/session_proxy.h"
#include "server/http/auth.h"
#include "server/http/job_token.h"

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
  p->options_ = options;
  if (options.data_dir.empty()) return InvalidArgument("--data-dir: required");
  std::error_code ec;
  std::filesystem::create_directories(options.data_dir + "/logs", ec);
  if (ec) return IoError("cannot create '" + options.data_dir + "': " + ec.message());
  if (options.tls_cert.empty() != options.tls_key.empty()) {
    return InvalidArgument("--tls-cert and --tls-key: give both or neither");
  }
  auto listen = ParseListen(options.listen, "--listen");
  if (!listen.ok()) return listen.status();
  if (!options.session_listen.empty()) {
    CORRAL_RETURN_IF_ERROR(ParseListen(options.session_listen, "--session-listen").status());
  }
  if (options.session_max_connections < 1 || options.session_max_connections_per_session < 1 ||
      options.session_max_pending_per_address < 1) {
    return InvalidArgument(
        "--session-max-connections, --session-max-connections-per-session, "
        "--session-max-pending-per-address: must be at least 1");
  }
  if (options.max_requests_in_flight < 0) {
    return InvalidArgument("--max-requests-in-flight: must be 0 (no cap) or a number of requests");
  }
  if (options.admission_wait < std::chrono::milliseconds(0) ||
      options.admission_wait > kMaxAdmissionWait) {
    return InvalidArgument("--admission-wait: must be 0 to 10s (clients time out beyond)");
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
  if (!options.advertise_url.empty() && OriginOf(options.advertise_url).empty()) {
    return InvalidArgument("--advertise-url: must be an http:// or https:// URL");
  }
  CORRAL_RETURN_IF_ERROR(ValidateLeaseTiming(options.lease));
  if (!options.metrics_token_file.empty()) {
    const std::string token = ReadFirstLine(options.metrics_token_file);
    if (token.size() < 16) {
      return InvalidArgument("--metrics-token-file " + options.metrics_token_file +
                             ": the first line must hold a token of at least 16 characters");
    }
    p->api_config_.metrics_token_hash = HashToken(token);
  }
  if (!options.envs_dir.empty()) {
    auto builtins = LoadEnvironmentDir(options.envs_dir);
    if (!builtins.ok()) {
      return Status(builtins.status().code(), "--envs-dir: " + builtins.status().message());
    }
    p->builtins_ = std::move(builtins).value();
  }
  if (!options.web_dir.empty()) {
    auto web = WebAssets::Create(options.web_dir);
    if (!web.ok()) return web.status();
    p->api_config_.web_assets = std::move(web).value();
  }

  // SQLite serves one server: a second one on the same file stops here.
  auto lock = store::SingleServerLock::Acquire(options.store_url);
  if (!lock.ok()) return lock.status();
  p->single_server_lock_ = std::move(lock).value();
  auto store = store::OpenStore(options.store_url);
  if (!store.ok()) return store.status();
  p->store_ = std::move(store).value();
  if (!p->single_server_lock_) {
    // PostgreSQL: the lease gets a connection of its own, so that a renewal never queues behind
    // the leader's work on the shared one (a recovery reading every job, a group's commit)
    // while its deadline runs.
    auto lease_store = store::OpenStore(options.store_url);
    if (!lease_store.ok()) return lease_store.status();
    p->lease_store_ = std::move(lease_store).value();
  }
  CORRAL_RETURN_IF_ERROR(p->ShareSecrets());

  auto [host, port] = *listen;
  Result<ListenSocket> socket = IoError("");
  const int tries = options.next_free_port ? 20 : 1;
  for (int i = 0; i < tries; ++i) {
    socket = Listen(host, port == 0 ? 0 : port + i, "--listen");
    if (socket.ok()) break;
  }
  if (!socket.ok()) return socket.status();
  p->listen_fd_ = socket->fd;
  p->bound_port_ = socket->port;
  const std::string scheme = options.tls_cert.empty() ? "http" : "https";
  p->url_ = scheme + "://" + host + ":" + std::to_string(socket->port);
  p->api_config_.join_token_hash = p->join_token_hash_;
  p->api_config_.public_url = options.public_url;
  p->api_config_.tls = !options.tls_cert.empty();

  if (p->single_server_lock_) {
    CORRAL_RETURN_IF_ERROR(p->BuildLeader());
    return p;
  }
  // PostgreSQL: follow until the lease is ours. Clients and other servers are sent to the
  // advertised URL, which must be one they can reach.
  std::string advertise = !options.advertise_url.empty() ? options.advertise_url
                          : !options.public_url.empty()  ? options.public_url
                                                         : p->url_;
  if (options.advertise_url.empty() && options.public_url.empty() &&
      (host.empty() || host == "*" || host == "0.0.0.0" || host == "::" || host == "[::]")) {
    return InvalidArgument("--advertise-url: required when --listen binds every address (" +
                           options.listen +
                           "): the URL other servers send clients to while this one leads");
  }
  if (!options.tls_cert.empty() && advertise.rfind("https://", 0) != 0) {
    return InvalidArgument("--advertise-url: " + advertise +
                           " is not https:// although this server serves TLS: followers would "
                           "forward clients' credentials to it in clear");
  }
  // A failover (the lease's lapse, then a follower's poll) must end before agents fence, or
  // every failover would stop every requeue-able task.
  if (options.lease.duration + options.lease.renew_interval >=
      std::chrono::seconds(options.fence_after_s)) {
    return InvalidArgument(
        "--lease-duration plus --lease-renew-interval must be shorter than --fence-after (" +
        std::to_string(options.fence_after_s) +
        " s): agents would fence every requeue-able task at each failover");
  }
  while (!advertise.empty() && advertise.back() == '/') advertise.pop_back();
  p->advertise_url_ = advertise;
  auto holder = RandomHexId(8);
  if (!holder.ok()) return holder.status();
  ServerProcess* self = p.get();
  p->lease_ = std::make_unique<LeaderLease>(
      p->lease_store_ ? *p->lease_store_ : *p->store_, *holder, advertise, options.lease,
      [self](int64_t epoch) {
        // Built on a thread of its own: the renewals go on meanwhile.
        self->leader_thread_ = std::thread([self, epoch] {
          std::cout << "corral server: leading (epoch " << epoch << ")" << std::endl;
          // A connection to the store that broke while it was idle (PostgreSQL restarted) fails
          // its next statement once and is re-established by the one after: an I/O error is
          // tried again. Nothing is kept of a build that failed on the store (its errors come
          // before any part is kept), so building again is safe.
          Status led;
          for (int attempt = 0; attempt < 3; ++attempt) {
            led = self->BuildLeader();
            if (led.code() != StatusCode::kIoError) break;
          }
          if (led.ok()) led = self->StartLeader();
          if (!led.ok()) {
            std::cerr << "corral server: cannot start leading: " << led.message() << std::endl;
            std::_Exit(1);
          }
        });
      },
      [](const Status& why) {
        std::cerr << "corral server: no longer the leader (" << why.message()
                  << "); exiting with status " << kExitLostLease
                  << " so that a supervisor starts it again as a follower" << std::endl;
        std::_Exit(kExitLostLease);
      });
  p->peer_ = std::make_unique<PeerSignature>(p->session_key_);
  p->proxy_ = std::make_unique<LeaderProxy>(*p->peer_, LeaderProxyTiming{});
  p->follower_accounts_ = std::make_unique<Accounts>(
      *p->store_, p->clock_, PrincipalCache::Options{}, std::nullopt, p->session_key_);
  HttpServerOptions http = p->HttpOptions();
  // What it cannot forward (Divert) it answers from the head, also once the lease is held and
  // until the leader's own server replaces it (StartLeader): it has no routes.
  http.gate = [self](const HttpRequest& head) {
    return std::optional<HttpResponse>(FollowerAnswer(head, self->lease_->Leader()));
  };
  http.admit = [self](const HttpRequest& head) { return self->FollowerAdmit(head); };
  auto follower = HttpServer::Create(p->DuplicateListenSocket(), std::move(http));
  if (!follower.ok()) return follower.status();
  p->follower_http_ = std::move(follower).value();
  CORRAL_RETURN_IF_ERROR(p->FollowSessions(host, port));
  return p;
}

Status ServerProcess::FollowSessions(const std::string& api_host, int api_port) {
  // The port the gateway will have once this server leads (BuildLeader): --session-listen's,
  // else the API's + 1. With an API on port 0 (tests) it is not known ahead: nothing listens.
  std::string host = api_host;
  int port = bound_port_ + 1;
  if (!options_.session_listen.empty()) {
    std::tie(host, port) = *ParseListen(options_.session_listen, "--session-listen");
  } else if (api_port == 0) {
    return Status::Ok();
  }
  auto socket = Listen(host, port, "--session-listen");
  if (!socket.ok()) return socket.status();
  // Every request is sent to the leader's API with a 307 (method and body kept), which sends
  // session URLs on to its gateway: a bookmarked session URL of any server keeps working in a
  // browser. WebSocket handshakes are not redirected by browsers; pages that open them load
  // from the leader's gateway first. No leader known: 503, as the API port answers.
  HttpServerOptions http = HttpOptions();
  http.divert = nullptr;
  http.gate = [this](const HttpRequest& head) {
    const std::optional<std::string> leader = lease_->Leader();
    if (!leader || lease_->Leading() || head.path == "/healthz") {
      return std::optional<HttpResponse>(FollowerAnswer(head, leader));
    }
    HttpResponse res;
    if (head.target.empty() || head.target[0] != '/') {  // an absolute form: not ours to carry
      SendProblem(res, InvalidArgument("the request target must be a path: " + head.target));
    } else {
      res.Redirect(*leader + head.target, 307);
    }
    return std::optional<HttpResponse>(std::move(res));
  };
  http.admit = [this](const HttpRequest& head) { return FollowerAdmit(head); };
  auto server = HttpServer::Create(*socket, std::move(http));
  if (!server.ok()) return server.status();
  follower_sessions_ = std::move(server).value();
  return Status::Ok();
}

Status ServerProcess::ShareSecrets() {
  // The join token: this server's own (flag or file), which must be the cluster's; else the
  // cluster's (its hash: agents use the first server's token); else a new one, the cluster's
  // from now on.
  join_token_ = options_.join_token;
  const std::string join_path = options_.data_dir + "/join.token";
  if (join_token_.empty()) join_token_ = ReadFirstLine(join_path);
  std::string offer;
  bool created = false;
  if (!join_token_.empty()) {
    offer = HashToken(join_token_);
  } else {
    auto stored = store_->ShareClusterSecret(store::ClusterSecret::kJoinTokenHash, "");
    if (!stored.ok()) return stored.status();
    if (stored->empty()) {
      auto token = GenerateToken();
      if (!token.ok()) return token.status();
      join_token_ = *token;
      offer = HashToken(join_token_);
      created = true;
    }
  }
  auto shared = store_->ShareClusterSecret(store::ClusterSecret::kJoinTokenHash, offer);
  if (!shared.ok()) return shared.status();
  if (created && *shared == offer) {
    CORRAL_RETURN_IF_ERROR(WriteSecretFile(join_path, join_token_ + "\n"));
  } else if (created) {
    join_token_.clear();  // another server stored its own first: that one is the cluster's
  } else if (!offer.empty() && *shared != offer) {
    return FailedPrecondition(
        "join token: this server's (" +
        (options_.join_token.empty() ? join_path : std::string("--join-token")) +
        ") differs from the one the cluster's first server stored; give every server of the "
        "cluster the same join token, or none (it then uses the cluster's)");
  }
  join_token_hash_ = *shared;

  // The key sessions' secrets are derived from: every server of the cluster must have the same,
  // which the store checks by an HMAC of a fixed text under the key (never the key).
  const std::string key_path = options_.session_key_file.empty()
                                   ? options_.data_dir + "/session.key"
                                   : options_.session_key_file;
  session_key_ = ReadFirstLine(key_path);
  if (session_key_.empty() && options_.session_key_file.empty()) {
    auto key = RandomHexId(kSecretBytes);
    if (!key.ok()) return key.status();
    session_key_ = *key;
    CORRAL_RETURN_IF_ERROR(WriteSecretFile(key_path, session_key_ + "\n"));
  }
  if (session_key_.size() < 32) {
    return InvalidArgument("--session-key-file " + key_path +
                           ": the first line must hold a key of at least 32 characters");
  }
  const std::string check = HmacSha256Hex(session_key_, "corral session key check v1");
  auto stored_check = store_->ShareClusterSecret(store::ClusterSecret::kSessionKeyCheck, check);
  if (!stored_check.ok()) return stored_check.status();
  if (*stored_check != check) {
    return FailedPrecondition(
        "session key: this server's (" + key_path +
        ") differs from the one the cluster's other servers use, so sessions' secrets would "
        "differ; give every server of the cluster the same --session-key-file");
  }
  return Status::Ok();
}

ListenSocket ServerProcess::DuplicateListenSocket() const {
  return ListenSocket{fcntl(listen_fd_, F_DUPFD_CLOEXEC, 0), bound_port_};
}

HttpServerOptions ServerProcess::HttpOptions() const {
  HttpServerOptions http;
  http.tls_cert = options_.tls_cert;
  http.tls_key = options_.tls_key;
  http.limits.max_anonymous_per_address = options_.max_anonymous_connections_per_address;
  http.limits.max_anonymous = options_.max_anonymous_connections;
  http.limits.head_timeout = std::chrono::seconds(options_.request_head_timeout_s);
  http.limits.body_timeout = std::chrono::seconds(options_.request_body_timeout_s);
  http.max_connections = options_.max_connections;
  const int cap = options_.max_requests_in_flight;
  // The agents' pool: as many as the API's, plus the heartbeats the controller lets wait (their
  // long polls hold their slot while they wait).
  http.saturation = SaturationLimits{cap, cap == 0 ? 0 : cap + Controller::kMaxWaitingHeartbeats,
                                     options_.admission_wait};
  if (lease_) {
    http.vouch = [this](const HttpRequest& head) {
      return peer_->Verify(head, std::chrono::system_clock::now());
    };
    http.divert = [this](const HttpRequest& head) { return Divert(head); };
    http.gate = [this](const HttpRequest& head) { return Gate(head); };
  }
  return http;
}

HttpHandler ServerProcess::Divert(const HttpRequest& head) const {
  const std::optional<std::string> leader = lease_->Leader();
  // While it leads, or just after (its lease ran out before it heard so), it names itself.
  if (lease_->Leading() || !leader || *leader == advertise_url_) return nullptr;
  if ((head.method == "GET" || head.method == "HEAD") && head.path == "/healthz") return nullptr;
  if (peer_->Verify(head, std::chrono::system_clock::now())) return nullptr;  // forwarded once
  return [this](const HttpRequest& request, HttpResponse& response) {
    const std::optional<std::string> leader = lease_->Leader();
    std::optional<HttpResponse> answer;
    // Credentials that came over TLS never go on in clear (a leader advertising http://).
    const bool downgrade = api_config_.tls && leader && leader->rfind("https://", 0) != 0;
    if (leader && !downgrade) answer = proxy_->Forward(*leader, request);
    response = answer ? *std::move(answer) : FollowerAnswer(request, leader);
  };
}

Result<Admission> ServerProcess::FollowerAdmit(const HttpRequest& head) const {
  std::string token = BearerTokenOf(head.Header("Authorization"));
  if (token.empty()) {
    auto cookie = LoginCookieToken(head.Header("Cookie"));
    if (cookie.ok()) token = *cookie;
  }
  if (token.empty()) return Admission{Caller::kAnonymous, api_config_.max_anonymous_body_bytes};
  if ((!join_token_hash_.empty() && SecureEquals(HashToken(token), join_token_hash_)) ||
      (LooksLikeJobToken(token) ? follower_accounts_->AuthenticateJob(token)
                                : follower_accounts_->Authenticate(token))
          .ok()) {
    return Admission{Caller::kAuthenticated, api_config_.max_body_bytes};
  }
  if (head.HasHeader(protocol::kNodeHeader)) {
    return Admission{Caller::kAnonymous, api_config_.max_body_bytes};
  }
  return Admission{Caller::kAnonymous, api_config_.max_anonymous_body_bytes};
}

std::optional<HttpResponse> ServerProcess::Gate(const HttpRequest& head) const {
  if (lease_->Leading()) return std::nullopt;
  return FollowerAnswer(head, lease_->Leader());
}

Status ServerProcess::BuildLeader() {
  auto admin_token = Bootstrap(*store_, clock_);
  if (!admin_token.ok()) return admin_token.status();
  new_admin_token_ = *admin_token;
  if (!new_admin_token_.empty()) {
    CORRAL_RETURN_IF_ERROR(
        WriteSecretFile(options_.data_dir + "/admin.token", new_admin_token_ + "\n"));
  }

  const ServerOptions& options = options_;
  ControllerConfig config;
  config.session_key = session_key_;
  config.policy = options.policy;
  config.node_timeout = Seconds(options.node_timeout_s);
  config.logs_dir = options.data_dir + "/logs";
  config.max_log_bytes = options.max_log_bytes;
  config.max_pending_jobs = options.max_pending_jobs;
  if (options.default_token_expiry_s > 0) {
    config.default_token_expiry = Seconds(options.default_token_expiry_s);
  }
  config.policy_file = options.policy_file;
  if (!options.partitions_file.empty()) {
    auto file = ReadJsonOrYamlFile(options.partitions_file);
    if (!file.ok()) return file.status();
    auto table = protocol::ParsePartitionTable(*file);
    if (!table.ok()) {
      return InvalidArgument(options.partitions_file + ": " + table.status().message());
    }
    config.partitions = std::move(table).value();
  }
  config.kill_grace = Seconds(options.kill_grace_s);
  config.resize_interval = Seconds(options.resize_interval_s);
  config.resize_cost = Seconds(options.resize_cost_s);
  config.resize_budget = options.resize_budget;
  config.checkpoint_root = options.checkpoint_root;
  config.victims = options.victims;
  config.min_run_before_preemption = options.min_run_before_preemption;
  config.max_checkpoint_grace = options.max_checkpoint_grace;
  config.fence_after = Seconds(options.fence_after_s);
  config.node_give_up = Seconds(options.node_give_up_s);
  config.session_idle_timeout = Seconds(options.session_idle_timeout_s);
  config.session_idle_warning = Seconds(options.session_idle_warning_s);
  session_app_probe_ = std::make_unique<HttpSessionAppProbe>();
  config.session_app_probe = session_app_probe_.get();
  config.gpu_monitor.idle_threshold_percent = options.gpu_idle_threshold_percent;
  config.gpu_monitor.idle_after_ms = int64_t{options.gpu_idle_after_s} * 1000;
  config.notify_idle_gpus = options.gpu_idle_events;
  config.resource_defaults.cpus_per_gpu = options.default_cpus_per_gpu;
  config.resource_defaults.memory_per_cpu = MemoryMib(options.default_memory_per_cpu_mib);
  config.work_visibility =
      options.show_all_work ? WorkVisibility::kAll : WorkVisibility::kOwnProjects;
  auto controller = Controller::Create(config, *store_, clock_);
  if (!controller.ok()) return controller.status();
  controller_ = std::move(controller).value();
  GpuHistory::Options history;
  history.fine_retention = Seconds(options.metrics_fine_retention_s);
  history.coarse_retention = Seconds(options.metrics_coarse_retention_s);
  gpu_history_ = std::make_unique<GpuHistory>(controller_->Gpus(), *store_, clock_, history);
  JobRetention::Options retention;
  retention.keep_finished = options.keep_finished;
  retention.checkpoint_root = options.checkpoint_root;
  retention.keep_checkpoints = options.checkpoint_retention;
  retention_ = std::make_unique<JobRetention>(*store_, controller_->Logs(), clock_, retention);
  if (!options.envs_dir.empty()) {
    auto loaded = controller_->Environments().LoadBuiltins(builtins_);
    if (!loaded.ok()) {
      return Status(loaded.status().code(),
                    "--envs-dir " + options.envs_dir + ": " + loaded.status().message());
    }
    for (const std::string& skipped : loaded->skipped) {
      std::cerr << "corral server: warning: --envs-dir " << options.envs_dir << ": " << skipped
                << "\n";
    }
  }

  // The session gateway: by default next to the API (its port + 1; a free one in tests). The
  // follower's redirects on that port stop first: the gateway binds it.
  if (follower_sessions_) follower_sessions_->Stop();
  auto [host, port] = *ParseListen(options.listen, "--listen");
  std::optional<std::pair<std::string, int>> session_listen;
  if (!options.session_listen.empty()) {
    session_listen = *ParseListen(options.session_listen, "--session-listen");
  }
  const int tries = options.next_free_port ? 20 : 1;
  const int bound = bound_port_;
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
  for (int i = 0; i < (session_listen ? 1 : tries) && !gateway_; ++i) {
    gateway.port = gateway_port == 0 ? 0 : gateway_port + i;
    // Without --session-public-url: --public-url's with the gateway's port (unknown yet for
    // port 0, in tests: then the gateway and the API derive it from each request).
    gateway.public_url = !options.session_public_url.empty() ? options.session_public_url
                         : gateway.port != 0 ? WithPort(options.public_url, gateway.port)
                                             : "";
    auto created = SessionGateway::Create(gateway);
    if (created.ok()) {
      gateway_ = std::move(created).value();
    } else if (i + 1 == (session_listen ? 1 : tries)) {
      return created.status();
    }
  }

  HttpApiConfig api_config = api_config_;
  api_config.gpu_history = gpu_history_.get();
  api_config.session_url = gateway.public_url;
  api_config.session_port = gateway_->port();
  api_ = std::make_unique<HttpApi>(*controller_, clock_, std::move(api_config));
  HttpServerOptions http = HttpOptions();
  HttpApi* api = api_.get();
  http.admit = [api](const HttpRequest& head) { return api->Admit(head); };
  auto server = HttpServer::Create(DuplicateListenSocket(), std::move(http));
  if (!server.ok()) return server.status();
  http_ = std::move(server).value();
  api_->Register(*http_);
  session_directory_ = std::make_unique<ServerSessionDirectory>(*api_, *controller_);
  return Status::Ok();
}

Status ServerProcess::StartLeader() {
  controller_->Start();
  gpu_history_->Start();
  retention_->Start();
  if (Status started = http_->Start(); !started.ok()) return started;
  gateway_->Start(*session_directory_);
  // The follower's server stops taking connections; the leader's takes them all from now on.
  if (follower_http_) {
    proxy_->CancelAll();  // forwards in flight end: the leader they went to is gone
    follower_http_->Stop();
  }
  if (options_.announce) {
    std::cout << "sessions served on " << session_url() << "\n";
    if (!new_admin_token_.empty()) {
      std::cout << "admin token (shown once; also in " << options_.data_dir
                << "/admin.token): " << new_admin_token_ << "\n";
    }
    std::cout << std::flush;
  }
  return Status::Ok();
}

Status ServerProcess::Start() {
  if (!lease_) return StartLeader();
  if (Status started = follower_http_->Start(); !started.ok()) return started;
  if (follower_sessions_) {
    if (Status started = follower_sessions_->Start(); !started.ok()) return started;
  }
  lease_->Start();
  return Status::Ok();
}

void ServerProcess::Stop() {
  if (lease_) lease_->Stop();  // no new leadership from here on
  if (leader_thread_.joinable()) leader_thread_.join();
  if (listen_fd_ >= 0) close(listen_fd_);  // the HTTP servers close their duplicates
  listen_fd_ = -1;
  if (proxy_) proxy_->CancelAll();
  if (follower_http_) follower_http_->Stop();
  if (follower_sessions_) follower_sessions_->Stop();
  if (gateway_) gateway_->Stop();  // its connections end now, WebSockets included
  if (api_) api_->Shutdown();      // live event streams end now, not at their next event
  if (http_) http_->Stop();
  if (controller_) controller_->Stop();
  if (retention_) retention_->Stop();      // before the controller it borrows from goes
  if (gpu_history_) gpu_history_->Stop();  // stores what the monitor still holds
}

ServerProcess::~ServerProcess() { Stop(); }

}  // namespace corral::server
