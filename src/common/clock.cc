#include "common/clock.h"

#include <ctime>

namespace corral {

Seconds SystemClock::Now() {
  timespec ts{};
  clock_gettime(CLOCK_REALTIME, &ts);
  return Seconds(ts.tv_sec);
}

}  // namespace corral
