// The task supervisor ("shim", as in containerd-shim and conmon): a small process between the
// agent and a task that outlives the agent, so that an agent restart neither kills tasks nor
// loses their exit status. Internal to ProcessRuntime.
//
//   agent --posix_spawn--> shim (`corral-supervise __supervise`, ShimPlan::supervisor: a fresh
//                     process, so that starting a task never copies the agent's page tables;
//                     the plan comes over a socket; setsid: own session, stdio on /dev/null, no
//                     inherited fds)
//                     --vfork--> task (own process group; joins its cgroups; stdout/stderr
//                               appended to log files; switches to the task user; cwd;
//                               exact env; execve)
//   The shim starts the task only once the agent says so (StartShim's `before_task`: the agent
//   records the shim's pid first), writes the task's pid to ShimPlan::task_pid_path, tells the
//   agent the task's pid and whether exec succeeded (a pipe), waits for the
//   task, SIGKILLs what is left of the task's process group, writes the exit record atomically
//   (exit.json: temp file + rename), writes one byte to the agent's exit notice FIFO (when the
//   plan names one and an agent has it open), reaps the task and exits.
//
// The shim is re-executed rather than forked because fork() in a large multi-threaded agent
// (corral dev runs the server in it) write-protects every page of it: a 600-task gang took
// 240 s to start, most of it copy-on-write faults in the server's threads. Between the shim's
// vfork and the task's exec only system calls are made.
#pragma once

#include <sys/types.h>

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "common/status.h"

namespace corral::agent {

// The credentials the task switches to before exec, in this order: setgroups(groups),
// setgid(gid), setuid(uid). Needs privilege (root) unless they are the shim's own.
struct ShimIdentity {
  uid_t uid = 0;
  gid_t gid = 0;
  std::vector<gid_t> groups;  // supplementary groups
};

// The hidden subcommand that runs a shim: `corral-supervise __supervise`
// (apps/corral/supervise_main.cc) or `corral-daemon __supervise` (apps/corral/daemon_main.cc).
inline constexpr char kSuperviseCommand[] = "__supervise";

// This build's identity as the plan carries it (ShimPlan::build): "VERSION COMMIT"
// (common/build_info.h).
const std::string& ShimBuild();

struct ShimPlan {
  // The binary started as the shim with kSuperviseCommand; it must call SuperviseMain():
  // build/corral-supervise (apps/corral/supervise_main.cc), or "/proc/self/exe", the agent's own
  // binary even after it was replaced on disk (agent_process.h, TaskSupervisor).
  std::string supervisor;
  // Started instead when `supervisor` cannot be (posix_spawn fails with ENOENT, EACCES,
  // ENOEXEC or ETXTBSY) or refuses the plan (it dies without accepting it: a supervisor of another
  // build, see `build`); nothing of the task has started then. Empty: none, the start fails.
  std::string fallback_supervisor;
  // The build that wrote the plan (ShimBuild(): version and commit). A supervisor of another
  // build refuses the plan before starting anything, so that an agent and a supervisor binary
  // replaced under it never disagree on the plan's format or meaning. Tests set another value.
  std::string build = ShimBuild();
  std::string executable;         // path for execve: absolute, or relative to workdir
  std::vector<std::string> argv;  // argv[0] as the task sees it
  std::vector<std::string> env;   // "NAME=value"
  std::string workdir;
  std::string stdout_path;  // opened O_APPEND|O_CREAT
  std::string stderr_path;  // opened O_APPEND|O_CREAT
  std::string exit_path;    // exit.json, written by the shim at the end
  // The task's pid in decimal, written by the shim once the task has exec'd (or failed to),
  // before its report: an agent that adopts a task whose record lacks the task's pid (its
  // predecessor died before writing it) finds it there. Empty: not written.
  std::string task_pid_path;
  // A FIFO the shim writes one byte to once exit.json is in place, so that the agent learns of
  // the end at once instead of at its next poll. Opened only then (O_NONBLOCK): a FIFO nobody
  // reads (agent down) or one that is full is skipped; the agent polls anyway. Empty: none.
  std::string exit_notice_path;
  std::vector<std::string> cgroup_procs;  // cgroup.procs files the task joins before exec
  // nullopt: the task keeps the shim's (the agent's) credentials. The logs are opened and the
  // cgroups joined before the switch, the workdir entered after it (as the task user).
  std::optional<ShimIdentity> identity;
};

// Where starting the task failed.
enum class ShimStep : int32_t {
  kNone = 0,
  kFork = 1,
  kCgroup = 2,  // joining a cgroup; not fatal: the task runs without limits
  kStdout = 3,
  kStderr = 4,
  kChdir = 5,
  kExec = 6,
  kSetUser = 7,  // setgroups, setgid or setuid to ShimPlan::identity
};

// "open stdout log", "exec", ...
const char* ShimStepName(ShimStep step);

struct ShimStart {
  std::string supervisor;  // the binary that supervises the task: the plan's or its fallback
  pid_t shim_pid = 0;
  pid_t task_pid = 0;                      // also the task's process group id; 0 if fork failed
  ShimStep failed_step = ShimStep::kNone;  // kNone: the task is running
  int error = 0;                           // errno of failed_step
  int cgroup_error = 0;                    // errno of joining a cgroup (the task runs regardless)
};

// Starts the shim, sends it the plan, calls `before_task` with its pid and waits for the shim to
// accept the plan; only if both did lets the shim start the task; then waits (briefly: until
// the task has exec'd or failed to) for its report. ProcessRuntime records the shim's pid in
// `before_task`, so that an agent killed at any moment leaves a record naming the supervisor of
// whatever was started (never a running task that the next agent thinks gone). When
// `before_task` fails, the shim exits without starting the task, is reaped, and that error is
// returned; the shim does the same when the caller dies before saying go. A supervisor that
// cannot be started or refuses the plan is reaped and the plan's fallback_supervisor is tried
// the same way (`before_task` is called again, with the new pid); nothing of the task ran.
// The shim is a child of the caller, who must reap it (waitpid) once it exits. Errors: the
// task's command line and environment over 64 MiB (InvalidArgument); no supervisor could be
// started or accepted the plan (both supervisors' errors); `before_task` failed (its error); or
// the shim died before reporting.
Result<ShimStart> StartShim(const ShimPlan& plan,
                            const std::function<Status(pid_t shim_pid)>& before_task);

// SuperviseMain()'s exit code for a plan of another build.
inline constexpr int kShimRefusedPlan = 3;

// The shim's main, in a process started by StartShim() with kSuperviseCommand: reads the plan,
// accepts it, waits for the go, supervises the task, and never returns but with exit code 2
// when it was not started by StartShim (no plan to read) or kShimRefusedPlan when the plan was
// written by another build (ShimPlan::build).
int SuperviseMain();

}  // namespace corral::agent
