// What the HTTP API adds for the dashboard (docs/dashboard.md): which API requests the login
// cookie may authenticate, and the live summary stream (Server-Sent Events) with its cap.
// Thread safety: the functions are pure; EventStreams is thread-safe.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

namespace corral::server {

// True when the corral_token cookie may authenticate `method` on `path` (the request path,
// without the query): the dashboard's requests only. GET/HEAD of the read routes it shows
// (whoami, jobs, a job, its logs and its GPUs, queue, nodes, projects, policy, environments,
// the event stream, the GPUs, usage, the capacity forecast), and POST /api/v1/jobs (submit),
// /api/v1/jobs/<id>/cancel and /api/v1/capacity/what-if (a computation, admins only).
// Tokens, users, project settings, node actions, sessions and /metrics need the bearer token:
// cookies are per host, so a session's app (on the gateway's port, same host) could make its
// viewer's browser send the cookie; it must not mint tokens or change the cluster with it
// (docs/decisions.md). The caller still
// applies CrossSiteRefusal to every non-GET/HEAD request it authenticates by cookie.
bool CookieMayAuthenticate(std::string_view method, std::string_view path);

// One Server-Sent Events message: "id: ID\nevent: EVENT\ndata: JSON\n\n". `event` must be a
// plain name ([a-z_]+; anything else becomes "message"); the data is one line of JSON
// (newlines inside strings are escaped by the JSON encoding, invalid UTF-8 becomes U+FFFD).
std::string EventStreamFrame(std::string_view event, int64_t id, const nlohmann::json& data);

// The open event streams: at most `max_streams` at once (each holds one of the server's HTTP
// threads), and a shutdown that wakes every stream so that the server can stop at once.
class EventStreams {
 public:
  explicit EventStreams(int max_streams) : max_streams_(max_streams) {}

  // A stream's place; gives it back when destroyed. Move-only; must not outlive its owner.
  class Ticket {
   public:
    Ticket(Ticket&& other) noexcept : owner_(std::exchange(other.owner_, nullptr)) {}
    Ticket& operator=(Ticket&&) = delete;
    ~Ticket();
    bool admitted() const { return owner_ != nullptr; }

   private:
    friend class EventStreams;
    explicit Ticket(EventStreams* owner) : owner_(owner) {}
    EventStreams* owner_;  // null: refused (too many streams, or shutting down)
  };

  // A place for one more stream, or a refused ticket when `max_streams` are open or Shutdown
  // was called.
  Ticket Open();
  // Waits up to `period`; false when Shutdown was called (the stream should end), else true.
  bool Wait(std::chrono::milliseconds period);
  // Ends every stream's wait now and refuses new ones. Idempotent.
  void Shutdown();
  int open() const;

 private:
  const int max_streams_;
  mutable std::mutex mu_;
  std::condition_variable wake_;
  int open_ = 0;
  bool shutdown_ = false;
};

}  // namespace corral::server
