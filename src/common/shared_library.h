// Libraries loaded at run time rather than linked (store/libpq.h, server/http/mhd_library.h):
// linked, a library and everything it needs is loaded into every `corral` call, the CLI's
// included, before main.
//
// Thread safety: any thread.
#pragma once

#include <string>

#include "common/status.h"

namespace corral {

// dlopen()s `soname` with RTLD_NOW | RTLD_LOCAL (its own dependencies stay out of the global
// symbol namespace); the handle is never closed. Errors: FailedPrecondition "<who> needs <what>
// (<soname>, Debian package <package>): <dlerror>".
Result<void*> OpenSharedLibrary(const char* soname, const std::string& who, const std::string& what,
                                const std::string& package);

}  // namespace corral
