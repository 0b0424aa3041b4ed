#include "server/server_command.h"

#include <iostream>

#include "common/shutdown_signal.h"
#include "server/server_process.h"

namespace corral::server {

void AddServerCommand(CLI::App& app, int* exit_code) {
  auto options = std::make_shared<ServerOptions>();
  CLI::App* c = app.add_subcommand("server", "Run the controller: API, scheduler, agent gateway");
  c->add_option("--listen", options->listen, "HOST:PORT to serve on");
  c->add_option("--store", options->store_url, "sqlite:PATH or postgres://...")->required();
  c->add_option("--data-dir", options->data_dir, "Logs and tokens")->required();
  c->add_option("--join-token", options->join_token,
                "Token agents join with (default: <data-dir>/join.token, created if missing)");
  c->add_option("--tls-cert", options->tls_cert, "PEM certificate: serve https");
  c->add_option("--tls-key", options->tls_key, "PEM private key for --tls-cert");
  c->add_option("--policy", options->policy, "Placement policy (default fgd)");
  c->add_option("--node-timeout", options->node_timeout_s,
                "Seconds without heartbeat before a node is lost");
  c->add_option("--policy-file", options->policy_file,
                "Scheduling rules (YAML/JSON: order, blocking, reclaim, fair_share); re-read when "
                "it changes");
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
                "Seconds an app may take to answer a request through the session proxy "
                "(default 60; longer: 502)")
      ->check(CLI::Range(1, 3600));
  c->add_option("--public-url", options->public_url,
                "The URL users reach this server at, for session URLs (default: the request's "
                "Host)");
  c->callback([options, exit_code] {
    BlockShutdownSignals();
    auto server = ServerProcess::Create(*options);
    if (!server.ok()) {
      std::cerr << "corral server: " << server.status().message() << "\n";
      *exit_code = server.status().code() == StatusCode::kInvalidArgument ? 2 : 1;
      return;
    }
    (*server)->Start();
    std::cout << "corral server listening on " << (*server)->url() << "\n";
    if (!(*server)->new_admin_token().empty()) {
      std::cout << "admin token (shown once; also in " << options->data_dir
                << "/admin.token): " << (*server)->new_admin_token() << "\n";
    }
    std::cout << std::flush;
    WaitForShutdownSignal();
    (*server)->Stop();
  });
}

}  // namespace corral::server
