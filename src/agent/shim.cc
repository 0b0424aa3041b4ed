#include "agent/shim.h"

#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <nlohmann/json.hpp>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

// ---- Code that runs after fork(): system calls only, no allocation. ----

// The plan as C pointers, built before fork.
struct Prepared {
  const char* executable;
  char* const* argv;
  char* const* envp;
  const char* workdir;
  const char* stdout_path;
  const char* stderr_path;
  const char* exit_path;
  const char* exit_tmp_path;
  const char* exit_notice_path;  // "" for none
  const char* task_pid_path;     // "" for none
  const char* const* cgroup_procs;
  size_t cgroup_count;
  bool set_identity;
  uid_t uid;
  gid_t gid;
  const gid_t* groups;
  size_t group_count;
};

// One record from the task (before exec) to the shim.
struct StepRecord {
  int32_t step;
  int32_t error;
};

// The shim's report to the agent.
struct Report {
  int32_t task_pid;
  int32_t failed_step;
  int32_t error;
  int32_t cgroup_error;
};

// Signals the shim ignores (a terminal hang-up or ^C meant for the agent must not stop it);
// the task gets them back at their defaults.
constexpr int kShimIgnored[] = {SIGHUP, SIGINT, SIGQUIT, SIGPIPE, SIGTSTP, SIGTTIN, SIGTTOU};

void WriteFully(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = write(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    p += n;
    size -= static_cast<size_t>(n);
  }
}

// Appends decimal `v` at `out`; returns the new end.
char* AppendInt(char* out, int64_t v) {
  char digits[24];
  int n = 0;
  bool negative = v < 0;
  uint64_t u = negative ? static_cast<uint64_t>(-(v + 1)) + 1 : static_cast<uint64_t>(v);
  do {
    digits[n++] = static_cast<char>('0' + u % 10);
    u /= 10;
  } while (u != 0);
  if (negative) *out++ = '-';
  while (n > 0) *out++ = digits[--n];
  return out;
}

char* AppendText(char* out, const char* text) {
  while (*text != '\0') *out++ = *text++;
  return out;
}

void SetDispositions(const int* signals, size_t count, void (*handler)(int)) {
  struct sigaction sa = {};
  sa.sa_handler = handler;
  sigemptyset(&sa.sa_mask);
  for (size_t i = 0; i < count; ++i) sigaction(signals[i], &sa, nullptr);
}

void CloseAllFrom(unsigned int first, unsigned int last) {
  if (first > last) return;
  if (close_range(first, last, 0) == 0) return;
  long max = sysconf(_SC_OPEN_MAX);
  if (max < 0 || max > 65536) max = 65536;
  for (long fd = first; fd < max && fd <= static_cast<long>(last); ++fd)
    close(static_cast<int>(fd));
}

// The task: runs in the shim's child, ends in execve or _exit(127).
[[noreturn]] void RunTask(const Prepared& p, int status_fd) {
  setpgid(0, 0);
  char pid_text[24];
  char* end = AppendInt(pid_text, getpid());
  for (size_t i = 0; i < p.cgroup_count; ++i) {
    int fd = open(p.cgroup_procs[i], O_WRONLY | O_CLOEXEC);
    bool ok = fd >= 0 && write(fd, pid_text, static_cast<size_t>(end - pid_text)) > 0;
    int error = errno;
    if (fd >= 0) close(fd);
    if (!ok) {
      StepRecord r{static_cast<int32_t>(ShimStep::kCgroup), error};
      WriteFully(status_fd, &r, sizeof(r));
      break;
    }
  }
  auto fail = [&](ShimStep step) {
    StepRecord r{static_cast<int32_t>(step), errno};
    WriteFully(status_fd, &r, sizeof(r));
    _exit(127);
  };
  int out = open(p.stdout_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (out < 0) fail(ShimStep::kStdout);
  int err = open(p.stderr_path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0644);
  if (err < 0) fail(ShimStep::kStderr);
  dup2(out, STDOUT_FILENO);
  dup2(err, STDERR_FILENO);
  close(out);
  close(err);
  // Groups before the uid: once the uid is not root, the groups can no longer be changed.
  if (p.set_identity &&
      (setgroups(p.group_count, p.groups) != 0 || setgid(p.gid) != 0 || setuid(p.uid) != 0)) {
    fail(ShimStep::kSetUser);
  }
  if (chdir(p.workdir) != 0) fail(ShimStep::kChdir);
  SetDispositions(kShimIgnored, sizeof(kShimIgnored) / sizeof(kShimIgnored[0]), SIG_DFL);
  execve(p.executable, p.argv, p.envp);
  fail(ShimStep::kExec);
  _exit(127);  // not reached
}

void WriteExitRecord(const Prepared& p, const char* body_end_json, char* buffer, char* end) {
  timespec now = {};
  clock_gettime(CLOCK_REALTIME, &now);
  end = AppendText(end, "\"ended_at\":");
  end = AppendInt(end, now.tv_sec);
  end = AppendText(end, body_end_json);
  int fd = open(p.exit_tmp_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return;
  WriteFully(fd, buffer, static_cast<size_t>(end - buffer));
  fsync(fd);
  close(fd);
  rename(p.exit_tmp_path, p.exit_path);
  // After the rename: whoever reads the notice finds the record. Non-blocking: without a reader
  // (the agent is down: it polls when it is back) open fails with ENXIO; a full FIFO already
  // wakes its reader.
  if (p.exit_notice_path[0] != '\0') {
    int notice = open(p.exit_notice_path, O_WRONLY | O_NONBLOCK | O_CLOEXEC);
    if (notice >= 0) {
      const char byte = 'x';
      (void)!write(notice, &byte, 1);
      close(notice);
    }
  }
}

// Writes the task's pid to p.task_pid_path (not synced: it only has to outlive the agent).
void WriteTaskPid(const Prepared& p, pid_t task) {
  if (p.task_pid_path[0] == '\0') return;
  char text[24];
  char* end = AppendInt(text, task);
  int fd = open(p.task_pid_path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  WriteFully(fd, text, static_cast<size_t>(end - text));
  close(fd);
}

// Waits for the agent's go (one byte on the control socket `go_fd`). Anything else (the agent
// refused to go on, or died first) ends the shim before a task exists.
void AwaitGo(int go_fd) {
  char go = 0;
  ssize_t n;
  do {
    n = read(go_fd, &go, 1);
  } while (n < 0 && errno == EINTR);
  close(go_fd);
  if (n != 1) _exit(0);
}

[[noreturn]] void RunShim(const Prepared& p, int report_fd, int go_fd) {
  setsid();
  // Default dispositions (the agent's handlers mean nothing here), a few ignored, none blocked.
  struct sigaction sa = {};
  sa.sa_handler = SIG_DFL;
  sigemptyset(&sa.sa_mask);
  for (int s = 1; s < NSIG; ++s) sigaction(s, &sa, nullptr);
  SetDispositions(kShimIgnored, sizeof(kShimIgnored) / sizeof(kShimIgnored[0]), SIG_IGN);
  sigset_t none;
  sigemptyset(&none);
  sigprocmask(SIG_SETMASK, &none, nullptr);

  // Keep only the report pipe and the control socket and /dev/null as stdio: the agent's
  // terminal stays with the agent.
  int fd = fcntl(report_fd, F_DUPFD_CLOEXEC, 3);
  if (fd < 0) _exit(1);
  int go = fcntl(go_fd, F_DUPFD_CLOEXEC, fd + 1);
  if (go < 0) _exit(1);
  int null = open("/dev/null", O_RDWR | O_CLOEXEC);
  if (null >= 0) {
    dup2(null, STDIN_FILENO);
    dup2(null, STDOUT_FILENO);
    dup2(null, STDERR_FILENO);
  }
  CloseAllFrom(3, static_cast<unsigned int>(fd) - 1);
  CloseAllFrom(static_cast<unsigned int>(fd) + 1, static_cast<unsigned int>(go) - 1);
  CloseAllFrom(static_cast<unsigned int>(go) + 1, ~0U);
  AwaitGo(go);

  Report report = {0, 0, 0, 0};
  char buffer[256];
  int pipe_fds[2];
  pid_t task = -1;
  // vfork: the task only makes system calls until it execs (RunTask), and the shim's page
  // tables need not be copied.
  if (pipe2(pipe_fds, O_CLOEXEC) == 0) task = vfork();
  if (task < 0) {
    report.failed_step = static_cast<int32_t>(ShimStep::kFork);
    report.error = errno;
    WriteFully(fd, &report, sizeof(report));
    close(fd);
    char* end = AppendText(buffer, "{\"failed_step\":");
    end = AppendInt(end, report.failed_step);
    end = AppendText(end, ",\"error\":");
    end = AppendInt(end, report.error);
    end = AppendText(end, ",");
    WriteExitRecord(p, "}\n", buffer, end);
    _exit(0);
  }
  if (task == 0) {
    close(pipe_fds[0]);
    close(fd);
    RunTask(p, pipe_fds[1]);
  }
  setpgid(task, task);  // as the task does: whichever runs first, the group exists at once
  close(pipe_fds[1]);
  WriteTaskPid(p, task);
  report.task_pid = task;
  StepRecord record;
  while (true) {
    ssize_t n = read(pipe_fds[0], &record, sizeof(record));
    if (n < 0 && errno == EINTR) continue;
    if (n != static_cast<ssize_t>(sizeof(record))) break;  // EOF: exec succeeded (CLOEXEC)
    if (record.step == static_cast<int32_t>(ShimStep::kCgroup)) {
      report.cgroup_error = record.error;
    } else {
      report.failed_step = record.step;
      report.error = record.error;
    }
  }
  close(pipe_fds[0]);
  WriteFully(fd, &report, sizeof(report));  // the agent may be gone: EPIPE is ignored
  close(fd);

  // Wait without reaping, so that the task's pid (its process group id) cannot be reused while
  // the rest of the group is killed.
  siginfo_t info = {};
  while (waitid(P_PID, static_cast<id_t>(task), &info, WEXITED | WNOWAIT) != 0 && errno == EINTR) {
  }
  kill(-task, SIGKILL);  // the task's leftover children: a task ends as a whole

  char* end = AppendText(buffer, "{");
  if (report.failed_step != 0) {
    end = AppendText(end, "\"failed_step\":");
    end = AppendInt(end, report.failed_step);
    end = AppendText(end, ",\"error\":");
    end = AppendInt(end, report.error);
    end = AppendText(end, ",");
  } else if (info.si_code == CLD_EXITED) {
    end = AppendText(end, "\"exit_code\":");
    end = AppendInt(end, info.si_status);
    end = AppendText(end, ",");
  } else {
    end = AppendText(end, "\"signal\":");
    end = AppendInt(end, info.si_status);
    end = AppendText(end, info.si_code == CLD_DUMPED ? ",\"core_dumped\":true," : ",");
  }
  WriteExitRecord(p, "}\n", buffer, end);
  while (waitpid(task, nullptr, 0) < 0 && errno == EINTR) {
  }
  _exit(0);
}

// ---- Agent side. ----

std::vector<char*> PointerArray(const std::vector<std::string>& strings) {
  std::vector<char*> out;
  out.reserve(strings.size() + 1);
  for (const std::string& s : strings) out.push_back(const_cast<char*>(s.c_str()));
  out.push_back(nullptr);
  return out;
}

}  // namespace

const char* ShimStepName(ShimStep step) {
  switch (step) {
    case ShimStep::kNone:
      return "none";
    case ShimStep::kFork:
      return "fork";
    case ShimStep::kCgroup:
      return "join cgroup";
    case ShimStep::kStdout:
      return "open stdout log";
    case ShimStep::kStderr:
      return "open stderr log";
    case ShimStep::kChdir:
      return "chdir to workdir";
    case ShimStep::kExec:
      return "exec";
    case ShimStep::kSetUser:
      return "switch to the task user";
  }
  return "unknown step";
}

namespace {

// The shim's descriptors, as StartShim() sets them up for SuperviseMain().
constexpr int kReportFd = 3;   // the report pipe's write end
constexpr int kControlFd = 4;  // a socket: the plan (length-prefixed JSON), then the go byte
constexpr uint32_t kMaxPlanBytes = 64u << 20;

nlohmann::json PlanToJson(const ShimPlan& plan) {
  nlohmann::json j{{"executable", plan.executable},
                   {"argv", plan.argv},
                   {"env", plan.env},
                   {"workdir", plan.workdir},
                   {"stdout_path", plan.stdout_path},
                   {"stderr_path", plan.stderr_path},
                   {"exit_path", plan.exit_path},
                   {"task_pid_path", plan.task_pid_path},
                   {"exit_notice_path", plan.exit_notice_path},
                   {"cgroup_procs", plan.cgroup_procs}};
  if (plan.identity) {
    j["identity"] = {{"uid", plan.identity->uid},
                     {"gid", plan.identity->gid},
                     {"groups", plan.identity->groups}};
  }
  return j;
}

// Throws (nlohmann) on a plan StartShim() did not write.
ShimPlan PlanFromJson(const nlohmann::json& j) {
  ShimPlan plan;
  j.at("executable").get_to(plan.executable);
  j.at("argv").get_to(plan.argv);
  j.at("env").get_to(plan.env);
  j.at("workdir").get_to(plan.workdir);
  j.at("stdout_path").get_to(plan.stdout_path);
  j.at("stderr_path").get_to(plan.stderr_path);
  j.at("exit_path").get_to(plan.exit_path);
  j.at("task_pid_path").get_to(plan.task_pid_path);
  j.at("exit_notice_path").get_to(plan.exit_notice_path);
  j.at("cgroup_procs").get_to(plan.cgroup_procs);
  if (auto it = j.find("identity"); it != j.end()) {
    ShimIdentity identity;
    it->at("uid").get_to(identity.uid);
    it->at("gid").get_to(identity.gid);
    it->at("groups").get_to(identity.groups);
    plan.identity = std::move(identity);
  }
  return plan;
}

bool SendAll(int fd, const void* data, size_t size) {
  const char* p = static_cast<const char*>(data);
  while (size > 0) {
    ssize_t n = send(fd, p, size, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool ReadAll(int fd, void* data, size_t size) {
  char* p = static_cast<char*>(data);
  while (size > 0) {
    ssize_t n = read(fd, p, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    p += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Starts `supervisor __supervise` with the report pipe's write end as kReportFd and the
// control socket's shim end as kControlFd; nothing else is inherited (all are CLOEXEC).
Result<pid_t> SpawnSupervisor(const std::string& supervisor, int report_fd, int control_fd) {
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_adddup2(&actions, report_fd, kReportFd);
  posix_spawn_file_actions_adddup2(&actions, control_fd, kControlFd);
  char* const argv[] = {const_cast<char*>("corral"), const_cast<char*>(kSuperviseCommand), nullptr};
  char* const envp[] = {nullptr};
  pid_t pid = 0;
  int e = posix_spawn(&pid, supervisor.c_str(), &actions, nullptr, argv, envp);
  posix_spawn_file_actions_destroy(&actions);
  if (e != 0)
    return IoError("cannot start the task supervisor " + supervisor + ": " + ErrnoText(e));
  return pid;
}

}  // namespace

Result<ShimStart> StartShim(const ShimPlan& plan,
                            const std::function<Status(pid_t shim_pid)>& before_task) {
  const std::string body = PlanToJson(plan).dump();
  if (body.size() > kMaxPlanBytes) {
    return InvalidArgument("task too large to start: " + std::to_string(body.size()) +
                           " bytes of command line and environment");
  }
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0) return IoError("pipe: " + ErrnoText(errno));
  // A socket, not a pipe, so that writing to a shim that died is EPIPE, not SIGPIPE.
  int control[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    int e = errno;
    close(report_pipe[0]);
    close(report_pipe[1]);
    return IoError("socketpair: " + ErrnoText(e));
  }
  Result<pid_t> spawned = SpawnSupervisor(plan.supervisor, report_pipe[1], control[1]);
  close(report_pipe[1]);
  close(control[1]);
  if (!spawned.ok()) {
    close(report_pipe[0]);
    close(control[0]);
    return spawned.status();
  }
  const pid_t shim = *spawned;
  const uint32_t size = static_cast<uint32_t>(body.size());
  Status ready =
      SendAll(control[0], &size, sizeof(size)) && SendAll(control[0], body.data(), body.size())
          ? before_task(shim)
          : IoError("task supervisor died before reading its plan: " + ErrnoText(errno));
  const char go = 'g';
  if (ready.ok() && !SendAll(control[0], &go, 1)) {
    ready = IoError("task supervisor died before starting the task: " + ErrnoText(errno));
  }
  close(control[0]);
  if (!ready.ok()) {
    close(report_pipe[0]);
    while (waitpid(shim, nullptr, 0) < 0 && errno == EINTR) {
    }
    return ready;
  }
  Report report = {};
  const bool reported = ReadAll(report_pipe[0], &report, sizeof(report));
  close(report_pipe[0]);
  if (!reported) {
    int status = 0;
    while (waitpid(shim, &status, 0) < 0 && errno == EINTR) {
    }
    return IoError("task supervisor died while starting the task (wait status " +
                   std::to_string(status) + ")");
  }
  ShimStart start;
  start.shim_pid = shim;
  start.task_pid = report.task_pid;
  start.failed_step = static_cast<ShimStep>(report.failed_step);
  start.error = report.error;
  start.cgroup_error = report.cgroup_error;
  return start;
}

int SuperviseMain() {
  uint32_t size = 0;
  if (!ReadAll(kControlFd, &size, sizeof(size)) || size > kMaxPlanBytes) return 2;
  std::string body(size, '\0');
  if (!ReadAll(kControlFd, body.data(), body.size())) return 2;
  ShimPlan plan;
  try {
    plan = PlanFromJson(nlohmann::json::parse(body));
  } catch (const nlohmann::json::exception&) {
    return 2;
  }
  const std::string exit_tmp = plan.exit_path + ".tmp";
  std::vector<char*> argv = PointerArray(plan.argv);
  std::vector<char*> envp = PointerArray(plan.env);
  std::vector<const char*> cgroups;
  for (const std::string& f : plan.cgroup_procs) cgroups.push_back(f.c_str());
  const ShimIdentity identity = plan.identity.value_or(ShimIdentity{});
  const Prepared prepared = {plan.executable.c_str(),
                             argv.data(),
                             envp.data(),
                             plan.workdir.c_str(),
                             plan.stdout_path.c_str(),
                             plan.stderr_path.c_str(),
                             plan.exit_path.c_str(),
                             exit_tmp.c_str(),
                             plan.exit_notice_path.c_str(),
                             plan.task_pid_path.c_str(),
                             cgroups.data(),
                             cgroups.size(),
                             plan.identity.has_value(),
                             identity.uid,
                             identity.gid,
                             identity.groups.data(),
                             identity.groups.size()};
  RunShim(prepared, kReportFd, kControlFd);
}

}  // namespace corral::agent
