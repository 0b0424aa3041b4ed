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

#include <cstring>
#include <type_traits>

#include "agent/file_io.h"
#include "agent/proc_stat.h"
#include "common/build_info.h"

namespace corral::agent {
namespace {

// ---- The shim's code (`corral-supervise __supervise`). Between its vfork and the task's exec
// (RunTask) only system calls are made: no allocation, no locks. ----

// The plan as C pointers, built before the vfork.
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

// Writes "PID START_TICKS\n" to p.task_pid_path (not synced: it only has to outlive the agent;
// a reader takes a file without the final newline as not written yet).
void WriteTaskPid(const Prepared& p, pid_t task) {
  if (p.task_pid_path[0] == '\0') return;
  // The task has exec'd or failed to, and is not reaped yet: its /proc entry exists. (This is
  // the shim, a process of its own: it may allocate.)
  Result<ProcStat> stat = ReadProcStat(task);
  if (!stat.ok()) return;
  char text[48];
  char* end = AppendInt(text, task);
  *end++ = ' ';
  end = AppendInt(end, static_cast<int64_t>(stat->start_ticks));
  *end++ = '\n';
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

// Runs in `corral-supervise __supervise` as StartShim() spawned it: its own session, no signal
// blocked or handled, stdio on /dev/null, only `report_fd` and `go_fd` open besides.
[[noreturn]] void RunShim(const Prepared& p, int report_fd, int go_fd) {
  SetDispositions(kShimIgnored, sizeof(kShimIgnored) / sizeof(kShimIgnored[0]), SIG_IGN);
  const int fd = report_fd;
  AwaitGo(go_fd);

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
constexpr int kReportFd = 3;  // the report pipe's write end
// A socket: the plan (PlanWriter) to the shim, kAccepted back, then the go byte to the shim.
constexpr int kControlFd = 4;
constexpr char kAccepted = 'a';
constexpr int kFirstFreeFd = 5;
constexpr uint32_t kMaxPlanBytes = 64u << 20;

// The plan's fields in their order on the wire, for PlanWriter and PlanReader alike, so that
// the two cannot disagree.
// `Plan` is const ShimPlan for the writer, ShimPlan for the reader.
//
// On the wire the body is preceded by its size (u32) and starts with the build that wrote it
// (ShimPlan::build), outside VisitPlan: a supervisor reads the build alone, exits with
// kShimRefusedPlan unless it is its own, and acknowledges with kAccepted once it has read the
// rest. Supervisors of every build rely on this prefix, the refusal and the acknowledgement:
// they must never change (the agent waits for the acknowledgement without a deadline).
template <typename Io, typename Plan>
void VisitPlan(Io& io, Plan& plan) {
  io(plan.executable);
  io(plan.argv);
  io(plan.env);
  io(plan.workdir);
  io(plan.stdout_path);
  io(plan.stderr_path);
  io(plan.exit_path);
  io(plan.task_pid_path);
  io(plan.exit_notice_path);
  io(plan.cgroup_procs);
  uint32_t has_identity = plan.identity.has_value() ? 1 : 0;
  io(has_identity);
  if (has_identity == 0) return;
  if constexpr (!std::is_const_v<Plan>) {
    if (!plan.identity) plan.identity.emplace();
  }
  io(plan.identity->uid);
  io(plan.identity->gid);
  io(plan.identity->groups);
}

// Byte-exact: numbers in host order, strings and lists length-prefixed (argv and env need not be
// UTF-8, so not JSON).
class PlanWriter {
 public:
  void operator()(uint32_t v) { out_.append(reinterpret_cast<const char*>(&v), sizeof(v)); }
  void operator()(const std::string& v) {
    (*this)(static_cast<uint32_t>(v.size()));
    out_ += v;
  }
  template <typename T>
  void operator()(const std::vector<T>& list) {
    (*this)(static_cast<uint32_t>(list.size()));
    for (const T& item : list) (*this)(item);
  }
  std::string& out() { return out_; }

 private:
  std::string out_;
};

// Reads what PlanWriter wrote; ok() is false once anything was short or too long.
class PlanReader {
 public:
  explicit PlanReader(const std::string& in) : in_(in) {}
  void operator()(uint32_t& v) {
    if (!Take(sizeof(v))) return;
    std::memcpy(&v, in_.data() + pos_ - sizeof(v), sizeof(v));
  }
  void operator()(std::string& v) {
    uint32_t size = 0;
    (*this)(size);
    if (!Take(size)) return;
    v.assign(in_, pos_ - size, size);
  }
  template <typename T>
  void operator()(std::vector<T>& list) {
    uint32_t size = 0;
    (*this)(size);
    if (!ok_ || size > in_.size() - pos_) {  // every item takes at least a byte
      ok_ = false;
      return;
    }
    list.resize(size);
    for (T& item : list) (*this)(item);
  }
  bool ok() const { return ok_ && pos_ == in_.size(); }

 private:
  bool Take(size_t n) {
    if (!ok_ || n > in_.size() - pos_) ok_ = false;
    if (ok_) pos_ += n;
    return ok_;
  }
  const std::string& in_;
  size_t pos_ = 0;
  bool ok_ = true;
};

// `read` or `send` (MSG_NOSIGNAL: EPIPE, not SIGPIPE) until done; false on an error or EOF.
bool Transfer(int fd, char* data, size_t size, bool sending) {
  while (size > 0) {
    ssize_t n = sending ? send(fd, data, size, MSG_NOSIGNAL) : read(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

bool SendAll(int fd, const void* data, size_t size) {
  return Transfer(fd, const_cast<char*>(static_cast<const char*>(data)), size, true);
}

bool ReadAll(int fd, void* data, size_t size) {
  return Transfer(fd, static_cast<char*>(data), size, false);
}

// The agent's sanitizer settings, so that a sanitizer build's supervisor reports like the agent.
std::vector<std::string> SupervisorEnvironment() {
  std::vector<std::string> env;
  for (const char* name : {"ASAN_OPTIONS", "UBSAN_OPTIONS", "LSAN_OPTIONS"}) {
    if (const char* value = getenv(name)) env.push_back(std::string(name) + "=" + value);
  }
  return env;
}

// Starts `supervisor __supervise` in a session of its own, with no signal blocked or handled,
// stdio on /dev/null, the report pipe's write end as kReportFd, the control socket's shim end as
// kControlFd and no other descriptor.
// A supervisor started, or posix_spawn's errno.
struct Spawned {
  pid_t pid = -1;
  int error = 0;  // 0: started
};

Spawned SpawnSupervisor(const std::string& supervisor, int report_fd, int control_fd) {
  // Above the targets first, so that one dup2 cannot overwrite the other's source (an agent
  // started with stdio closed has its pipes at 0-3).
  const int report = fcntl(report_fd, F_DUPFD_CLOEXEC, kFirstFreeFd);
  const int control = fcntl(control_fd, F_DUPFD_CLOEXEC, kFirstFreeFd);
  if (report < 0 || control < 0) {
    const int e = errno;
    if (report >= 0) close(report);
    if (control >= 0) close(control);
    return {-1, e};
  }
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  for (int stdio : {STDIN_FILENO, STDOUT_FILENO, STDERR_FILENO}) {
    posix_spawn_file_actions_addopen(&actions, stdio, "/dev/null", O_RDWR, 0);
  }
  posix_spawn_file_actions_adddup2(&actions, report, kReportFd);
  posix_spawn_file_actions_adddup2(&actions, control, kControlFd);
  posix_spawn_file_actions_addclosefrom_np(&actions, kFirstFreeFd);
  posix_spawnattr_t attr;
  posix_spawnattr_init(&attr);
  sigset_t none;
  sigset_t all;
  sigemptyset(&none);
  sigfillset(&all);
  posix_spawnattr_setsigmask(&attr, &none);
  posix_spawnattr_setsigdefault(&attr, &all);
  posix_spawnattr_setflags(&attr,
                           POSIX_SPAWN_SETSIGMASK | POSIX_SPAWN_SETSIGDEF | POSIX_SPAWN_SETSID);
  std::vector<std::string> env = SupervisorEnvironment();
  std::vector<char*> envp = PointerArray(env);
  char* const argv[] = {const_cast<char*>("corral"), const_cast<char*>(kSuperviseCommand), nullptr};
  pid_t pid = 0;
  const int e = posix_spawn(&pid, supervisor.c_str(), &actions, &attr, argv, envp.data());
  posix_spawnattr_destroy(&attr);
  posix_spawn_file_actions_destroy(&actions);
  close(report);
  close(control);
  return {e == 0 ? pid : -1, e};
}

// Reaps `shim`, which died or was told not to go on; its wait status in words.
std::string Reap(pid_t shim) {
  int status = 0;
  while (waitpid(shim, &status, 0) < 0 && errno == EINTR) {
  }
  return "wait status " + std::to_string(status);
}

// Whether StartShim may try the plan's fallback supervisor after an attempt.
enum class Fallback {
  kTry,  // the supervisor could not be started or refused the plan: nothing of the task ran
  kNo,   // the outcome stands
};

// One supervisor's attempt at StartShim().
struct Attempt {
  Fallback fallback = Fallback::kNo;
  Result<ShimStart> start = IoError("not attempted");
};

// Spawn errors that say the file cannot run as a supervisor, now or at all: missing, not
// executable, not a program, or being written (an upgrade copying over it).
bool CannotRun(int spawn_error) {
  return spawn_error == ENOENT || spawn_error == EACCES || spawn_error == ENOEXEC ||
         spawn_error == ETXTBSY;
}

Attempt TryShim(const std::string& supervisor, const std::string& body,
                const std::function<Status(pid_t shim_pid)>& before_task) {
  int report_pipe[2];
  if (pipe2(report_pipe, O_CLOEXEC) != 0)
    return {Fallback::kNo, IoError("pipe: " + ErrnoText(errno))};
  // A socket, not a pipe, so that writing to a shim that died is EPIPE, not SIGPIPE.
  int control[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, control) != 0) {
    int e = errno;
    close(report_pipe[0]);
    close(report_pipe[1]);
    return {Fallback::kNo, IoError("socketpair: " + ErrnoText(e))};
  }
  const Spawned spawned = SpawnSupervisor(supervisor, report_pipe[1], control[1]);
  close(report_pipe[1]);
  close(control[1]);
  if (spawned.error != 0) {
    close(report_pipe[0]);
    close(control[0]);
    return {CannotRun(spawned.error) ? Fallback::kTry : Fallback::kNo,
            IoError("cannot start the task supervisor " + supervisor + ": " +
                    ErrnoText(spawned.error))};
  }
  const pid_t shim = spawned.pid;
  const uint32_t size = static_cast<uint32_t>(body.size());
  const bool sent =
      SendAll(control[0], &size, sizeof(size)) && SendAll(control[0], body.data(), body.size());
  // The agent's record is written while the shim loads and reads the plan.
  Status ready = sent ? before_task(shim) : Status::Ok();
  char accepted = 0;
  const bool agreed =
      sent && ready.ok() && ReadAll(control[0], &accepted, 1) && accepted == kAccepted;
  const char go = 'g';
  const bool went = agreed && SendAll(control[0], &go, 1);
  close(control[0]);
  if (!went) {
    close(report_pipe[0]);
    const std::string how = Reap(shim);
    if (!ready.ok()) return {Fallback::kNo, ready};
    // Died before accepting the plan: not started (ENOEXEC found later), or another build.
    if (!agreed) {
      return {Fallback::kTry, FailedPrecondition("task supervisor " + supervisor +
                                                 " did not accept the plan (" + how + ")")};
    }
    return {Fallback::kNo, IoError("task supervisor " + supervisor +
                                   " died before starting the task (" + how + ")")};
  }
  Report report = {};
  const bool reported = ReadAll(report_pipe[0], &report, sizeof(report));
  close(report_pipe[0]);
  if (!reported) {
    return {Fallback::kNo,
            IoError("task supervisor died while starting the task (" + Reap(shim) + ")")};
  }
  ShimStart start;
  start.supervisor = supervisor;
  start.shim_pid = shim;
  start.task_pid = report.task_pid;
  start.failed_step = static_cast<ShimStep>(report.failed_step);
  start.error = report.error;
  start.cgroup_error = report.cgroup_error;
  return {Fallback::kNo, std::move(start)};
}

}  // namespace

// The plan's format (VisitPlan): bump it with every change, so that two builds of one commit
// with uncommitted changes ("-dirty") that write different plans still differ.
constexpr int kPlanFormat = 2;

const std::string& ShimBuild() {
  static const std::string build =
      std::string(kVersion) + " " + kCommit + " plan " + std::to_string(kPlanFormat);
  return build;
}

Result<ShimStart> StartShim(const ShimPlan& plan,
                            const std::function<Status(pid_t shim_pid)>& before_task) {
  PlanWriter writer;
  writer(plan.build);
  VisitPlan(writer, plan);
  const std::string& body = writer.out();
  if (body.size() > kMaxPlanBytes) {
    return InvalidArgument("task too large to start: " + std::to_string(body.size()) +
                           " bytes of command line and environment");
  }
  Attempt attempt = TryShim(plan.supervisor, body, before_task);
  if (attempt.fallback == Fallback::kTry && !plan.fallback_supervisor.empty() &&
      plan.fallback_supervisor != plan.supervisor) {
    Attempt second = TryShim(plan.fallback_supervisor, body, before_task);
    if (!second.start.ok()) {
      const Status& first = attempt.start.status();
      const Status& then = second.start.status();
      return Status(then.code(), first.message() + "; then " + then.message());
    }
    return std::move(second.start);
  }
  return std::move(attempt.start);
}

int SuperviseMain() {
  uint32_t size = 0;
  if (!ReadAll(kControlFd, &size, sizeof(size)) || size > kMaxPlanBytes) return 2;
  std::string body(size, '\0');
  if (!ReadAll(kControlFd, body.data(), body.size())) return 2;
  PlanReader reader(body);
  // Another build's plan may not even parse: its build, first on the wire, decides alone.
  std::string build;
  reader(build);
  if (build != ShimBuild()) return kShimRefusedPlan;
  ShimPlan plan;
  plan.build = std::move(build);
  VisitPlan(reader, plan);
  if (!reader.ok()) return 2;
  if (!SendAll(kControlFd, &kAccepted, 1)) return 2;
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
