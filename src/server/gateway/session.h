// Interactive sessions (docs/sessions.md): the pure rules the controller applies to them: when
// a running session is idle and what to do about it, and how to read what an app says about its
// own use. No I/O and no locking here; the controller calls these under its lock. The one
// side effect sessions need, asking an app about its use, is behind SessionAppProbe (the real
// one, over HTTP, is in session_proxy.h).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/units.h"

namespace corral::server {

// What is known about how a running session is used.
struct SessionActivity {
  // The last request the proxy forwarded to it; its start (and a server restart) count as one.
  Seconds last_activity{0};
  // The last activity the app itself reported (Jupyter Server's GET <prefix>api/status,
  // "last_activity"), never later than when it was asked: use the proxy never sees, such as
  // notebooks reached through the direct URL (WebSockets). None: the app never said.
  std::optional<Seconds> app_last_activity;
  // When its GPUs were last busy (GpuMonitor::JobLastBusyMs: now while one is over the idle
  // threshold). None: it holds no GPU, or no sample has come yet.
  std::optional<Seconds> gpus_last_busy;
};

// When the session was last used: the latest of the proxy's, the app's and the GPUs' activity.
Seconds LastUse(const SessionActivity& activity);

// How long the session has been unused at `now` (0 when it is in use right now). The one
// place that decides idleness: the idle notice and the stop follow from it.
Seconds IdleFor(const SessionActivity& activity, Seconds now);

struct IdlePolicy {
  Seconds timeout{0};  // idle this long: notice; 0: never idle
  Seconds warning{0};  // notice given this long ago and still idle: stop
};

enum class SessionStep {
  kNothing,     // in use, or the notice was given and the warning period runs
  kNotice,      // idle for `timeout`: record the notice ("stopping in W s unless used")
  kInUseAgain,  // used after the notice: record that and clear the notice
  kStop,        // still idle `warning` after the notice: cancel the session
};

// The next step for a running session whose idle notice was given at `notice_at` (none: not
// given).
SessionStep NextSessionStep(const SessionActivity& activity, std::optional<Seconds> notice_at,
                            const IdlePolicy& policy, Seconds now);

// True for the steps that end the session's quiet (the notice, the stop): before taking them
// the controller asks the app whether it was used meanwhile.
inline bool AsksTheApp(SessionStep step) {
  return step == SessionStep::kNotice || step == SessionStep::kStop;
}

// The "last_activity" of a Jupyter Server GET <prefix>api/status answer: a JSON object whose
// "last_activity" is an ISO 8601 time with a zone ("2026-12-03T10:00:00.123456Z", or an offset
// such as "+02:00"), as seconds since the Unix epoch (the fraction dropped). Nullopt for
// anything else: not JSON, no such field, a time without a zone or out of range.
std::optional<Seconds> ParseAppLastActivity(std::string_view status_body);

// Where a running session's app listens, to ask it about its use.
struct SessionApp {
  std::string address;     // the node's address
  int port = 0;            // the session's port
  std::string url_prefix;  // "/sessions/<id>/": the app's base URL
  std::string token;       // the session's secret ("Authorization: token <secret>")
};

// Asks a session's app when it was last used. Implementations do I/O: the controller calls
// them without holding its lock, and may call them from several threads at once.
class SessionAppProbe {
 public:
  virtual ~SessionAppProbe() = default;
  // The app's own last activity, or nullopt when it cannot say (no such endpoint, no answer in
  // time, an answer that does not parse): then nothing changes.
  virtual std::optional<Seconds> LastActivity(const SessionApp& app) = 0;
};

}  // namespace corral::server
