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
// does; the CLI's own errors (commands.h) are 1..6 and come with a "corral: ..." line on stderr.
inline constexpr int kExitTimeout = 124;    // timeout: as GNU timeout(1) exits
inline constexpr int kExitOom = 137;        // oom: 128 + SIGKILL, as a shell shows an OOM kill
inline constexpr int kExitCancelled = 130;  // cancelled: 128 + SIGINT, as an interrupted command
inline constexpr int kExitLost = 75;        // lost: EX_TEMPFAIL (sysexits.h), submit it again

inline constexpr std::chrono::milliseconds kFirstPoll{200};
inline constexpr std::chrono::milliseconds kMaxPoll{2000};

// What an ended job exits with: 0 succeeded; failed: the exit code of its first task (by index,
// of the last run) that exited non-zero, or 128 + the signal that ended it, else 1 (it failed
// before any task ended: a task that could not start); timeout, oom, cancelled and lost the
// constants above. A job not ended (a state this CLI does not know included) exits 1.
int JobExitCode(const protocol::JobView& job);

// Polls job `id` until it has ended (a final state, or one this CLI does not know) and returns
// its last view. Errors: the server's (not found, unreachable), a view that does not parse.
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
// polling until the job has ended and its last lines are read. Returns the bytes printed.
// Errors: the server's.
Result<int64_t> PrintLog(ApiClient& client, const LogRequest& request, std::ostream& out);

// The length of the log `request` names now (its `follow` aside), read without its text.
// Errors: the server's.
Result<int64_t> LogSize(ApiClient& client, const LogRequest& request);

}  // namespace corral::cli
