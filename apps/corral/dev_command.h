// `corral dev`: a complete one-machine cluster in one process — the server with SQLite in a
// data directory plus one agent (fake GPUs when the machine has none) — like `nomad agent -dev`.
#pragma once

#include <CLI/CLI.hpp>

namespace corral {

void AddDevCommand(CLI::App& app, int* exit_code);

}  // namespace corral
