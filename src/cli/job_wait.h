// Waiting for jobs from the command line: `corral submit --wait` and `--follow`, `corral logs`.
// A job's end becomes the CLI's exit code (JobExitCode, docs/control-plane.md, "Waiting for a
// job"); a job's output is read page by page, and followed until the job ends (PrintLog).
//
// Waiting polls the job's view (GET /api/v1/jobs/ID): every kFirstPoll at first, backing off to
// kMaxPoll, as a job that has run for minutes rarely ends in the next second.
#pragma once

#include <chrono>
#include <optional>
#include <ostream>
#include <vector>

#include "cli/api_client.h"
#include "common/ids.h"
#include "common/status.h"
#include "protocol/api_job.h"

namespace corral::cli {

// The exit codes of a job that ended without an exit code of its own. Beside them, a job that
// failed exits with its task's code (1..255), or 128 + N when signal N ended it, as a shell
// does. While waiting, the CLI's own failures (a refused submission, a server lost) exit
// kExitCorral instead of their usual codes (commands.h), as `docker run` does.
inline constexpr int kExitTimeout = 124;    // timeout: as GNU timeout(1) exits
inline constexpr int kExitCorral = 125;     // corral itself failed (the message says how)
inline constexpr int kExitOom = 137;        // oom: 128 + SIGKILL, as a shell shows an OOM kill
inline constexpr int kExitCancelled = 143;  // cancelled: 128 + SIGTERM, what its tasks were sent
inline constexpr int kExitLost = 75;        // lost: EX_TEMPFAIL (sysexits.h), submit it again

inline constexpr std::chrono::milliseconds kFirstPoll{200};
inline constexpr std::chrono::milliseconds kMaxPoll{2000};

// What an ended job exits with: 0 succeeded; failed: the exit code of its first task (by index,
// of the last run; one that ended on its own before one corral stopped) that exited non-zero,
// or 128 + the signal that ended it, else 1 (it failed before any task ended: a task that could
// not start); timeout, oom, cancelled and lost the constants above. A job not ended exits 1.
int JobExitCode(const protocol::JobView& job);

// Polls job `id` until it has ended and returns its last view. Errors: the server's (not found,
// unreachable), FailedPrecondition for a state this CLI does not know (a newer server's), a
// view that does not parse.
Result<protocol::JobView> WaitForJob(ApiClient& client, JobId id);

// Which of a task's outputs `PrintLog` reads.
enum class LogStream { kStdout, kStderr };

struct LogRequest {
  JobId job;
  int task = 0;
  LogStream stream = LogStream::kStdout;
  std::optional<int64_t> generation;  // none: the job's latest run
  bool follow = false;                // keep reading until the job ends
};

// Prints the log `request` names to `out` from its start, page by page; with `follow`, goes on
// polling until the job has ended and its last lines are read. Returns the log offset it reached
// (0: the log was empty; past the bytes printed when older output had been dropped).
// Errors: the server's.
Result<int64_t> PrintLog(ApiClient& client, const LogRequest& request, std::ostream& out);

// The length of the log `request` names now (its `follow` aside), read without its text.
// Errors: the server's.
Result<int64_t> LogSize(ApiClient& client, const LogRequest& request);

}  // namespace corral::cli
