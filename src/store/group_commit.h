// Group commit, the core of SubmissionBatcher (submissions) and WriteBatcher (the controller's
// write batches): many threads queue items; one writer thread takes whatever items are waiting
// (up to max_batch) and commits them in one transaction, so N waiting items cost one commit (one
// fsync) instead of N. While one group commits, the next one gathers, so a lone item is
// committed at once and a busy server groups by itself.
//
// Linger: clients answered by one commit need a moment (a wake-up, a new request) to queue
// again; a writer that started the next commit at once would commit the first of them alone and
// make the others wait a whole commit. So when fewer items are waiting than the last group held,
// the writer waits for more, at most a quarter of the last commit's duration and never more than
// max_linger (PostgreSQL's commit_delay, adaptive). A lone client never waits.
//
// Failures: a group stands or falls as a whole. When it fails for a reason tied to its items
// (anything but a store-wide failure: IoError, Internal, Unavailable), each of its items is
// committed alone, in order, and gets its own answer, so that one bad item does not fail its
// neighbours. A store-wide failure answers every item of the group with the error: retrying
// could commit twice an item whose commit outcome is unknown, and a fenced server (Unavailable)
// would be fenced again for each.
//
// Order: items are committed, and answered, in the order they were queued (an item's answer is
// never ready before the answer of an item queued before it).
//
// Thread safety: Enqueue, Close and stats may be called from any thread.
#pragma once

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <functional>
#include <future>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "common/status.h"
#include "store/store.h"

namespace corral::store {

// `Answer` is what an item's caller gets: Status, or a Result; it is built from the error
// Status of a failed commit, and its ok() tells a committed item.
template <typename Item, typename Answer>
class GroupCommitter {
 public:
  struct Options {
    size_t max_batch = 256;                      // items per transaction at most (>= 1)
    std::chrono::microseconds max_linger{1000};  // see "Linger" above; 0 disables it
  };
  struct Stats {
    int64_t items = 0;    // items committed
    int64_t commits = 0;  // transactions that committed (groups, and items alone)
    size_t largest_group = 0;
  };
  // The store calls, made on the writer thread only.
  struct Calls {
    // Commits `items` (never empty) in one transaction, all or nothing: one answer per item, in
    // order, or the error that failed them all (nothing committed). The items stay as they were:
    // a failed group's are committed again one by one.
    std::function<Result<std::vector<Answer>>(const std::vector<Item>& items)> group;
    // Commits one item in a transaction of its own: its answer.
    std::function<Answer(const Item& item)> one;
    // The answer of an item that writes nothing, given without a commit (still in its place in
    // the order); nullopt for an item that needs one. Unset: every item needs one.
    std::function<std::optional<Answer>(const Item& item)> without_commit;
  };

  // Starts the writer thread. `closed` is the error that items queued after Close() get.
  GroupCommitter(Calls calls, Options options, Status closed)
      : calls_(std::move(calls)),
        options_{std::max<size_t>(options.max_batch, 1), options.max_linger},
        closed_error_(std::move(closed)) {
    writer_ = std::thread([this] { WriterLoop(); });
  }
  // Close(), then waits until every item already queued is answered.
  ~GroupCommitter() {
    Close();
    writer_.join();
  }
  GroupCommitter(const GroupCommitter&) = delete;
  GroupCommitter& operator=(const GroupCommitter&) = delete;

  // Queues `item` and returns at once; the future holds its answer once its group committed or
  // failed. After Close(): a ready future holding the `closed` error.
  std::future<Answer> Enqueue(Item item) {
    Pending pending{std::move(item), {}};
    std::future<Answer> answer = pending.answer.get_future();
    {
      std::lock_guard<std::mutex> lock(mu_);
      if (!closed_) {
        queue_.push_back(std::move(pending));
        work_.notify_one();
        return answer;
      }
    }
    pending.answer.set_value(Answer(closed_error_));
    return answer;
  }

  // Stops taking items; those already queued are still committed. Idempotent.
  void Close() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      closed_ = true;
    }
    work_.notify_all();
  }

  Stats stats() const {
    std::lock_guard<std::mutex> lock(mu_);
    return stats_;
  }

 private:
  struct Pending {
    Item item;
    std::promise<Answer> answer;
  };

  void WriterLoop() {
    std::vector<Pending> group;
    for (;;) {
      group.clear();
      {
        std::unique_lock<std::mutex> lock(mu_);
        work_.wait(lock, [this] { return !queue_.empty() || closed_; });
        if (queue_.empty()) return;  // closed and drained
        const size_t expected = std::min(last_group_, options_.max_batch);
        if (queue_.size() < expected && !closed_) {
          auto linger =
              std::min<std::chrono::steady_clock::duration>(options_.max_linger, last_commit_ / 4);
          work_.wait_for(lock, linger, [&] { return queue_.size() >= expected || closed_; });
        }
        while (!queue_.empty() && group.size() < options_.max_batch) {
          group.push_back(std::move(queue_.front()));
          queue_.pop_front();
        }
      }
      auto start = std::chrono::steady_clock::now();
      Commit(group);
      last_commit_ = std::chrono::steady_clock::now() - start;
      last_group_ = group.size();
    }
  }

  // Commits `group` and answers every item of it, in order.
  void Commit(std::vector<Pending>& group) {
    std::vector<std::optional<Answer>> at_once(group.size());
    std::vector<Item> items;  // those that need a commit, in order
    items.reserve(group.size());
    for (size_t i = 0; i < group.size(); ++i) {
      if (calls_.without_commit) at_once[i] = calls_.without_commit(group[i].item);
      if (!at_once[i]) items.push_back(std::move(group[i].item));
    }
    Result<std::vector<Answer>> committed = std::vector<Answer>();
    if (!items.empty()) committed = calls_.group(items);
    if (committed.ok() && !items.empty()) Count(items.size());
    const bool one_by_one = !committed.ok() && items.size() > 1 && !IsStoreWide(committed.status());
    size_t next = 0;  // the next of `items`
    for (size_t i = 0; i < group.size(); ++i) {
      if (at_once[i]) {
        group[i].answer.set_value(std::move(*at_once[i]));
      } else if (committed.ok()) {
        group[i].answer.set_value(std::move((*committed)[next++]));
      } else if (one_by_one) {
        Answer answer = calls_.one(items[next++]);
        if (answer.ok()) Count(1);
        group[i].answer.set_value(std::move(answer));
      } else {
        group[i].answer.set_value(Answer(committed.status()));
      }
    }
  }

  // One transaction committed `items` items.
  void Count(size_t items) {
    std::lock_guard<std::mutex> lock(mu_);
    stats_.items += static_cast<int64_t>(items);
    stats_.commits += 1;
    stats_.largest_group = std::max(stats_.largest_group, items);
  }

  const Calls calls_;
  const Options options_;
  const Status closed_error_;

  mutable std::mutex mu_;
  std::condition_variable work_;  // signalled when an item arrives or on Close
  std::deque<Pending> queue_;     // guarded by mu_
  bool closed_ = false;           // guarded by mu_
  Stats stats_;                   // guarded by mu_
  // Writer thread only: the previous group's size and commit duration (for the linger).
  size_t last_group_ = 0;
  std::chrono::steady_clock::duration last_commit_{};
  std::thread writer_;  // started last, in the constructor
};

}  // namespace corral::store
