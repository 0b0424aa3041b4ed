// CORRAL_CHECK(condition): an invariant of corral's own code, never of its input (input errors
// are Status values). When it does not hold, the process prints the condition and where, and
// aborts: in every build type, unlike assert, which Release builds drop. For invariants whose
// violation would otherwise be undefined behaviour (a dereferenced end iterator).
#pragma once

#include <cstdio>
#include <cstdlib>

namespace corral {

[[noreturn]] inline void CheckFailed(const char* condition, const char* file, int line) {
  std::fprintf(stderr, "%s:%d: CORRAL_CHECK failed: %s\n", file, line, condition);
  std::abort();
}

}  // namespace corral

#define CORRAL_CHECK(condition) \
  ((condition) ? static_cast<void>(0) : ::corral::CheckFailed(#condition, __FILE__, __LINE__))
