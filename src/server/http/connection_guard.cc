#include "server/http/connection_guard.h"

namespace corral::server {

bool ConnectionGuard::MayAccept(const std::string& address,
                                const std::function<void(int fd)>& shut_down) {
  std::lock_guard lock(mu_);
  const auto it = anonymous_by_address_.find(address);
  if (it != anonymous_by_address_.end() && it->second >= limits_.max_anonymous_per_address) {
    ++refused_;
    return false;
  }
  if (anonymous_ < limits_.max_anonymous) return true;
  // Every place is taken: the anonymous connection that has waited longest for a head goes.
  Connection* oldest = nullptr;
  for (auto& [id, c] : connections_) {
    if (c.authenticated || c.shut_down || c.phase != ConnectionPhase::kAwaitingHead) continue;
    if (oldest == nullptr || c.since < oldest->since) oldest = &c;
  }
  if (oldest == nullptr) {
    ++refused_;
    return false;
  }
  oldest->shut_down = true;
  shut_down(oldest->fd);
  ++evicted_;
  return true;
}

ConnectionGuard::Id ConnectionGuard::Opened(const std::string& address, int fd,
                                            Clock::time_point now) {
  std::lock_guard lock(mu_);
  const Id id = next_id_++;
  connections_[id] = Connection{address, fd, false, false, ConnectionPhase::kAwaitingHead, now};
  ++anonymous_by_address_[address];
  ++anonymous_;
  return id;
}

void ConnectionGuard::LeaveAnonymous(Connection& c) {
  if (c.authenticated) return;
  c.authenticated = true;
  --anonymous_;
  const auto it = anonymous_by_address_.find(c.address);
  if (it != anonymous_by_address_.end() && --it->second == 0) anonymous_by_address_.erase(it);
}

void ConnectionGuard::Closed(Id id) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it == connections_.end()) return;
  LeaveAnonymous(it->second);
  connections_.erase(it);
}

void ConnectionGuard::Entered(Id id, ConnectionPhase phase, Clock::time_point now) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it == connections_.end() || (it->second.shut_down && it->second.phase == phase)) return;
  it->second.phase = phase;
  it->second.since = now;
  it->second.shut_down = false;
}

void ConnectionGuard::Authenticated(Id id) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it != connections_.end()) LeaveAnonymous(it->second);
}

int ConnectionGuard::ShutDownOverdue(Clock::time_point now,
                                     const std::function<void(int fd)>& shut_down) {
  std::lock_guard lock(mu_);
  int count = 0;
  for (auto& [id, c] : connections_) {
    if (c.shut_down) continue;
    std::chrono::milliseconds limit;
    switch (c.phase) {
      case ConnectionPhase::kAwaitingHead:
        limit = limits_.head_timeout;
        break;
      case ConnectionPhase::kReadingBody:
        limit = limits_.body_timeout;
        break;
      case ConnectionPhase::kAnswering:
        if (c.authenticated) continue;
        limit = limits_.anonymous_answer_timeout;
        break;
    }
    if (now - c.since < limit) continue;
    c.shut_down = true;
    shut_down(c.fd);
    ++count;
  }
  timed_out_ += count;
  return count;
}

ConnectionGuard::Counts ConnectionGuard::counts() {
  std::lock_guard lock(mu_);
  return Counts{static_cast<int>(connections_.size()), anonymous_, refused_, evicted_, timed_out_};
}

}  // namespace corral::server
