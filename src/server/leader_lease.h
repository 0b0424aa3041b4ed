// Leadership of a server among several on one PostgreSQL store (docs/control-plane.md, "Several
// servers on one PostgreSQL"): a thread that polls for the store's lease (Store::AcquireLease)
// until it gets it, then renews it, and says whether this server leads right now.
//
// The leader counts its lease from the moment it sent the renewal that the database granted, by
// its own steady clock: that deadline is never later than the database's expiry, so Leading()
// turns false before any other server can take over, even when the process was frozen (SIGSTOP,
// a VM pause) and has not yet heard that it lost. Past the deadline, or when the store says the
// lease is another's, the lease is lost for good: `on_lost` is called once (the server exits:
// docs/decisions.md, "A server that loses the lease exits").
//
// Thread-safe.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <mutex>
#include <optional>
#include <string>
#include <thread>

#include "common/status.h"
#include "server/http/http_exchange.h"
#include "store/store.h"

namespace corral::server {

struct LeaseTiming {
  // How long a granted lease holds (the failover's main part), how often the leader renews it,
  // and how often a follower tries to take it (the same interval).
  std::chrono::milliseconds duration{3000};
  std::chrono::milliseconds renew_interval{500};
};

// InvalidArgument naming the flag: both at least 100 ms, the duration at most 10 minutes, and
// renew_interval < duration / 2 (so that one lost renewal never costs the lease).
Status ValidateLeaseTiming(const LeaseTiming& timing);

class LeaderLease {
 public:
  // `holder`: this server's id, unique per process; `url`: the base URL it advertises to the
  // others while it leads. `on_acquired` runs on the lease's thread once, when the lease is
  // first held (with its epoch), and must return soon: the renewals wait for it; `on_lost` runs
  // on that thread once, when it is lost.
  LeaderLease(store::Store& store, std::string holder, std::string url, LeaseTiming timing,
              std::function<void(int64_t epoch)> on_acquired,
              std::function<void(const Status& why)> on_lost);
  ~LeaderLease();
  LeaderLease(const LeaderLease&) = delete;
  LeaderLease& operator=(const LeaderLease&) = delete;

  void Start();
  // Ends the thread (without giving up the lease: it lapses).
  void Stop();

  // True while this server holds the lease by its own deadline (see above).
  bool Leading() const;
  // The leader's advertised URL as last read (this server's while it leads); none when no
  // server holds the lease.
  std::optional<std::string> Leader() const;

 private:
  void Run();
  // Waits `d` or until Stop; false when stopping.
  bool Sleep(std::chrono::milliseconds d);

  store::Store& store_;
  const std::string holder_;
  const std::string url_;
  const LeaseTiming timing_;
  const std::function<void(int64_t)> on_acquired_;
  const std::function<void(const Status&)> on_lost_;

  // Steady-clock nanoseconds until which this server leads; 0: it does not.
  std::atomic<int64_t> leading_until_ns_{0};
  mutable std::mutex mu_;
  std::condition_variable wake_;
  bool stopping_ = false;              // guarded by mu_
  std::optional<std::string> leader_;  // guarded by mu_
  std::thread thread_;
};

// What a server that does not lead answers every request (but GET /healthz) with: 503
// problem+json "this server is not the leader; the leader is URL" (or "; no leader yet"),
// Retry-After: 1 and, when known, Corral-Leader: URL. GET /healthz: 200
// {"status":"ok","role":"follower","leader":URL or null}.
HttpResponse FollowerAnswer(const HttpRequest& head, const std::optional<std::string>& leader);

}  // namespace corral::server
