#include "agent/proc_stat.h"

#include <cstdlib>
#include <string>

#include "agent/file_io.h"

namespace corral::agent {

Result<ProcStat> ReadProcStat(pid_t pid) {
  if (pid <= 0) return NotFound("no process " + std::to_string(pid));
  auto text = ReadFile("/proc/" + std::to_string(pid) + "/stat");
  if (!text.ok()) return NotFound("no process " + std::to_string(pid));
  // "pid (comm) S ppid ...": comm may hold spaces and parentheses, so start after the last ')'.
  size_t close = text->rfind(')');
  if (close == std::string::npos || close + 2 >= text->size()) {
    return IoError("/proc/" + std::to_string(pid) + "/stat: unexpected format");
  }
  ProcStat stat;
  const char* p = text->c_str() + close + 2;
  stat.state = *p;
  // Field 3 is the state; field 6 the session; field 22 is 19 fields further.
  for (int field = 3; field < 22 && *p != '\0'; ++field) {
    while (*p != '\0' && *p != ' ') ++p;
    while (*p == ' ') ++p;
    if (field + 1 == 6) stat.session = static_cast<pid_t>(std::strtol(p, nullptr, 10));
  }
  if (*p == '\0') return IoError("/proc/" + std::to_string(pid) + "/stat: too few fields");
  stat.start_ticks = std::strtoull(p, nullptr, 10);
  return stat;
}

bool IsSameLiveProcess(pid_t pid, uint64_t start_ticks) {
  auto stat = ReadProcStat(pid);
  return stat.ok() && stat->start_ticks == start_ticks && stat->state != 'Z' && stat->state != 'X';
}

}  // namespace corral::agent
