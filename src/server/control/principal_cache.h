// Who a token hash belongs to, remembered for a few seconds so that an API request does not
// cost two store reads (the user, then their projects) on the store's one connection, where they
// queue behind group commits.
//
// Contracts:
//  - An entry is used for less than `ttl` after it was loaded; then it is loaded again.
//  - Clear() forgets every entry and any load in flight, so a change this server makes (a
//    revoked token, a new membership) is seen by the next request. Changes made by another
//    server sharing the store are seen within `ttl`.
//  - Only successful loads are cached: an unknown or revoked token is looked up every time, and
//    a token created a moment ago works at once.
//  - At most `capacity` entries; the oldest are dropped first.
//
// Thread safety: all methods may be called from any thread; loads run without the lock held.
#pragma once

#include <cstdint>
#include <functional>
#include <list>
#include <mutex>
#include <string>
#include <unordered_map>

#include "common/clock.h"
#include "common/status.h"
#include "server/http/auth.h"

namespace corral::server {

class PrincipalCache {
 public:
  struct Options {
    size_t capacity = 10000;  // entries
    Seconds ttl{5};
  };

  // Borrows `clock`, which must outlive the cache.
  PrincipalCache(Clock& clock, Options options);

  // The principal of `token_hash`: the cached one while fresh, else the answer of `load`
  // (cached when OK and no Clear() ran while it loaded).
  Result<Principal> Get(const std::string& token_hash,
                        const std::function<Result<Principal>()>& load);

  // Forgets everything, loads in flight included. Call after any change to tokens, users or
  // memberships.
  void Clear();

  size_t size() const;

 private:
  struct Entry {
    Principal principal;
    Seconds loaded_at{0};
    std::list<std::string>::iterator position;  // in order_
  };

  bool Fresh(const Entry& entry, Seconds now) const;
  // Requires mu_.
  void EraseLocked(std::unordered_map<std::string, Entry>::iterator it);

  Clock& clock_;
  const Options options_;
  mutable std::mutex mu_;
  std::unordered_map<std::string, Entry> entries_;  // guarded by mu_
  std::list<std::string> order_;                    // guarded by mu_; keys, oldest load first
  uint64_t epoch_ = 0;  // guarded by mu_; bumped by Clear() so that older loads are dropped
};

}  // namespace corral::server
