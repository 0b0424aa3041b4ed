// Group commit for job submissions. Many threads call Submit(); each blocks until its job is
// committed and gets its id ("a submission is acknowledged only after commit"). One writer
// thread takes whatever submissions are waiting (up to max_batch) and inserts them with one
// Store::InsertJobs transaction, so N waiting submissions cost one commit (one fsync) instead of
// N. While one batch commits, the next one gathers, so a lone submission is committed at once
// and a busy server batches by itself. It is the group commit of group_commit.h (which
// WriteBatcher shares), with its adaptive linger: when fewer submissions are waiting than the
// last batch held, the writer waits for more, at most a quarter of the last commit's duration
// and never more than max_linger. A lone client never waits.
//
// Thread safety: Submit and Close may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>

#include "store/group_commit.h"
#include "store/store.h"

namespace corral::store {

class SubmissionBatcher {
 public:
  struct Options {
    size_t max_batch = 256;                      // jobs per transaction at most
    std::chrono::microseconds max_linger{1000};  // the linger (above); 0 disables it
  };
  struct Stats {
    int64_t jobs = 0;     // jobs committed
    int64_t batches = 0;  // InsertJobs transactions that committed
    size_t largest_batch = 0;
  };

  // Starts the writer thread. `store` is not owned and must outlive the batcher.
  explicit SubmissionBatcher(Store* store) : SubmissionBatcher(store, Options()) {}
  SubmissionBatcher(Store* store, Options options);
  // Close(), then waits until every submission already taken is answered.
  ~SubmissionBatcher() = default;
  SubmissionBatcher(const SubmissionBatcher&) = delete;
  SubmissionBatcher& operator=(const SubmissionBatcher&) = delete;

  // Inserts `job` (see Store::InsertJob) and returns its id once committed, or the error that
  // job met. One invalid job does not fail the others of its batch: a batch that fails for a
  // reason tied to its jobs (invalid argument, missing user or project, ...) is retried job by
  // job. After Close(): FailedPrecondition.
  Result<JobId> Submit(JobRecord job);

  // Stops taking submissions; those already queued are still committed. Idempotent.
  void Close() { committer_.Close(); }

  Stats stats() const;

 private:
  GroupCommitter<JobRecord, Result<JobId>> committer_;
};

}  // namespace corral::store
