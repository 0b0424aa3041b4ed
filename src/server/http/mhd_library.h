// GNU libmicrohttpd, loaded at run time by the first HTTP server that starts: linked, it was
// loaded with GnuTLS and the nine libraries GnuTLS needs (about 15,000 relocations) into every
// `corral` call, the CLI's and each task supervisor's included, which made each start about 30%
// slower (docs/benchmarks.md, "Build time and CLI start-up"). The table's types come from
// microhttpd.h, so a signature that changes breaks the build rather than a call (as libpq's,
// store/libpq.h).
//
// Thread safety: LoadMhd() and Mhd() may be called from any thread; the table is immutable and
// lives until the process exits (the library is never unloaded).
#pragma once

#include <microhttpd.h>

#include "common/status.h"

namespace corral::server {

// Every libmicrohttpd function the HTTP server calls; one X(name) per function.
#define CORRAL_MHD_FUNCTIONS(X)        \
  X(MHD_add_response_header)           \
  X(MHD_create_response_from_buffer)   \
  X(MHD_create_response_from_callback) \
  X(MHD_destroy_response)              \
  X(MHD_get_connection_info)           \
  X(MHD_get_connection_values)         \
  X(MHD_queue_response)                \
  X(MHD_start_daemon)                  \
  X(MHD_stop_daemon)

struct MhdLibrary {
#define CORRAL_MHD_FIELD(name) decltype(&::name) name = nullptr;
  CORRAL_MHD_FUNCTIONS(CORRAL_MHD_FIELD)
#undef CORRAL_MHD_FIELD
};

// Loads libmicrohttpd.so.12 (Debian package libmicrohttpd12) once and resolves every function.
// Errors: FailedPrecondition naming the library and package, or the missing function; the same
// error on every later call.
Result<const MhdLibrary*> LoadMhd();

// The table LoadMhd() loaded. Only after a LoadMhd() that succeeded.
const MhdLibrary& Mhd();

}  // namespace corral::server
