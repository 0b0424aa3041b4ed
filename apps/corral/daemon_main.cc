// corral-daemon: the controller, the node agent, `corral dev`, `corral launch` and the agent's
// task supervisor (daemon_commands.h). People run it as `corral NAME ...`: the client
// (client_main.cc) execv()s it with the same argv. This file only parses the top-level command
// line and hands over to the subcommands.
#include <CLI/CLI.hpp>
#include <iostream>
#include <string_view>

#include "agent/agent_command.h"
#include "agent/launch_command.h"
#include "agent/shell_server.h"
#include "agent/shim.h"
#include "dev_command.h"
#include "server/server_command.h"
#include "top_level.h"

int main(int argc, char** argv) {
  // A task's supervisor (agent/shim.h), started by the agent: nothing else is set up for it.
  if (argc == 2 && std::string_view(argv[1]) == corral::agent::kSuperviseCommand) {
    return corral::agent::SuperviseMain();
  }
  CLI::App app;
  corral::SetUpTopLevel(app);
  int exit_code = 0;
  corral::AddDevCommand(app, &exit_code);
  corral::server::AddServerCommand(app, &exit_code);
  corral::agent::AddAgentCommand(app, &exit_code);
  corral::agent::AddLaunchCommand(app, &exit_code);
  corral::agent::AddShellServerCommand(app, &exit_code);
  return corral::ParseAndRun(app, argc, argv, exit_code);
}
