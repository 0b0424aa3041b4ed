// The client commands of `corral`: login, submit, jobs, job show, logs, cancel, nodes, node,
// projects, project, queue, policy, users, user, tokens, token, whoami, environment, session,
// gpus, idle, usage, capacity. Tables by default, `-o json` everywhere. Exit codes: 0 ok, 1 server
// or connection failure, 2 bad input (usage, invalid spec), 3 not found, 4 not authenticated or not
// allowed, 5 conflict with the current state, 6 a limit reached (try again later); `submit
// --wait` exits with the job's own code instead (cli/job_wait.h).
#pragma once

#include <CLI/CLI.hpp>
#include <string_view>

namespace corral::cli {

// Adds the client commands to `app`. `command` is argv[1] (or empty): when it names a client
// command, only the group of commands it belongs to is added, as the others cannot be reached
// and building their flags is most of the CLI's start-up work; otherwise (help, an option, a
// misspelt command and its did-you-mean) all of them.
void AddClientCommands(CLI::App& app, int* exit_code, std::string_view command = {});

}  // namespace corral::cli
