// `corral server`: the controller daemon.
#pragma once

#include <CLI/CLI.hpp>

namespace corral::server {

void AddServerCommand(CLI::App& app, int* exit_code);

}  // namespace corral::server
