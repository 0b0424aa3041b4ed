// What a follower does with a request while another server leads (docs/control-plane.md,
// "Several servers on one PostgreSQL"): it sends it, once read and admitted under the
// follower's own limits, to the leader's advertised URL, and relays the answer as it comes
// (an event stream or a long poll piece by piece, never buffered whole).
//
// What travels: the method, the target as sent, the body, and every request header but the
// hop-by-hop ones (Connection, Keep-Alive, Transfer-Encoding, TE, Upgrade, Expect,
// Proxy-*, Content-Length, which is set again) and any Corral-Forwarded-For, which the follower
// replaces by its own, signed (peer_signature.h). Host, Authorization and cookies pass
// unchanged: the leader authenticates the caller as usual, and sees the Host the client used.
// What comes back: the status and every header but the hop-by-hop ones (Content-Length and
// Transfer-Encoding are the follower's own).
//
// Thread-safe: each Forward has its own connection to the leader and a thread that reads it.
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "server/http/http_exchange.h"
#include "server/http/peer_signature.h"

namespace corral::server {

struct LeaderProxyTiming {
  // Connecting to the leader: past it, the leader "cannot be reached".
  std::chrono::milliseconds connect_timeout{2000};
  // Between two bytes of the leader's answer (an event stream's keep-alives come more often).
  std::chrono::milliseconds read_timeout{300'000};
  // What is read ahead of a client that reads slowly (the leader's sending waits beyond).
  size_t max_buffered_bytes = 1 << 20;
};

class LeaderProxy {
 public:
  // Borrows `peer`, which must outlive the proxy.
  LeaderProxy(const PeerSignature& peer, LeaderProxyTiming timing);

  // The leader's answer to `request`, sent to `leader_url` ("http://10.0.0.2:8080"; an https
  // leader's certificate is verified with the system's CAs for the URL's host): its head once it
  // has come, its body streamed. None when the request certainly did not reach the leader (no
  // connection, or no TLS session: the caller answers 503 and clients may send it elsewhere). When
  // the leader was reached but no answer came (reset, timeout), 502 problem+json: the request may
  // have been carried out, so it must not look like a 503.
  std::optional<HttpResponse> Forward(const std::string& leader_url, const HttpRequest& request);
  // Ends every forward in flight at once (their answers end, cut short), so that an HTTP server
  // relaying them can stop without waiting for an event stream or a long poll.
  void CancelAll();

 private:
  struct Relay;

  const PeerSignature& peer_;
  const LeaderProxyTiming timing_;
  std::mutex mu_;
  std::vector<std::weak_ptr<Relay>> relays_;  // guarded by mu_
};

// The headers of `request` that go to the leader (above), with `vouched` as its
// Corral-Forwarded-For.
HttpHeaders ForwardedRequestHeaders(const HttpHeaders& request, const std::string& vouched);
// The headers of the leader's answer that go to the client (above).
HttpHeaders RelayedResponseHeaders(const HttpHeaders& answer);

}  // namespace corral::server
