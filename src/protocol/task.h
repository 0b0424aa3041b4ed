// What the server asks an agent to run (TaskLaunch) and what the agent reports back
// (TaskStatus): messages of the agent <-> server protocol (docs/control-plane.md, "Agent
// protocol"), with their JSON codecs. What an agent checks and sets up on its node for a launch
// (the workdir exists, the task's environment) is agent/task_setup.h.
#pragma once

#include <compare>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/launcher.h"
#include "model/states.h"
#include "model/warning_signal.h"

namespace corral {
class FieldReader;  // common/json_fields.h
}  // namespace corral

namespace corral::protocol {

// An allocation id and its generation: the fencing token of one task run (architecture.md,
// contract 3). A re-run of the same task gets a new generation.
struct AllocationIdTag {};
using AllocationId = Id<AllocationIdTag>;

struct TaskKey {
  AllocationId allocation;
  int64_t generation = 0;
  auto operator<=>(const TaskKey&) const = default;
};

// "12-1": the key as used in file and cgroup names and messages.
std::string ToString(const TaskKey& key);
// ToString's form back (two non-negative decimal numbers and a dash); none for anything else.
std::optional<TaskKey> ParseTaskKey(std::string_view text);

// How one part of a distributed job (docs/distributed.md) meets the others: the job's N parts
// ("nodes", one task each) run P processes each, N × P ranks in all; rank r = node_rank × P +
// local_rank. Sent by the server as the launch's "distributed" object; rendezvous.h turns it into
// environment variables, a hostfile and the argv that is exec'd.
struct Distributed {
  model::Launcher launcher = model::Launcher::kNone;
  int procs_per_node = 1;   // P: 1..model::kMaxProcsPerNode
  int node_rank = 0;        // this part's index: == TaskLaunch::task_index
  int nodes = 1;            // N: == TaskLaunch::tasks (1..1,000,000)
  std::string master_addr;  // address of part 0's node (model::ValidateNodeAddress)
  // Base of the block of ports reserved for the job on every node of the job (one port, or one
  // per rank for tf; see docs/distributed.md):
  // 1024..65535 - P.
  int port = 0;
  // The address of each part's node, by node rank (N entries; parts may share an address).
  std::vector<std::string> hosts;
};

// The environment asset (docs/environments.md) a task runs in, as the server resolved it: its
// pinned version and what the runtime sets up. The process runtime puts <venv>/bin or
// <conda>/bin first on PATH and sets VIRTUAL_ENV or CONDA_PREFIX; it cannot run a "container"
// environment. A "process" launch whose venv or conda is missing on the node but which has an
// image may run as a container instead (ProcessRuntime changes `runtime` then; process_runtime.h).
struct LaunchEnvironment {
  std::string name;
  int64_t version = 0;  // >= 1
  std::string runtime;  // "process" | "container"
  std::string image;    // container image; may be empty
  std::string venv;     // absolute; for runtime "process" a directory on the node; may be empty
  std::string conda;    // absolute; for runtime "process" a directory on the node; may be empty
};

// An interactive session's task (docs/sessions.md): the app serves on `port` under `url_prefix`
// and accepts requests carrying `token`; the task gets them as CORRAL_SESSION_PORT,
// CORRAL_SESSION_URL_PREFIX and CORRAL_SESSION_TOKEN (model/session.h).
struct LaunchSession {
  int port = 0;            // 1024..65535, reserved for the session on this node
  std::string url_prefix;  // "/sessions/<job id>/"
  std::string token;       // 64 hex characters
  // An interactive shell (JobSpec's session.shell): the agent runs its pty server
  // (agent/shell_server.h) on the port, with argv (empty: the task user's login shell) on the pty.
  bool shell = false;
};

struct TaskLaunch {
  JobId job_id;
  int task_index = 0;  // 0..tasks-1
  int tasks = 1;       // tasks of the job (CORRAL_NUM_TASKS)
  TaskKey key;
  // The program and its arguments, exec'd directly (PATH is searched for argv[0] when it has no
  // '/'); no shell unless `shell`: then /bin/sh -c argv[0], with argv[1..] as "$0", "$1", ...
  // Empty only for an interactive shell (LaunchSession::shell) that runs the login shell.
  std::vector<std::string> argv;
  bool shell = false;
  // Absolute, must exist on the node; empty: `submit_dir` when the node has it and the task's
  // user may enter it, else a scratch directory the agent makes (and says so in its note).
  std::string workdir;
  std::string submit_dir;                  // the job's (JobSpec::submit_dir); may be empty
  std::map<std::string, std::string> env;  // may not set CORRAL_* or the GPU variables
  std::vector<int> gpus;                   // node GPU indices; empty for CPU-only tasks
  MilliGpu gpu_milli{0};                   // per GPU; 1000 for whole GPUs
  CpuMilli cpu{0};                         // 0 = no CPU limit
  MemoryMib memory{0};                     // 0 = no memory limit
  Seconds time_limit{0};                   // 0 = none
  // Sent to the task once, `before` seconds ahead of its time limit (only with one). On the
  // wire as {"signal": 10, "before_s": 90}.
  std::optional<model::WarningSignal> warning_signal;
  std::string user;
  std::string project;
  std::optional<Distributed> distributed;  // nullopt: not part of a distributed job
  std::optional<int64_t> array_index;      // an array element's index (CORRAL_ARRAY_INDEX)
  std::optional<int64_t> array_id;         // an array element's array (SLURM_ARRAY_JOB_ID)
  // A batch job (JobSpec::script): the agent writes `script` to a file of its own and runs it
  // with `argv` as its arguments; the task also gets the SLURM_* variables (task_setup.h).
  // Empty: not a batch job.
  std::string script;
  std::string job_name;  // SLURM_JOB_NAME of a batch job
  // Files that also get what the task writes to stdout / stderr (JobSpec::output_file, its
  // pattern expanded), relative to the working folder; written as the task's user. Empty
  // error_file: stderr goes to output_file too. Empty output_file: none.
  std::string output_file;
  std::string error_file;
  // The in-job channel (docs/in-job.md): the job's token (CORRAL_JOB_TOKEN; a secret, derived by
  // the server, never logged) and "<checkpoint root>/<job id>" (CORRAL_CHECKPOINT_DIR), which the
  // agent creates for the task's user (0700) before the task starts. Empty: none (an older
  // server, or no checkpoint root).
  std::string job_token;
  std::string checkpoint_dir;
  std::optional<LaunchEnvironment> environment;  // nullopt: the agent's own environment
  std::optional<LaunchSession> session;          // nullopt: not an interactive session
  // Its job would be requeued elsewhere if its node were declared lost (restarts left under
  // max_restarts): an agent that reaches no server stops it ("requeueable", docs/control-plane.md,
  // "Fencing"). Absent (an older server): false.
  bool requeueable = false;
};

// A task's process as its agent saw it, the "state" of a TaskStatus. Not the server's task state
// (model::TaskState: assigned, running, exited, killed, lost), which the reconcile core derives
// from it (reconcile::DecideReport): a process that failed to start is a killed task there.
enum class ProcessState {
  kRunning,
  kExited,         // ended on its own: exit code, or a signal nobody in corral sent
  kKilled,         // stopped by the agent (Kill, time limit); exit code or signal as it ended
  kFailedToStart,  // never ran: invalid launch, program not found, exec failed
  kLost,           // its supervisor vanished without recording an exit (protocol addition)
};

// A task's output streams.
enum class LogStream { kStdout, kStderr };
const char* LogStreamName(LogStream stream);                     // "stdout", "stderr"
std::optional<LogStream> ParseLogStream(std::string_view name);  // LogStreamName's; else none

// "running", "exited", "killed", "failed_to_start", "lost".
const char* ProcessStateName(ProcessState state);
bool IsTerminal(ProcessState state);

struct TaskStatus {
  JobId job_id;
  int task_index = 0;
  TaskKey key;
  ProcessState state = ProcessState::kRunning;
  int pid = 0;                      // the task's process (and process group) id; 0 if none
  std::optional<int> exit_code;     // when it exited
  std::optional<int> signal;        // when a signal ended it
  Seconds started_at{0};            // Unix seconds
  std::optional<Seconds> ended_at;  // Unix seconds, when terminal
  std::string message;              // why (kill reason, start error, limits not applied, ...)
  // Why the process ended: what the server makes of the end (a time limit ends the job timeout,
  // the OOM killer oom: model::FailedStateFor), typed so that no one parses `message`. Set for
  // kExited and kKilled, and only for them (the codec refuses a report otherwise).
  std::optional<model::TaskEndCause> end_cause;
};

// What is wrong with a Distributed on its own (ranges, addresses, one host per node), or
// nullopt: {"distributed.port", "must be in 1024..65531 ..."}. The codec refuses such a launch;
// the agent's Validate (agent/task_setup.h) checks it against the launch too.
struct FieldProblem {
  std::string field;  // "distributed.port"
  std::string why;
};
std::optional<FieldProblem> DistributedProblem(const Distributed& distributed);

// JSON in the protocol's field names ("job_id", "allocation_id", "generation", "argv", ...).
nlohmann::json ToJson(const TaskLaunch& launch);
nlohmann::json ToJson(const TaskStatus& status);
nlohmann::json ToJson(const TaskKey& key);  // {"allocation_id", "generation"}
// Errors name the field: "task launch: field 'argv': must be an array of strings",
// "task launch: field 'distributed.port': ...". A "distributed" that is absent or null: nullopt.
// Ids and generations are >= 0, counts and indices 0..1,000,000, a status's state one of
// ProcessStateName()'s.
Result<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& json);
Result<TaskStatus> TaskStatusFromJson(const nlohmann::json& json);
// The same, for one nested in another message: errors carry the reader's path
// ("heartbeat: field 'tasks[3].state': ...").
Result<TaskLaunch> ReadTaskLaunch(const FieldReader& reader);
Result<TaskStatus> ReadTaskStatus(const FieldReader& reader);
Result<TaskKey> ReadTaskKey(const FieldReader& reader);

}  // namespace corral::protocol
