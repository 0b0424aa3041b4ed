#include "agent/launch_command.h"

#include <errno.h>
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

struct LaunchFlags {
  int procs = 0;
  bool hold = false;
  std::vector<std::string> command;
  CLI::Option* procs_flag = nullptr;  // counted: given or not
};

// Blocks `signals` and returns a descriptor that reads them (signalfd; -1 with errno on error).
// Blocked rather than handled, so that they wait in the kernel until read.
int BlockAndOpen(const sigset_t& signals, sigset_t* previous_mask) {
  sigprocmask(SIG_BLOCK, &signals, previous_mask);
  return signalfd(-1, &signals, SFD_CLOEXEC);
}

// The next signal from `fd`, or 0 when `deadline` passes first (kNoDeadline: never).
int NextSignal(int fd, Clock::time_point deadline) {
  while (true) {
    int timeout_ms = -1;
    if (deadline != kNoDeadline) {
      const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) return 0;
      timeout_ms = static_cast<int>(left.count());
    }
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, timeout_ms) <= 0) continue;  // EINTR, or the deadline (checked above)
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
  NextSignal(fd, kNoDeadline);
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
// child restores `mask` (the signal mask from before BlockAndOpen()).
pid_t StartProcess(const std::vector<std::string>& command,
                   const std::map<std::string, std::string>& node_env, int local_rank,
                   const sigset_t& mask) {
  std::map<std::string, std::string> env = node_env;
  for (const auto& [name, value] : RankEnvironment(node_env, local_rank)) env[name] = value;
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

int RunProcs(const std::vector<std::string>& command, int procs) {
  sigset_t waited;
  sigemptyset(&waited);
  for (int signal : {SIGCHLD, SIGTERM, SIGINT}) sigaddset(&waited, signal);
  sigset_t mask;  // restored in the processes started
  const int fd = BlockAndOpen(waited, &mask);
  if (fd < 0) {
    std::cerr << "corral launch: signalfd: " << strerror(errno) << "\n";
    return 1;
  }
  const std::map<std::string, std::string> node_env = InheritedEnvironment();
  std::map<pid_t, int> running;  // pid -> local rank
  std::optional<int> result;     // the exit status, decided by the first failure or signal
  Clock::time_point kill_at = kNoDeadline;  // when to SIGKILL the processes left
  auto stop_others = [&](int status) {
    result = status;
    SignalAll(running, SIGTERM);
    kill_at = Clock::now() + kStopGrace;
  };
  for (int i = 0; i < procs; ++i) {
    pid_t pid = StartProcess(command, node_env, i, mask);
    if (pid < 0) {
      std::cerr << "corral launch: cannot start process " << i << ": " << strerror(errno)
                << "; stopping the others\n";
      stop_others(1);
      break;
    }
    running.emplace(pid, i);
  }
  while (!running.empty()) {
    const int signal = NextSignal(fd, kill_at);
    if (signal == 0) {  // the grace of the siblings of a failed process is over
      SignalAll(running, SIGKILL);
      kill_at = kNoDeadline;
      continue;
    }
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
  return RunProcs(f.command, f.procs);
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
  c->add_option("command", f->command, "The program and its arguments, after --");
  c->callback([f, exit_code] { *exit_code = RunLaunchCommand(*f); });
}

}  // namespace corral::agent
