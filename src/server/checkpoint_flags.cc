#include "server/checkpoint_flags.h"

#include "common/duration.h"
#include "protocol/job_spec.h"
#include "sched/scheduler.h"

namespace corral::server {

void AddCheckpointFlags(CLI::App& command, CheckpointFlags& flags) {
  command
      .add_option("--victims", flags.victims,
                  "How reclaim picks victims among borrowed jobs: least-lost-work (lowest "
                  "priority, then least work since the last checkpoint per GPU) or priority "
                  "(lowest priority, then most over quota); default least-lost-work")
      ->check(CLI::IsMember({"priority", "least-lost-work"}));
  command.add_option("--min-run-before-preemption", flags.min_run_before_preemption,
                     "How long a job runs (since its start or resize) before reclaim may stop "
                     "it, as 10m, 1h (default 0)");
  command.add_option("--max-checkpoint-grace", flags.max_checkpoint_grace,
                     "The most grace (SIGTERM to SIGKILL) a job's --checkpoint-grace gets when "
                     "it is preempted or resized, as 300s, 5m (default 300s; at most 1h)");
  command.add_option("--checkpoint-retention", flags.checkpoint_retention,
                     "How long a finished job's checkpoint folder (<--checkpoint-root>/<job "
                     "id>) is kept before the server removes it, as 7d, 12h (default 7d; 0: "
                     "kept)");
}

Status ApplyCheckpointFlags(const CheckpointFlags& flags, ServerOptions& options) {
  auto victims = sched::ParseVictimOrder(flags.victims);
  if (!victims.ok()) return InvalidArgument("--victims: " + victims.status().message());
  options.victims = *victims;
  auto min_run = ParseDuration(flags.min_run_before_preemption, "--min-run-before-preemption");
  if (!min_run.ok()) return min_run.status();
  options.min_run_before_preemption = *min_run;
  auto grace = ParseDuration(flags.max_checkpoint_grace, "--max-checkpoint-grace");
  if (!grace.ok()) return grace.status();
  if (*grace > protocol::kMaxCheckpointGrace) {
    return InvalidArgument("--max-checkpoint-grace: at most " +
                           FormatDuration(protocol::kMaxCheckpointGrace) + ", got " +
                           flags.max_checkpoint_grace);
  }
  options.max_checkpoint_grace = *grace;
  auto retention = ParseDuration(flags.checkpoint_retention, "--checkpoint-retention");
  if (!retention.ok()) return retention.status();
  options.checkpoint_retention =
      retention->value() > 0 ? std::optional<Seconds>(*retention) : std::nullopt;
  return Status::Ok();
}

}  // namespace corral::server
