#include "server/control/principal_cache.h"

namespace corral::server {

PrincipalCache::PrincipalCache(Clock& clock, Options options) : clock_(clock), options_(options) {}

Result<Principal> PrincipalCache::Get(const std::string& token_hash,
                                      const std::function<Result<Principal>()>& load) {
  uint64_t epoch = 0;
  {
    std::lock_guard lock(mu_);
    if (auto it = entries_.find(token_hash); it != entries_.end()) {
      if (Fresh(it->second, clock_.Now())) return it->second.principal;
      EraseLocked(it);
    }
    epoch = epoch_;
  }
  const Seconds loaded_at = clock_.Now();
  Result<Principal> principal = load();
  if (!principal.ok() || options_.capacity == 0) return principal;
  std::lock_guard lock(mu_);
  // A Clear() while loading may have been a revocation that this load did not see.
  if (epoch != epoch_) return principal;
  if (auto it = entries_.find(token_hash); it != entries_.end()) EraseLocked(it);
  // order_ is by load time, so expired entries are at its front; then the oldest make room.
  const Seconds now = clock_.Now();
  while (!order_.empty()) {
    auto oldest = entries_.find(order_.front());
    if (entries_.size() < options_.capacity && Fresh(oldest->second, now)) break;
    EraseLocked(oldest);
  }
  order_.push_back(token_hash);
  entries_.emplace(token_hash, Entry{*principal, loaded_at, std::prev(order_.end())});
  return principal;
}

void PrincipalCache::Clear() {
  std::lock_guard lock(mu_);
  entries_.clear();
  order_.clear();
  ++epoch_;
}

size_t PrincipalCache::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

bool PrincipalCache::Fresh(const Entry& entry, Seconds now) const {
  // A clock stepped back makes an entry stale rather than fresh for longer than the TTL.
  return entry.loaded_at <= now && now < entry.loaded_at + options_.ttl;
}

void PrincipalCache::EraseLocked(std::unordered_map<std::string, Entry>::iterator it) {
  order_.erase(it->second.position);
  entries_.erase(it);
}

}  // namespace corral::server
