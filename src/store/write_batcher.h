// Group commit for the controller's writes (a heartbeat's task updates and job transitions, a
// cancel): the controller decides under its lock, queues the decision's WriteBatch here,
// releases the lock, waits until the batch is durable, and only then applies it to memory. One
// writer thread takes whatever batches are waiting (up to max_batch) and commits them with one
// Store::ApplyGroup transaction, so N waiting batches cost one commit (one fsync) instead of N.
// It is the group commit of group_commit.h, shared with SubmissionBatcher: the same adaptive
// linger, and the same rule on failures (a group refused for one of its batches is committed
// batch by batch, in order, so that only that batch fails; a store-wide failure answers every
// batch of the group with the error).
//
// Order: batches are committed in the order they were queued (a batch sees the writes of every
// batch queued before it), and their futures become ready in that order.
//
// Thread safety: Enqueue, Close and stats may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <future>

#include "store/group_commit.h"
#include "store/store.h"

namespace corral::store {

class WriteBatcher {
 public:
  struct Options {
    size_t max_batch = 256;                      // WriteBatches per transaction at most
    std::chrono::microseconds max_linger{1000};  // the linger (group_commit.h); 0 disables it
  };
  struct Stats {
    int64_t batches = 0;  // WriteBatches committed
    int64_t commits = 0;  // ApplyGroup/Apply transactions that committed
    size_t largest_group = 0;
  };

  // Starts the writer thread. `store` is not owned and must outlive the batcher.
  explicit WriteBatcher(Store* store);
  WriteBatcher(Store* store, Options options);
  // Close(), then waits until every batch already taken is answered.
  ~WriteBatcher();
  WriteBatcher(const WriteBatcher&) = delete;
  WriteBatcher& operator=(const WriteBatcher&) = delete;

  // Queues `batch` (stamped `now`) and returns at once. The future becomes ready once the
  // batch's group committed (Ok) or failed (the error this batch met, as Store::Apply gives it).
  // Futures become ready in the order their batches were enqueued (a later batch's future is
  // never ready before an earlier one's). An empty batch is answered Ok without a commit, in
  // its place in that order. After Close(): a ready future holding Unavailable
  // (store-wide: the controller tries nothing job by job after it stopped).
  std::shared_future<Status> Enqueue(WriteBatch batch, Seconds now);

  // Stops taking batches; those already queued are still committed. Idempotent.
  void Close();

  Stats stats() const;

 private:
  GroupCommitter<TimedBatch, Status> committer_;
};

}  // namespace corral::store
