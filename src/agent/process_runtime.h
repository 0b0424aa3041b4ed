// Runs tasks as plain processes on the node, each under a supervisor process (shim.h) that
// survives agent restarts. Per task:
//  - its own session-less process group (SIGTERM/SIGKILL reach the task and its children);
//  - CPU and memory limits through cgroups (v2, or v1 on hybrid machines) when the machine
//    allows; otherwise the task runs without limits and its status message says so;
//  - the credentials of the task user (options.task_user: uid, primary group, supplementary
//    groups), switched to just before exec, after the logs are opened and the cgroups joined;
//  - the environment of TaskEnvironment(): PATH (and LANG) from the agent (not the rest of the
//    agent's environment, which may hold its tokens), HOME of the task user, the job's env, the
//    corral variables;
//  - its workdir, or when the launch gives none a scratch directory
//    <work_dir>/scratch/<alloc>-<gen> (mode 0700, owned by the task user; kept after the task);
//  - stdout and stderr appended to <work_dir>/tasks/<alloc>-<gen>/stdout.log and stderr.log;
//  - exit code or signal, as recorded by the supervisor in exit.json.
//
// A task of a distributed job (TaskLaunch::distributed; rendezvous.h) also gets:
//  - the rendezvous variables (TaskEnvironment(): DistributedEnvironment() and, with one
//    process per part and a launcher whose ranks corral sets, RankEnvironment());
//  - the job's hostfile (Hostfile()) at <work_dir>/hostfiles/<alloc>-<gen>, named by
//    CORRAL_HOSTFILE (and, with mpi, OMPI_MCA_orte_default_hostfile). It cannot live in the task's
//    directory, which the task user cannot read, nor in its workdir, which is the job's; the file
//    is the agent's (mode 0444: readable by the task user, not writable), removed by Forget();
//  - LaunchArgv() as its command line: torchrun through PATH like argv[0], or the corral binary
//    (`corral launch`, options.self_exe) that starts the part's processes or holds the node.
//
// The agent's own files are private: <work_dir>/tasks and each task's directory are mode 0700
// (task users cannot read other tasks' logs and records); <work_dir>/scratch and
// <work_dir>/hostfiles are 0711 (enterable, not listable). A task user other than the agent's
// needs search (x) permission on work_dir and its parents to reach its scratch directory and
// hostfile.
//
// State on disk, per task, in <work_dir>/tasks/<alloc>-<gen>/: task.json (the launch, start
// time, supervisor and task pids with their /proc start times, cgroup dirs), kill.json (a kill
// in progress), exit.json (written by the supervisor). A new ProcessRuntime over the same
// work_dir adopts every task found there: ended (exit.json) -> reported ended; supervisor alive
// (same pid and /proc start time) -> running; otherwise -> kLost ("lost: supervisor gone"),
// after killing whatever is left of the task. Tasks are never forgotten without Forget().
//
// When the task's main process ends, the supervisor SIGKILLs the rest of its process group,
// and the agent kills whatever is left in its cgroup: a task ends as a whole.
//
// Not thread-safe: one thread (the reconcile loop) calls every method.
#pragma once

#include <sys/types.h>

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/cgroups.h"
#include "agent/runtime.h"
#include "agent/shim.h"
#include "agent/task_user.h"
#include "common/clock.h"

namespace corral::agent {

struct ProcessRuntimeOptions {
  std::string work_dir;   // absolute; holds tasks/ and scratch/ (created if missing)
  std::string node_name;  // CORRAL_NODE_NAME
  // The Unix user every task runs as. Only root may name a user other than its own. Empty: the
  // runtime's own user, with HOME from its environment (tests; the agent command requires a
  // task user when it runs as root).
  std::string task_user;
  // The grace between SIGTERM and SIGKILL when a task reaches its time limit.
  Seconds time_limit_grace{30};
  // Where to make task cgroups. Disable with CgroupManager::Disabled("...").
  std::optional<CgroupManager> cgroups;  // nullopt: CgroupManager::Detect() with defaults
  // The corral binary, run as `corral launch` by distributed tasks (LaunchArgv); the task user
  // must be able to execute it. Empty: this process's own binary (/proc/self/exe); tests name
  // the built corral binary.
  std::string self_exe;
};

class ProcessRuntime final : public Runtime {
 public:
  // Creates work_dir/tasks, work_dir/scratch and work_dir/hostfiles and adopts the tasks found
  // there. `clock` must outlive the runtime. Errors: work_dir not absolute or not writable; the
  // task user unknown (NotFound), or another user than the runtime's own while it does not run as
  // root (PermissionDenied).
  static Result<std::unique_ptr<ProcessRuntime>> Create(ProcessRuntimeOptions options,
                                                        Clock* clock);
  // Leaves the tasks running (they are adopted by the next ProcessRuntime over work_dir).
  ~ProcessRuntime() override = default;

  TaskStatus Start(const TaskLaunch& launch) override;
  std::vector<TaskStatus> Poll() override;
  Status Kill(const TaskKey& key, Seconds grace, const std::string& reason) override;
  Status Forget(const TaskKey& key) override;
  Result<std::string> ReadLog(const TaskKey& key, LogStream stream, int64_t offset,
                              int64_t max_bytes) override;

  // The directory of a task's files (logs, task.json, exit.json); it may not exist.
  std::string TaskDir(const TaskKey& key) const;
  const CgroupManager& cgroups() const { return cgroups_; }

 private:
  struct Task {
    TaskLaunch launch;
    TaskStatus status;
    pid_t shim_pid = 0;
    uint64_t shim_start_ticks = 0;
    bool shim_is_child = false;  // forked by this runtime: reap it with waitpid
    bool shim_reaped = false;
    pid_t task_pid = 0;
    uint64_t task_start_ticks = 0;
    std::optional<TaskCgroup> cgroup;  // removed (and reset) once the task has ended
    std::string notes;                 // limits not applied, for the status message
    // A kill in progress.
    std::optional<std::string> kill_reason;
    Seconds kill_deadline{0};
    bool sigkill_sent = false;
  };

  ProcessRuntime(ProcessRuntimeOptions options, Clock* clock, CgroupManager cgroups,
                 std::optional<TaskUser> task_user);

  void Adopt(const std::string& dir_name);
  TaskStatus FailToStart(const TaskLaunch& launch, const std::string& message);
  Result<std::string> MakeScratchDir(const TaskKey& key) const;
  Result<std::string> ResolveExecutable(const TaskLaunch& launch,
                                        const std::vector<std::string>& argv,
                                        const std::vector<std::string>& env) const;
  std::string HostfilePath(const TaskKey& key) const;
  Status WriteHostfile(const TaskKey& key, const Distributed& distributed) const;
  Status WriteTaskRecord(const TaskKey& key, const Task& task) const;
  Status WriteKillRecord(const TaskKey& key, const Task& task) const;
  void Observe(const TaskKey& key, Task& task);
  void Finish(const TaskKey& key, Task& task);
  void SignalTask(Task& task, int signal);
  void CleanUpCgroup(Task& task);

  ProcessRuntimeOptions options_;
  Clock* clock_;  // not owned
  CgroupManager cgroups_;
  std::optional<TaskUser> task_user_;            // nullopt: tasks run as the runtime's own user
  std::optional<ShimIdentity> identity_;         // what tasks switch to; nullopt: nothing to switch
  std::map<std::string, std::string> base_env_;  // passed to every task: PATH, HOME, LANG
  std::map<TaskKey, Task> tasks_;
};

}  // namespace corral::agent
