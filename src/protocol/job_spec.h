// The job spec users submit (API JSON; the CLI also reads YAML, and checks what it built with
// ParseJobSpec before it sends it), with its JSON codec:
//
//   {"name": "train", "project": "vision", "command": ["python3", "train.py"],
//    "shell": false, "workdir": "/data/train", "submit_dir": "/home/a/proj", "env": {"SEED": "1"},
//    "resources": {"gpus": 2, "gpu_milli": 1000, "gpu_models": ["A100-80GB"],
//                  "cpu_milli": 16000, "memory_mib": 65536},
//    "tasks": 1, "priority": 0, "time_limit_s": 3600, "max_restarts": 0,
//    "launcher": "torchrun", "procs_per_node": 2,
//    "array": {"indices": [0, 1, 2], "max_running": 2, "env": [{"LR": "0.1"}, {}, {}]},
//    "environment": "pytorch@3", "signal": {"name": "USR1", "before_s": 90},
//    "dependency": "afterok:12:13,afterany:14", "kill_on_invalid_dep": false,
//    "script": {"text": "#!/bin/sh\n...", "args": ["a"]}, "output_file": "out_%j.txt",
//    "error_file": "err_%j.txt", "partition": "gpu", "qos": "high",
//    "elastic": {"unit": "gpus", "min": 2, "max": 8, "step": 0}}
//
// Everything here is pure: what needs the server's state (the environment a spec names, the
// cluster's resource defaults, the store's job records) is server/control/job_submission.h.
//
// `environment` (docs/environments.md) names an environment asset, "NAME" or "NAME@VERSION";
// `command` may then be left out when the environment has a default command. The server resolves
// it at submission and stores the spec with "NAME@VERSION", the command and the environment's
// variables filled in, so that every run uses the same version.
//
// Distributed jobs (docs/distributed.md): `tasks` parts (one per node, or node share), each with
// `resources`, started together; `launcher` says how each part starts its `procs_per_node`
// processes and which rendezvous variables they get.
// `command` is an argv, run without a shell; with "shell": true it must hold one string, run by
// /bin/sh -c. Unknown fields are errors (typo safety); every error names the field
// ("field 'resources.gpus': must be between 0 and 1024, got -1").
//
// CPU and memory (docs/control-plane.md, "CPU and memory"): `resources.cpu_milli` is per task
// (part); `resources.cpus` is whole CPUs per process (rank), so a part asks cpus × 1000 ×
// procs_per_node milli-CPU (Slurm's -c); a spec gives one of them. What a submitted spec leaves
// out, the server fills in at submission, and a stored spec holds the effective cpu_milli and
// memory_mib only.
//
// Arrays (docs/control-plane.md, "Job arrays"): a spec with `array` is submitted as one job per
// index, each the spec without `array`, with the index's `env` entries merged over the spec's.
//
// Batch scripts (docs/batch.md, batch_script.h): a spec with `script` runs its text (which
// starts with "#!") with `script.args`, instead of a `command`; the server expands the script's
// directives into the spec first (ExpandBatchScript), so a stored spec holds what they asked.
// `output_file` / `error_file`: Slurm's --output / --error patterns (%j %A %a %x %u), files in
// the working folder (relative) or anywhere the task's user may write, which also get what the
// task writes to stdout / stderr; without `error_file`, stderr goes to `output_file` too.
//
// Dependencies (docs/control-plane.md, "Dependencies"): `dependency` is Slurm's text
// (model/dependency.h), the same the CLI's --dependency and a batch script's #SBATCH line take;
// a stored spec holds its canonical text. The ids must name jobs the submitter sees (checked by
// the server at submission). `kill_on_invalid_dep`: a job whose dependency can never be met is
// cancelled instead of staying pending.
//
// Elastic jobs (docs/elastic.md): `elastic` {"unit": "gpus" | "nodes" (default gpus), "min",
// "max" (1..model::kMaxElasticSize), "step" (0: powers of two, the default)} lets the server run
// the job at any size of the range and resize it. The size is resources.gpus (unit gpus: one task
// of whole GPUs) or tasks (unit nodes: one task per node, each with `resources`); a submitted
// spec leaves it out (it becomes MIN) or gives MIN; a stored one holds a size in the range. An
// elastic job is never a session nor a GPU share; arrays of elastic jobs are fine (each element
// is one elastic job). A job elastic by nodes is distributed (IsDistributed) whatever its size.
// Checkpoints (docs/in-job.md, "Preemption and checkpoints"): `checkpoint_grace_s` is how long
// the job's tasks get between SIGTERM and SIGKILL when preempted or resized (to save a
// checkpoint), 0..3600; the server caps it with its --max-checkpoint-grace.
//
// Sessions (docs/sessions.md): a spec with `session` ({"idle_timeout_s": N}, N 0 = never or >= 60;
// absent: the server's default) is an interactive session: exactly one task, no array, launcher
// none. The server generates its secret at submission and stores it in the spec as
// `session.token`, which only stored specs may hold.
#pragma once

#include <cstdint>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/dependency.h"
#include "model/job.h"
#include "model/launcher.h"
#include "model/warning_signal.h"

namespace corral::protocol {

// The `array` of a spec.
struct ArraySpec {
  std::vector<int> indices;        // 1..model::kMaxArrayElements, unique, each >= 0
  std::optional<int> max_running;  // >= 1; none: no limit
  // Empty, or per index (in the order of `indices`) its element's whole env: the spec's env with
  // the index's variables merged over it.
  std::vector<std::map<std::string, std::string>> env;
};

// The `session` of a spec.
struct SessionSpec {
  // Seconds without a proxied request before the session is stopped (after a notice): 0 never,
  // else >= model::kMinSessionIdleTimeoutS; none: the server's --session-idle-timeout.
  std::optional<int64_t> idle_timeout_s;
  // An interactive shell (`corral shell`, docs/sessions.md): the task runs the job's command, or
  // without one the task user's login shell, on a pty served over a WebSocket by the agent's
  // pty server (agent/shell_server.h) instead of the command serving HTTP itself.
  bool shell = false;
  // The session's secret (CORRAL_SESSION_TOKEN) is never stored: it is derived from `salt` with
  // the server's session key (Controller::SessionToken). `salt`: 64 lowercase hex characters,
  // generated at submission; never in a submitted or shown spec, always in a stored one.
  std::string salt;
  // A spec stored before secrets were derived holds the secret itself as `token`: read from such
  // rows, never written to new ones.
  std::string stored_token;
};

// The `script` of a spec.
struct BatchScript {
  std::string text;               // starts with "#!"; at most kMaxScriptBytes (batch_script.h)
  std::vector<std::string> args;  // its arguments ("$1", ...)
  std::string name;               // its file's name, as submitted; may be empty
};

// Where a spec comes from: a user (who may not set what the server sets), the store, or a job
// view (a stored spec without the session's token: api_job.h). Unknown fields are refused in
// the first two, ignored in a job view (a newer server's fields, read by an older CLI).
enum class SpecOrigin { kSubmitted, kStored, kShown };

struct JobSpec {
  std::string name;     // a job name (names.h) when submitted; empty: none
  std::string project;  // empty: the server's default project
  std::vector<std::string> command;
  bool shell = false;
  std::string workdir;  // absolute; empty: submit_dir where the node has it, else scratch
  // Absolute: the folder it was submitted from (the CLI sends its own); empty: none given. A job
  // without a workdir runs there when its node has that folder, else in a per-task scratch
  // directory (docs/control-plane.md, "Working folder").
  std::string submit_dir;
  std::map<std::string, std::string> env;
  // Per task (part). cpu and memory: as asked (resources.cpu_milli, resources.cpus ×
  // procs_per_node, resources.memory_mib), or 0 until the server fills in its defaults.
  model::TaskResources resources;
  // Whether resources.cpu and resources.memory were asked rather than left to the server's
  // defaults: only a submitted spec leaves them out; true in a stored spec and once the defaults
  // were applied.
  bool cpu_given = false;
  bool memory_given = false;
  int tasks = 1;
  int priority = 0;
  int64_t time_limit_s = 0;  // 0: none
  int max_restarts = 0;      // requeues after failure or node loss
  model::Launcher launcher = model::Launcher::kNone;
  int procs_per_node = 1;          // 1..model::kMaxProcsPerNode
  std::optional<ArraySpec> array;  // set: an array (ArrayElements); never in a stored spec
  // "NAME" or "NAME@VERSION" as submitted; "NAME@VERSION" in a stored spec; empty: none.
  std::string environment;
  std::optional<SessionSpec> session;  // set: an interactive session
  // "signal": sent to every task `before` seconds before its time limit (needs one).
  std::optional<model::WarningSignal> warning_signal;
  std::optional<BatchScript> script;            // set: a batch job, which has no `command`
  std::string output_file;                      // Slurm's --output pattern; empty: none
  std::string error_file;                       // Slurm's --error pattern; empty: with output_file
  std::string partition;                        // a partition of the server's table; empty: none
  std::string qos;                              // a QoS of the server's table; empty: none
  std::vector<model::Dependency> dependencies;  // "dependency": all to be met; empty: none
  bool kill_on_invalid_dep = false;
  // Set: an elastic job, its size now in resources.gpus or tasks (at submission: MIN).
  std::optional<model::ElasticBounds> elastic;
  // "checkpoint_grace_s": the SIGTERM -> SIGKILL grace its tasks get when preempted or resized
  // (time to write a checkpoint), 0..kMaxCheckpointGrace; none: the server's kill grace. The
  // server caps it (--max-checkpoint-grace).
  std::optional<Seconds> checkpoint_grace;
};

// One job of an array: its index and its spec (the array's, without `array`, with the index's
// env merged over the spec's env).
struct ArrayElement {
  int index = 0;
  JobSpec spec;
};

// The most parts the job may have: tasks, or elastic.max for a job elastic by nodes.
int MaxTasks(const JobSpec& spec);
// True when the job's parts get rendezvous variables: several parts (MaxTasks), a launcher or
// several processes per part.
bool IsDistributed(const JobSpec& spec);
// The ports a distributed job's processes bind, reserved as one block (MASTER_PORT is its
// base): one per rank for tf (every TensorFlow worker listens; at the job's largest size), else
// one.
int PortsOf(const JobSpec& spec);

// The most whole CPUs `resources.cpus` may ask per process.
inline constexpr int64_t kMaxCpusPerProc = 100000;
// The longest checkpoint_grace_s a spec may ask (the agents' kill grace bound, StopOrder).
inline constexpr Seconds kMaxCheckpointGrace{3600};

// Parses and validates a spec (`command` may be empty only with an `environment`), then checks
// it as a whole (CheckJobSpec). A submitted spec's `name` must be a job name (names.h); its
// `project` is the name of an existing project, not checked here. Limits: 4096 argv entries, 256
// env entries (also for each array element, its own and the spec's together), 64 KiB strings.
// A submitted or shown spec may not hold `session.salt` (or `session.token`); a stored one must
// hold one of them when it has a session.
// Errors: InvalidArgument naming the field.
Result<JobSpec> ParseJobSpec(const nlohmann::json& json,
                             SpecOrigin origin = SpecOrigin::kSubmitted);
// The checks of a whole spec, across its fields, for a spec changed after ParseJobSpec read it
// (the server fills in an environment's command and variables): with shell, one command string;
// no shell with launcher torchrun; the ports of a tf job within what corral hands out; a
// session's shape (one task, no array, no launcher, one process); an elastic job's (whole GPUs,
// no session, one task when it grows by GPUs); no variable corral sets (in
// env and in every array element's); an array copied once per element within 64 MiB.
// InvalidArgument naming the field.
Status CheckJobSpec(const JobSpec& spec);
// The spec as stored with a job: every field but `array` (a job is never an array; `command`
// when it is empty, which ParseJobSpec allows with an environment), with the session's token
// when it has one (job views clear it: api_job.h). ParseJobSpec reads it back as it was.
nlohmann::json ToJson(const JobSpec& spec);
// A relative `workdir` taken from the absolute `submit_dir` ("runs/a" in /home/u: /home/u/runs/a;
// "." and "dir/" name the folder itself); an absolute one, or one without an absolute
// submit_dir, as it is. The CLI's --workdir and a batch script's -D share it.
std::string WorkdirFrom(const std::string& submit_dir, const std::string& workdir);
// A spec's "elastic": {"unit": "gpus", "min": 2, "max": 8, "step": 0}.
nlohmann::json ElasticJson(const model::ElasticBounds& elastic);
// A spec's "signal": {"name": "USR1", "before_s": 90}.
nlohmann::json SignalJson(const model::WarningSignal& warning);

// The jobs of an array spec, in the order of its indices; empty when `spec` has no `array`.
std::vector<ArrayElement> ArrayElements(const JobSpec& spec);

}  // namespace corral::protocol
