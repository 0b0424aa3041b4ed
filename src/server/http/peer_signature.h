// The client's address that a follower vouches for when it forwards a request to the leader
// (leader_proxy.h; docs/security.md, "Forwarded requests"): the header
// `Corral-Forwarded-For: ADDRESS COUNTED TIME SIGNATURE`, where ADDRESS and COUNTED are the
// request's client_address and counted_address on the follower, TIME the Unix seconds it was
// signed at, and SIGNATURE the hex HMAC-SHA256, under the cluster's peer key, of those three with
// the request's method and target. The peer key is derived from the session key every server of
// the cluster shares (ServerProcess::ShareSecrets checks it), never the key itself.
//
// A header that is badly formed, badly signed, or signed more than kPeerSignatureLifetime away
// from the verifier's clock (either way) vouches for nothing: the connection's own address
// counts. Stateless and thread-safe.
#pragma once

#include <chrono>
#include <optional>
#include <string>

#include "server/http/http_exchange.h"

namespace corral::server {

inline constexpr char kPeerHeader[] = "Corral-Forwarded-For";
inline constexpr std::chrono::seconds kPeerSignatureLifetime{30};

// The addresses a peer vouched for.
struct VouchedAddress {
  std::string address;  // client_address
  std::string counted;  // counted_address
};

class PeerSignature {
 public:
  // `session_key`: the cluster's session key; the peer key is HMAC(session_key, "corral peer v1").
  explicit PeerSignature(const std::string& session_key);

  // The header's value vouching that `request` (its method and target) came from its
  // client_address (counted as its counted_address), signed at `now`.
  std::string Sign(const HttpRequest& request, std::chrono::system_clock::time_point now) const;
  // The addresses `head`'s Corral-Forwarded-For vouches for, when it is present, well formed,
  // signed with the peer key for its method and target, and signed within
  // kPeerSignatureLifetime of `now`; else none.
  std::optional<VouchedAddress> Verify(const HttpRequest& head,
                                       std::chrono::system_clock::time_point now) const;

 private:
  std::string Mac(const std::string& address, const std::string& counted, int64_t time,
                  const HttpRequest& request) const;

  std::string key_;
};

}  // namespace corral::server
