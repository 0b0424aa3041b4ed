// The pty server of `corral shell` (docs/sessions.md, "Interactive shells"): what an interactive
// shell's task runs. The agent starts it in place of the job's command (LaunchSession::shell),
// under the task's supervisor, as the task user, in the job's working folder, with the task's
// environment:
//
//   corral-daemon __shell [--attach-timeout SECONDS] [--ping-interval SECONDS] -- [CMD ARGS...]
//
// It listens on CORRAL_SESSION_PORT and waits for one WebSocket handshake (RFC 6455) to
// CORRAL_SESSION_URL_PREFIX carrying `Authorization: token $CORRAL_SESSION_TOKEN` — the session
// gateway sends it after checking that the caller owns the job. Other requests get 400, 401 or
// 404 and the server goes on waiting. On the first good handshake it stops listening, opens a
// pty (forkpty) and runs CMD on it, or without one the task user's login shell ($SHELL from the
// password database, else /bin/bash, else /bin/sh, started as "-NAME"), with the environment it
// was given less CORRAL_SESSION_TOKEN. Then it relays: binary frames are terminal bytes both
// ways, a client's text frame is a resize (protocol/shell_messages.h, TIOCSWINSZ), and when the
// shell ends (SIGCHLD; background jobs may still hold the pty) it relays what the pty still
// holds, sends {"exit": CODE} and a close frame, hangs up the rest of the shell's session and
// exits with CODE (128 + N for signal N).
//
// The client going away (close frame, end of connection, a bad frame) hangs the shell up
// (SIGHUP to every process of its session, SIGKILL 5 s later: well inside the agent's kill
// grace, since the session is outside the task's process group), and so do SIGTERM, SIGINT and
// SIGHUP to the server (the agent cancelling the job), which then sends an attached client the
// exit frame. So does a client that leaves two pings unanswered (one every 30 s by default:
// a dead connection no packet reports). Other signals whose default would end the server (SIGUSR1,
// a time limit's warning) go to the pty's foreground process group instead. No handshake within the
// attach timeout (default 300 s): exit 1 with a message on stderr. Frames are bounded
// (protocol::kMaxShellFrame).
#pragma once

#include <string>

namespace CLI {
class App;
}  // namespace CLI

namespace corral::agent {

// The hidden subcommand of corral-daemon that runs the pty server.
inline constexpr char kShellServerCommand[] = "__shell";

void AddShellServerCommand(CLI::App& app, int* exit_code);

// The Sec-WebSocket-Accept value for a handshake's Sec-WebSocket-Key (RFC 6455, 4.2.2).
std::string WebSocketAccept(const std::string& key);

}  // namespace corral::agent
