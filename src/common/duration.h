// Durations as people type them on command lines: "90", "90s", "30m", "2h", "1d".
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"
#include "common/units.h"

namespace corral {

// The longest duration ParseDuration takes: 2^40 s (some 34,000 years), so that adding it to a
// Unix time cannot overflow.
inline constexpr Seconds kMaxDuration{int64_t{1} << 40};

// Seconds from a whole number (seconds), or numbers each followed by a unit, units in
// decreasing order without repeats: "90s", "30m", "2h30m", "1d12h" ("s", "m", "h", "d"). 0 and
// at most kMaxDuration. InvalidArgument naming `what` (a flag: "--expires: expected a duration
// like 90s, 30m, 2h or 1d, got '5x'").
Result<Seconds> ParseDuration(std::string_view text, const std::string& what);

// A time limit as people type one: what ParseDuration takes ("90" is seconds, "2h30m"), or
// Slurm's clock forms "M:SS", "H:MM:SS", "D-H", "D-H:MM", "D-H:MM:SS" (a field after the first
// is below 60). At most kMaxDuration. InvalidArgument naming `what` and the forms it takes.
Result<Seconds> ParseTimeLimit(std::string_view text, const std::string& what);

// `seconds` in the units form ParseDuration reads back: "2h30m", "1d4h", "45s", "0s" (every
// non-zero unit from days down). A negative duration is written "-1m30s", which no parser
// here takes.
std::string FormatDuration(Seconds seconds);

// Milliseconds, from what ParseDuration takes or a whole number followed by "ms" ("500ms",
// "3s"). InvalidArgument naming `what`.
Result<int64_t> ParseDurationMs(std::string_view text, const std::string& what);

}  // namespace corral
