#include "agent/process_runtime.h"

#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <limits>
#include <nlohmann/json.hpp>
#include <set>

#include "agent/executable.h"
#include "agent/file_io.h"
#include "agent/launch_defaults.h"
#include "agent/proc_stat.h"
#include "agent/rendezvous.h"
#include "agent/shell_server.h"
#include "agent/shim.h"
#include "agent/stop_file.h"
#include "agent/workdir_mount.h"
#include "common/json_parse.h"
#include "common/strings.h"
#include "model/node.h"
#include "protocol/names.h"

namespace corral::agent {
namespace {

using nlohmann::json;

constexpr char kTaskFile[] = "/task.json";
constexpr char kKillFile[] = "/kill.json";
constexpr char kWarnedFile[] = "/warned.json";  // the warning signal went out (TaskLaunch)
constexpr char kExitFile[] = "/exit.json";
constexpr char kTaskPidFile[] = "/task.pid";  // written by the shim (ShimPlan::task_pid_path)
constexpr char kStdoutFile[] = "/stdout.log";
constexpr char kStderrFile[] = "/stderr.log";
constexpr char kContainerEnvFile[] = "/container.env";
constexpr char kLostMessage[] = "lost: supervisor gone";
// Under the work dir, the namespaces: clusters/<cluster id>/<node name>/ (process_runtime.h).
constexpr char kClustersDir[] = "/clusters";
constexpr char kExitNoticeFifo[] = "/exit-notices";
constexpr int64_t kMaxLogRead = 16 << 20;
constexpr char kNoEngine[] = "this node has no container engine (corral agent --container-engine)";
// Removals of a container run on the reconcile loop's thread, up to RemoveContainer()'s timeout
// each: one that failed is tried again at most this often per task, so that a broken engine
// does not stall every Poll().
constexpr Seconds kContainerRemovalRetry{30};

bool IsContainerLaunch(const TaskLaunch& launch) {
  return launch.environment && launch.environment->runtime == "container";
}

// The first host prefix (venv, conda) of the launch's environment that is not a directory on
// this node; "" when every one given is (or none is given).
std::string MissingHostPrefix(const TaskLaunch& launch) {
  if (!launch.environment) return "";
  for (const std::string* prefix : {&launch.environment->venv, &launch.environment->conda}) {
    struct stat st;
    if (!prefix->empty() && (stat(prefix->c_str(), &st) != 0 || !S_ISDIR(st.st_mode))) {
      return *prefix;
    }
  }
  return "";
}

// The engine's own failures (image missing, bad option, ...) end its process with 125 (podman
// and docker agree); the container's command may exit so as well. (126 and 127, "cannot invoke"
// and "not found", do not come from the engine here: with --init the init process reports them.)
std::string EngineExitNote(const std::optional<int>& exit_code) {
  if (exit_code != 125) return "";
  return "exit code 125: the container engine failed, unless the task itself exited so (see its "
         "stderr)";
}

// The task keys named by the directories in `dir` (other entries are not ours).
std::vector<TaskKey> TaskKeysIn(const std::string& dir, std::error_code& ec) {
  std::vector<TaskKey> keys;
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    std::error_code type_ec;
    if (!entry.is_directory(type_ec)) continue;
    if (std::optional<TaskKey> key = protocol::ParseTaskKey(entry.path().filename().string())) {
      keys.push_back(*key);
    }
  }
  return keys;
}

std::string NamespaceHome(const std::string& work_dir, const std::string& cluster_id,
                          const std::string& node_name) {
  return work_dir + kClustersDir + "/" + cluster_id + "/" + node_name;
}

// One agent per work dir (node_identity.h's WorkDirLock): tasks in another namespace of it were
// left by this work dir's agent while it served another cluster, or ran under another node name.
// This agent would neither supervise nor report them, and their server will run their jobs again
// elsewhere: refused, naming them, rather than left running unseen.
Status RefuseOtherNamespacesTasks(const std::string& work_dir, const std::string& home) {
  std::error_code ec;
  for (const auto& cluster : std::filesystem::directory_iterator(work_dir + kClustersDir, ec)) {
    std::error_code node_ec;
    for (const auto& node : std::filesystem::directory_iterator(cluster.path(), node_ec)) {
      const std::string other = node.path().string();
      if (other == home) continue;
      std::error_code tasks_ec;
      const size_t count = TaskKeysIn(other + "/tasks", tasks_ec).size();
      if (count == 0) continue;
      return FailedPrecondition(
          "process runtime: " + other + " holds " + std::to_string(count) + " task(s) of cluster " +
          cluster.path().filename().string() + ", node " + node.path().filename().string() +
          ", not yet reported to that cluster's server; this agent joins another cluster or "
          "runs under another name, and would neither supervise nor report them. Start it "
          "again with that cluster's server and name until they have ended and been reported, "
          "or stop them (their processes are in the cgroups under corral/" +
          cluster.path().filename().string() + "/" + node.path().filename().string() +
          ") and remove " + other + " (docs/control-plane.md)");
    }
  }
  return Status::Ok();
}

// The old layout's directories (agents before cluster ids), once no task of it is left: removed
// when empty, kept otherwise.
void RemoveEmptyLegacyDirs(const std::string& work_dir) {
  for (const char* dir : {"/tasks", "/scratch", "/hostfiles", "/scripts", "/mounts"}) {
    (void)rmdir((work_dir + dir).c_str());
  }
}

std::string JoinMessage(const std::vector<std::string>& parts) {
  std::string out;
  for (const std::string& p : parts) {
    if (p.empty()) continue;
    if (!out.empty()) out += "; ";
    out += p;
  }
  return out;
}

// Field readers for the agent's own files that never throw: a damaged file must not take the
// agent down (a wrong type reads as the fallback).
int64_t IntField(const json& j, const char* key, int64_t fallback = 0) {
  auto it = j.find(key);
  return it != j.end() && it->is_number_integer() ? it->get<int64_t>() : fallback;
}
std::string StringField(const json& j, const char* key, const std::string& fallback = "") {
  auto it = j.find(key);
  return it != j.end() && it->is_string() ? it->get<std::string>() : fallback;
}
// dump() that never throws: invalid UTF-8 (possible in argv from the C++ API, never from the
// protocol's JSON) is written as U+FFFD.
std::string Dump(const json& j) {
  return j.dump(-1, ' ', false, json::error_handler_t::replace) + "\n";
}
bool BoolField(const json& j, const char* key) {
  auto it = j.find(key);
  return it != j.end() && it->is_boolean() && it->get<bool>();
}

json CgroupToJson(const std::optional<TaskCgroup>& cgroup) {
  if (!cgroup) return nullptr;
  return json{{"dirs", cgroup->dirs}, {"memory_dir", cgroup->memory_dir}};
}

std::optional<TaskCgroup> CgroupFromJson(const json& j) {
  if (!j.is_object()) return std::nullopt;
  TaskCgroup c;
  if (auto dirs = j.find("dirs"); dirs != j.end() && dirs->is_array()) {
    for (const json& d : *dirs) {
      if (d.is_string()) c.dirs.push_back(d.get<std::string>());
    }
  }
  c.memory_dir = StringField(j, "memory_dir");
  return c;
}

// The agent's PATH with the folder of its own binary (`self_exe`) added at the end when it is
// not there already, so that a task finds the `corral` beside it (`corral job report`,
// docs/in-job.md) without shadowing anything on the agent's PATH.
std::string TaskSearchPath(const std::string& path, const std::string& self_exe) {
  const std::string folder = std::filesystem::path(self_exe).parent_path().string();
  if (folder.empty()) return path;
  for (const std::string& entry : Split(path, ':')) {
    if (entry == folder) return path;
  }
  return path + ":" + folder;
}

}  // namespace

ProcessRuntime::ProcessRuntime(ProcessRuntimeOptions options, Clock* clock, CgroupManager cgroups,
                               std::optional<TaskUser> task_user, std::string home)
    : options_(std::move(options)),
      clock_(clock),
      cgroups_(std::move(cgroups)),
      identity_(IdentityOf(std::move(task_user))),
      home_(std::move(home)),
      container_scope_(options_.cluster_id + "-" + options_.node_name) {
  const char* path = std::getenv("PATH");
  base_env_["PATH"] =
      TaskSearchPath(path != nullptr && *path != '\0' ? path : kDefaultPath, options_.self_exe);
  if (const char* lang = std::getenv("LANG"); lang != nullptr) base_env_["LANG"] = lang;
}

ProcessRuntime::TaskIdentity ProcessRuntime::IdentityOf(std::optional<TaskUser> user) {
  TaskIdentity identity;
  if (user) {
    identity.home = user->home;
    // Without root the task user is the runtime's own (Create checks): nothing to switch.
    if (geteuid() == 0) identity.shim = ShimIdentity{user->uid, user->gid, user->groups};
    identity.container = ContainerUser{user->uid, user->gid, user->groups};
  } else {
    const char* home = std::getenv("HOME");
    identity.home = home != nullptr && *home != '\0' ? home : "/";
    identity.container = ContainerUser{geteuid(), getegid(), {}};
  }
  identity.user = std::move(user);
  return identity;
}

Result<TaskUser> ProcessRuntime::SubmitterUser(const std::string& name) {
  const Seconds now = clock_->Now();
  auto cached = users_.find(name);
  if (cached != users_.end() && now < cached->second.looked_up + kUserLookupTtl) {
    return cached->second.user;
  }
  Result<TaskUser> user = options_.look_up_user ? options_.look_up_user(name) : LookUpUser(name);
  if (user.ok()) {
    users_[name] = {*user, now};
  } else if (user.status().code() == StatusCode::kIoError && cached != users_.end() &&
             now < cached->second.looked_up + kUserLookupGrace) {
    return cached->second.user;  // the database is unreadable for now: its last answer
  } else if (cached != users_.end()) {
    users_.erase(cached);  // gone (NotFound), or unreadable for too long
  }
  return user;
}

Result<ProcessRuntime::TaskIdentity> ProcessRuntime::IdentityFor(const TaskLaunch& launch) {
  if (!options_.run_as_submitter) return identity_;
  if (launch.user.empty()) return InvalidArgument("the launch names no submitter to run as");
  // Only a valid user name reaches the map and the user database: a name the server should not
  // have made (one stored before names were checked, or sent by a compromised server) runs
  // nothing, rather than being cut at a NUL or matched loosely into someone else's account.
  if (Status valid = protocol::CheckName(protocol::NameKind::kUser, launch.user); !valid.ok()) {
    return PermissionDenied("cannot run as the submitter: " + valid.message());
  }
  const auto mapped = options_.user_map.find(launch.user);
  const std::string name = mapped != options_.user_map.end() ? mapped->second : launch.user;
  const std::string who = "submitter '" + launch.user + "'" +
                          (name != launch.user ? " (mapped to Unix user '" + name + "')" : "");
  if (mapped == options_.user_map.end()) {
    for (const auto& [corral_user, unix_user] : options_.user_map) {
      if (unix_user == name) {
        return PermissionDenied("cannot run as " + who + ": Unix user '" + name +
                                "' belongs to corral user '" + corral_user +
                                "' in --task-user-map, and is reached only through the map");
      }
    }
  }
  Result<TaskUser> user = SubmitterUser(name);
  if (!user.ok()) {
    return Status(user.status().code(),
                  "cannot run as " + who + ": " + user.status().message() + " on this node");
  }
  if (user->uid < options_.min_task_uid) {
    return PermissionDenied("cannot run as " + who + ": uid " + std::to_string(user->uid) +
                            " is under the agent's --min-task-uid " +
                            std::to_string(options_.min_task_uid));
  }
  if (user->uid > options_.max_task_uid) {
    return PermissionDenied("cannot run as " + who + ": uid " + std::to_string(user->uid) +
                            " is over the agent's --max-task-uid " +
                            std::to_string(options_.max_task_uid));
  }
  if (user->gid == 0) {
    return PermissionDenied("cannot run as " + who + ": its primary group is 0 (root's)");
  }
  return IdentityOf(std::move(user).value());
}

Result<std::optional<TaskUser>> ProcessRuntime::TaskUserOf(const ProcessRuntimeOptions& options) {
  if (options.work_dir.empty() || options.work_dir[0] != '/') {
    return InvalidArgument("process runtime: work dir must be an absolute path, got '" +
                           options.work_dir + "'");
  }
  if (options.run_as_submitter && !options.task_user.empty()) {
    return InvalidArgument(
        "process runtime: a task user and running as the submitter exclude "
        "each other");
  }
  if (options.run_as_submitter && geteuid() != 0) {
    return PermissionDenied("process runtime: only root can run tasks as their submitters");
  }
  if (options.run_as_submitter &&
      (options.min_task_uid < 1 || options.max_task_uid < options.min_task_uid)) {
    return InvalidArgument(
        "process runtime: the task uid range [" + std::to_string(options.min_task_uid) + ", " +
        std::to_string(options.max_task_uid) + "] must be non-empty and leave out uid 0");
  }
  std::optional<TaskUser> task_user;
  if (!options.task_user.empty()) {
    Result<TaskUser> user = LookUpUser(options.task_user);
    if (!user.ok()) {
      return Status(user.status().code(), "process runtime: " + user.status().message());
    }
    if (geteuid() != 0 && user->uid != geteuid()) {
      return PermissionDenied("process runtime: task user '" + options.task_user +
                              "' is not this process's own user (uid " + std::to_string(geteuid()) +
                              "); only root can run tasks as another user");
    }
    task_user = std::move(user).value();
  }
  return task_user;
}

Status ProcessRuntime::CheckOptions(const ProcessRuntimeOptions& options) {
  return TaskUserOf(options).status();
}

Result<std::unique_ptr<ProcessRuntime>> ProcessRuntime::Create(ProcessRuntimeOptions options,
                                                               Clock* clock) {
  Result<std::optional<TaskUser>> task_user = TaskUserOf(options);
  if (!task_user.ok()) return task_user.status();
  if (options.supervisor_exe.empty()) {
    return InvalidArgument("process runtime: no task supervisor binary (supervisor_exe)");
  }
  if (Status valid = model::ValidateClusterId(options.cluster_id); !valid.ok()) {
    return InvalidArgument("process runtime: " + valid.message());
  }
  if (Status valid = protocol::CheckName(protocol::NameKind::kNode, options.node_name);
      !valid.ok()) {
    return InvalidArgument("process runtime: " + valid.message());
  }
  const std::string clusters_dir = options.work_dir + kClustersDir;
  const std::string cluster_dir = clusters_dir + "/" + options.cluster_id;
  const std::string home = NamespaceHome(options.work_dir, options.cluster_id, options.node_name);
  CORRAL_RETURN_IF_ERROR(RefuseOtherNamespacesTasks(options.work_dir, home));
  const std::string tasks_dir = home + "/tasks";
  const std::string mounts_dir = home + "/mounts";
  // The namespace's levels: enterable by task users (to reach their scratch directories and
  // hostfiles and scripts), not listable. Inside, private: task records and every task's logs,
  // and the container workdirs' staging mounts; scratch, hostfiles and scripts: enterable, not
  // listable.
  for (const auto& [dir, mode] :
       {std::pair{clusters_dir, 0711}, std::pair{cluster_dir, 0711}, std::pair{home, 0711},
        std::pair{tasks_dir, 0700}, std::pair{home + "/scratch", 0711},
        std::pair{home + "/hostfiles", 0711}, std::pair{home + "/scripts", 0711},
        std::pair{home + "/stops", 0711}, std::pair{mounts_dir, 0700}}) {
    std::error_code ec;
    std::filesystem::create_directories(dir, ec);
    if (ec) return IoError("process runtime: cannot create " + dir + ": " + ec.message());
    if (chmod(dir.c_str(), static_cast<mode_t>(mode)) != 0) {
      return IoError("process runtime: chmod " + dir + ": " + ErrnoText(errno));
    }
    if (access(dir.c_str(), W_OK | X_OK) != 0) {
      return IoError("process runtime: " + dir + " is not writable: " + ErrnoText(errno));
    }
  }
  if (options.self_exe.empty()) {
    // Left empty when unknown: only the tasks that need `corral launch` fail (to start).
    std::error_code ec;
    options.self_exe = std::filesystem::read_symlink("/proc/self/exe", ec).string();
  }
  CgroupManager cgroups =
      options.cgroups
          ? *options.cgroups
          : CgroupManager::Detect("/sys/fs/cgroup",
                                  AgentCgroupParent(options.cluster_id, options.node_name));
  const std::string work_dir = options.work_dir;
  std::unique_ptr<ProcessRuntime> runtime(new ProcessRuntime(
      std::move(options), clock, std::move(cgroups), std::move(task_user).value(), home));
  runtime->OpenExitNotices();
  // This namespace's tasks, then those an agent before cluster ids left in the old layout
  // (work_dir/tasks/<alloc>-<gen>; their cgroups and containers as task.json and the old
  // naming say), which stay where they are until forgotten.
  for (const std::string& root : {home, work_dir}) {
    std::error_code ec;
    if (root == work_dir && !std::filesystem::exists(root + "/tasks", ec)) break;
    std::vector<TaskKey> keys = TaskKeysIn(root + "/tasks", ec);
    if (ec) return IoError("process runtime: cannot list " + root + "/tasks: " + ec.message());
    for (const TaskKey& key : keys) runtime->Adopt(root, key);
    // Staging mounts of tasks that are gone (an agent stopped between a start that failed and
    // its clean-up): detached, their directories removed.
    for (const auto& entry : std::filesystem::directory_iterator(root + "/mounts", ec)) {
      std::optional<TaskKey> key = protocol::ParseTaskKey(entry.path().filename().string());
      auto task = key ? runtime->tasks_.find(*key) : runtime->tasks_.end();
      if (task == runtime->tasks_.end() || task->second.home != root) {
        (void)UnbindDirectory(entry.path().string());
      }
    }
  }
  if (runtime->legacy_tasks_ == 0) RemoveEmptyLegacyDirs(work_dir);
  return runtime;
}

const std::string& ProcessRuntime::HomeOf(const TaskKey& key) const {
  auto it = tasks_.find(key);
  return it != tasks_.end() ? it->second.home : home_;
}

ProcessRuntime::~ProcessRuntime() {
  if (exit_notice_fd_ >= 0) close(exit_notice_fd_);
  if (exit_notice_hold_fd_ >= 0) close(exit_notice_hold_fd_);
}

void ProcessRuntime::OpenExitNotices() {
  const std::string path = home_ + kExitNoticeFifo;
  struct stat st;
  if (lstat(path.c_str(), &st) == 0 && !S_ISFIFO(st.st_mode)) unlink(path.c_str());
  if (mkfifo(path.c_str(), 0600) != 0 && errno != EEXIST) return;
  // Non-blocking both: opening the read end must not wait for a writer, nor the write end for a
  // reader (there is one: ours), and reads must stop when the FIFO is empty.
  exit_notice_fd_ = open(path.c_str(), O_RDONLY | O_NONBLOCK | O_CLOEXEC);
  if (exit_notice_fd_ < 0) return;
  exit_notice_hold_fd_ = open(path.c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
  if (exit_notice_hold_fd_ < 0) {
    close(exit_notice_fd_);
    exit_notice_fd_ = -1;
  }
}

void ProcessRuntime::DrainExitNotices() {
  if (exit_notice_fd_ < 0) return;
  char buffer[512];
  while (read(exit_notice_fd_, buffer, sizeof(buffer)) > 0) {
  }
}

std::string ProcessRuntime::MountPath(const TaskKey& key) const {
  return HomeOf(key) + "/mounts/" + ToString(key);
}

std::string ProcessRuntime::ScratchPath(const TaskKey& key) const {
  return HomeOf(key) + "/scratch/" + ToString(key);
}

std::string ProcessRuntime::ContainerNameOf(const TaskKey& key) const {
  // Containers of the old layout's tasks were named without a namespace.
  return ContainerName(HomeOf(key) == home_ ? container_scope_ : "", key);
}

Result<std::string> ProcessRuntime::StageWorkdir(const TaskKey& key, const std::string& workdir,
                                                 const TaskIdentity& identity) const {
  Result<int> dir = OpenDirectoryAs(identity.shim, workdir);
  if (!dir.ok()) return dir.status();
  const std::string target = MountPath(key);
  Status s = UnbindDirectory(target);  // a leftover of an earlier failed start
  if (s.ok() && mkdir(target.c_str(), 0700) != 0) {
    s = IoError("cannot create " + target + ": " + ErrnoText(errno));
  }
  if (s.ok()) s = BindDirectory(*dir, target);
  close(*dir);
  if (!s.ok()) {
    (void)UnbindDirectory(target);
    return s;
  }
  return target;
}

std::string ProcessRuntime::TaskDir(const TaskKey& key) const {
  return HomeOf(key) + "/tasks/" + ToString(key);
}

void ProcessRuntime::Adopt(const std::string& home, const TaskKey& key) {
  // A key of this namespace wins over the same key left in the old layout (an agent that
  // switched clusters at its upgrade): that one is left alone, and not reported.
  if (tasks_.count(key) > 0) return;
  const std::string dir = home + "/tasks/" + ToString(key);
  if (home != home_) ++legacy_tasks_;
  Task task;
  task.home = home;
  task.status.key = key;
  auto text = ReadFile(dir + kTaskFile);
  if (!text.ok() && text.status().code() == StatusCode::kNotFound) {
    // The agent died between creating the folder and writing the record, which precedes the
    // start of the task (a supervisor already started exits without its go): nothing was
    // started. Its empty cgroup, if one was made, goes with it.
    if (cgroups_.version() != CgroupVersion::kNone) {
      if (Result<TaskCgroup> group = cgroups_.Create(ToString(key), {}); group.ok()) {
        (void)CgroupManager::Remove(*group);
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove(home + "/hostfiles/" + ToString(key), ec);
    std::filesystem::remove_all(home + "/stops/" + ToString(key), ec);
    std::filesystem::remove(home + "/scripts/" + ToString(key), ec);
    std::filesystem::remove_all(home + "/scratch/" + ToString(key), ec);
    return;
  }
  json record;
  // Written by this agent from a launch the server sent: as large as such answers may be.
  if (text.ok()) record = ParseJsonOrNull(*text, kServerAnswerLimits);
  Result<TaskLaunch> launch = record.is_object() && record.contains("launch")
                                  ? TaskLaunchFromJson(record["launch"])
                                  : Result<TaskLaunch>(InvalidArgument("no launch"));
  if (!launch.ok()) {
    // Without its record the task cannot be supervised; report it so that the server knows.
    task.status.state = ProcessState::kLost;
    task.status.ended_at = clock_->Now();
    task.status.message = "lost: task record unreadable (" +
                          (text.ok() ? launch.status().message() : text.status().message()) + ")";
    tasks_[key] = std::move(task);
    return;
  }
  task.launch = std::move(launch).value();
  task.in_container = IsContainerLaunch(task.launch);
  task.status.job_id = task.launch.job_id;
  task.status.task_index = task.launch.task_index;
  task.status.started_at = Seconds(IntField(record, "started_at"));
  task.shim_pid = static_cast<pid_t>(IntField(record, "shim_pid"));
  task.shim_start_ticks = static_cast<uint64_t>(IntField(record, "shim_start_ticks"));
  task.task_pid = static_cast<pid_t>(IntField(record, "task_pid"));
  task.task_start_ticks = static_cast<uint64_t>(IntField(record, "task_start_ticks"));
  if (auto cgroup = record.find("cgroup"); cgroup != record.end()) {
    task.cgroup = CgroupFromJson(*cgroup);
  }
  task.notes = StringField(record, "notes");
  task.status.pid = task.task_pid;
  task.status.message = task.notes;
  task.warned = access((dir + kWarnedFile).c_str(), F_OK) == 0;
  if (auto kill_text = ReadFile(dir + kKillFile); kill_text.ok()) {
    json kill = ParseJsonOrNull(*kill_text);
    if (kill.is_object()) {
      task.kill_reason = StringField(kill, "reason", "killed");
      if (auto cause = model::ParseTaskEndCause(StringField(kill, "cause")); cause.ok()) {
        task.kill_cause = *cause;
      }
      task.kill_deadline = Seconds(IntField(kill, "deadline"));
      task.sigkill_sent = BoolField(kill, "sigkill_sent");
    }
  }
  auto [it, added] = tasks_.emplace(key, std::move(task));
  Observe(it->first, it->second);
}

TaskStatus ProcessRuntime::FailToStart(const TaskLaunch& launch, const std::string& message) {
  Task task;
  task.home = home_;
  task.launch = launch;
  task.status.job_id = launch.job_id;
  task.status.task_index = launch.task_index;
  task.status.key = launch.key;
  task.status.state = ProcessState::kFailedToStart;
  task.status.started_at = clock_->Now();
  task.status.ended_at = task.status.started_at;
  task.status.message = message;
  tasks_[launch.key] = task;
  return task.status;
}

Status ProcessRuntime::MakeTaskOwnedDir(const std::string& dir, const std::string& what,
                                        const TaskIdentity& identity, bool adopt_agent_owned) {
  const uid_t task_uid = identity.shim ? identity.shim->uid : geteuid();
  const bool created = mkdir(dir.c_str(), 0700) == 0;
  if (!created && errno != EEXIST) {
    return IoError("cannot create the " + what + " " + dir + ": " + ErrnoText(errno));
  }
  // O_NOFOLLOW: a link put there by whoever can write to the parent is refused, not followed.
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
  if (fd < 0) return IoError(what + " " + dir + ": " + ErrnoText(errno));
  Status s;
  struct stat st;
  if (fstat(fd, &st) != 0) {
    s = IoError("stat " + what + " " + dir + ": " + ErrnoText(errno));
  } else if (st.st_uid != task_uid && !((created || adopt_agent_owned) && st.st_uid == geteuid())) {
    s = PermissionDenied("the " + what + " " + dir + " is owned by uid " +
                         std::to_string(st.st_uid) + ", not by the task's user (uid " +
                         std::to_string(task_uid) + "): it is not adopted");
  }
  if (s.ok() && identity.shim && fchown(fd, identity.shim->uid, identity.shim->gid) != 0) {
    s = IoError("chown " + what + " " + dir + " to task user '" + identity.user->name +
                "': " + ErrnoText(errno));
  }
  if (s.ok() && fchmod(fd, 0700) != 0) {
    s = IoError("chmod " + what + " " + dir + ": " + ErrnoText(errno));
  }
  close(fd);
  return s;
}

Result<std::string> ProcessRuntime::MakeScratchDir(const TaskKey& key,
                                                   const TaskIdentity& identity) const {
  const std::string dir = ScratchPath(key);
  // An existing one is left by a start that failed midway: reused. Only the runtime can create
  // entries in scratch/ (0711), so one the agent owns is its own.
  CORRAL_RETURN_IF_ERROR(MakeTaskOwnedDir(dir, "scratch directory", identity, true));
  return dir;
}

Result<std::string> ProcessRuntime::ResolveExecutable(const TaskLaunch& launch,
                                                      const std::vector<std::string>& argv,
                                                      const std::vector<std::string>& env) const {
  const std::string& name = argv[0];
  if (launch.shell && name == kShell) return name;
  if (name.empty()) {
    return NotFound(
        "the corral binary is unknown (reading /proc/self/exe failed), and this "
        "task's launcher runs `corral launch`");
  }
  // The launcher's program (torchrun, corral) is named as such: the job's argv[0] is not it.
  std::string what = "'" + name + "'";
  if (!launch.script.empty() && name == ScriptPath(launch.key)) {
    what = "the batch script " + what;
  } else if (!launch.argv.empty() && name == launch.argv[0]) {
    what = "argv[0] " + what;
  }
  if (name.find('/') != std::string::npos) {
    std::string path = name[0] == '/' ? name : launch.workdir + "/" + name;
    if (!IsExecutableFile(path)) return NotFound(what + ": " + path + " is not an executable file");
    return path;
  }
  std::string search = kDefaultPath;
  for (const std::string& e : env) {
    if (e.rfind("PATH=", 0) == 0) search = e.substr(5);
  }
  std::string path = FindExecutable(name, search, launch.workdir);
  if (!path.empty()) return path;
  return NotFound(what + ": command not found in PATH (" + search + ")");
}

std::string ProcessRuntime::HostfilePath(const TaskKey& key) const {
  return HomeOf(key) + "/hostfiles/" + ToString(key);
}

std::string ProcessRuntime::StopDir(const TaskKey& key) const {
  return HomeOf(key) + "/stops/" + ToString(key);
}

std::string ProcessRuntime::StopFilePath(const TaskKey& key) const {
  return StopDir(key) + "/stop.json";
}

Status ProcessRuntime::MakeCheckpointDir(const TaskLaunch& launch,
                                         const TaskIdentity& identity) const {
  const std::string& dir = launch.checkpoint_dir;
  const std::string root = std::filesystem::path(dir).parent_path().string();
  struct stat st;
  if (stat(root.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return FailedPrecondition("the checkpoint root " + root +
                              " is not a folder on this node (it must be a shared file system "
                              "every node mounts at the same path: corral server "
                              "--checkpoint-root)");
  }
  // The root is shared: an existing folder is adopted only from the task's user (one the agent
  // owns may be another node's half-done start, or planted).
  return MakeTaskOwnedDir(dir, "checkpoint folder", identity, false);
}

Status ProcessRuntime::MakeStopDir(const TaskKey& key, const TaskIdentity& identity) const {
  // The agent's, in the task's group, setgid: the stop files written in it are that group's
  // (0440, WriteStopFile), so that the task's user reads them and other users do not.
  const std::string dir = StopDir(key);
  if (mkdir(dir.c_str(), 0750) != 0) {
    return IoError("cannot create " + dir + ": " + ErrnoText(errno));
  }
  const gid_t group = identity.shim ? identity.shim->gid : getegid();
  if (chown(dir.c_str(), static_cast<uid_t>(-1), group) != 0) {
    return IoError("chown " + dir + ": " + ErrnoText(errno));
  }
  if (chmod(dir.c_str(), 02750) != 0) return IoError("chmod " + dir + ": " + ErrnoText(errno));
  return Status::Ok();
}

void ProcessRuntime::RequestStop(const TaskKey& key, const Task& task, Seconds grace) const {
  const StopRequest request{task.kill_reason.value_or("killed"), grace, task.kill_deadline};
  if (Status s = WriteStopFile(StopFilePath(key), request); !s.ok()) {
    std::cerr << "corral agent: task " << ToString(key)
              << ": cannot write its stop file: " << s.message() << std::endl;
  }
}

std::string ProcessRuntime::ScriptPath(const TaskKey& key) const {
  return HomeOf(key) + "/scripts/" + ToString(key);
}

Status ProcessRuntime::WriteScript(const TaskKey& key, const std::string& script,
                                   const TaskIdentity& identity) const {
  // Only the runtime can create entries in scripts/ (0711): the path is ours. Readable by the
  // task's user alone, from its first byte: a script may hold what others should not read.
  const std::string path = ScriptPath(key);
  const std::string temp = path + ".tmp";
  (void)unlink(temp.c_str());  // left by a start that failed midway
  const int fd = open(temp.c_str(), O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC | O_NOFOLLOW, 0600);
  if (fd < 0) return IoError("cannot create " + temp + ": " + ErrnoText(errno));
  Status s;
  if (identity.shim && fchown(fd, identity.shim->uid, identity.shim->gid) != 0) {
    s = IoError("chown " + temp + ": " + ErrnoText(errno));
  }
  for (size_t done = 0; s.ok() && done < script.size();) {
    const ssize_t n = write(fd, script.data() + done, script.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) s = IoError("cannot write " + temp + ": " + ErrnoText(errno));
    if (n > 0) done += static_cast<size_t>(n);
  }
  if (s.ok() && fchmod(fd, 0500) != 0) s = IoError("chmod " + temp + ": " + ErrnoText(errno));
  close(fd);
  if (s.ok() && rename(temp.c_str(), path.c_str()) != 0) {
    s = IoError("cannot rename " + temp + ": " + ErrnoText(errno));
  }
  if (!s.ok()) (void)unlink(temp.c_str());
  return s;
}

Status ProcessRuntime::WriteHostfile(const TaskKey& key, const Distributed& distributed) const {
  // Only the runtime can create entries in hostfiles/ (0711): the path is ours.
  const std::string path = HostfilePath(key);
  CORRAL_RETURN_IF_ERROR(WriteFileAtomic(path, Hostfile(distributed)));
  if (chmod(path.c_str(), 0444) != 0) return IoError("chmod " + path + ": " + ErrnoText(errno));
  return Status::Ok();
}

Status ProcessRuntime::WriteTaskRecord(const TaskKey& key, const Task& task) const {
  json record{
      {"launch", ToJson(task.launch)},       {"started_at", task.status.started_at.value()},
      {"shim_pid", task.shim_pid},           {"shim_start_ticks", task.shim_start_ticks},
      {"task_pid", task.task_pid},           {"task_start_ticks", task.task_start_ticks},
      {"cgroup", CgroupToJson(task.cgroup)}, {"notes", task.notes},
  };
  return WriteFileAtomic(TaskDir(key) + kTaskFile, Dump(record));
}

Status ProcessRuntime::WriteKillRecord(const TaskKey& key, const Task& task) const {
  json record{{"reason", task.kill_reason.value_or("")},
              {"deadline", task.kill_deadline.value()},
              {"sigkill_sent", task.sigkill_sent}};
  if (task.kill_cause) record["cause"] = model::ToString(*task.kill_cause);
  return WriteFileAtomic(TaskDir(key) + kKillFile, Dump(record));
}

TaskStatus ProcessRuntime::Start(const TaskLaunch& requested) {
  if (auto it = tasks_.find(requested.key); it != tasks_.end()) return it->second.status;
  TaskLaunch launch = requested;
  Result<TaskIdentity> identity = IdentityFor(launch);
  if (!identity.ok()) return FailToStart(launch, identity.status().message());
  // No workdir: the folder it was submitted from where this node has it, as Slurm does; else a
  // scratch directory, and the task's note says why.
  std::string workdir_note;
  if (Status s = ValidateSubmitDir(launch); !s.ok()) return FailToStart(launch, s.message());
  if (launch.workdir.empty() && !launch.submit_dir.empty()) {
    const std::string why =
        WhyNotEnterable(launch.submit_dir, identity->user ? &*identity->user : nullptr);
    if (why.empty()) {
      launch.workdir = launch.submit_dir;
    } else {
      workdir_note = "running in a scratch folder: the submit folder " + launch.submit_dir + " " +
                     why + " (give --workdir to choose)";
    }
  }
  if (launch.workdir.empty()) {
    Result<std::string> scratch = MakeScratchDir(launch.key, *identity);
    if (!scratch.ok()) return FailToStart(launch, scratch.status().message());
    launch.workdir = *scratch;
  }
  // The server sends an environment with both a host setup and an image as runtime "process"
  // (it prefers it). Where the host setup is missing, the image runs in a container instead,
  // when this node has an engine. The launch is changed to say so: task.json records it, so
  // the next agent adopts the task as a container task.
  std::string fallback;     // the status note of such a task
  std::string no_fallback;  // why there is none, when the host setup is missing
  if (LaunchEnvironment* e = launch.environment ? &*launch.environment : nullptr;
      e != nullptr && e->runtime == "process" && !e->image.empty()) {
    const std::string missing = MissingHostPrefix(launch);
    if (!missing.empty() && options_.container_engine) {
      e->runtime = "container";
      fallback =
          "host prefix " + missing + " missing here: running image " + e->image + " in a container";
    } else if (!missing.empty()) {
      no_fallback = "its image " + e->image + " cannot run here instead: " + kNoEngine;
    }
  }
  // Validate() refuses a missing host prefix of a "process" launch, naming it.
  if (Status s = Validate(launch); !s.ok()) {
    return FailToStart(launch, JoinMessage({fallback, s.message(), no_fallback}));
  }
  const bool in_container = IsContainerLaunch(launch);
  const bool shell_session = launch.session && launch.session->shell;
  if (in_container && shell_session) {
    return FailToStart(launch,
                       "an interactive shell runs in the process runtime only, not in a container "
                       "(environment '" +
                           launch.environment->name + "')");
  }
  if (in_container && !options_.container_engine) return FailToStart(launch, kNoEngine);
  const TaskKey& key = launch.key;
  const std::string dir = TaskDir(key);
  const std::string hostfile = launch.distributed ? HostfilePath(key) : "";
  const TaskChannel channel{options_.task_server, StopFilePath(key), options_.task_ca_cert};
  if (!launch.checkpoint_dir.empty()) {
    if (Status s = MakeCheckpointDir(launch, *identity); !s.ok()) {
      return FailToStart(launch, s.message());
    }
  }

  ShimPlan plan;
  std::error_code ec;
  std::string script;         // a batch task's script file (WriteScript), once written
  std::string container_env;  // the content of container.env
  std::string staged;         // the container workdir's staging mount (workdir_mount.h), if any
  if (in_container) {
    // Without root there is no mount(2), and no rootful engine either: the path goes as it is.
    if (geteuid() == 0) {
      Result<std::string> mounted = StageWorkdir(key, launch.workdir, *identity);
      if (!mounted.ok()) {
        return FailToStart(launch, JoinMessage({fallback, mounted.status().message()}));
      }
      staged = *mounted;
    }
    Result<ContainerRun> run = PlanContainerRun(
        *options_.container_engine, launch, ContainerNameOf(key), identity->container,
        options_.node_name, hostfile, dir + kContainerEnvFile, staged, channel);
    if (!run.ok()) {
      if (!staged.empty()) (void)UnbindDirectory(staged);
      return FailToStart(launch, JoinMessage({fallback, run.status().message()}));
    }
    plan.executable = run->argv[0];
    plan.argv = std::move(run->argv);
    plan.env = options_.container_engine->env;
    plan.workdir = "/";  // the engine's; the container's is in its argv
    container_env = std::move(run->env_file);
  } else {
    std::vector<std::string> argv;
    if (!launch.script.empty()) {
      // Written before the executable is resolved (it is the executable); removed with the
      // task's other files, or below when the start fails.
      if (Status s = WriteScript(key, launch.script, *identity); !s.ok()) {
        return FailToStart(launch, s.message());
      }
      script = ScriptPath(key);
      argv = {script};
      argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    } else if (launch.shell) {
      argv = {kShell, "-c"};
      argv.insert(argv.end(), launch.argv.begin(), launch.argv.end());
    } else {
      argv = launch.argv;
    }
    argv = LaunchArgv(launch, argv, options_.self_exe);
    if (shell_session) {
      // The pty server runs the command (or the login shell) on a pty and serves it on the
      // session's port; it execs nothing itself until a client attaches.
      std::vector<std::string> server = {options_.self_exe, kShellServerCommand, "--"};
      server.insert(server.end(), argv.begin(), argv.end());
      argv = std::move(server);
    }
    std::map<std::string, std::string> base_env = base_env_;
    base_env["HOME"] = identity->home;
    plan.env = TaskEnvironment(launch, options_.node_name, base_env, hostfile, channel);
    Result<std::string> executable = ResolveExecutable(launch, argv, plan.env);
    if (!executable.ok()) {
      if (!script.empty()) std::filesystem::remove(script, ec);
      return FailToStart(launch, executable.status().message());
    }
    plan.executable = *executable;
    plan.argv = std::move(argv);
    plan.workdir = launch.workdir;
    plan.identity = identity->shim;
  }

  std::filesystem::remove_all(dir, ec);  // a leftover of an earlier failed start
  if (mkdir(dir.c_str(), 0700) != 0) {
    if (!script.empty()) std::filesystem::remove(script, ec);
    return FailToStart(launch, "cannot create " + dir + ": " + ErrnoText(errno));
  }

  Task task;
  task.home = home_;
  task.launch = launch;
  task.in_container = in_container;
  task.notes = JoinMessage({workdir_note, fallback});
  task.status.job_id = launch.job_id;
  task.status.task_index = launch.task_index;
  task.status.key = key;
  task.status.started_at = clock_->Now();
  const bool wants_limits = launch.cpu.value() > 0 || launch.memory.value() > 0;
  if (in_container) {
    // The engine applies the limits to the container, which it places in its own cgroup; the
    // engine process itself runs unlimited.
  } else if (cgroups_.version() != CgroupVersion::kNone) {
    Result<TaskCgroup> group = cgroups_.Create(ToString(key), {launch.cpu, launch.memory});
    if (group.ok()) {
      task.cgroup = *group;
      task.notes = JoinMessage({task.notes, group->note});
    } else if (wants_limits) {
      task.notes = JoinMessage({task.notes, "running without limits: " + group.status().message()});
    }
  } else if (wants_limits) {
    task.notes =
        JoinMessage({task.notes, "running without limits: " + cgroups_.unavailable_reason()});
  }
  auto abandon = [&](const std::string& message) {
    if (task.cgroup) {
      CgroupManager::KillAll(*task.cgroup);
      (void)CgroupManager::Remove(*task.cgroup);
    }
    std::filesystem::remove_all(dir, ec);
    std::filesystem::remove_all(StopDir(key), ec);
    if (!hostfile.empty()) std::filesystem::remove(hostfile, ec);
    if (!script.empty()) std::filesystem::remove(script, ec);
    if (!staged.empty()) (void)UnbindDirectory(staged);
    return FailToStart(launch, message);
  };
  if (launch.distributed) {
    if (Status s = WriteHostfile(key, *launch.distributed); !s.ok()) return abandon(s.message());
  }
  // Empty while the task may run: one left by an earlier failed start goes.
  std::filesystem::remove_all(StopDir(key), ec);
  if (Status s = MakeStopDir(key, *identity); !s.ok()) return abandon(s.message());
  if (in_container) {
    // In the agent's private task directory, like the launch in task.json.
    if (Status s = WriteFileAtomic(dir + kContainerEnvFile, container_env); !s.ok()) {
      return abandon(s.message());
    }
  }

  plan.stdout_path = dir + kStdoutFile;
  plan.stderr_path = dir + kStderrFile;
  plan.exit_path = dir + kExitFile;
  if (exit_notice_fd_ >= 0) plan.exit_notice_path = home_ + kExitNoticeFifo;
  if (task.cgroup) plan.cgroup_procs = CgroupManager::ProcsFiles(*task.cgroup);
  plan.task_pid_path = dir + kTaskPidFile;
  plan.supervisor = options_.supervisor_exe;
  plan.fallback_supervisor = options_.fallback_supervisor_exe;

  // The record names the supervisor before the task starts: an agent killed at any moment
  // leaves either no record (nothing started: the next agent removes the folder) or one that
  // names a supervisor, alive with the task or dead with what it left in the task's cgroup.
  auto record_supervisor = [&](pid_t shim_pid) -> Status {
    task.shim_pid = shim_pid;
    task.shim_is_child = true;
    // Without its start time the next agent would take a live supervisor for a dead one.
    Result<ProcStat> stat = ReadProcStat(shim_pid);
    if (!stat.ok()) return stat.status();
    task.shim_start_ticks = stat->start_ticks;
    return WriteTaskRecord(key, task);
  };
  Result<ShimStart> start = StartShim(plan, record_supervisor);
  if (!start.ok()) return abandon(start.status().message());
  if (start->supervisor != options_.supervisor_exe) {
    std::cerr << "corral agent: task supervisor " << options_.supervisor_exe
              << " cannot be started or is of another build; tasks start under "
              << start->supervisor << " from now on\n";
    options_.supervisor_exe = start->supervisor;
    options_.fallback_supervisor_exe.clear();
  }
  if (start->failed_step != ShimStep::kNone) {
    while (waitpid(start->shim_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
    std::string what = ShimStepName(start->failed_step);
    if (start->failed_step == ShimStep::kExec) what += " " + plan.executable;
    if (start->failed_step == ShimStep::kChdir) what += " " + plan.workdir;
    if (start->failed_step == ShimStep::kSetUser) what += " '" + identity->user->name + "'";
    return abandon(what + ": " + ErrnoText(start->error));
  }
  task.task_pid = start->task_pid;
  // The task may already be gone.
  if (auto stat = ReadProcStat(task.task_pid); stat.ok()) task.task_start_ticks = stat->start_ticks;
  if (start->cgroup_error != 0) {
    task.notes = JoinMessage({task.notes, "running without limits: cannot join cgroup: " +
                                              ErrnoText(start->cgroup_error)});
  }
  task.status.pid = task.task_pid;
  task.status.message = task.notes;
  (void)WriteTaskRecord(key, task);  // on failure the next agent finds the pid in task.pid
  auto [it, added] = tasks_.emplace(key, std::move(task));
  return it->second.status;
}

void ProcessRuntime::SignalTask(Task& task, int signal) {
  if (task.task_pid > 0) kill(-task.task_pid, signal);
  if (signal == SIGKILL && task.cgroup) CgroupManager::KillAll(*task.cgroup);
  // The engine passes SIGTERM on to the container; SIGKILL stops only the engine process (the
  // container lives on: podman's conmon or docker's daemon holds it), so the container is
  // removed. After the kill, not before: an engine still creating the container could create
  // it after a removal, but not once it is dead, so a removal that succeeds here is final and
  // Finish() need not run another. A failed one is retried later (CleanUpContainer()).
  if (signal == SIGKILL && task.in_container) (void)CleanUpContainer(task.status.key, task);
}

void ProcessRuntime::CleanUpCgroup(Task& task) {
  if (!task.cgroup) return;
  CgroupManager::KillAll(*task.cgroup);
  if (CgroupManager::Remove(*task.cgroup).ok()) task.cgroup.reset();
}

Status ProcessRuntime::CleanUpContainer(const TaskKey& key, Task& task) {
  if (!task.in_container || task.container_removed) return Status::Ok();
  if (!options_.container_engine) {
    return FailedPrecondition("container " + ContainerNameOf(key) +
                              " may still exist: this agent has no container engine to remove it");
  }
  const Seconds now = clock_->Now();
  if (!task.removal_error.ok() && now < task.next_removal) return task.removal_error;
  Status removed = RemoveContainer(*options_.container_engine, ContainerNameOf(key));
  task.container_removed = removed.ok();
  task.removal_error = removed;
  if (!removed.ok()) task.next_removal = now + kContainerRemovalRetry;
  return removed;
}

void ProcessRuntime::Finish(const TaskKey& key, Task& task) {
  const std::string dir = TaskDir(key);
  auto text = ReadFile(dir + kExitFile);
  json exit = text.ok() ? ParseJsonOrNull(*text) : json();
  TaskStatus& s = task.status;
  s.ended_at = clock_->Now();
  if (!exit.is_object()) {
    s.state = ProcessState::kLost;
    s.message = "lost: exit record unreadable";
  } else {
    s.ended_at = Seconds(IntField(exit, "ended_at", s.ended_at->value()));
    std::string oom;
    if (task.cgroup) {
      auto kills = CgroupManager::OomKills(*task.cgroup);
      if (kills && *kills > 0) {
        oom = "out of memory: killed at its memory limit of " +
              std::to_string(task.launch.memory.value()) + " MiB";
      }
    }
    if (exit.contains("lost")) {
      s.state = ProcessState::kLost;
      s.message = kLostMessage;
    } else if (exit.contains("failed_step")) {
      s.state = ProcessState::kFailedToStart;
      s.message = std::string(ShimStepName(static_cast<ShimStep>(IntField(exit, "failed_step")))) +
                  ": " + ErrnoText(static_cast<int>(IntField(exit, "error")));
    } else {
      s.state = task.kill_reason ? ProcessState::kKilled : ProcessState::kExited;
      if (exit.contains("exit_code")) s.exit_code = static_cast<int>(IntField(exit, "exit_code"));
      if (exit.contains("signal")) s.signal = static_cast<int>(IntField(exit, "signal"));
      s.message = JoinMessage({task.kill_reason.value_or(""), oom,
                               task.in_container ? EngineExitNote(s.exit_code) : "", task.notes});
      // The kernel's OOM kill explains a failed end whoever else was stopping the task (a
      // process that survived an OOM kill of one of its children and exited 0 did not fail);
      // then the agent's own kill; then what the process did.
      const bool failed = s.signal.has_value() || s.exit_code.value_or(0) != 0;
      if (!oom.empty() && failed) {
        s.end_cause = model::TaskEndCause::kOutOfMemory;
      } else if (task.kill_reason) {
        s.end_cause = task.kill_cause.value_or(model::TaskEndCause::kStopped);
      } else {
        s.end_cause = s.signal ? model::TaskEndCause::kSignalled : model::TaskEndCause::kExited;
      }
    }
  }
  CleanUpCgroup(task);
  if (Status removed = CleanUpContainer(key, task); !removed.ok()) {
    s.message = JoinMessage({s.message, removed.message()});
  }
}

void ProcessRuntime::Observe(const TaskKey& key, Task& task) {
  if (task.shim_is_child && !task.shim_reaped) {
    pid_t r = waitpid(task.shim_pid, nullptr, WNOHANG);
    if (r == task.shim_pid || (r < 0 && errno == ECHILD)) task.shim_reaped = true;
  }
  if (IsTerminal(task.status.state)) {
    CleanUpCgroup(task);                // a group still busy at the end is retried here
    (void)CleanUpContainer(key, task);  // and a container the engine failed to remove
    return;
  }
  const std::string exit_path = TaskDir(key) + kExitFile;
  auto has_exit = [&] { return access(exit_path.c_str(), F_OK) == 0; };
  if (has_exit()) {
    Finish(key, task);
    return;
  }
  const bool shim_alive = task.shim_is_child
                              ? !task.shim_reaped
                              : IsSameLiveProcess(task.shim_pid, task.shim_start_ticks);
  if (!shim_alive) {
    if (has_exit()) {  // written just before the shim exited
      Finish(key, task);
      return;
    }
    // The supervisor died without a word (SIGKILL, OOM, reboot). Kill what is left of the task,
    // record the verdict where the shim would have, and report it.
    if (task.task_pid <= 0) FindTaskPid(key, task);
    if (task.task_pid > 0 && IsSameLiveProcess(task.task_pid, task.task_start_ticks)) {
      kill(-task.task_pid, SIGKILL);
    }
    json lost{{"lost", "supervisor gone"}, {"ended_at", clock_->Now().value()}};
    (void)WriteFileAtomic(exit_path, Dump(lost));
    Finish(key, task);
    return;
  }
  if (task.task_pid <= 0) FindTaskPid(key, task);
  const Seconds now = clock_->Now();
  if (const auto& warning = task.launch.warning_signal;
      warning && !task.warned && !task.kill_reason && task.task_pid > 0 &&
      task.launch.time_limit.value() > 0 &&
      now >= task.status.started_at + task.launch.time_limit - warning->before) {
    // Recorded before it is sent: an agent restarted between the two leaves the job without
    // its warning rather than warning it twice.
    task.warned = true;
    if (Status s = WriteFileAtomic(TaskDir(key) + kWarnedFile,
                                   Dump(json{{"signal", warning->signal}, {"at", now.value()}}));
        !s.ok()) {
      std::cerr << "corral agent: task " << ToString(key) << ": cannot record its warning signal ("
                << s.message() << "); an agent restarted now would send it again" << std::endl;
    }
    SignalTask(task, warning->signal);
  }
  if (task.launch.time_limit.value() > 0 && !task.kill_reason &&
      now >= task.status.started_at + task.launch.time_limit) {
    task.kill_reason =
        "time limit of " + std::to_string(task.launch.time_limit.value()) + " s reached";
    task.kill_cause = model::TaskEndCause::kTimeLimit;
    task.kill_deadline = now + options_.time_limit_grace;
    RequestStop(key, task, options_.time_limit_grace);
    SignalTask(task, options_.time_limit_grace.value() > 0 ? SIGTERM : SIGKILL);
    task.sigkill_sent = options_.time_limit_grace.value() <= 0;
    (void)WriteKillRecord(key, task);
  }
  if (task.kill_reason && !task.sigkill_sent && now >= task.kill_deadline) {
    SignalTask(task, SIGKILL);
    task.sigkill_sent = true;
    (void)WriteKillRecord(key, task);
  }
}

void ProcessRuntime::FindTaskPid(const TaskKey& key, Task& task) const {
  auto text = ReadFile(TaskDir(key) + kTaskPidFile);
  // Absent or without its final newline: not written yet (the shim writes it once the task has
  // exec'd).
  if (!text.ok() || text->empty() || text->back() != '\n') return;
  char* end = nullptr;
  const long pid = std::strtol(text->c_str(), &end, 10);
  const unsigned long long ticks = std::strtoull(end, nullptr, 10);
  if (pid <= 0 || pid > std::numeric_limits<pid_t>::max() || ticks == 0) return;
  // The process with that pid and start time is the task (a zombie too: its end is read from
  // exit.json); another start time is another process that got the pid after the task's end.
  Result<ProcStat> stat = ReadProcStat(static_cast<pid_t>(pid));
  if (!stat.ok() || stat->start_ticks != ticks) return;
  task.task_pid = static_cast<pid_t>(pid);
  task.task_start_ticks = ticks;
  task.status.pid = task.task_pid;
  (void)WriteTaskRecord(key, task);  // found again from task.pid on failure
}

std::vector<RunningTask> ProcessRuntime::Running() const {
  std::vector<RunningTask> out;
  for (const auto& [key, task] : tasks_) {
    if (task.status.state != ProcessState::kRunning) continue;
    out.push_back({task.launch, task.status.pid, task.in_container});
  }
  return out;
}

std::vector<TaskStatus> ProcessRuntime::Poll() {
  // First: a notice written while the tasks are observed below stays for the next Poll().
  DrainExitNotices();
  std::vector<TaskStatus> out;
  out.reserve(tasks_.size());
  for (auto& [key, task] : tasks_) {
    Observe(key, task);
    out.push_back(task.status);
  }
  return out;
}

Status ProcessRuntime::Kill(const TaskKey& key, Seconds grace, const std::string& reason,
                            model::TaskEndCause cause) {
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return NotFound("no task " + ToString(key) + " on this node");
  Task& task = it->second;
  Observe(key, task);
  if (IsTerminal(task.status.state)) return Status::Ok();
  const Seconds now = clock_->Now();
  if (!task.kill_reason) {
    task.kill_reason = reason.empty() ? "killed" : reason;
    task.kill_cause = cause;
    task.kill_deadline = now + grace;
    RequestStop(key, task, grace);
    if (grace.value() > 0) SignalTask(task, SIGTERM);
  } else if (now + grace < task.kill_deadline) {
    // A second kill with a shorter grace: the stop file must not promise a later SIGKILL.
    task.kill_deadline = now + grace;
    RequestStop(key, task, grace);
  }
  if (!task.sigkill_sent && now >= task.kill_deadline) {
    SignalTask(task, SIGKILL);
    task.sigkill_sent = true;
  }
  return WriteKillRecord(key, task);
}

Status ProcessRuntime::Forget(const TaskKey& key) {
  auto it = tasks_.find(key);
  if (it == tasks_.end()) return NotFound("no task " + ToString(key) + " on this node");
  Task& task = it->second;
  Observe(key, task);
  if (!IsTerminal(task.status.state)) {
    return FailedPrecondition("task " + ToString(key) + " is still running; kill it first");
  }
  if (task.shim_is_child && !task.shim_reaped && task.shim_pid > 0) {
    // The shim exits right after writing exit.json; do not leave a zombie behind.
    while (waitpid(task.shim_pid, nullptr, 0) < 0 && errno == EINTR) {
    }
  }
  if (task.cgroup) {
    CgroupManager::KillAll(*task.cgroup);
    CORRAL_RETURN_IF_ERROR(CgroupManager::Remove(*task.cgroup));
  }
  if (options_.container_engine) CORRAL_RETURN_IF_ERROR(CleanUpContainer(key, task));
  if (task.in_container) CORRAL_RETURN_IF_ERROR(UnbindDirectory(MountPath(key)));
  std::error_code ec;
  std::filesystem::remove_all(TaskDir(key), ec);
  if (ec) return IoError("cannot remove " + TaskDir(key) + ": " + ec.message());
  for (const std::string& file : {HostfilePath(key), ScriptPath(key)}) {
    std::filesystem::remove(file, ec);
    if (ec) return IoError("cannot remove " + file + ": " + ec.message());
  }
  std::filesystem::remove_all(StopDir(key), ec);
  if (ec) return IoError("cannot remove " + StopDir(key) + ": " + ec.message());
  // The scratch directory (when the job named no workdir) goes with the task: it is scratch.
  // remove_all does not follow the symbolic links a task may have left there.
  std::filesystem::remove_all(ScratchPath(key), ec);
  if (ec)
    return IoError("cannot remove the scratch directory of " + ToString(key) + ": " + ec.message());
  if (task.home != home_) --legacy_tasks_;
  tasks_.erase(it);
  return Status::Ok();
}

Result<std::string> ProcessRuntime::ReadLog(const TaskKey& key, LogStream stream, int64_t offset,
                                            int64_t max_bytes) {
  // Thread-safe: touches only the task's files, never tasks_ (the runtime thread's), so the
  // directory is found on disk: the namespace's, else the old layout's (Adopt()'s order).
  if (offset < 0 || max_bytes < 0) return InvalidArgument("log offset and size must be >= 0");
  std::string dir = home_ + "/tasks/" + ToString(key);
  if (access(dir.c_str(), F_OK) != 0) {
    const std::string legacy = options_.work_dir + "/tasks/" + ToString(key);
    if (access(legacy.c_str(), F_OK) == 0) dir = legacy;
  }
  const std::string path = dir + (stream == LogStream::kStdout ? kStdoutFile : kStderrFile);
  int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    const int error = errno;
    if (error == ENOENT && access(dir.c_str(), F_OK) != 0) {
      return NotFound("no output of task " + ToString(key) + " on this node");
    }
    if (error == ENOENT) return std::string();  // the task has not written this stream yet
    return IoError(path + ": " + ErrnoText(error));
  }
  // Sized by what the file holds past `offset`: every report asks for every task's output, and
  // most tasks have written nothing new (a zero-filled buffer of max_bytes each time was most
  // of a report's cost at 1,000 tasks). A log still growing is read up to its size now.
  struct stat st;
  if (fstat(fd, &st) != 0) {
    const int error = errno;
    close(fd);
    return IoError(path + ": " + ErrnoText(error));
  }
  const int64_t available = std::max<int64_t>(0, static_cast<int64_t>(st.st_size) - offset);
  std::string out(static_cast<size_t>(std::min({max_bytes, kMaxLogRead, available})), '\0');
  size_t got = 0;
  while (got < out.size()) {
    ssize_t n = pread(fd, out.data() + got, out.size() - got, offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      int e = errno;
      close(fd);
      return IoError(path + ": " + ErrnoText(e));
    }
    if (n == 0) break;
    got += static_cast<size_t>(n);
  }
  close(fd);
  out.resize(got);
  return out;
}

}  // namespace corral::agent
