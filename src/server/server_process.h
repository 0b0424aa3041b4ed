// A running controller: the store, the controller, the HTTP server and their threads, wired
// together. `corral server` runs one until a signal; `corral dev` runs one next to an agent;
// tests start them on loopback.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "server/api/http_api.h"
#include "server/control/accounts.h"
#include "server/control/controller.h"
#include "server/control/job_retention.h"
#include "server/gateway/session_gateway.h"
#include "server/http/http_server.h"
#include "server/http/leader_proxy.h"
#include "server/http/peer_signature.h"
#include "server/leader_lease.h"
#include "server/monitoring/gpu_history.h"
#include "store/single_server_lock.h"
#include "store/store.h"

namespace corral::server {

// The envs/ directory of the source tree this corral was built from, when it exists (a
// development checkout); else "".
std::string DefaultEnvsDir();
// The built dashboard of the source tree this corral was built from (web/dist with an
// index.html: `make web`), when it exists; else "". `corral dev` serves it by default.
std::string DefaultWebDir();

// The back-pressure defaults (docs/decisions.md, "Back-pressure defaults").
inline constexpr int kDefaultMaxRequestsInFlight = 64;
inline constexpr std::chrono::milliseconds kDefaultAdmissionWait{500};
inline constexpr std::chrono::milliseconds kMaxAdmissionWait{10'000};

struct ServerOptions {
  std::string listen = "127.0.0.1:8080";  // HOST:PORT; port 0 picks a free one
  bool next_free_port = false;            // if PORT is taken, try the next 20
  std::string store_url;                  // sqlite:PATH | postgres://...
  std::string data_dir;                   // logs, join.token, admin.token
  std::string join_token;                 // empty: read or create <data_dir>/join.token
  // The key sessions' secrets are derived from (its first line, 32 characters or more); every
  // server of one cluster needs the same. Empty: read or create <data_dir>/session.key.
  std::string session_key_file;
  std::string tls_cert, tls_key;  // both or neither
  // The API's connections (http_server.h, connection_guard.h; docs/security.md): connections
  // without an authenticated request yet, per client address and in all; connections in all;
  // the time a request's head may take (also the idle keep-alive limit) and its body.
  int max_anonymous_connections_per_address = 64;
  int max_anonymous_connections = 1024;
  int max_connections = 4096;
  int request_head_timeout_s = 10;
  int request_body_timeout_s = 30;
  // Back-pressure (saturation_guard.h; docs/control-plane.md, "Back-pressure"): API requests
  // handled at once (0: no cap; agents' requests have a pool of their own, this plus the
  // heartbeats the controller lets wait), and how long a request may wait for a place before it
  // is answered 503 with Retry-After.
  int max_requests_in_flight = kDefaultMaxRequestsInFlight;
  std::chrono::milliseconds admission_wait = kDefaultAdmissionWait;
  std::string policy{sched::kDefaultPolicy};  // placement (sched/placement_policy.h)
  int node_timeout_s = 30;
  std::string policy_file;  // scheduling rules (sched/policy_config.h); re-read on change
  // Partitions and QoS (protocol/api_partitions.h), read at start; empty: none.
  std::string partitions_file;
  int kill_grace_s = 10;  // SIGTERM -> SIGKILL when a task is cancelled, preempted or stale
  // Elastic jobs' hysteresis (ControllerConfig::resize_interval, resize_cost, resize_budget;
  // the flags: elastic_flags.h).
  int64_t resize_interval_s = 60;
  int64_t resize_cost_s = 60;
  int resize_budget = 20;
  // Where jobs keep their checkpoints (ControllerConfig::checkpoint_root): absolute, on a file
  // system every node mounts at that path. Empty: none.
  std::string checkpoint_root;
  // Checkpoint-aware preemption (docs/in-job.md, "Preemption and checkpoints"; the flags:
  // checkpoint_flags.h): how reclaim picks victims, how long a job runs before it may be one,
  // the most grace a job's checkpoint_grace gets, and how long a finished job's checkpoint
  // folder is kept (none: kept).
  sched::VictimOrder victims = sched::VictimOrder::kLeastLostWork;
  Seconds min_run_before_preemption{0};
  Seconds max_checkpoint_grace{300};
  std::optional<Seconds> checkpoint_retention = JobRetention::kDefaultKeepCheckpoints;
  // Fencing (docs/control-plane.md): an agent that reached no server this long stops its
  // requeue-able tasks; a node silent node_give_up_s is lost with every job on it.
  // reconcile::CheckNodeTimings must hold (Create refuses other values, naming the flags).
  int fence_after_s = 10;
  int node_give_up_s = 3600;
  // The built-in environments (docs/environments.md), loaded at start; empty: none.
  std::string envs_dir = DefaultEnvsDir();
  // Sessions (docs/sessions.md): the idle timeout of sessions whose spec gives none (0: never),
  // the notice an idle session gets before it is stopped, and the URL users reach the server
  // at (session URLs; empty: the request's Host).
  int session_idle_timeout_s = 3600;
  int session_idle_warning_s = 300;
  std::string public_url;
  // The session gateway (session_gateway.h): where it listens (HOST:PORT; empty: the API's host
  // and port + 1, or any free port when the API's is 0), its URL for users (empty: --public-url
  // with the gateway's port, else each request's Host), and its caps on open connections.
  std::string session_listen;
  std::string session_public_url;
  int session_max_connections = 256;
  int session_max_connections_per_session = 32;
  int session_max_pending_per_address = 16;
  // How long a gateway connection that is not upgraded may move no byte (before the app's
  // answer: 502).
  int session_proxy_timeout_s = 60;
  // The built dashboard served at / (docs/dashboard.md); empty: / is the plain status page.
  std::string web_dir;
  // GPU metrics (docs/monitoring.md): an allocated GPU under `gpu_idle_threshold_percent` for
  // `gpu_idle_after_s` is flagged idle; history kept 10 s for `metrics_fine_retention_s`, 5 min
  // for `metrics_coarse_retention_s`; a file whose first line is the token that opens GET
  // /metrics only (empty: admin tokens only).
  int gpu_idle_threshold_percent = 10;
  int gpu_idle_after_s = 1800;
  bool gpu_idle_events = true;  // a job whose GPUs are flagged idle gets an event saying so
  int64_t metrics_fine_retention_s = 24 * 3600;
  int64_t metrics_coarse_retention_s = 90 * 24 * 3600;
  // Finished jobs are purged from the store (with their tasks, events and logs) this long after
  // they ended (job_retention.h; docs/monitoring.md); none: kept forever.
  std::optional<Seconds> keep_finished = JobRetention::kDefaultKeepFinished;
  std::string metrics_token_file;
  // What a submitted spec leaves out (job_submission.h, ResourceDefaults): whole CPUs per GPU of a
  // GPU job, and MiB per CPU; 0: none.
  int64_t default_cpus_per_gpu = 0;
  int64_t default_memory_per_cpu_mib = 0;
  // Limits on what one user may cost the server (docs/security.md): what each stream of a task
  // run keeps on disk (LogSink), the cluster's cap on pending jobs (SubmitLimiter), and how long
  // new tokens last when their creator asks nothing (0: forever).
  int64_t max_log_bytes = LogSink::kDefaultMaxBytes;
  int64_t max_pending_jobs = SubmitLimiter::kDefaultMaxPendingJobs;
  int64_t default_token_expiry_s = 0;
  // Every user sees every job on nodes and GPUs (WorkVisibility::kAll); by default members see
  // other projects' jobs only as "in use" (docs/security.md, "What others can see").
  bool show_all_work = false;
  // Several servers on one PostgreSQL store (docs/control-plane.md, "Several servers on one
  // PostgreSQL"): the base URL this server is reached at by clients sent to it while it leads
  // (empty: --public-url, else the --listen URL; required when --listen binds every address),
  // and the leader's lease (leader_lease.h). A SQLite store serves one server, which leads
  // from its start.
  std::string advertise_url;
  LeaseTiming lease;
  // Print, when this server starts leading, where sessions are served and the admin token if
  // it created one (`corral server`; tests and `corral dev` say what they need themselves).
  bool announce = false;
};

// The exit status of a server that lost the leader's lease (docs/decisions.md): a supervisor
// starts it again, as a follower.
constexpr int kExitLostLease = 3;

// On a SQLite store the server leads from its start, holding the store's one-server lock. On
// PostgreSQL it starts as a follower: its API port answers at once (FollowerAnswer) while it polls
// for the leader's lease; once it holds the lease it builds its controller from the store (as
// after a restart: every node gets a full --node-timeout from then) and serves. A leader that
// loses the lease prints why and exits with kExitLostLease at once, whatever it was doing: its
// writes are fenced from the takeover on anyway.
class ServerProcess {
 public:
  // Opens the store (migrating it), checks that this server shares the cluster's join token and
  // session key, and binds the API port. On SQLite it also leads at once (below). Errors name
  // what failed.
  static Result<std::unique_ptr<ServerProcess>> Create(const ServerOptions& options);
  ~ServerProcess();

  // Serves until Stop(); an error when the HTTP server cannot start (a TLS key it cannot use).
  // When leading, it creates the admin user, token and default project on the store's first
  // start, recovers the controller's state and binds the session gateway.
  Status Start();
  void Stop();

  std::string url() const { return url_; }
  // The session gateway as bound ("http://127.0.0.1:8081"); sessions' URLs may use its public
  // URL instead. Leading servers only.
  std::string session_url() const { return gateway_->url(); }
  int session_port() const { return gateway_->port(); }
  // The admin token if this start created it (printed once), else empty. Leading servers only.
  const std::string& new_admin_token() const { return new_admin_token_; }
  // The join token this server was given or created; empty when it adopted the cluster's
  // (stored only as a hash: agents use the first server's token).
  const std::string& join_token() const { return join_token_; }

 private:
  ServerProcess() = default;
  // Checks this server's join token and session key against the cluster's (the store's; the
  // first server's become the cluster's), adopting the cluster's join token when it has none.
  Status ShareSecrets();
  // While following (PostgreSQL): listens on the session gateway's port and redirects every
  // request to the leader's API (which sends session URLs on to its gateway), so that session
  // URLs of any server work; stopped when this server leads and its gateway takes the port.
  // `api_host`/`api_port`: --listen's (port 0: the gateway's port is not known, nothing listens).
  Status FollowSessions(const std::string& api_host, int api_port);
  // Builds what a leader runs: the admin's first start, the controller (recovered from the
  // store), the API's HTTP server on the listening socket, the session gateway.
  Status BuildLeader();
  // Starts it, and stops the follower's HTTP server.
  Status StartLeader();
  // A duplicate of the listening socket, for an HTTP server to take (and close).
  ListenSocket DuplicateListenSocket() const;
  // The options both HTTP servers share: TLS, limits, and, when there is a lease, the check of
  // a peer's Corral-Forwarded-For (peer_signature.h), forwarding (Divert) and the leader's gate
  // (Gate).
  HttpServerOptions HttpOptions() const;
  // The gate of the leader's HTTP server: the follower's answer once this server no longer
  // leads by its own deadline (LeaderLease::Leading), before it exits.
  std::optional<HttpResponse> Gate(const HttpRequest& head) const;
  // While this server does not lead and knows the leader: the handler that forwards `head`'s
  // request to it (leader_proxy.h), answering the follower's 503 when it cannot be reached.
  // None for GET /healthz and for a request a peer already forwarded (no loops).
  HttpHandler Divert(const HttpRequest& head) const;
  // The follower's admission (the leader's rules, from the store): a user's token or login
  // cookie that the store knows, or the join token, gets the authenticated limits; a request
  // that names a node and carries a token gets the authenticated body limit but stays under the
  // anonymous caps (node tokens are checked by the leader); anything else the anonymous ones.
  Result<Admission> FollowerAdmit(const HttpRequest& head) const;

  ServerOptions options_;
  SystemClock clock_;
  std::unique_ptr<store::SingleServerLock> single_server_lock_;  // SQLite only
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<store::Store> lease_store_;  // PostgreSQL only: the lease's own connection
  std::string join_token_hash_;
  std::string session_key_;
  int listen_fd_ = -1;  // the API's listening socket (each HTTP server takes a duplicate)
  int bound_port_ = 0;
  HttpApiConfig api_config_;                   // the API's settings known before leading
  std::vector<EnvironmentSpec> builtins_;      // --envs-dir's, loaded when leading
  std::unique_ptr<HttpServer> follower_http_;  // answers while following (PostgreSQL)
  // While following: the session port's answers (redirects to the leader; FollowerSessions).
  std::unique_ptr<HttpServer> follower_sessions_;
  std::unique_ptr<LeaderLease> lease_;                  // PostgreSQL only
  std::string advertise_url_;                           // with the lease: this server's
  std::unique_ptr<PeerSignature> peer_;                 // with the lease: forwarded requests
  std::unique_ptr<LeaderProxy> proxy_;                  // with the lease
  std::unique_ptr<Accounts> follower_accounts_;         // with the lease: FollowerAdmit
  std::thread leader_thread_;                           // runs Lead() once the lease is held
  std::unique_ptr<SessionAppProbe> session_app_probe_;  // the controller borrows it
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<GpuHistory> gpu_history_;  // borrows the controller's GpuMonitor
  std::unique_ptr<JobRetention> retention_;  // borrows the controller's LogSink
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<SessionDirectory> session_directory_;  // the gateway borrows it
  std::unique_ptr<SessionGateway> gateway_;
  std::string url_;
  std::string new_admin_token_;
  std::string join_token_;
};

}  // namespace corral::server
