// The client side of `corral shell [submit flags] [-- CMD ARGS...]` (docs/sessions.md,
// "Interactive shells"): salloc / srun --pty for corral. The command (commands.cc) builds the job
// spec from corral submit's flags; RunShell() submits it as a session whose `shell` is true,
// waits until it runs (saying why it waits), attaches the terminal to the task's pty server
// (agent/shell_server.h) through the session gateway over a WebSocket, and returns the remote
// shell's exit code.
//
// The terminal: with a tty on stdin it is put in raw mode (restored on every way out, SIGTERM
// and SIGHUP included), so Ctrl-C and Ctrl-Z travel as bytes; the window size is sent at the
// start and on every SIGWINCH. Without one (a pipe) the bytes are sent as they are, with 80x24,
// and the end of stdin is sent as Ctrl-D (again every half second until the shell ends), which
// ends a shell waiting at its prompt. SIGINT or
// SIGTERM while waiting for the allocation cancels the job.
#pragma once

#include <nlohmann/json.hpp>

#include "cli/api_client.h"
#include "common/status.h"

namespace corral::cli {

// The spec's `session` of a shell: no idle timeout (the shell ends with its connection instead).
nlohmann::json ShellSession();

// Runs the shell of `spec` (a checked job spec with ShellSession()) to its end: its exit code
// (128 + N when a signal N killed it). Errors: the submission's; the job ending before the shell
// was reached (FailedPrecondition); the gateway refusing the connection (its status's code);
// the connection lost before the shell said how it ended (IoError).
Result<int> RunShell(ApiClient& client, const nlohmann::json& spec);

}  // namespace corral::cli
