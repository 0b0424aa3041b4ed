// `corral sim fill|replay|predict|gen`: the simulator's command line. The flags and the JSON output
// are a contract that scripts depend on (issue 2); see docs/simulator.md.
#pragma once

#include <CLI/CLI.hpp>

namespace corral::sim {

// The subcommand's name and the line `corral --help` shows for it.
inline constexpr char kSimCommand[] = "sim";
inline constexpr char kSimSummary[] = "Run the scheduler over traces on a virtual clock";

// Adds the `sim` subcommand tree to `app`. The callbacks set *exit_code (0 ok, 1 run failure,
// 2 bad input) and print results to stdout, errors to stderr.
void AddSimCommand(CLI::App& app, int* exit_code);

}  // namespace corral::sim
