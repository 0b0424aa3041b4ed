// `corral launch`: what a part of a distributed job runs on its node (rendezvous.h, LaunchArgv),
// as the task user, under the task's supervisor.
//
//   corral launch --procs P -- CMD [ARGS...]
//     Starts P processes of CMD (PATH is searched), process i with the inherited environment
//     plus RankEnvironment(environment, i) (RANK, LOCAL_RANK, ...), all in the caller's process
//     group. Exits when all have: 0 when all exited 0. When one exits non-zero or by a signal,
//     the others get SIGTERM, SIGKILL 10 s later, and the command exits with that process's
//     status (its exit code, or 128 + its signal). A SIGTERM or SIGINT to the command is
//     passed on to every process (no SIGKILL: the sender owns the grace); the command then
//     waits for them and exits with 128 + that signal (143 for SIGTERM). A CMD that cannot be
//     exec'd exits 127 with a message on stderr.
//   corral launch --procs P [--output FILE] [--error FILE] [--truncate] -- CMD [ARGS...]
//     The same, and what the processes write to stdout (and stderr, without --error) is also
//     written to the --output FILE (stderr alone to the --error FILE), opened relative to the
//     working folder as the task's user (O_APPEND; emptied first with --truncate), as Slurm's
//     --output: the command copies it through pipes to its own stdout / stderr (the task's log) and
//     the files. A file it cannot open: exit 1 with a message on stderr before anything starts.
//     With P == 1 the process gets no rank variables of its own (its part's are in the environment
//     already). Signals other than SIGTERM, SIGINT and SIGCHLD (a warning signal before the time
//     limit, sent to the task's process group) are left to the processes, which got them too.
//   corral launch --hold
//     Waits for SIGTERM or SIGINT, then exits 0 (mpi: the parts other than part 0 hold their
//     node while mpirun, started by part 0, uses it).
//
// Prints nothing on success. Bad flags: exit 2 with a message naming the flag.
#pragma once

#include <CLI/CLI.hpp>

namespace corral::agent {

void AddLaunchCommand(CLI::App& app, int* exit_code);

}  // namespace corral::agent
