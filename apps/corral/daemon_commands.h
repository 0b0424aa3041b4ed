// The commands that run in corral-daemon, the executable installed next to `corral` (the client):
// the long-running processes and the heavy code (server, store, agent). The simulator runs in the
// client's process (client_main.cc): it needs none of the daemon's libraries. `corral NAME`
// for each of these execv()s corral-daemon with the same argv before parsing anything
// (client_main.cc), so `corral server ...` works as it always did while the client itself loads
// neither OpenSSL, cpp-httplib nor SQLite (docs/decisions.md, "Two executables").
#pragma once

#include <array>
#include <string_view>

namespace corral {

// The daemon executable's file name; it lives in the client's folder.
inline constexpr char kDaemonExecutable[] = "corral-daemon";

struct DaemonCommand {
  std::string_view name;
  std::string_view summary;  // the line `corral --help` shows for it
};

// Every command of corral-daemon, in the order `corral --help` lists them; "__supervise" (the
// agent's task supervisor, agent/shim.h) and "__shell" (the pty server of an interactive shell's
// task, agent/shell_server.h) are hidden. The summaries repeat the daemon's own.
inline constexpr std::array<DaemonCommand, 6> kDaemonCommands{{
    {"dev", "Run a one-machine cluster: server and agent together"},
    {"server", "Run the controller: API, scheduler, agent gateway"},
    {"agent", "Run the node agent: join a server, run its tasks"},
    {"launch", "Start the processes of one part of a distributed job (run by the agent)"},
    {"__supervise", ""},
    {"__shell", ""},
}};

// Whether `argv1` names a command of corral-daemon.
constexpr bool IsDaemonCommand(std::string_view argv1) {
  for (const DaemonCommand& c : kDaemonCommands) {
    if (c.name == argv1) return true;
  }
  return false;
}

}  // namespace corral
