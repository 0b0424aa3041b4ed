// A running controller: the store, the controller, the HTTP server and their threads, wired
// together. `corral server` runs one until a signal; `corral dev` runs one next to an agent;
// tests start them on loopback.
#pragma once

#include <memory>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/status.h"
#include "server/api/http_api.h"
#include "server/control/controller.h"
#include "server/gateway/session_gateway.h"
#include "server/http/http_server.h"
#include "server/monitoring/gpu_history.h"
#include "store/store.h"

namespace corral::server {

// The envs/ directory of the source tree this corral was built from, when it exists (a
// development checkout); else "".
std::string DefaultEnvsDir();
// The built dashboard of the source tree this corral was built from (web/dist with an
// index.html: `make web`), when it exists; else "". `corral dev` serves it by default.
std::string DefaultWebDir();

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
  std::string policy = "fgd";
  int node_timeout_s = 30;
  std::string policy_file;  // scheduling rules (sched/policy_config.h); re-read on change
  int kill_grace_s = 10;    // SIGTERM -> SIGKILL when a task is cancelled, preempted or stale
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
};

class ServerProcess {
 public:
  // Opens the store (migrating it), creates the admin user, token and default project on first
  // start, recovers the controller's state and binds the port. Errors name what failed.
  static Result<std::unique_ptr<ServerProcess>> Create(const ServerOptions& options);
  ~ServerProcess();

  // Serves until Stop(); an error when the HTTP server cannot start (a TLS key it cannot use).
  Status Start();
  void Stop();

  std::string url() const { return url_; }
  // The session gateway as bound ("http://127.0.0.1:8081"); sessions' URLs may use its public
  // URL instead.
  std::string session_url() const { return gateway_->url(); }
  int session_port() const { return gateway_->port(); }
  // The admin token if this start created it (printed once), else empty.
  const std::string& new_admin_token() const { return new_admin_token_; }
  const std::string& join_token() const { return join_token_; }

 private:
  ServerProcess() = default;

  SystemClock clock_;
  std::unique_ptr<store::Store> store_;
  std::unique_ptr<SessionAppProbe> session_app_probe_;  // the controller borrows it
  std::unique_ptr<Controller> controller_;
  std::unique_ptr<GpuHistory> gpu_history_;  // borrows the controller's GpuMonitor
  std::unique_ptr<HttpApi> api_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<SessionDirectory> session_directory_;  // the gateway borrows it
  std::unique_ptr<SessionGateway> gateway_;
  std::string url_;
  std::string new_admin_token_;
  std::string join_token_;
};

}  // namespace corral::server
