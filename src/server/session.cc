#include "server/session.h"

#include <algorithm>

namespace corral::server {

Seconds IdleFor(const SessionActivity& activity, Seconds now) {
  return Seconds(std::max<int64_t>(0, now.value() - activity.last_activity.value()));
}

SessionStep NextSessionStep(const SessionActivity& activity, std::optional<Seconds> notice_at,
                            const IdlePolicy& policy, Seconds now) {
  if (policy.timeout.value() <= 0) {
    return notice_at ? SessionStep::kInUseAgain : SessionStep::kNothing;
  }
  const bool idle = IdleFor(activity, now) >= policy.timeout;
  if (!notice_at) return idle ? SessionStep::kNotice : SessionStep::kNothing;
  if (!idle) return SessionStep::kInUseAgain;
  return now - *notice_at >= policy.warning ? SessionStep::kStop : SessionStep::kNothing;
}

}  // namespace corral::server
