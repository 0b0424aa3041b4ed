// The job spec users submit (API JSON; the CLI also reads YAML and sends JSON):
//
//   {"name": "train", "project": "vision", "command": ["python3", "train.py"],
//    "shell": false, "workdir": "/data/train", "env": {"SEED": "1"},
//    "resources": {"gpus": 2, "gpu_milli": 1000, "gpu_models": ["A100-80GB"],
//                  "cpu_milli": 16000, "memory_mib": 65536},
//    "tasks": 1, "priority": 0, "time_limit_s": 3600, "max_restarts": 0,
//    "launcher": "torchrun", "procs_per_node": 2,
//    "array": {"indices": [0, 1, 2], "max_running": 2, "env": [{"LR": "0.1"}, {}, {}]},
//    "environment": "pytorch@3"}
//
// `environment` (docs/environments.md) names an environment asset, "NAME" or "NAME@VERSION";
// `command` may then be left out when the environment has a default command. The server resolves
// it at submission (ResolveEnvironment, controller) and stores the spec with "NAME@VERSION", the
// command and the environment's variables filled in, so that every run uses the same version.
//
// Distributed jobs (docs/distributed.md): `tasks` parts (one per node, or node share), each with
// `resources`, started together; `launcher` says how each part starts its `procs_per_node`
// processes and which rendezvous variables they get.
// `command` is an argv, run without a shell; with "shell": true it must hold one string, run by
// /bin/sh -c. Unknown fields are errors (typo safety); every error names the field.
//
// CPU and memory (docs/control-plane.md, "CPU and memory"): `resources.cpu_milli` is per task
// (part); `resources.cpus` is whole CPUs per process (rank), so a part asks cpus × 1000 ×
// procs_per_node milli-CPU (Slurm's -c); a spec gives one of them. What a submitted spec leaves
// out, the server fills in at submission (ApplyResourceDefaults), and a stored spec holds the
// effective cpu_milli and memory_mib only.
//
// Arrays (docs/control-plane.md, "Job arrays"): a spec with `array` is submitted as one job per
// index, each the spec without `array`, with the index's `env` entries merged over the spec's.
//
// Sessions (docs/sessions.md): a spec with `session` ({"idle_timeout_s": N}, N 0 = never or >= 60;
// absent: the server's default) is an interactive session: exactly one task, no array, launcher
// none. The server generates its secret at submission and stores it in the spec as
// `session.token`, which only stored specs may hold.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/job.h"
#include "model/launcher.h"
#include "server/environment.h"
#include "store/store.h"

namespace corral::server {

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
  // The session's secret (CORRAL_SESSION_TOKEN): 64 lowercase hex characters, generated at
  // submission; never in a submitted spec, always in a stored one.
  std::string token;
};

// Where a spec comes from: a user (who may not set what the server sets) or the store.
enum class SpecOrigin { kSubmitted, kStored };

struct JobSpec {
  std::string name;
  std::string project;  // empty: the server's default project
  std::vector<std::string> command;
  bool shell = false;
  std::string workdir;  // absolute; empty: the agent's per-task directory
  std::map<std::string, std::string> env;
  // Per task (part). cpu and memory: as asked (resources.cpu_milli, resources.cpus ×
  // procs_per_node, resources.memory_mib), or 0 until ApplyResourceDefaults fills them in.
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
};

// One job of an array: its index and its spec (the array's, without `array`, with the index's
// env merged over the spec's env).
struct ArrayElement {
  int index = 0;
  JobSpec spec;
};

// True when the job's parts get rendezvous variables: several parts, a launcher or several
// processes per part.
bool IsDistributed(const JobSpec& spec);
// The ports a distributed job's processes bind, reserved as one block (MASTER_PORT is its
// base): one per rank for tf (every TensorFlow worker listens), else one.
int PortsOf(const JobSpec& spec);

// The most whole CPUs `resources.cpus` may ask per process.
inline constexpr int64_t kMaxCpusPerProc = 100000;
// The CPUs per process of a job without GPUs that asks none, as Slurm gives each task one.
inline constexpr int64_t kDefaultCpusPerProc = 1;

// The cluster's defaults for what a submitted spec leaves out (corral server flags).
struct ResourceDefaults {
  // --default-cpus-per-gpu: whole CPUs per GPU of a GPU job that asks no CPU (Slurm's
  // DefCpuPerGPU); a share of a GPU gets its share of them. 0: such a job asks no CPU.
  int64_t cpus_per_gpu = 0;
  // --default-memory-per-cpu-mib: MiB per CPU asked (or defaulted) of a job that asks no memory
  // (Slurm's DefMemPerCPU). 0: off, such a job asks no memory.
  MemoryMib memory_per_cpu{0};
};

// Fills in the CPU and memory `spec` left out (cpu_given, memory_given), once per submission:
//  - CPU: a job without GPUs asks kDefaultCpusPerProc per process, procs_per_node × 1000
//    milli-CPU per task; a GPU job asks cpus_per_gpu per GPU, cpus_per_gpu × gpus × gpu_milli
//    milli-CPU per task (none when cpus_per_gpu is 0).
//  - memory: memory_per_cpu per CPU of the task's CPU request (asked or defaulted), rounded up
//    to a whole MiB; none when memory_per_cpu is 0.
// Returns what it filled in, for the submitter (the job's submission event): "resources.
// cpu_milli 1000 (1 CPU per process, no GPUs asked)" and the like, joined by "; "; "" when the
// spec asked everything.
std::string ApplyResourceDefaults(const ResourceDefaults& defaults, JobSpec& spec);

// Parses and validates a spec (`command` may be empty only with an `environment`). Limits: 4096
// argv entries, 256 env entries (also for each array element, its own and the spec's together), 64
// KiB strings.
// A submitted spec may not hold `session.token`; a stored one must when it has a session.
Result<JobSpec> ParseJobSpec(const nlohmann::json& json,
                             SpecOrigin origin = SpecOrigin::kSubmitted);
// The spec as stored with a job: every field but `array` (a job is never an array), with the
// session's token.
nlohmann::json ToJson(const JobSpec& spec);
// A stored spec as users see it in job views: without the session's token.
nlohmann::json WithoutSecrets(nlohmann::json stored_spec);

// Makes `spec` use version `version` of environment `env`: "environment" becomes
// "NAME@VERSION", an empty command the environment's command, and the environment's variables go
// under the spec's (and under each array element's). InvalidArgument naming the field when the
// command is still empty, not one string with shell, the variables are too many or hold a name
// corral sets for the job (rendezvous variables of its launcher), the array grows too big, or
// the tasks have fewer GPUs than the environment's gpus.min.
Status ApplyEnvironment(const EnvironmentSpec& env, int64_t version, JobSpec& spec);

// The jobs of an array spec, in the order of its indices; empty when `spec` has no `array`.
std::vector<ArrayElement> ArrayElements(const JobSpec& spec);

// The scheduler's view of job `record` with the (validated) spec `spec`.
model::Job ToModelJob(const JobSpec& spec, const store::JobRecord& record);

}  // namespace corral::server
