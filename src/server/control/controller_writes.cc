// Controller, the write group: changes decided under the lock, committed together without it,
// applied to memory once durable (controller.h, "The write group"; docs/control-plane.md, "The
// heartbeat path").

#include <future>

#include "server/control/controller.h"

namespace corral::server {

std::shared_future<Status> Controller::WriteLocked(store::WriteBatch batch, Seconds now,
                                                   PendingWrite write) {
  if (batch.empty()) {
    // Nothing to wait for: its caller settled whatever write it meets (a quiet heartbeat).
    write.apply(Status::Ok());
    std::promise<Status> done;
    done.set_value(Status::Ok());
    return done.get_future().share();
  }
  write.durable = writes_.Enqueue(std::move(batch), now);
  for (JobId id : write.jobs) pending_jobs_.insert(id);
  if (!write.node.empty()) pending_nodes_.insert(write.node);
  pending_writes_.push_back(std::move(write));
  return pending_writes_.back().durable;
}

void Controller::ApplyAnsweredWritesLocked() {
  while (!pending_writes_.empty()) {
    PendingWrite& first = pending_writes_.front();
    if (first.durable.wait_for(std::chrono::seconds(0)) != std::future_status::ready) return;
    // Taken off the queue before its apply runs: an apply never sees itself pending.
    PendingWrite write = std::move(first);
    pending_writes_.pop_front();
    for (JobId id : write.jobs) pending_jobs_.erase(pending_jobs_.find(id));
    if (!write.node.empty()) pending_nodes_.erase(pending_nodes_.find(write.node));
    write.apply(write.durable.get());
    // Launches held back while the write was pending (ResponseForLocked) may go out now.
    for (JobId id : write.jobs) {
      if (auto live = jobs_.find(id); live != jobs_.end()) NotifyNodesLocked(live->second);
    }
  }
}

int Controller::PendingWrites() {
  std::lock_guard lock(mu_);
  return static_cast<int>(pending_writes_.size());
}

void Controller::SettleWritesLocked() {
  // The writer answers in order: once the last is answered, every earlier one is.
  if (!pending_writes_.empty()) pending_writes_.back().durable.wait();
  ApplyAnsweredWritesLocked();
}

void Controller::AwaitWriteLocked(std::unique_lock<std::mutex>& lock,
                                  const std::shared_future<Status>& durable) {
  if (durable.wait_for(std::chrono::seconds(0)) != std::future_status::ready) {
    lock.unlock();
    durable.wait();
    lock.lock();
    DrainInboxLocked();
  }
  ApplyAnsweredWritesLocked();
}

}  // namespace corral::server
