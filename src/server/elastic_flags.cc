#include "server/elastic_flags.h"

#include <tuple>

#include "common/duration.h"

namespace corral::server {

namespace {
constexpr int64_t kMaxResizeSeconds = int64_t{365} * 86400;
}  // namespace

void AddElasticFlags(CLI::App& command, ElasticFlags& flags) {
  command.add_option("--resize-interval", flags.resize_interval,
                     "Elastic jobs: the least time between a job's start or resize and its "
                     "growth, as 60s, 5m (default 60s; at most 365d; shrinks for a pending job "
                     "are never held back)");
  command.add_option("--resize-cost", flags.resize_cost,
                     "Elastic jobs: the progress a resize is taken to lose (the restart from a "
                     "checkpoint), as 60s, 5m (default 60s; at most 365d): a job with a time "
                     "limit grows only when the time the growth saves exceeds it");
  command
      .add_option("--resize-budget", flags.resize_budget,
                  "Elastic jobs: the resizes a job may make in its life; past it, it no longer "
                  "grows (default 20)")
      ->check(CLI::Range(0, 100000));
}

Status ApplyElasticFlags(const ElasticFlags& flags, ServerOptions& options) {
  for (auto [text, flag, out] :
       {std::tuple{&flags.resize_interval, "--resize-interval", &options.resize_interval_s},
        std::tuple{&flags.resize_cost, "--resize-cost", &options.resize_cost_s}}) {
    auto duration = ParseDuration(*text, flag);
    if (!duration.ok()) return duration.status();
    if (duration->value() > kMaxResizeSeconds) {
      return InvalidArgument(std::string(flag) + ": at most 365d, got " + *text);
    }
    *out = duration->value();
  }
  options.resize_budget = flags.resize_budget;
  return Status::Ok();
}

}  // namespace corral::server
