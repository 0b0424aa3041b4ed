// What /proc/<pid>/stat says about a process: enough to tell whether a pid still names the
// process we started (pids are reused; the start time is not).
#pragma once

#include <sys/types.h>

#include <cstdint>

#include "common/status.h"

namespace corral::agent {

struct ProcStat {
  char state = '?';          // 'R', 'S', 'D', 'Z' (zombie: exited, not yet reaped), ...
  pid_t session = 0;         // field 6: the session's id
  uint64_t start_ticks = 0;  // field 22: start time in clock ticks after boot
};

// NotFound when no such process exists.
Result<ProcStat> ReadProcStat(pid_t pid);

// True when `pid` exists, is not a zombie, and started at `start_ticks`.
bool IsSameLiveProcess(pid_t pid, uint64_t start_ticks);

}  // namespace corral::agent
