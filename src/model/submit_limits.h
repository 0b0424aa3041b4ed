// Submit limits (docs/control-plane.md, "Submit limits"): how much a user, or a project's
// members together, may ask of the queue, as Slurm's MaxSubmitJobs. Set by admins on a user or
// a project, kept by the store, enforced by the server at each submission. One type from the
// store to the API and the CLI.
#pragma once

#include <cstdint>
#include <optional>

namespace corral::model {

// The largest value either limit takes (larger is certainly a typo).
inline constexpr int64_t kMaxSubmitLimit = 1'000'000'000;

struct SubmitLimits {
  // Jobs pending at once (an array's elements count one by one); none: no limit. 0 refuses
  // every submission.
  std::optional<int64_t> max_pending_jobs;
  // Jobs submitted in any 60 seconds (an array's elements count one by one); none: no limit.
  std::optional<int64_t> max_submits_per_minute;
  bool operator==(const SubmitLimits&) const = default;
};

}  // namespace corral::model
