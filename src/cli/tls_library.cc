#include "cli/tls_library.h"

#include <dlfcn.h>

#include <string>

#include "common/shared_library.h"

namespace corral::cli {
namespace {

// The soname of the ABI the OpenSSL 3 headers describe; Debian's libssl3 package.
constexpr const char* kTlsSoname = "libssl.so.3";

Result<const TlsLibrary*> OpenTls() {
  Result<void*> opened =
      OpenSharedLibrary(kTlsSoname, "an https:// server", "OpenSSL's libssl", "libssl3");
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  auto* tls = new TlsLibrary;  // lives as long as the process, like the library
#define CORRAL_TLS_RESOLVE(name)                                            \
  tls->name = reinterpret_cast<decltype(tls->name)>(dlsym(library, #name)); \
  if (tls->name == nullptr) {                                               \
    delete tls;                                                             \
    return FailedPrecondition(std::string(kTlsSoname) + " has no " #name);  \
  }
  CORRAL_TLS_FUNCTIONS(CORRAL_TLS_RESOLVE)
#undef CORRAL_TLS_RESOLVE
  return tls;
}

}  // namespace

Result<const TlsLibrary*> LoadTls() {
  static const Result<const TlsLibrary*> loaded = OpenTls();  // once; thread-safe initialisation
  return loaded;
}

}  // namespace corral::cli
