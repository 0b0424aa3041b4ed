// GNU libmicrohttpd, opened at run time (dlopen) by the first HTTP server that starts, rather
// than linked: every corral command, the CLI's and each task supervisor's included, loaded it
// and the GnuTLS it needs (ten libraries, about 15,000 relocations) before main, which made each
// start 40% slower (docs/benchmarks.md, "CLI start-up").
//
// Thread safety: LoadMhd() may be called from any thread; Mhd() after a LoadMhd() that
// succeeded, from any thread.
#pragma once

#include <microhttpd.h>

#include "common/status.h"

namespace corral::server {

// The soname of the ABI microhttpd.h describes (Debian 12: package libmicrohttpd12).
inline constexpr char kMhdSoname[] = "libmicrohttpd.so.12";

// The functions of libmicrohttpd corral calls, with the header's signatures.
struct MhdLibrary {
  decltype(&MHD_start_daemon) start_daemon = nullptr;
  decltype(&MHD_stop_daemon) stop_daemon = nullptr;
  decltype(&MHD_get_connection_info) get_connection_info = nullptr;
  decltype(&MHD_get_connection_values) get_connection_values = nullptr;
  decltype(&MHD_create_response_from_callback) create_response_from_callback = nullptr;
  decltype(&MHD_create_response_from_buffer) create_response_from_buffer = nullptr;
  decltype(&MHD_add_response_header) add_response_header = nullptr;
  decltype(&MHD_queue_response) queue_response = nullptr;
  decltype(&MHD_destroy_response) destroy_response = nullptr;
};

// Opens kMhdSoname once and resolves every function; the library stays loaded. Errors:
// FailedPrecondition naming the library (and the package to install) or the missing function;
// the same error again on every later call.
Result<const MhdLibrary*> LoadMhd();

// The library LoadMhd() opened. Only after a LoadMhd() that succeeded.
const MhdLibrary& Mhd();

}  // namespace corral::server
