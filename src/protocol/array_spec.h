// The two ways `corral submit` (and a batch script's --array) describes a job array
// (docs/control-plane.md, "Job arrays"), each turned into the job spec's "array" object
// ({"indices", "max_running", "env"}) that POST /api/v1/jobs takes:
//  - Slurm's --array: comma-separated parts, each an index "N", a range "A-B" or a range with a
//    step "A-B:S" (A, A+S, ... up to B), then optionally "%M", at most M elements running at once:
//    "0-99%8", "1,3,5-7", "0-20:5". Indices keep the order given.
//  - A sweep file (JSON or YAML): {"grid": {NAME: [VALUE, ...], ...}} for every combination of
//    the values, or {"runs": [{NAME: VALUE, ...}, ...]} for the runs listed, and optionally
//    "max_running". Element i (index i) gets its parameters as environment variables named as
//    the parameters. Grid order: parameters sorted by name, the last name changing fastest.
// Errors are InvalidArgument and name the bad part.
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace corral::protocol {

// The "array" object of an --array value.
Result<nlohmann::json> ParseArrayFlag(std::string_view text);

// The "array" object of sweep file `what` (already parsed as `sweep`). Values are printed as
// the file's scalars: strings as they are, true / false, numbers in their shortest form (0.1,
// 32, 1e-05).
Result<nlohmann::json> ArrayFromSweep(const nlohmann::json& sweep, const std::string& what);

}  // namespace corral::protocol
