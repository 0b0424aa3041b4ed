// Batch scripts (docs/batch.md): a job spec with "script": {"text", "args"} runs the script, and
// the script's directives say what it asks, as `sbatch job.sh` reads a Slurm script. One library
// for the CLI (`corral batch`, which checks what it sends) and the server (POST /api/v1/jobs,
// which expands what it gets).
//
// Directives are the `#CORRAL` and `#SBATCH` lines before the script's first command (Slurm's
// rule: after the "#!" line, every line up to the first that is neither blank nor a comment).
// Each holds options as a command line does ("--time=10:00 -J x", quotes as the shell reads
// them; a word starting with '#' ends the line):
//  - `#CORRAL` lines take `corral submit`'s long flags (--gpus 2, --time-limit 2h, --env A=1...),
//    plus --output-file and --error-file;
//  - `#SBATCH` lines take the common sbatch options with Slurm's meaning (BatchDirectiveTable in
//    batch_script.cc lists them: -J, -A, -N, -n, --ntasks-per-node, -c, --mem, --gres, --gpus,
//    -t, -a, -o, -e, -D, -d, --signal, -p, -q...). Ranks (-n, --ntasks-per-node) map onto parts
//    and processes per part (docs/distributed.md): -N parts, ntasks / N processes each.
// Options Slurm has and corral does not are warnings naming them and their line, never dropped
// silently. Precedence: the request's own fields (the command line's flags) over #CORRAL lines
// over #SBATCH lines; within one kind the later line wins.
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"

namespace corral::protocol {

// The most bytes a script may have (the spec's limit on strings), and directives it may hold.
inline constexpr size_t kMaxScriptBytes = 64 * 1024;
inline constexpr size_t kMaxDirectives = 512;

enum class DirectiveKind { kCorral, kSbatch };

// One option of a directive line, as written.
struct Directive {
  int line = 0;  // 1-based
  DirectiveKind kind = DirectiveKind::kSbatch;
  std::string flag;                  // "--time", "-t"
  std::optional<std::string> value;  // "10:00"; none for a flag without a value
  bool operator==(const Directive&) const = default;
};

// The directives of `script`, in order. InvalidArgument ("script: line 3: ...") for a script
// without "#!" on its first line (sbatch's rule: it names the interpreter), over kMaxScriptBytes,
// with a NUL byte, an unterminated quote, or more than kMaxDirectives options. An option's value
// is the rest of its word after '=', else the next word when the option takes one.
Result<std::vector<Directive>> ParseDirectives(std::string_view script);

struct BatchExpansion {
  nlohmann::json spec;                // the request's spec, the directives' fields filled in
  std::vector<std::string> warnings;  // "line 5: #SBATCH --mail-type: ignored (...)"
};

// The spec a batch request asks for: `request` (a spec object with "script") under which the
// script's directives fill in what it does not say (the header's precedence). Without a name
// from either, the job is named after "script.name" (the script's file name, as sbatch names
// it) when that is a valid job name. A relative
// --chdir / --workdir of a directive is taken from the request's "submit_dir". The result keeps
// "script"; ParseJobSpec checks it as any spec. A request without "script" comes back as it is.
// InvalidArgument naming the line and option ("script: line 4: #SBATCH --time: expected minutes
// or ..."), or the field for a malformed "script".
Result<BatchExpansion> ExpandBatchScript(const nlohmann::json& request);

// A Slurm time (sbatch --time): a bare number is minutes; "M:S", "H:M:S", "D-H", "D-H:M",
// "D-H:M:S"; "UNLIMITED" / "INFINITE" 0 (none). InvalidArgument naming `what`.
Result<int64_t> ParseSlurmTime(std::string_view text, const std::string& what);

// Slurm's file name pattern of --output / --error with its job's values: %j the job id, %A the
// array's id (the job's own outside an array), %a the array index ("4294967294" outside one, as
// Slurm), %x the job name, %u the user, %% a '%'. Other % sequences stay as written.
struct OutputNames {
  int64_t job_id = 0;
  int64_t array_id = 0;  // the job's own id when it is not in an array
  std::optional<int64_t> array_index;
  std::string job_name;
  std::string user;
};
std::string ExpandOutputPattern(std::string_view pattern, const OutputNames& names);

}  // namespace corral::protocol
