// Interactive sessions (docs/sessions.md): the pure rules the controller applies to them: when
// a running session is idle and what to do about it. No I/O and no locking here; the controller
// calls these under its lock.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/units.h"

namespace corral::server {

// What is known about how a running session is used.
struct SessionActivity {
  // The last request the proxy forwarded to it; its start (and a server restart) count as one.
  Seconds last_activity{0};
  // Later: per-task GPU utilisation from the agents (the monitoring issue) joins here, e.g.
  // `std::optional<double> gpu_utilisation` over the last minutes; IdleFor then counts a
  // session whose GPUs work as in use.
};

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

}  // namespace corral::server
