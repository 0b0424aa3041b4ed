// The client commands of `corral`: login, submit, jobs, job show, logs, cancel, nodes, node,
// projects, project, users, user, tokens, token, whoami, environment, session, gpus, idle,
// usage, capacity. Tables by default, `-o json` everywhere. Exit codes: 0 ok, 1 server or
// connection failure, 2 bad input (usage, invalid spec), 3 not found, 4 not authenticated or not
// allowed, 5 conflict with the current state.
#pragma once

#include <CLI/CLI.hpp>

namespace corral::cli {

void AddClientCommands(CLI::App& app, int* exit_code);

}  // namespace corral::cli
