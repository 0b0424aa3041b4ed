// What both executables' main() share (client_main.cc, daemon_main.cc): the top-level app and
// how a parse ends. Header-only: each executable compiles it once.
#pragma once

#include <CLI/CLI.hpp>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "common/build_info.h"
#include "common/strings.h"

namespace corral {

// The top-level app: one subcommand required, --version.
inline void SetUpTopLevel(CLI::App& app) {
  app.description("corral — pools GPU servers into one shared cluster");
  app.require_subcommand(1);
  app.set_version_flag("--version",
                       std::string("corral ") + kVersion + " (commit " + kCommit + ")");
}

// For a usage error in argv: the first word that names no subcommand where one is expected,
// or the first long flag the (sub)command lacks, said with the nearest known name ("did you
// mean"); "" when every word is known (the error is something else: a missing value, a bad
// number). Words after "--" are the job's, never looked at.
inline std::string UnknownWord(const CLI::App& app, int argc, char** argv) {
  const CLI::App* at = &app;
  std::string path = "corral";
  bool positional_seen = false;  // at `at`: a word taken as a positional argument
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") break;
    if (arg.rfind("--", 0) == 0) {
      const std::string flag = arg.substr(0, arg.find('='));
      if (const CLI::Option* known = at->get_option_no_throw(flag)) {
        // Its value is the next word ("--gpus 2"), unless given as "--gpus=2".
        if (known->get_type_size_max() > 0 && arg.find('=') == std::string::npos) ++i;
        continue;
      }
      // After the command's first word, an unknown flag is most likely the job's own.
      if (positional_seen) {
        return "unknown flag " + flag + " for '" + path + "': the job's own flags go after -- (" +
               path + " [FLAGS] -- COMMAND ARGS)";
      }
      std::vector<std::string> known;
      for (const CLI::Option* option : at->get_options()) {
        for (const std::string& name : option->get_lnames()) known.push_back(name);
      }
      const std::string near = NearestName(flag.substr(2), known);
      return "unknown flag " + flag + " for '" + path + "'" +
             (near.empty() ? "" : " (did you mean --" + near + "?)");
    }
    if (arg.rfind('-', 0) == 0) continue;  // a short flag: CLI11's own message says enough
    const auto named = at->get_subcommands(
        [&](const CLI::App* sub) { return !sub->get_name().empty() && sub->check_name(arg); });
    if (!named.empty()) {
      at = named.front();
      path += " " + arg;
      positional_seen = false;
      continue;
    }
    // A word where a subcommand is expected (the command takes no positional argument). Option
    // groups are subcommands without a name.
    const auto subcommands =
        at->get_subcommands([](const CLI::App* sub) { return !sub->get_name().empty(); });
    const bool positional =
        !at->get_options([](const CLI::Option* o) { return o->get_positional(); }).empty();
    if (subcommands.empty() || positional) {
      positional_seen = positional_seen || positional;
      continue;
    }
    std::vector<std::string> names;
    for (const CLI::App* sub : subcommands) {
      names.push_back(sub->get_name());
      for (const std::string& alias : sub->get_aliases()) names.push_back(alias);
    }
    const std::string near = NearestName(arg, names);
    return "unknown command '" + arg + "'" + (path == "corral" ? "" : " for '" + path + "'") +
           (near.empty() ? "" : " (did you mean '" + near + "'?)");
  }
  return "";
}

// Parses argv into `app` and runs what it names: `exit_code` as the command set it, 0 for help
// and --version, 2 for a usage error (naming an unknown command or flag with the nearest known
// one, UnknownWord), 1 for anything thrown.
inline int ParseAndRun(CLI::App& app, int argc, char** argv, const int& exit_code) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() != 0) {
      if (const std::string unknown = UnknownWord(app, argc, argv); !unknown.empty()) {
        std::cerr << "corral: " << unknown << "\nRun with --help for more information.\n";
        return 2;
      }
    }
    return app.exit(e) == 0 ? 0 : 2;
  } catch (const std::exception& e) {
    // Nothing should throw past a module boundary; if something does, fail cleanly.
    std::cerr << "corral: internal error: " << e.what() << "\n";
    return 1;
  }
  return exit_code;
}

}  // namespace corral
