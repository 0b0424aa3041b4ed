// Group commit for job submissions. Many threads call Submit(); each blocks until its job is
// committed and gets its id ("a submission is acknowledged only after commit"). One writer
// thread takes whatever submissions are waiting (up to max_batch) and inserts them with one
// Store::InsertJobs transaction, so N waiting submissions cost one commit (one fsync) instead of
// N. While one batch commits, the next one gathers, so a lone submission is committed at once
// and a busy server batches by itself.
//
// Linger: clients answered by one commit need a moment (a wake-up, a new request) to submit
// again; a writer that started the next commit at once would commit the first of them alone
// and make the others wait a whole commit. So when fewer submissions are waiting than the last
// batch held, the writer waits for more, at most a quarter of the last commit's duration and
// never more than max_linger (PostgreSQL's commit_delay, adaptive). A lone client never waits.
//
// Thread safety: Submit and Close may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <mutex>
#include <thread>

#include "store/store.h"

namespace corral::store {

class SubmissionBatcher {
 public:
  struct Options {
    size_t max_batch = 256;                      // jobs per transaction at most
    std::chrono::microseconds max_linger{1000};  // see "Linger" above; 0 disables it
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
  ~SubmissionBatcher();
  SubmissionBatcher(const SubmissionBatcher&) = delete;
  SubmissionBatcher& operator=(const SubmissionBatcher&) = delete;

  // Inserts `job` (see Store::InsertJob) and returns its id once committed, or the error that
  // job met. One invalid job does not fail the others of its batch: a batch that fails for a
  // reason tied to its jobs (invalid argument, missing user or project, ...) is retried job by
  // job. After Close(): FailedPrecondition.
  Result<JobId> Submit(JobRecord job);

  // Stops taking submissions; those already queued are still committed. Idempotent.
  void Close();

  Stats stats() const;

 private:
  struct Request;

  void WriterLoop();
  // Commits `batch` and answers every request in it.
  void Commit(const std::vector<Request*>& batch);

  Store* const store_;
  const Options options_;

  mutable std::mutex mu_;
  std::condition_variable work_;  // signalled when a request arrives or on Close
  std::deque<Request*> queue_;    // guarded by mu_; requests live on their callers' stacks
  bool closed_ = false;           // guarded by mu_
  Stats stats_;                   // guarded by mu_
  // Writer thread only: the previous batch's size and commit duration (for the linger).
  size_t last_batch_ = 0;
  std::chrono::steady_clock::duration last_commit_{};
  std::thread writer_;  // started last, in the constructor
};

}  // namespace corral::store
