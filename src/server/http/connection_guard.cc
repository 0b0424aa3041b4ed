#include "server/http/connection_guard.h"

namespace corral::server {

bool ConnectionGuard::MayAccept(const std::string& address) {
  std::lock_guard lock(mu_);
  const auto it = unauthenticated_by_address_.find(address);
  const int from_address = it == unauthenticated_by_address_.end() ? 0 : it->second;
  if (unauthenticated_ >= limits_.max_unauthenticated ||
      from_address >= limits_.max_unauthenticated_per_address) {
    ++refused_;
    return false;
  }
  return true;
}

ConnectionGuard::Id ConnectionGuard::Opened(const std::string& address, int fd,
                                            Clock::time_point now) {
  std::lock_guard lock(mu_);
  const Id id = next_id_++;
  connections_[id] = Connection{address, fd, false, false, ConnectionPhase::kAwaitingHead, now};
  ++unauthenticated_by_address_[address];
  ++unauthenticated_;
  return id;
}

void ConnectionGuard::Forget(Connection& c) {
  if (c.authenticated) return;
  c.authenticated = true;
  --unauthenticated_;
  const auto it = unauthenticated_by_address_.find(c.address);
  if (it != unauthenticated_by_address_.end() && --it->second == 0) {
    unauthenticated_by_address_.erase(it);
  }
}

void ConnectionGuard::Closed(Id id) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it == connections_.end()) return;
  Forget(it->second);
  connections_.erase(it);
}

void ConnectionGuard::Entered(Id id, ConnectionPhase phase, Clock::time_point now) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it == connections_.end()) return;
  it->second.phase = phase;
  it->second.since = now;
  it->second.shut_down = false;
}

void ConnectionGuard::Authenticated(Id id) {
  std::lock_guard lock(mu_);
  const auto it = connections_.find(id);
  if (it != connections_.end()) Forget(it->second);
}

int ConnectionGuard::ShutDownOverdue(Clock::time_point now,
                                     const std::function<void(int fd)>& shut_down) {
  std::lock_guard lock(mu_);
  int count = 0;
  for (auto& [id, c] : connections_) {
    if (c.shut_down || c.phase == ConnectionPhase::kAnswering) continue;
    const auto limit =
        c.phase == ConnectionPhase::kAwaitingHead ? limits_.head_timeout : limits_.body_timeout;
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
  return Counts{static_cast<int>(connections_.size()), unauthenticated_, refused_, timed_out_};
}

}  // namespace corral::server
