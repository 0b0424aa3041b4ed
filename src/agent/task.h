// What the server asks an agent to run (TaskLaunch) and what the agent reports back
// (TaskStatus), as in the agent <-> server protocol (docs: protocol draft of issue 3), with their
// JSON forms and the environment a task gets.
#pragma once

#include <compare>
#include <map>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/launcher.h"
#include "model/states.h"

namespace corral::agent {

// An allocation id and its generation: the fencing token of one task run (architecture.md,
// contract 3). A re-run of the same task gets a new generation.
// TODO(lead): AllocationId belongs in common/ids.h once the server needs it.
struct AllocationIdTag {};
using AllocationId = Id<AllocationIdTag>;

struct TaskKey {
  AllocationId allocation;
  int64_t generation = 0;
  auto operator<=>(const TaskKey&) const = default;
};

// "12-1": the key as used in file and cgroup names and messages.
std::string ToString(const TaskKey& key);

// How one part of a distributed job (docs/distributed.md) meets the others: the job's N parts
// ("nodes", one task each) run P processes each, N × P ranks in all; rank r = node_rank × P +
// local_rank. Sent by the server as the launch's "distributed" object; rendezvous.h turns it into
// environment variables, a hostfile and the argv that is exec'd.
struct Distributed {
  model::Launcher launcher = model::Launcher::kNone;
  int procs_per_node = 1;   // P: 1..model::kMaxProcsPerNode
  int node_rank = 0;        // this part's index: == TaskLaunch::task_index
  int nodes = 1;            // N: == TaskLaunch::tasks
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
};

struct TaskLaunch {
  JobId job_id;
  int task_index = 0;  // 0..tasks-1
  int tasks = 1;       // tasks of the job (CORRAL_NUM_TASKS)
  TaskKey key;
  // The program and its arguments, exec'd directly (PATH is searched for argv[0] when it has no
  // '/'); no shell unless `shell`: then /bin/sh -c argv[0], with argv[1..] as "$0", "$1", ...
  std::vector<std::string> argv;
  bool shell = false;
  std::string workdir;                     // absolute, must exist on the node
  std::map<std::string, std::string> env;  // may not set CORRAL_* or the GPU variables
  std::vector<int> gpus;                   // node GPU indices; empty for CPU-only tasks
  MilliGpu gpu_milli{0};                   // per GPU; 1000 for whole GPUs
  CpuMilli cpu{0};                         // 0 = no CPU limit
  MemoryMib memory{0};                     // 0 = no memory limit
  Seconds time_limit{0};                   // 0 = none
  std::string user;
  std::string project;
  std::optional<Distributed> distributed;        // nullopt: not part of a distributed job
  std::optional<int64_t> array_index;            // an array element's index (CORRAL_ARRAY_INDEX)
  std::optional<LaunchEnvironment> environment;  // nullopt: the agent's own environment
  std::optional<LaunchSession> session;          // nullopt: not an interactive session
};

enum class TaskState {
  kRunning,
  kExited,         // ended on its own: exit code, or a signal nobody in corral sent
  kKilled,         // stopped by the agent (Kill, time limit); exit code or signal as it ended
  kFailedToStart,  // never ran: invalid launch, program not found, exec failed
  kLost,           // its supervisor vanished without recording an exit (protocol addition)
};

// "running", "exited", "killed", "failed_to_start", "lost".
const char* TaskStateName(TaskState state);
bool IsTerminal(TaskState state);

struct TaskStatus {
  JobId job_id;
  int task_index = 0;
  TaskKey key;
  TaskState state = TaskState::kRunning;
  int pid = 0;                      // the task's process (and process group) id; 0 if none
  std::optional<int> exit_code;     // when it exited
  std::optional<int> signal;        // when a signal ended it
  Seconds started_at{0};            // Unix seconds
  std::optional<Seconds> ended_at;  // Unix seconds, when terminal
  std::string message;              // why (kill reason, start error, limits not applied, ...)
  // Why the process ended, for kExited and kKilled: what the server makes of the end (a time
  // limit ends the job timeout, the OOM killer oom: model::FailedStateFor), typed so that no
  // one parses `message`. None while running, for kFailedToStart and kLost, and from agents
  // that predate it ("end_cause" is optional in JSON).
  std::optional<model::TaskEndCause> end_cause;
};

// Checks a launch; the error names the task and the field: "task 12-1: field 'workdir': must be
// an absolute path, got 'data'". Checks that workdir exists and is a directory, and that a
// distributed launch agrees with itself (node_rank == task_index, nodes == tasks, ranges; no
// shell with torchrun, which takes a script), that an environment's venv or conda prefix is an
// absolute path and, for runtime "process", an existing directory ("field 'environment.venv':
// '/opt/x' (environment 'torch@2') does not exist on this node"; a container ignores them), and
// that a session's URL prefix is its job's (model::SessionUrlPrefix) and its token 64 hex
// characters.
Status Validate(const TaskLaunch& launch);

// True for the variables a job may not set: CORRAL_*, CUDA_VISIBLE_DEVICES,
// NVIDIA_VISIBLE_DEVICES and, for a distributed launch, the rendezvous variables corral sets
// for its launcher (IsRendezvousEnvName in rendezvous.h).
bool IsReservedEnvName(const std::string& name, const TaskLaunch& launch);

// The environment of a task, as "NAME=value" strings sorted by name: `base` (what the agent
// passes through, e.g. PATH and HOME), overridden by the job's env, then the corral variables:
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES (the GPU indices, comma-separated; for
// CPU-only tasks "" and "void"), CORRAL_JOB_ID, CORRAL_TASK_INDEX, CORRAL_NUM_TASKS,
// CORRAL_ALLOCATION_ID, CORRAL_NODE_NAME, CORRAL_GPU_MILLI; for a distributed launch also
// DistributedEnvironment(), RankEnvironment(..., 0) when the task is the only process of its
// part and corral sets the ranks (procs_per_node == 1, SetsRankVariables()), and
// HostfileEnvironment(hostfile) when `hostfile` is not empty (the path where the runtime wrote
// Hostfile()). All from rendezvous.h; `hostfile` is ignored for other launches. With an
// environment: CORRAL_ENVIRONMENT=NAME@VERSION and, for a venv (conda prefix), PATH starting
// with <venv>/bin (<conda>/bin) and VIRTUAL_ENV (CONDA_PREFIX); those win over the job's env. A
// session's task also gets the session variables (LaunchSession).
std::vector<std::string> TaskEnvironment(const TaskLaunch& launch, const std::string& node_name,
                                         const std::map<std::string, std::string>& base,
                                         const std::string& hostfile = "");

// JSON in the protocol's field names ("job_id", "allocation_id", "generation", "argv", ...).
nlohmann::json ToJson(const TaskLaunch& launch);
nlohmann::json ToJson(const TaskStatus& status);
// Errors name the field: "task launch: field 'argv': must be an array of strings",
// "task launch: field 'distributed.port': ...". A "distributed" that is absent or null: nullopt.
Result<TaskLaunch> TaskLaunchFromJson(const nlohmann::json& json);
Result<TaskStatus> TaskStatusFromJson(const nlohmann::json& json);

}  // namespace corral::agent
