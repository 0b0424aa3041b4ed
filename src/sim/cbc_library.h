// CBC (COIN-OR branch and cut), loaded at run time by the first exact solve
// (ExactPlaceableMilli, fill_bound.h): linked, libCbcSolver and the eleven libraries it needs
// (about 11,000 relocations) were loaded into every `corral` and `corral-daemon` start, though
// only `corral sim bound --exact-nodes` uses them (docs/decisions.md: libraries are loaded at run
// time for start-up, as libpq's and libmicrohttpd's). The table's types come from
// Cbc_C_Interface.h, so a signature that changes breaks the build rather than a call.
//
// Thread safety: LoadCbc() and Cbc() may be called from any thread; the table is immutable and
// lives until the process exits (the library is never unloaded).
#pragma once

#include <Cbc_C_Interface.h>

#include "common/status.h"

namespace corral::sim {

// Every CBC function the exact solve calls; one X(name) per function.
#define CORRAL_CBC_FUNCTIONS(X)  \
  X(Cbc_bestSolution)            \
  X(Cbc_deleteModel)             \
  X(Cbc_getBestPossibleObjValue) \
  X(Cbc_isProvenOptimal)         \
  X(Cbc_isSecondsLimitReached)   \
  X(Cbc_loadProblem)             \
  X(Cbc_newModel)                \
  X(Cbc_setInteger)              \
  X(Cbc_setLogLevel)             \
  X(Cbc_setMIPStartI)            \
  X(Cbc_setMaximumSeconds)       \
  X(Cbc_setObjSense)             \
  X(Cbc_setParameter)            \
  X(Cbc_solve)                   \
  X(Cbc_status)

struct CbcLibrary {
#define CORRAL_CBC_FIELD(name) decltype(&::name) name = nullptr;
  CORRAL_CBC_FUNCTIONS(CORRAL_CBC_FIELD)
#undef CORRAL_CBC_FIELD
};

// Loads libCbcSolver.so.3 (Debian package coinor-libcbc3) once and resolves every function.
// Errors: FailedPrecondition naming the library and package, or the missing function; the same
// error on every later call.
Result<const CbcLibrary*> LoadCbc();

}  // namespace corral::sim
