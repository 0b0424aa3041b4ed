#include "server/http/mhd_library.h"

#include <dlfcn.h>

#include <string>

#include "common/shared_library.h"

namespace corral::server {
namespace {

// The soname of the ABI microhttpd.h describes; Debian's libmicrohttpd12 package.
constexpr const char* kMhdSoname = "libmicrohttpd.so.12";

Result<const MhdLibrary*> OpenMhd() {
  Result<void*> opened =
      OpenSharedLibrary(kMhdSoname, "the API server", "libmicrohttpd", "libmicrohttpd12");
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  auto* mhd = new MhdLibrary;  // lives as long as the process, like the library
#define CORRAL_MHD_RESOLVE(name)                                            \
  mhd->name = reinterpret_cast<decltype(mhd->name)>(dlsym(library, #name)); \
  if (mhd->name == nullptr) {                                               \
    delete mhd;                                                             \
    return FailedPrecondition(std::string(kMhdSoname) + " has no " #name);  \
  }
  CORRAL_MHD_FUNCTIONS(CORRAL_MHD_RESOLVE)
#undef CORRAL_MHD_RESOLVE
  return mhd;
}

}  // namespace

Result<const MhdLibrary*> LoadMhd() {
  static const Result<const MhdLibrary*> loaded = OpenMhd();  // once; thread-safe initialisation
  return loaded;
}

const MhdLibrary& Mhd() { return **LoadMhd(); }

}  // namespace corral::server
