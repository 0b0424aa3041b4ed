// OpenSSL's libssl, loaded at run time by the first https request of the CLI (http_client.h):
// linked, libssl and libcrypto were loaded and relocated at every `corral` start, http or not
// (docs/benchmarks.md, "Build time and CLI start-up"). The table's types come from the OpenSSL
// headers, so a signature that changes breaks the build rather than a call (as
// server/http/mhd_library.h). libcrypto's functions are found through libssl, which needs it.
//
// Thread safety: LoadTls() may be called from any thread; the table is immutable and lives until
// the process exits (the library is never unloaded).
#pragma once

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509_vfy.h>

#include "common/status.h"

namespace corral::cli {

// Every OpenSSL function the CLI calls; one X(name) per function.
#define CORRAL_TLS_FUNCTIONS(X)       \
  X(TLS_client_method)                \
  X(SSL_CTX_new)                      \
  X(SSL_CTX_free)                     \
  X(SSL_CTX_ctrl)                     \
  X(SSL_CTX_set_verify)               \
  X(SSL_CTX_load_verify_locations)    \
  X(SSL_CTX_set_default_verify_paths) \
  X(SSL_new)                          \
  X(SSL_free)                         \
  X(SSL_set_fd)                       \
  X(SSL_ctrl)                         \
  X(SSL_set1_host)                    \
  X(SSL_connect)                      \
  X(SSL_read)                         \
  X(SSL_write)                        \
  X(SSL_pending)                      \
  X(SSL_get_error)                    \
  X(SSL_get_verify_result)            \
  X(SSL_shutdown)                     \
  X(ERR_get_error)                    \
  X(ERR_clear_error)                  \
  X(ERR_error_string_n)               \
  X(X509_verify_cert_error_string)

struct TlsLibrary {
#define CORRAL_TLS_FIELD(name) decltype(&::name) name = nullptr;
  CORRAL_TLS_FUNCTIONS(CORRAL_TLS_FIELD)
#undef CORRAL_TLS_FIELD
};

// Loads libssl.so.3 (Debian package libssl3) once and resolves every function. Errors:
// FailedPrecondition naming the library and package, or the missing function; the same error on
// every later call.
Result<const TlsLibrary*> LoadTls();

}  // namespace corral::cli
