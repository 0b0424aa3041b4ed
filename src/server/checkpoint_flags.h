// The flags of checkpoint-aware preemption (docs/in-job.md, "Preemption and checkpoints"), which
// `corral server` and `corral dev` both take.
#pragma once

#include <CLI/CLI.hpp>
#include <string>

#include "common/status.h"
#include "server/server_process.h"

namespace corral::server {

// The flags as typed; ApplyCheckpointFlags reads them into ServerOptions.
struct CheckpointFlags {
  std::string victims = "least-lost-work";  // --victims priority|least-lost-work
  std::string min_run_before_preemption = "0";
  std::string max_checkpoint_grace = "300s";  // 0..3600 s
  std::string checkpoint_retention = "7d";    // 0: keep
};

// Adds --victims, --min-run-before-preemption, --max-checkpoint-grace, --checkpoint-retention
// to `command`, read into `flags` (which must outlive the parse).
void AddCheckpointFlags(CLI::App& command, CheckpointFlags& flags);
// Sets `options`' victims, min_run_before_preemption, max_checkpoint_grace and
// checkpoint_retention from `flags`. InvalidArgument naming the flag.
Status ApplyCheckpointFlags(const CheckpointFlags& flags, ServerOptions& options);

}  // namespace corral::server
