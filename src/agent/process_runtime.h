// Runs tasks on the node, each under a supervisor process (shim.h) that survives agent restarts:
// as plain processes, or in containers when the launch's environment says runtime "container"
// (below). Per process task:
//  - its own session-less process group (SIGTERM/SIGKILL reach the task and its children);
//  - CPU and memory limits through cgroups (v2, or v1 on hybrid machines) when the machine
//    allows; otherwise the task runs without limits and its status message says so;
//  - the credentials of the task user (options.task_user: uid, primary group, supplementary
//    groups), switched to just before exec, after the logs are opened and the cgroups joined;
//  - the environment of TaskEnvironment(): PATH (and LANG) from the agent (not the rest of the
//    agent's environment, which may hold its tokens), HOME of the task user, the job's env, the
//    corral variables;
//  - its workdir, or when the launch gives none a scratch directory
//    <home>/scratch/<alloc>-<gen> (mode 0700, owned by the task user; removed by Forget());
//  - stdout and stderr appended to <home>/tasks/<alloc>-<gen>/stdout.log and stderr.log;
//  - exit code or signal, as recorded by the supervisor in exit.json;
//  - the in-job channel (docs/in-job.md): CORRAL_SERVER (options.task_server), the launch's job
//    token, CORRAL_STOP_FILE = <home>/stops/<alloc>-<gen>/stop.json (its folder the agent's,
//    0755, made at the start and removed by Forget()), written (stop_file.h) before the SIGTERM
//    of a Kill() or of the time limit; and the launch's checkpoint folder, created for the
//    task's user (0700) before the task starts: a folder whose parent (the checkpoint root) is
//    not on this node fails the start, naming it.
//
// A container task (options.container_engine; container_engine.h, docs/container-runtime.md) is
// the same supervised process, running `ENGINE run ... IMAGE ARGV` (PlanContainerRun()) instead
// of the task's program:
//  - the engine process runs as the agent's user with the engine's environment only
//    (ContainerEngine::env), in the agent's cgroup; the container's processes run as the task
//    user (--user), with the limits applied by the engine (--memory, --cpus), the task's GPUs
//    only, its workdir (or scratch directory), hostfile, stop file folder (read-only) and
//    checkpoint folder mounted at their host paths, and the
//    variables of ContainerEnvironment() read from <task dir>/container.env (private to the
//    agent: never on a command line);
//  - stdout, stderr and the exit code are the engine's, which passes on the container's;
//  - SIGTERM reaches the container through the engine (sig-proxy, --init); SIGKILL kills the
//    engine process, then removes the container (`ENGINE rm -f`);
//  - whenever the task ends (on its own, killed, or found lost on adoption) the container is
//    removed (RemoveContainer()) unless a removal after the SIGKILL already did; a failed removal
//    is retried by Poll() and Forget() (which fails meanwhile) until the engine says it is gone,
//    at most once every 30 s per task (each engine call blocks the caller up to 10 s);
//  - without an engine, a container launch fails to start ("this node has no container engine").
//
// A launch whose environment says runtime "process" but whose venv or conda prefix is not a
// directory on this node runs as a container task when the environment has an image and this
// node an engine (the server sends an environment with both as "process"): the launch kept in
// task.json says runtime "container" then (so the next agent adopts it as one), and the status
// message says "host prefix /opt/x missing here: running image I in a container". Otherwise
// it fails to start, naming the prefix.
//
// A task of a distributed job (TaskLaunch::distributed; rendezvous.h) also gets:
//  - the rendezvous variables (TaskEnvironment(): DistributedEnvironment() and, with one
//    process per part and a launcher whose ranks corral sets, RankEnvironment());
//  - the job's hostfile (Hostfile()) at <home>/hostfiles/<alloc>-<gen>, named by
//    CORRAL_HOSTFILE (and, with mpi, OMPI_MCA_orte_default_hostfile). It cannot live in the task's
//    directory, which the task user cannot read, nor in its workdir, which is the job's; the file
//    is the agent's (mode 0444: readable by the task user, not writable), removed by Forget();
//  - LaunchArgv() as its command line: torchrun through PATH like argv[0], or the corral binary
//    (`corral launch`, options.self_exe) that starts the part's processes or holds the node.
//
// Namespaces. Everything the runtime creates on the host belongs to one cluster and one node,
// so that any number of agents, of one cluster or of several (two `corral dev`, tests, CI), run
// on one host without touching each other's tasks (docs/control-plane.md):
//  - files under <home> = <work_dir>/clusters/<cluster_id>/<node_name>/;
//  - cgroups under corral/<cluster_id>/<node_name>/ (AgentCgroupParent());
//  - containers named corral-<cluster_id>-<node_name>-<alloc>-<gen> (ContainerName());
//  - clean-up only ever touches what a task's own record names (its cgroup dirs, its container,
//    its files).
// A work dir belongs to one agent (WorkDirLock, node_identity.h), and so to one namespace at a
// time: Create() refuses a work dir whose other namespaces still hold tasks (left while the
// agent served another cluster or ran under another name), naming them, instead of leaving them
// unsupervised and unreported.
//
// Upgrade: tasks of agents before cluster ids live in the old layout, <work_dir>/tasks/<alloc>-
// <gen> (scratch/, hostfiles/ and mounts/ beside it, cgroups corral/<alloc>-<gen> as task.json
// records them, containers corral-<alloc>-<gen>). Create() adopts them as this namespace's and
// they stay where they are until forgotten; once none is left, the old directories are removed
// when empty. A key in both layouts is this namespace's (the old one is left alone).
//
// The agent's own files are private: <home>/tasks and each task's directory are mode 0700
// (task users cannot read other tasks' logs and records); <home>/scratch and <home>/hostfiles
// and the levels above them up to <work_dir>/clusters are 0711 (enterable, not listable). A task
// user other than the agent's needs search (x) permission on work_dir and its parents to reach
// its scratch directory and hostfile.
//
// State on disk, per task, in <home>/tasks/<alloc>-<gen>/: task.json (the launch, start
// time, supervisor and task pids with their /proc start times, cgroup dirs; written once the
// supervisor is started and before it starts the task, again with the task's pid), task.pid
// (written by the supervisor), kill.json (a kill
// in progress), exit.json (written by the supervisor), container.env (a container task's
// variables). A new ProcessRuntime over the same
// work_dir and namespace adopts every task found there: ended (exit.json) -> reported ended;
// supervisor alive (same pid and /proc start time) -> running; otherwise -> kLost ("lost:
// supervisor gone"), after killing whatever is left of the task (its container included). Tasks are
// never forgotten without Forget().
//
// When the task's main process ends, the supervisor SIGKILLs the rest of its process group,
// and the agent kills whatever is left in its cgroup (or removes its container): a task ends as
// a whole.
//
// Exit notices: every supervisor writes a byte to the FIFO <home>/exit-notices once its
// task's exit.json is in place (ShimPlan::exit_notice_path); ExitNoticeFd() is its read end, so
// the agent learns of an end within milliseconds instead of at its next poll. The FIFO has a
// fixed path, so supervisors of tasks adopted after an agent restart reach the new agent too.
// Supervisors started by agents older than the FIFO write nothing: their ends are seen by the
// next Poll(), as before.
//
// Threads: one thread (the agent's runtime thread) calls every method but ReadLog() and
// ExitNoticeFd(), which are thread-safe (runtime.h).
#pragma once

#include <sys/types.h>

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/cgroups.h"
#include "agent/container_engine.h"
#include "agent/runtime.h"
#include "agent/shim.h"
#include "agent/task_user.h"
#include "common/clock.h"

namespace corral::agent {

struct ProcessRuntimeOptions {
  std::string work_dir;  // absolute; holds clusters/<cluster_id>/<node_name>/ (created if missing)
  // The namespace of everything the runtime creates (above): the cluster's id as its server
  // said at registration (model::ValidateClusterId), and the node's name (a node name:
  // protocol/names.h; also the tasks' CORRAL_NODE_NAME).
  std::string cluster_id;
  std::string node_name;
  // The Unix user every task runs as. Only root may name a user other than its own. Empty: the
  // runtime's own user, with HOME from its environment (tests; the agent command requires a
  // task user, or run_as_submitter, when it runs as root).
  std::string task_user;
  // Instead of task_user: each task runs as the Unix user of its submitter (TaskLaunch::user),
  // or as user_map[submitter] where the map names one; a Unix user the map gives to someone is
  // reached only through the map. Root only. The user is looked up at each launch. A submitter
  // without such a Unix user, or whose uid is outside [min_task_uid, max_task_uid] (root and
  // system accounts below, nobody and other service ids above), or whose primary group is 0,
  // gets a task that fails to start naming the user.
  bool run_as_submitter = false;
  std::map<std::string, std::string> user_map;  // corral user -> Unix user
  uid_t min_task_uid = 1000;                    // >= 1
  uid_t max_task_uid = 60000;                   // Debian's UID_MAX (login.defs)
  // How submitters' users are looked up (empty: LookUpUser, the user database; tests replace
  // it). An answer is reused for kUserLookupTtl; when the database cannot be read (IoError: a
  // directory service down for a moment), the last answer of up to kUserLookupGrace is used.
  std::function<Result<TaskUser>(const std::string&)> look_up_user;
  // The grace between SIGTERM and SIGKILL when a task reaches its time limit.
  Seconds time_limit_grace{30};
  // Where to make task cgroups. Disable with CgroupManager::Disabled("...").
  // nullopt: CgroupManager::Detect() of /sys/fs/cgroup with AgentCgroupParent(cluster_id,
  // node_name).
  std::optional<CgroupManager> cgroups;
  // The corral binary, run as `corral launch` by distributed tasks (LaunchArgv); the task user
  // must be able to execute it. Empty: this process's own binary (/proc/self/exe); tests name
  // the built corral binary.
  std::string self_exe;
  // The binary started as each task's supervisor (ShimPlan::supervisor): corral-supervise or
  // corral-daemon of this build. The agent names corral-supervise beside its own binary when it
  // is there (agent_process.h, TaskSupervisor); tests name the built one. Required: a test
  // binary started as `__supervise` would run its tests instead.
  std::string supervisor_exe;
  // Started instead when supervisor_exe cannot be or refuses the plan (ShimPlan's
  // fallback_supervisor); from then on every task starts under it, and the switch is logged
  // once. The agent names its own binary ("/proc/self/exe"). Empty: none.
  std::string fallback_supervisor_exe;
  // The engine that runs container launches; nullopt: they fail to start.
  std::optional<ContainerEngine> container_engine;
  // The servers the agent reaches, comma-separated: every task's CORRAL_SERVER (TaskChannel).
  // Empty: unset.
  std::string task_server;
  // The PEM bundle that verifies the servers' https (the agent's --ca-cert, an absolute path):
  // every task's CORRAL_CA_CERT (TaskChannel), read-only at the same path in containers. Empty:
  // unset (the system's CAs).
  std::string task_ca_cert;
};

class ProcessRuntime final : public Runtime {
 public:
  static constexpr Seconds kUserLookupTtl{60};
  static constexpr Seconds kUserLookupGrace{3600};

  // Creates the namespace's tasks/, scratch/, hostfiles/ and mounts/ and adopts the tasks found
  // there and in the old layout (above). `clock` must outlive the runtime. Errors: work_dir not
  // absolute or not writable; a cluster id or node name that is not valid (InvalidArgument);
  // another namespace of work_dir holding tasks (FailedPrecondition naming it); the task user
  // unknown (NotFound), or another user than the runtime's own while it does not run as root
  // (PermissionDenied); run_as_submitter without root (PermissionDenied), with a task_user, or
  // with a uid range that is empty or admits uid 0 (InvalidArgument).
  static Result<std::unique_ptr<ProcessRuntime>> Create(ProcessRuntimeOptions options,
                                                        Clock* clock);
  // Create()'s checks of everything but the namespace and the work dir's contents (the work
  // dir's form, the task user or submitters' settings): what an agent checks before it joins a
  // cluster, whose id it needs to create the runtime.
  static Status CheckOptions(const ProcessRuntimeOptions& options);
  // Leaves the tasks running (they are adopted by the next ProcessRuntime over work_dir).
  ~ProcessRuntime() override;

  TaskStatus Start(const TaskLaunch& launch) override;
  std::vector<TaskStatus> Poll() override;
  using Runtime::Kill;
  Status Kill(const TaskKey& key, Seconds grace, const std::string& reason,
              model::TaskEndCause cause) override;
  Status Forget(const TaskKey& key) override;
  Result<std::string> ReadLog(const TaskKey& key, LogStream stream, int64_t offset,
                              int64_t max_bytes) override;
  std::vector<RunningTask> Running() const override;
  // -1 when the FIFO could not be made (a file system without FIFOs): ends are then seen by
  // Poll() alone.
  int ExitNoticeFd() const override { return exit_notice_fd_; }

  // The directory of a task's files (logs, task.json, exit.json): in the old layout for a task
  // adopted from it, else in the namespace; it may not exist.
  std::string TaskDir(const TaskKey& key) const;
  // The name of a container task's container (ContainerName(): the namespace's, or the old
  // layout's for a task adopted from it).
  std::string ContainerNameOf(const TaskKey& key) const;
  const CgroupManager& cgroups() const { return cgroups_; }

 private:
  struct Task {
    // The directory holding its tasks/, scratch/, hostfiles/ and mounts/ entries: the
    // runtime's namespace, or work_dir for a task of the old layout.
    std::string home;
    TaskLaunch launch;
    TaskStatus status;
    pid_t shim_pid = 0;
    uint64_t shim_start_ticks = 0;
    bool shim_is_child = false;  // started by this runtime: reap it with waitpid
    bool shim_reaped = false;
    pid_t task_pid = 0;
    uint64_t task_start_ticks = 0;
    std::optional<TaskCgroup> cgroup;  // removed (and reset) once the task has ended
    bool in_container = false;         // its (launch's) environment's runtime is "container"
    bool container_removed = false;    // RemoveContainer() succeeded (after a SIGKILL or the end)
    // The last removal's failure (OK: none), and the time before which no other is tried.
    Status removal_error;
    Seconds next_removal{0};
    // For the status message: limits not applied, or the image run for a missing host setup.
    std::string notes;
    // A kill in progress: why (for the status message) and its cause (kStopped for a kill
    // order, kTimeLimit for the time limit; none in a kill record of an older agent).
    std::optional<std::string> kill_reason;
    std::optional<model::TaskEndCause> kill_cause;
    Seconds kill_deadline{0};
    bool sigkill_sent = false;
    // Its launch's warning signal was sent (recorded in warned.json: an agent that restarts
    // does not send it again).
    bool warned = false;
  };

  ProcessRuntime(ProcessRuntimeOptions options, Clock* clock, CgroupManager cgroups,
                 std::optional<TaskUser> task_user, std::string home);

  // Adopts the task `key` whose files are in `home` (Task::home) unless a task of that key is
  // known already.
  void Adopt(const std::string& home, const TaskKey& key);
  // CheckOptions(), returning the task user looked up (nullopt: none, or run_as_submitter).
  static Result<std::optional<TaskUser>> TaskUserOf(const ProcessRuntimeOptions& options);
  // Task::home of a known task, else the namespace's (where a new task goes).
  const std::string& HomeOf(const TaskKey& key) const;
  // Makes (or reuses) the exit notice FIFO and opens it; on failure leaves the fds at -1.
  void OpenExitNotices();
  // Reads whatever notices the FIFO holds (their content means nothing: only that a task ended).
  void DrainExitNotices();
  TaskStatus FailToStart(const TaskLaunch& launch, const std::string& message);
  // Who a task runs as: the runtime's task user, or its submitter's (run_as_submitter).
  struct TaskIdentity {
    std::optional<TaskUser> user;      // nullopt: the runtime's own user
    std::optional<ShimIdentity> shim;  // what the task switches to; nullopt: nothing to switch
    ContainerUser container;           // the same user, as container tasks get it
    std::string home;                  // the task's HOME
  };
  static TaskIdentity IdentityOf(std::optional<TaskUser> user);
  Result<TaskIdentity> IdentityFor(const TaskLaunch& launch);
  // A submitter's Unix user, through the cache (ProcessRuntimeOptions::look_up_user).
  Result<TaskUser> SubmitterUser(const std::string& name);
  Result<std::string> MakeScratchDir(const TaskKey& key, const TaskIdentity& identity) const;
  // Creates `dir` (its parent must exist) or adopts an existing one, then gives it to the task's
  // user, mode 0700. An existing folder is adopted only when the task's user owns it, or the
  // agent's uid does and `adopt_agent_owned` (the parent is one only the agent writes to); one
  // just created is the agent's. A link is refused. Errors name `what` and the folder.
  static Status MakeTaskOwnedDir(const std::string& dir, const std::string& what,
                                 const TaskIdentity& identity, bool adopt_agent_owned);
  // Where a container task's workdir is staged: <home>/mounts/<alloc>-<gen>.
  std::string MountPath(const TaskKey& key) const;
  // A task's scratch directory: <home>/scratch/<alloc>-<gen>.
  std::string ScratchPath(const TaskKey& key) const;
  // Opens `workdir` as `identity` and binds it at MountPath(key) (workdir_mount.h); returns
  // that path. Errors: the user cannot open the directory, or the mount failed.
  Result<std::string> StageWorkdir(const TaskKey& key, const std::string& workdir,
                                   const TaskIdentity& identity) const;
  Result<std::string> ResolveExecutable(const TaskLaunch& launch,
                                        const std::vector<std::string>& argv,
                                        const std::vector<std::string>& env) const;
  std::string HostfilePath(const TaskKey& key) const;
  // A task's stop file (CORRAL_STOP_FILE): <home>/stops/<alloc>-<gen>/stop.json; StopDir() its
  // folder.
  std::string StopDir(const TaskKey& key) const;
  std::string StopFilePath(const TaskKey& key) const;
  // Makes StopDir(key) (it must not exist): the agent's, group the task user's, mode 02750.
  Status MakeStopDir(const TaskKey& key, const TaskIdentity& identity) const;
  // Makes the launch's checkpoint folder (TaskLaunch::checkpoint_dir) for the task's user,
  // 0700, or reuses it (another task or generation of the job made it) when the task's user
  // owns it. Errors name the folder: its parent missing on this node, a link, not a folder,
  // another owner.
  Status MakeCheckpointDir(const TaskLaunch& launch, const TaskIdentity& identity) const;
  // Writes the stop file of a task being stopped (StopRequest); a failure is logged, the stop
  // goes on.
  void RequestStop(const TaskKey& key, const Task& task, Seconds grace) const;
  // A batch task's script (TaskLaunch::script): <home>/scripts/<alloc>-<gen>, owned by the
  // task's user, mode 0500.
  std::string ScriptPath(const TaskKey& key) const;
  Status WriteScript(const TaskKey& key, const std::string& script,
                     const TaskIdentity& identity) const;
  Status WriteHostfile(const TaskKey& key, const Distributed& distributed) const;
  Status WriteTaskRecord(const TaskKey& key, const Task& task) const;
  Status WriteKillRecord(const TaskKey& key, const Task& task) const;
  void Observe(const TaskKey& key, Task& task);
  // A task adopted without its pid (the agent before died between starting it and recording
  // it) gets it from the shim's task.pid, once there and naming the live task.
  void FindTaskPid(const TaskKey& key, Task& task) const;
  void Finish(const TaskKey& key, Task& task);
  void SignalTask(Task& task, int signal);
  void CleanUpCgroup(Task& task);
  // Removes the container of a container task unless it is known gone; a failure is returned,
  // and returned again without running the engine until kContainerRemovalRetry has passed.
  Status CleanUpContainer(const TaskKey& key, Task& task);

  ProcessRuntimeOptions options_;
  Clock* clock_;  // not owned
  CgroupManager cgroups_;
  TaskIdentity identity_;  // of every task, unless run_as_submitter
  struct CachedUser {
    TaskUser user;
    Seconds looked_up;
  };
  std::map<std::string, CachedUser> users_;  // run_as_submitter: Unix name -> last answer
  std::map<std::string, std::string>
      base_env_;  // passed to every task: PATH, LANG (HOME: identity)
  std::map<TaskKey, Task> tasks_;
  const std::string home_;             // <work_dir>/clusters/<cluster_id>/<node_name>
  const std::string container_scope_;  // "<cluster_id>-<node_name>" (ContainerName())
  int legacy_tasks_ = 0;               // known tasks of the old layout
  // The exit notice FIFO's read end, and a write end the runtime holds itself so that the read
  // end never reports end-of-file while no supervisor has it open; -1 when there is none.
  int exit_notice_fd_ = -1;
  int exit_notice_hold_fd_ = -1;
};

}  // namespace corral::agent
