// The API server's defence against slow and idle clients (docs/security.md, "Connections"):
// caps on anonymous connections, per client address and in all, and deadlines on each phase of
// a request, so that no client can hold the server's places by sending nothing, or a byte at a
// time.
//
// A connection is anonymous until one of its requests presents a credential the server accepts
// (an API token, the dashboard's cookie, a node or join token): from then on it counts against
// neither cap (agents and users behind one NAT or proxy are not limited by each other's
// connections). A new connection from an address at its cap is refused; when all anonymous
// places are taken, the oldest anonymous connection still waiting for a head is shut down to make
// room, so that a flood from many addresses cannot keep an agent or a user from connecting.
// Requests are timed by phase: the head must arrive within `head_timeout` of the connection's
// start or of the previous answer (which also closes idle keep-alive connections), the body
// within `body_timeout` of the head, and an anonymous caller's answer must be sent within
// `anonymous_answer_timeout` (a client reading slowly); an authenticated one's has no deadline
// (a long poll, a stream).
//
// Pure bookkeeping: the server (http_server.h) tells it what happens and shuts down what
// ShutDownOverdue names. Thread-safe.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <map>
#include <mutex>
#include <string>
#include <unordered_map>

namespace corral::server {

struct ConnectionLimits {
  // Anonymous connections from one client address (CountedAddress): over it, a new one is
  // closed at once. In all: over it, the oldest still waiting for a head is shut down.
  int max_anonymous_per_address = 64;
  int max_anonymous = 1024;
  std::chrono::milliseconds head_timeout{10000};
  std::chrono::milliseconds body_timeout{30000};
  std::chrono::milliseconds anonymous_answer_timeout{60000};
};

// Where a connection is in its current request.
enum class ConnectionPhase {
  kAwaitingHead,  // since it opened, or since its previous answer
  kReadingBody,   // since its head arrived
  kAnswering,     // the route runs, or the answer is being sent
};

class ConnectionGuard {
 public:
  using Clock = std::chrono::steady_clock;
  using Id = uint64_t;

  explicit ConnectionGuard(ConnectionLimits limits) : limits_(limits) {}

  // Whether a new connection from `address` may be accepted: under the address's cap. When every
  // anonymous place is taken, calls `shut_down(fd)` (under the guard's lock) for the oldest
  // anonymous connection waiting for a head, and accepts; refuses if there is none.
  bool MayAccept(const std::string& address, const std::function<void(int fd)>& shut_down);
  // A connection accepted from `address` on socket `fd`, awaiting its head from `now`.
  Id Opened(const std::string& address, int fd, Clock::time_point now);
  // The connection is closed (its socket is still open while this runs).
  void Closed(Id id);
  // The connection's phase is now `phase`, from `now`.
  void Entered(Id id, ConnectionPhase phase, Clock::time_point now);
  // One of the connection's requests authenticated: it leaves the anonymous counts for good.
  void Authenticated(Id id);

  // Calls `shut_down(fd)` for each connection past its phase's deadline at `now` (once per
  // phase), under the guard's lock, so that the connection cannot be closed meanwhile; returns
  // how many.
  int ShutDownOverdue(Clock::time_point now, const std::function<void(int fd)>& shut_down);

  struct Counts {
    int open = 0;
    int anonymous = 0;
    int64_t refused = 0;    // new connections closed at once, over an address's cap
    int64_t evicted = 0;    // anonymous connections shut down to make room for a new one
    int64_t timed_out = 0;  // connections shut down past a deadline
  };
  Counts counts();
  const ConnectionLimits& limits() const { return limits_; }

 private:
  struct Connection {
    std::string address;
    int fd = -1;
    bool authenticated = false;
    bool shut_down = false;  // for the current phase, or evicted
    ConnectionPhase phase = ConnectionPhase::kAwaitingHead;
    Clock::time_point since;
  };
  void LeaveAnonymous(Connection& c);  // mu_ held

  const ConnectionLimits limits_;
  std::mutex mu_;
  Id next_id_ = 1;
  std::unordered_map<Id, Connection> connections_;
  std::map<std::string, int> anonymous_by_address_;  // no zeros
  int anonymous_ = 0;
  int64_t refused_ = 0;
  int64_t evicted_ = 0;
  int64_t timed_out_ = 0;
};

}  // namespace corral::server
