#include "common/shared_library.h"

#include <dlfcn.h>

namespace corral {

Result<void*> OpenSharedLibrary(const char* soname, const std::string& who, const std::string& what,
                                const std::string& package) {
  void* library = dlopen(soname, RTLD_NOW | RTLD_LOCAL);
  if (library == nullptr) {
    const char* why = dlerror();
    return FailedPrecondition(who + " needs " + what + " (" + soname + ", Debian package " +
                              package + "): " + (why ? why : "dlopen failed"));
  }
  return library;
}

}  // namespace corral
