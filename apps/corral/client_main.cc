// corral: the client (src/cli) — the commands that talk to a server — and the simulator
// (src/sim). The commands that run a daemon live in corral-daemon next to it
// (daemon_commands.h): for those this process only replaces itself with corral-daemon, before
// any parsing, with the same argv.
#include <unistd.h>

#include <CLI/CLI.hpp>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <string>
#include <string_view>

#include "cli/commands.h"
#include "daemon_commands.h"
#include "sim/sim_command.h"
#include "top_level.h"

namespace {

// corral-daemon's path: in the folder of this executable (/proc/self/exe, so a symlink to
// `corral` elsewhere still finds it).
// Empty when /proc/self/exe cannot be read (never a bare name: execv would look in the working
// folder).
std::string DaemonPath() {
  std::error_code ec;
  const std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (ec) return "";
  return (self.parent_path() / corral::kDaemonExecutable).string();
}

// Replaces this process with corral-daemon, same argv; returns only when it cannot.
int ExecDaemon(char** argv) {
  const std::string path = DaemonPath();
  if (path.empty()) {
    std::cerr << "corral: '" << argv[1] << "' runs in " << corral::kDaemonExecutable
              << ", but this executable's folder is unknown (/proc/self/exe cannot be read)\n";
    return 1;
  }
  execv(path.c_str(), argv);
  const int error = errno;
  std::cerr << "corral: '" << argv[1] << "' runs in " << corral::kDaemonExecutable
            << ", which cannot be started from " << path << ": " << std::strerror(error)
            << " (install " << corral::kDaemonExecutable << " in the same folder as corral)\n";
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc >= 2 && corral::IsDaemonCommand(argv[1])) return ExecDaemon(argv);
  CLI::App app;
  corral::SetUpTopLevel(app);
  int exit_code = 0;
  // The simulator runs here, not in corral-daemon: it links none of the daemon's libraries, and
  // one process start instead of two is most of a small simulation's time (docs/decisions.md,
  // "The simulator in the client"). Only its flags are built when it is named.
  if (argc >= 2 && std::string_view(argv[1]) == corral::sim::kSimCommand) {
    corral::sim::AddSimCommand(app, &exit_code);
    return corral::ParseAndRun(app, argc, argv, exit_code);
  }
  // Placeholders, so that --help lists them: argv[1] naming one never gets here.
  for (const corral::DaemonCommand& c : corral::kDaemonCommands) {
    if (!c.summary.empty()) app.add_subcommand(std::string(c.name), std::string(c.summary));
  }
  app.add_subcommand(corral::sim::kSimCommand, corral::sim::kSimSummary);
  corral::cli::AddClientCommands(app, &exit_code, argc >= 2 ? argv[1] : "");
  return corral::ParseAndRun(app, argc, argv, exit_code);
}
