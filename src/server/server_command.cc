#include "server/server_command.h"

#include <chrono>
#include <iostream>
#include <tuple>

#include "common/duration.h"
#include "common/shutdown_signal.h"
#include "server/checkpoint_flags.h"
#include "server/elastic_flags.h"
#include "server/server_process.h"

namespace corral::server {

void AddServerCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ServerOptions>();
  auto token_expiry = std::make_shared<std::string>("0");
  CLI::App* c = app.add_subcommand("server", "Run the controller: API, scheduler, agent gateway");
  c->add_option("--listen", options->listen, "HOST:PORT to serve on");
  c->add_option("--store", options->store_url, "sqlite:PATH or postgres://...")->required();
  c->add_option("--data-dir", options->data_dir, "Logs and tokens")->required();
  c->add_option("--join-token", options->join_token,
                "Token agents join with (default: <data-dir>/join.token, created if missing)");
  c->add_option("--tls-cert", options->tls_cert, "PEM certificate: serve https");
  c->add_option("--tls-key", options->tls_key, "PEM private key for --tls-cert");
  c->add_option("--policy", options->policy, "Placement policy (docs/placement.md)")
      ->check(CLI::IsMember(sched::PolicyNames()))
      ->capture_default_str();
  c->add_option("--node-timeout", options->node_timeout_s,
                "Seconds without heartbeat before a node is unreachable: its requeue-able jobs "
                "are requeued, the others keep running (default 30)");
  c->add_option("--fence-after", options->fence_after_s,
                "Seconds an agent reaches no server before it stops its requeue-able tasks "
                "(default 10; --fence-after + --kill-grace + 5 must be less than "
                "--node-timeout)");
  c->add_option("--node-give-up", options->node_give_up_s,
                "Seconds without heartbeat before a node is lost with every job on it "
                "(default 3600)");
  c->add_option("--policy-file", options->policy_file,
                "Scheduling rules (YAML/JSON: order, blocking, reclaim, fair_share); re-read when "
                "it changes");
  c->add_option("--partitions-file", options->partitions_file,
                "Partitions and QoS (YAML/JSON: partitions: [{name, gpu_models, max_time_s, "
                "default}], qos: [{name, priority}]): what a job's -p / -q mean (docs/batch.md)");
  c->add_option("--envs-dir", options->envs_dir,
                "Built-in environments (YAML/JSON files) loaded at start (default: the source "
                "tree's envs/ when present; \"\" for none)");
  c->add_option("--kill-grace", options->kill_grace_s,
                "Seconds between SIGTERM and SIGKILL when a task is stopped")
      ->check(CLI::Range(0, 3600));
  c->add_option("--session-idle-timeout", options->session_idle_timeout_s,
                "Seconds without use before a session is stopped, for sessions that do not say "
                "(default 3600; 0: never)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--session-idle-warning", options->session_idle_warning_s,
                "Seconds between an idle session's notice and its stop (default 300)")
      ->check(CLI::NonNegativeNumber);
  c->add_option("--session-proxy-timeout", options->session_proxy_timeout_s,
                "Seconds a session gateway connection may move no byte (default 60; before the "
                "app's answer: 502); WebSockets have no limit")
      ->check(CLI::Range(1, 3600));
  c->add_option("--session-listen", options->session_listen,
                "HOST:PORT of the session gateway, which serves sessions on an origin of its own "
                "(default: the --listen host, port + 1)");
  c->add_option("--session-public-url", options->session_public_url,
                "The URL users reach the session gateway at (default: --public-url with the "
                "gateway's port, else the request's Host)");
  c->add_option("--session-max-connections", options->session_max_connections,
                "Connections the session gateway keeps open at once (default 256; over: 503)")
      ->check(CLI::Range(1, 100000));
  c->add_option("--session-max-connections-per-session",
                options->session_max_connections_per_session,
                "Connections one session may have open at once (default 32; over: 503)")
      ->check(CLI::Range(1, 100000));
  c->add_option("--checkpoint-root", options->checkpoint_root,
                "Absolute folder on a file system every node mounts at the same path: each job "
                "gets <DIR>/<job id> as CORRAL_CHECKPOINT_DIR (default: none)")
      ->check([](const std::string& dir) {
        return !dir.empty() && dir[0] == '/' && dir.find_first_of(":,") == std::string::npos
                   ? std::string()
                   : std::string("must be an absolute path without ':' or ','");
      });
  c->add_option("--session-key-file", options->session_key_file,
                "File whose first line is the key sessions' secrets are derived from; give every "
                "server of a cluster the same (default: <data-dir>/session.key, created)");
  c->add_option("--max-anonymous-connections-per-address",
                options->max_anonymous_connections_per_address,
                "API connections one client address may hold open before one of their requests "
                "authenticates (default 64; over: closed at once). Raise it behind a reverse "
                "proxy")
      ->check(CLI::Range(1, 100000));
  c->add_option("--max-anonymous-connections", options->max_anonymous_connections,
                "API connections open at once before one of their requests authenticates, from "
                "all addresses (default 1024; over: closed at once)")
      ->check(CLI::Range(1, 100000));
  c->add_option("--max-connections", options->max_connections,
                "API connections open at once in all (default 4096)")
      ->check(CLI::Range(1, 100000));
  auto admission_wait = std::make_shared<std::string>("500ms");
  c->add_option("--max-requests-in-flight", options->max_requests_in_flight,
                "API requests the server handles at once (default " +
                    std::to_string(kDefaultMaxRequestsInFlight) +
                    "; 0: no cap); past it a request waits up to --admission-wait for a place, "
                    "then gets 503 with Retry-After. Agents' requests have a pool of their own "
                    "(docs/control-plane.md, \"Back-pressure\")")
      ->check(CLI::Range(0, 100000));
  c->add_option("--admission-wait", *admission_wait,
                "How long a request may wait for a place when --max-requests-in-flight are "
                "being handled, as 500ms, 2s (default 500ms; 0: refused at once; at most 10s)");
  c->add_option("--request-head-timeout", options->request_head_timeout_s,
                "Seconds a request's head may take to arrive, from the connection's start or "
                "its previous answer (default 10; also closes idle keep-alive connections)")
      ->check(CLI::Range(1, 3600));
  c->add_option("--request-body-timeout", options->request_body_timeout_s,
                "Seconds a request's body may take to arrive after its head (default 30)")
      ->check(CLI::Range(1, 3600));
  c->add_option("--session-max-pending-per-address", options->session_max_pending_per_address,
                "Connections one client address may have open at once before sending a request "
                "head (default 16; over: closed). Raise it behind a reverse proxy")
      ->check(CLI::Range(1, 100000));
  c->add_option("--gpu-idle-threshold", options->gpu_idle_threshold_percent,
                "An allocated GPU under this utilisation (percent) is idle (default 10)")
      ->check(CLI::Range(1, 100));
  c->add_option("--gpu-idle-after", options->gpu_idle_after_s,
                "Seconds an allocated GPU must stay idle before it is flagged (default 1800)")
      ->check(CLI::Range(0, 30 * 86400));
  c->add_option("--gpu-idle-events", options->gpu_idle_events,
                "Record a job event when its GPUs are flagged idle, and when busy again (true or "
                "false; default true)");
  auto elastic = std::make_shared<ElasticFlags>();
  AddElasticFlags(*c, *elastic);
  c->add_option("--metrics-retention-fine", options->metrics_fine_retention_s,
                "Seconds the 10 s GPU metrics history is kept (default 86400)")
      ->check(CLI::Range(int64_t{600}, int64_t{366} * 86400));
  c->add_option("--metrics-retention-coarse", options->metrics_coarse_retention_s,
                "Seconds the 5 min GPU metrics history is kept (default 7776000: 90 days)")
      ->check(CLI::Range(int64_t{3600}, int64_t{3660} * 86400));
  auto keep_finished = std::make_shared<std::string>("90d");
  c->add_option("--keep-finished", *keep_finished,
                "How long finished jobs stay in the store after they ended, with their tasks, "
                "events and logs, as 90d, 12h (default 90d; 0 or forever: keep every job). "
                "Usage reports and capacity planning keep counting purged jobs");
  c->add_option("--metrics-token-file", options->metrics_token_file,
                "File whose first line is a token that opens GET /metrics and nothing else "
                "(Prometheus); default: admin tokens only");
  c->add_option("--default-cpus-per-gpu", options->default_cpus_per_gpu,
                "Whole CPUs per GPU of a GPU job that asks no CPU, as Slurm's DefCpuPerGPU "
                "(default 0: none; a job without GPUs asks 1 CPU per process)")
      ->check(CLI::Range(0, 1024));
  c->add_option("--default-memory-per-cpu-mib", options->default_memory_per_cpu_mib,
                "MiB per CPU of a job that asks no memory, as Slurm's DefMemPerCPU (default 0: "
                "off)")
      ->check(CLI::Range(0, 1 << 20));
  c->add_option("--max-pending-jobs", options->max_pending_jobs,
                "Jobs pending at once in the whole cluster; submissions past it get 429 "
                "(default 1000000; users' and projects' own limits: corral user/project "
                "set-limits)")
      ->check(CLI::Range(int64_t{1}, model::kMaxSubmitLimit));
  c->add_option("--max-log-bytes", options->max_log_bytes,
                "Bytes each stream (stdout, stderr) of a task run keeps on the server's disk; "
                "older output is dropped with a note (default 1073741824: 1 GiB; at least 65536)")
      ->check(CLI::Range(LogSink::kMinMaxBytes, int64_t{1} << 50));
  c->add_option("--default-token-expiry", *token_expiry,
                "How long new API tokens last when their creator gives no --expires, as 90d, "
                "12h (default 0: until revoked)");
  c->add_flag("--show-all-work", options->show_all_work,
              "Show every user the jobs, users and projects on every node and GPU (default: "
              "other projects' work is only \"in use\"; admins always see everything)");
  c->add_option("--web-dir", options->web_dir,
                "The built dashboard (web/dist) to serve at / (default: none, / is a status page)");
  c->add_option("--public-url", options->public_url,
                "The URL users reach this server at, for session URLs (default: the request's "
                "Host)");
  auto lease_duration = std::make_shared<std::string>("3s");
  auto lease_renew = std::make_shared<std::string>("500ms");
  c->add_option("--advertise-url", options->advertise_url,
                "With several servers on one PostgreSQL: the base URL other servers send clients "
                "to while this one leads (default: --public-url, else the --listen URL; "
                "required when --listen binds every address)");
  c->add_option("--lease-duration", *lease_duration,
                "With several servers on one PostgreSQL: how long the leader's lease holds "
                "without renewal, by the database's clock, as 3s, 1500ms (default 3s): a "
                "failover takes about this long");
  c->add_option("--lease-renew-interval", *lease_renew,
                "How often the leader renews its lease, and a follower tries to take it, as "
                "500ms (default 500ms; under half of --lease-duration)");
  auto checkpoints = std::make_shared<CheckpointFlags>();
  AddCheckpointFlags(*c, *checkpoints);
  c->callback([options, token_expiry, keep_finished, lease_duration, lease_renew, admission_wait,
               elastic, checkpoints, exit_code] {
    for (Status s :
         {ApplyCheckpointFlags(*checkpoints, *options), ApplyElasticFlags(*elastic, *options)}) {
      if (!s.ok()) {
        std::cerr << "corral server: " << s.message() << "\n";
        *exit_code = 2;
        return;
      }
    }
    auto token_expiry_s = ParseDuration(*token_expiry, "--default-token-expiry");
    if (!token_expiry_s.ok()) {
      std::cerr << "corral server: " << token_expiry_s.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    options->default_token_expiry_s = token_expiry_s->value();
    auto keep = ParseKeepFinished(*keep_finished, "--keep-finished");
    if (!keep.ok()) {
      std::cerr << "corral server: " << keep.status().message() << "\n";
      *exit_code = 2;
      return;
    }
    options->keep_finished = *keep;
    for (auto [text, flag, out] :
         {std::tuple{lease_duration.get(), "--lease-duration", &options->lease.duration},
          std::tuple{lease_renew.get(), "--lease-renew-interval", &options->lease.renew_interval},
          std::tuple{admission_wait.get(), "--admission-wait", &options->admission_wait}}) {
      auto ms = ParseDurationMs(*text, flag);
      if (!ms.ok()) {
        std::cerr << "corral server: " << ms.status().message() << "\n";
        *exit_code = 2;
        return;
      }
      *out = std::chrono::milliseconds(*ms);
    }
    options->announce = true;
    BlockShutdownSignals();
    auto server = ServerProcess::Create(*options);
    if (!server.ok()) {
      std::cerr << "corral server: " << server.status().message() << "\n";
      *exit_code = server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      return;
    }
    std::cout << "corral server listening on " << (*server)->url() << " (placement policy "
              << options->policy << ")" << std::endl;
    if (Status started = (*server)->Start(); !started.ok()) {
      std::cerr << "corral server: " << started.message() << "\n";
      *exit_code = 1;
      (*server)->Stop();
      return;
    }
    WaitForShutdownSignal();
    (*server)->Stop();
  });
}

}  // namespace corral::server
