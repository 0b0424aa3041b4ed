// What both executables' main() share (client_main.cc, daemon_main.cc): the top-level app and
// how a parse ends. Header-only: each executable compiles it once.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>

#include "common/build_info.h"

namespace corral {

// The top-level app: one subcommand required, --version.
inline void SetUpTopLevel(CLI::App& app) {
  app.description("corral — pools GPU servers into one shared cluster");
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("corral ") + kVersion + " (commit " + kCommit + ")");
}

// Parses argv into `app` and runs what it names: `exit_code` as the command set it, 0 for help
// and --version, 2 for a usage error, 1 for anything thrown.
inline int ParseAndRun(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // Nothing should throw past a module boundary; if something does, fail cleanly.
    std::cerr << "corral: internal error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}

}  // namespace corral
