// Retention of finished jobs (docs/monitoring.md, "Retention of finished jobs"): the leader
// deletes the jobs that ended longer ago than the retention (`corral server --keep-finished`,
// 90 days by default, as Slurm's accounting purge), with their task rows, events and output on
// disk, so that the store and the logs folder stop growing with every job ever run. What usage
// reports read is kept apart from the jobs (the GPU time per day, user and project:
// store::GpuUsageRow); what capacity planning's forecast needs of the purged jobs, their GPU
// demand per hour, is written in the transaction that deletes them (store::DemandHour). The job
// ids of purged jobs are never given again.
//
// A purge runs once when the leader starts and then every `period`, in batches of `batch_jobs`
// jobs: each batch is one short transaction (other writers get the store between batches), and
// its jobs' output is removed just before it (a job past its retention may lose its output an
// instant before its record; never the other way round, so no output is left behind by a crash).
//
// The same thread removes the checkpoint folders (checkpoint_folders.h) of jobs that ended longer
// ago than `keep_checkpoints` (--checkpoint-retention, 7 days by default), when the server's
// --checkpoint-root is reachable from it (on `corral dev` it is): RemoveCheckpointsOnce.
//
// Thread-safe: Start/Stop from the owner; PurgeOnce from any thread (one purge at a time).
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/clock.h"
#include "common/ids.h"
#include "common/status.h"
#include "server/control/log_sink.h"
#include "store/store.h"

namespace corral::server {

class JobRetention {
 public:
  static constexpr Seconds kDefaultKeepFinished{90 * 86400};
  static constexpr int64_t kDefaultBatchJobs = 1000;
  static constexpr Seconds kDefaultKeepCheckpoints{7 * 86400};
  // The checkpoint folders one removal looks at (the next job ids after the last pass's).
  static constexpr size_t kMaxCheckpointFolders = 10000;

  struct Options {
    // Jobs that ended longer ago than this are purged; none: kept forever.
    std::optional<Seconds> keep_finished = kDefaultKeepFinished;
    Seconds period{3600};
    int64_t batch_jobs = kDefaultBatchJobs;  // 1..store::Store::kMaxPurgeBatch
    // The jobs' checkpoint folders (ControllerConfig::checkpoint_root; empty: none), removed
    // this long after their job ended; none: kept.
    std::string checkpoint_root;
    std::optional<Seconds> keep_checkpoints = kDefaultKeepCheckpoints;
    size_t checkpoint_folders_per_pass = kMaxCheckpointFolders;  // 1..kMaxCheckpointFolders
  };

  // What one purge did.
  struct Purge {
    int64_t jobs = 0;     // jobs deleted
    int64_t batches = 0;  // transactions that deleted some
  };

  // Borrows the store, the log sink and the clock (they must outlive it).
  JobRetention(store::Store& store, LogSink& logs, Clock& clock, Options options);
  ~JobRetention();
  JobRetention(const JobRetention&) = delete;
  JobRetention& operator=(const JobRetention&) = delete;

  // Starts the thread (a purge and a removal at once, then every period) / stops it, waiting for
  // a batch in flight. Without a retention (neither keep_finished nor checkpoint folders to
  // remove) no thread runs.
  void Start();
  void Stop();

  // Purges now every job that ended before the clock's now − keep_finished (nothing without a
  // retention). A store error stops the purge there (what was committed stays purged; the next
  // period goes on); output and checkpoint folders that could not be removed are reported on
  // stderr and do not stop it (a purged job's checkpoint folder goes before its row).
  Result<Purge> PurgeOnce();
  // Removes the checkpoint folder of every job that ended before the clock's now −
  // keep_checkpoints (at most checkpoint_folders_per_pass folders looked at, lowest ids after the
  // previous call's last, starting over past the highest); returns how many went. Folders of
  // jobs the store does not know (never a job's: a purge removes its jobs' folders first) and of
  // jobs not ended are left. Stops between folders once Stop() was called. A folder that cannot be
  // removed (a task user's files the server may not delete) is reported on stderr and does not stop
  // the others. Without a root or a retention: nothing.
  Result<int64_t> RemoveCheckpointsOnce();

 private:
  void Loop();

  store::Store& store_;
  LogSink& logs_;
  Clock& clock_;
  const Options options_;
  std::mutex purge_mu_;         // one purge at a time
  JobId checkpoint_cursor_{0};  // guarded by purge_mu_: RemoveCheckpointsOnce's next start
  std::mutex mu_;               // guards stopping_
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

// The shortest --keep-finished taken: a shorter one is far more likely a slip ("90" for 90 days
// is 90 seconds) than a wish to lose every finished job within the hour.
inline constexpr Seconds kMinKeepFinished{3600};
// --keep-finished: a duration as common/duration.h parses it ("90d", "12h"; at least
// kMinKeepFinished), or "0" / "forever" for none. InvalidArgument naming `flag`.
Result<std::optional<Seconds>> ParseKeepFinished(const std::string& text, const std::string& flag);

}  // namespace corral::server
