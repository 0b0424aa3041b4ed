// The size flags of a job request (docs/elastic.md): "N" or, for an elastic job, "MIN-MAX" as
// Slurm writes node ranges (--nodes=1-2). `corral submit`'s --gpus, --gpus-per-node, --tasks and
// --nodes take them, and so do a batch script's #CORRAL lines and #SBATCH --nodes. A range
// becomes the spec's `elastic` (job_spec.h, ElasticJson); one number, its size field as before.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "model/job.h"

namespace corral::protocol {

// What one size flag said: `min` == `max` for one number (any integer: the spec's check names
// its field when it is out of range), else an elastic range of 1 <= min < max <=
// model::kMaxElasticSize.
struct SizeFlag {
  int min = 0;
  int max = 0;
  bool IsRange() const { return min != max; }
};

// "N" or "MIN-MAX" ("4-4" is 4). InvalidArgument starting with `flag`: "--gpus: 8-2: MIN must
// not exceed MAX", "--gpus: expected N or MIN-MAX, got 'x'".
Result<SizeFlag> ParseSizeFlag(std::string_view text, const std::string& flag);

}  // namespace corral::protocol
