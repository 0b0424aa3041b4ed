#include "agent/launch_command.h"

#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <iostream>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "agent/rendezvous.h"
#include "model/launcher.h"

namespace corral::agent {
namespace {

using Clock = std::chrono::steady_clock;

// Between SIGTERM and SIGKILL for the siblings of a process that failed.
constexpr auto kStopGrace = std::chrono::seconds(10);
constexpr Clock::time_point kNoDeadline = Clock::time_point::max();
// How long the output left in the pipes is copied once the processes have ended.
constexpr auto kDrainTime = std::chrono::seconds(2);

struct LaunchFlags {
  int procs = 0;
  bool hold = false;
  std::string output, error;  // files that also get stdout / stderr; none: ""
  bool truncate = false;
  std::vector<std::string> command;
  CLI::Option* procs_flag = nullptr;  // counted: given or not
};

// Blocks `signals` and returns a descriptor that reads them (signalfd; -1 with errno on error).
// Blocked rather than handled, so that they wait in the kernel until read.
int BlockAndOpen(const sigset_t& signals, sigset_t* previous_mask) {
  sigprocmask(SIG_BLOCK, &signals, previous_mask);
  return signalfd(-1, &signals, SFD_CLOEXEC);
}

// A stream of the processes copied into the command's own (the task's log) and a file.
struct Tee {
  int pipe = -1;     // read end; -1 once at its end
  int log = -1;      // STDOUT_FILENO or STDERR_FILENO
  int file = -1;     // the output file
  std::string name;  // the file's name, for the message when writing it fails
};

// Writes all of `data` to `fd`; false on an error.
bool WriteAll(int fd, const char* data, size_t size) {
  while (size > 0) {
    const ssize_t n = write(fd, data, size);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data += n;
    size -= static_cast<size_t>(n);
  }
  return true;
}

// Copies what `tee`'s pipe holds now (one read) to its log and file; false when it held
// nothing (its end: then closed, or nothing for now with O_NONBLOCK). A file that cannot be
// written any more is said once on stderr and left; the log goes on.
bool CopyOnce(Tee& tee) {
  char buffer[65536];
  const ssize_t n = read(tee.pipe, buffer, sizeof(buffer));
  if (n < 0 && errno == EINTR) return true;
  if (n <= 0) {
    if (n == 0 || errno != EAGAIN) {
      close(tee.pipe);
      tee.pipe = -1;
    }
    return false;
  }
  (void)WriteAll(tee.log, buffer, static_cast<size_t>(n));
  if (tee.file >= 0 && !WriteAll(tee.file, buffer, static_cast<size_t>(n))) {
    const std::string message = "corral launch: cannot write " + tee.name + ": " + strerror(errno) +
                                "; going on without it\n";
    (void)WriteAll(STDERR_FILENO, message.data(), message.size());
    tee.file = -1;
  }
  return true;
}

// The next signal from `fd`, or 0 when `deadline` passes first (kNoDeadline: never). Copies
// the tees' output while it waits.
int NextSignal(int fd, Clock::time_point deadline, std::vector<Tee>& tees) {
  while (true) {
    int timeout_ms = -1;
    if (deadline != kNoDeadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      timeout_ms = static_cast<int>(left.count());
    }
    std::vector<pollfd> polled = {{fd, POLLIN, 0}};
    for (const Tee& tee : tees) polled.push_back({tee.pipe, POLLIN, 0});  // -1: skipped
    if (poll(polled.data(), polled.size(), timeout_ms) <= 0) continue;    // EINTR, or the deadline
    for (size_t i = 0; i < tees.size(); ++i) {
      if (polled[i + 1].revents != 0) CopyOnce(tees[i]);
    }
    if ((polled[0].revents & POLLIN) == 0) continue;
    signalfd_siginfo info;
    if (read(fd, &info, sizeof(info)) == static_cast<ssize_t>(sizeof(info))) {
      return static_cast<int>(info.ssi_signo);
    }
  }
}

int Hold() {
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  const int fd = BlockAndOpen(stop, nullptr);
  if (fd < 0) {
    std::cerr << "corral launch: signalfd: " << strerror(errno) << "\n";
    return 1;
  }
  std::vector<Tee> none;
  NextSignal(fd, kNoDeadline, none);
  return 0;
}

std::map<std::string, std::string> InheritedEnvironment() {
  std::map<std::string, std::string> env;
  for (char** e = environ; *e != nullptr; ++e) {
    const char* eq = std::strchr(*e, '=');
    if (eq != nullptr) env.emplace(std::string(*e, static_cast<size_t>(eq - *e)), eq + 1);
  }
  return env;
}

// Forks process `local_rank` of `command`; returns its pid, or -1 (errno) if fork failed. The
// child restores `mask` (the signal mask from before BlockAndOpen()) and, where they are not
// -1, writes its stdout and stderr to `out` and `err`. Ranks are set with several processes;
// one process has those of its part (the agent's).
pid_t StartProcess(const std::vector<std::string>& command,
                   const std::map<std::string, std::string>& node_env, int local_rank, int procs,
                   const sigset_t& mask, int out, int err) {
  std::map<std::string, std::string> env = node_env;
  if (procs > 1) {
    for (const auto& [name, value] : RankEnvironment(node_env, local_rank)) env[name] = value;
  }
  std::vector<std::string> env_strings;
  env_strings.reserve(env.size());
  for (const auto& [name, value] : env) {
    env_strings.push_back(std::string(name).append("=").append(value));
  }
  // Prepared before fork(): the child allocates nothing (this process has one thread).
  std::vector<char*> envp;
  envp.reserve(env_strings.size() + 1);
  for (std::string& e : env_strings) envp.push_back(e.data());
  envp.push_back(nullptr);
  std::vector<char*> argv;
  argv.reserve(command.size() + 1);
  for (const std::string& a : command) argv.push_back(const_cast<char*>(a.c_str()));
  argv.push_back(nullptr);
  const std::string exec_failed = "corral launch: cannot run '" + command[0] + "': ";
  pid_t pid = fork();
  if (pid == 0) {
    if (out >= 0) dup2(out, STDOUT_FILENO);
    if (err >= 0) dup2(err, STDERR_FILENO);
    sigprocmask(SIG_SETMASK, &mask, nullptr);
    execvpe(argv[0], argv.data(), envp.data());
    const char* why = strerror(errno);
    (void)!write(STDERR_FILENO, exec_failed.data(), exec_failed.size());
    (void)!write(STDERR_FILENO, why, std::strlen(why));
    (void)!write(STDERR_FILENO, "\n", 1);
    _exit(127);
  }
  return pid;
}

void SignalAll(const std::map<pid_t, int>& running, int signal) {
  for (const auto& [pid, local_rank] : running) kill(pid, signal);
}

// Opens an output file as Slurm does (relative to the working folder); -1 after saying why.
int OpenOutput(const std::string& name, bool truncate) {
  const int fd = open(name.c_str(),
                      O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC | (truncate ? O_TRUNC : 0), 0644);
  if (fd < 0) {
    std::cerr << "corral launch: cannot open output file " << name << ": " << strerror(errno)
              << "\n";
  }
  return fd;
}

// The signals the command waits for: SIGCHLD, SIGTERM and SIGINT, which it acts on, and the
// rest a sender may aim at the task's process group (a warning signal before the time limit,
// SIGHUP, SIGUSR1...), which the processes got too and this command drops instead of dying of.
sigset_t WaitedSignals() {
  sigset_t waited;
  sigfillset(&waited);
  for (int synchronous : {SIGKILL, SIGSTOP, SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGABRT}) {
    sigdelset(&waited, synchronous);
  }
  return waited;
}

int RunProcs(const std::vector<std::string>& command, int procs, const LaunchFlags& f) {
  const sigset_t waited = WaitedSignals();
  sigset_t mask;  // restored in the processes started
  const int fd = BlockAndOpen(waited, &mask);
  if (fd < 0) {
    std::cerr << "corral launch: signalfd: " << strerror(errno) << "\n";
    return 1;
  }
  const std::map<std::string, std::string> node_env = InheritedEnvironment();
  // With output files, the processes write into pipes this command copies to the log and the
  // files (stderr to the output file too when no error file is given).
  std::vector<Tee> tees;
  int write_ends[2] = {-1, -1};  // the processes' stdout and stderr; -1: inherited
  // stderr goes to --error, else to --output; stdout to --output, else only to the log.
  const int out_file = f.output.empty() ? -1 : OpenOutput(f.output, f.truncate);
  const int err_file = f.error.empty() ? out_file : OpenOutput(f.error, f.truncate);
  if ((!f.output.empty() && out_file < 0) || (!f.error.empty() && err_file < 0)) return 1;
  for (int stream : {0, 1}) {
    const int file = stream == 0 ? out_file : err_file;
    if (file < 0) continue;
    int ends[2];
    if (pipe2(ends, O_CLOEXEC) != 0) {
      std::cerr << "corral launch: pipe: " << strerror(errno) << "\n";
      return 1;
    }
    write_ends[stream] = ends[1];
    tees.push_back({ends[0], stream == 0 ? STDOUT_FILENO : STDERR_FILENO, file,
                    stream == 0 || f.error.empty() ? f.output : f.error});
  }
  std::map<pid_t, int> running;  // pid -> local rank
  std::optional<int> result;     // the exit status, decided by the first failure or signal
  Clock::time_point kill_at = kNoDeadline;  // when to SIGKILL the processes left
  auto stop_others = [&](int status) {
    result = status;
    SignalAll(running, SIGTERM);
    kill_at = Clock::now() + kStopGrace;
  };
  for (int i = 0; i < procs; ++i) {
    pid_t pid = StartProcess(command, node_env, i, procs, mask, write_ends[0], write_ends[1]);
    if (pid < 0) {
      std::cerr << "corral launch: cannot start process " << i << ": " << strerror(errno)
                << "; stopping the others\n";
      stop_others(1);
      break;
    }
    running.emplace(pid, i);
  }
  for (int end : write_ends) {
    if (end >= 0) close(end);
  }
  while (!running.empty()) {
    const int signal = NextSignal(fd, kill_at, tees);
    if (signal == 0) {  // the grace of the siblings of a failed process is over
      SignalAll(running, SIGKILL);
      kill_at = kNoDeadline;
      continue;
    }
    if (signal != SIGCHLD && signal != SIGTERM && signal != SIGINT) continue;  // WaitedSignals
    if (signal != SIGCHLD) {
      if (!result) result = 128 + signal;
      SignalAll(running, signal);
      continue;
    }
    int status = 0;
    pid_t pid = 0;
    while ((pid = waitpid(-1, &status, WNOHANG)) > 0) {
      auto it = running.find(pid);
      if (it == running.end()) continue;
      const int local_rank = it->second;
      running.erase(it);
      const int code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
      // Every process's end is kept in the part's log, not only the first failure's.
      const std::string how = WIFEXITED(status)
                                  ? "exited with " + std::to_string(code)
                                  : "was killed by signal " + std::to_string(WTERMSIG(status));
      if (code != 0 && !result) {
        std::cerr << "corral launch: process " << local_rank << " " << how
                  << "; stopping the others\n";
        stop_others(code);
      } else if (code != 0) {
        std::cerr << "corral launch: process " << local_rank << " " << how << "\n";
      }
    }
  }
  // What the processes wrote before they ended; a process they left behind (killed with the
  // task's process group when this command exits) may still hold a pipe open: not waited for.
  // Bounded: a process left behind that keeps writing does not keep the command alive.
  const Clock::time_point drain_until = Clock::now() + kDrainTime;
  for (Tee& tee : tees) {
    if (tee.pipe < 0) continue;
    (void)fcntl(tee.pipe, F_SETFL, O_NONBLOCK);
    while (Clock::now() < drain_until && CopyOnce(tee)) {
    }
  }
  return result.value_or(0);
}

int RunLaunchCommand(const LaunchFlags& f) {
  const bool procs_given = f.procs_flag->count() > 0;
  if (f.hold) {
    if (!f.command.empty()) {
      std::cerr << "corral launch: --hold: takes no command\n";
      return 2;
    }
    return Hold();
  }
  if (!procs_given) {
    std::cerr << "corral launch: --procs or --hold is required\n";
    return 2;
  }
  if (f.command.empty()) {
    std::cerr << "corral launch: --procs: needs a command after --\n";
    return 2;
  }
  return RunProcs(f.command, f.procs, f);
}

}  // namespace

void AddLaunchCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<LaunchFlags>();
  CLI::App* c = app.add_subcommand(
      "launch", "Start the processes of one part of a distributed job (run by the agent)");
  f->procs_flag = c->add_option("--procs", f->procs, "Processes to start, each with its rank")
                      ->check(CLI::Range(1, model::kMaxProcsPerNode));
  CLI::Option* hold =
      c->add_flag("--hold", f->hold, "Start nothing; wait for SIGTERM or SIGINT, then exit 0");
  f->procs_flag->excludes(hold);
  c->add_option("--output", f->output,
                "A file that also gets the processes' stdout (and stderr, without --error)")
      ->excludes(hold);
  c->add_option("--error", f->error, "A file that also gets the processes' stderr")->excludes(hold);
  c->add_flag("--truncate", f->truncate, "Empty the files first (else append)")->excludes(hold);
  c->add_option("command", f->command, "The program and its arguments, after --");
  c->callback([f, exit_code] { *exit_code = RunLaunchCommand(*f); });
}

}  // namespace corral::agent
