// `corral agent`: the node agent daemon.
#pragma once

#include <CLI/CLI.hpp>

namespace corral::agent {

void AddAgentCommand(CLI::App& app, int* exit_code);

}  // namespace corral::agent
