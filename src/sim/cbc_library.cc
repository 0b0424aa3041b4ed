#include "sim/cbc_library.h"

#include <dlfcn.h>

#include <string>

#include "common/shared_library.h"

namespace corral::sim {
namespace {

// The soname of the ABI Cbc_C_Interface.h describes (CBC 2.10); Debian's coinor-libcbc3 package.
constexpr const char* kCbcSoname = "libCbcSolver.so.3";

Result<const CbcLibrary*> OpenCbc() {
  Result<void*> opened = OpenSharedLibrary(kCbcSoname, "the exact solve (--exact-nodes)",
                                           "CBC's solver library", "coinor-libcbc3");
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  auto* cbc = new CbcLibrary;  // lives as long as the process, like the library
#define CORRAL_CBC_RESOLVE(name)                                            \
  cbc->name = reinterpret_cast<decltype(cbc->name)>(dlsym(library, #name)); \
  if (cbc->name == nullptr) {                                               \
    delete cbc;                                                             \
    return FailedPrecondition(std::string(kCbcSoname) + " has no " #name);  \
  }
  CORRAL_CBC_FUNCTIONS(CORRAL_CBC_RESOLVE)
#undef CORRAL_CBC_RESOLVE
  return cbc;
}

}  // namespace

Result<const CbcLibrary*> LoadCbc() {
  static const Result<const CbcLibrary*> loaded = OpenCbc();  // once; thread-safe initialisation
  return loaded;
}

}  // namespace corral::sim
