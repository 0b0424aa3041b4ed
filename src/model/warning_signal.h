// A signal sent to a job's tasks a while before its time limit, so that it can save its work
// (Slurm's --signal=SIG@SECONDS): `corral submit --signal USR1@90`, the spec's
// {"signal": {"name": "USR1", "before_s": 90}}, sent once by each task's agent at
// time_limit - before_s (docs/control-plane.md, "Time limits").
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/units.h"

namespace corral::model {

// Slurm's default when SIG is given without @SECONDS.
inline constexpr Seconds kDefaultWarningLead{60};
// The longest lead a warning may have (Slurm's limit).
inline constexpr Seconds kMaxWarningLead{65535};

struct WarningSignal {
  int signal = 0;  // a Linux signal number, 1..64; not SIGKILL or SIGSTOP, which cannot be caught
  Seconds before{kDefaultWarningLead};  // 0..kMaxWarningLead
  bool operator==(const WarningSignal&) const = default;
};

// The signal of a name as Slurm and kill(1) take it ("USR1", "SIGUSR1", "usr1", "10"; RTMIN+N
// too). Errors: InvalidArgument naming `field`, for an unknown name or a signal that cannot be
// caught.
Result<int> ParseSignal(std::string_view text, std::string_view field);
// "USR1"; the number for a signal without a name.
std::string SignalName(int signal);

// "SIG[@SECONDS]" (Slurm's --signal without its R:/B: prefixes). Errors name `field`.
Result<WarningSignal> ParseWarningSignal(std::string_view text, std::string_view field);

}  // namespace corral::model
