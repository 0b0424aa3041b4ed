// The node tokens the server accepts: one per registered node, stored hashed (HashToken), set
// at registration and withdrawn when the node is lost (it must register again).
//
// Its own lock, apart from the controller's: a heartbeat is authenticated from its headers
// before its body is parsed and before the controller's lock is taken, so the heartbeat path
// takes that lock once, and an unauthenticated caller never contends for it. Thread-safe.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <shared_mutex>
#include <string>

namespace corral::server {

class NodeCredentials {
 public:
  // `node` is authenticated by the token whose hash is `token_hash` (replacing any before).
  // Returns the registration's number, new each time (> 0): the caller keeps it to tell a
  // request of this registration from one authenticated just before the node registered again.
  uint64_t Set(const std::string& node, std::string token_hash);
  // `node` is authenticated by nothing until Set again.
  void Withdraw(const std::string& node);
  // The registration that `token` (in clear, as sent) authenticates for `node`; nullopt when it
  // is not the node's current token. Compares in constant time.
  std::optional<uint64_t> Authenticate(const std::string& node, const std::string& token) const;

 private:
  struct Registration {
    std::string token_hash;
    uint64_t number = 0;
  };
  mutable std::shared_mutex mu_;
  std::map<std::string, Registration> registrations_;  // node -> its current registration
  uint64_t last_number_ = 0;
};

}  // namespace corral::server
