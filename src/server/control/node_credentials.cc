#include "server/control/node_credentials.h"

#include <mutex>

#include "server/http/auth.h"

namespace corral::server {

uint64_t NodeCredentials::Set(const std::string& node, std::string token_hash) {
  std::unique_lock lock(mu_);
  registrations_[node] = {std::move(token_hash), ++last_number_};
  return last_number_;
}

void NodeCredentials::Withdraw(const std::string& node) {
  std::unique_lock lock(mu_);
  registrations_.erase(node);
}

std::optional<uint64_t> NodeCredentials::Authenticate(const std::string& node,
                                                      const std::string& token) const {
  const std::string hash = HashToken(token);  // outside the lock: it is the costly part
  std::shared_lock lock(mu_);
  auto it = registrations_.find(node);
  if (it == registrations_.end() || !SecureEquals(it->second.token_hash, hash)) {
    return std::nullopt;
  }
  return it->second.number;
}

}  // namespace corral::server
