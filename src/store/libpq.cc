#include "store/libpq.h"

#include <dlfcn.h>

#include <string>
#include <string_view>

#include "common/shared_library.h"

namespace corral::store {
namespace {

// The soname of libpq since PostgreSQL 8.2; Debian's libpq5 package.
constexpr const char* kLibPqSoname = "libpq.so.5";

Result<const LibPq*> Load() {
  Result<void*> opened = OpenSharedLibrary(kLibPqSoname, "a PostgreSQL store", "libpq", "libpq5");
  if (!opened.ok()) return opened.status();
  void* library = *opened;
  auto* pq = new LibPq;  // lives as long as the process, like the library
#define CORRAL_LIBPQ_RESOLVE(name)                                                                \
  pq->name = reinterpret_cast<decltype(pq->name)>(dlsym(library, #name));                         \
  if (pq->name == nullptr) {                                                                      \
    delete pq;                                                                                    \
    return FailedPrecondition(std::string(kLibPqSoname) + " has no " #name +                      \
                              (std::string_view(#name).find("Pipeline") != std::string_view::npos \
                                   ? " (PostgreSQL 14 or newer is needed for pipeline mode)"      \
                                   : ""));                                                        \
  }
  CORRAL_LIBPQ_FUNCTIONS(CORRAL_LIBPQ_RESOLVE)
#undef CORRAL_LIBPQ_RESOLVE
  return pq;
}

}  // namespace

Result<const LibPq*> LoadLibPq() {
  static const Result<const LibPq*> loaded = Load();  // once; thread-safe initialisation
  return loaded;
}

}  // namespace corral::store
