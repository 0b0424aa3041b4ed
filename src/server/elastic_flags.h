// The flags of elastic jobs' growth hysteresis (docs/control-plane.md, "Elastic jobs: live
// resizes"), which `corral server` and `corral dev` both take.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"
#include "server/server_process.h"

namespace corral::server {

// The flags as typed; ApplyElasticFlags reads them into ServerOptions.
struct ElasticFlags {
  std::string resize_interval = "60s";  // 0..365d
  std::string resize_cost = "60s";      // 0..365d
  int resize_budget = 20;               // 0..100000
};

// Adds --resize-interval, --resize-cost, --resize-budget to `command`, read into `flags`
// (which must outlive the parse).
void AddElasticFlags(CLI::App& command, ElasticFlags& flags);
// Sets `options`' resize_interval_s, resize_cost_s and resize_budget from `flags`.
// InvalidArgument naming the flag.
Status ApplyElasticFlags(const ElasticFlags& flags, ServerOptions& options);

}  // namespace corral::server
