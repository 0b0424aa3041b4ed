#include "server/http/mhd_library.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

namespace corral::server {
namespace {

std::once_flag mhd_once;
MhdLibrary mhd_functions;
const MhdLibrary* mhd_loaded = nullptr;
std::string mhd_error;

template <typename F>
bool ResolveMhd(void* handle, const char* name, F* out) {
  *out = reinterpret_cast<F>(dlsym(handle, name));
  if (*out == nullptr) mhd_error = std::string(kMhdSoname) + " has no " + name;
  return *out != nullptr;
}

void OpenMhd() {
  void* handle = dlopen(kMhdSoname, RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* why = dlerror();
    mhd_error = std::string("cannot load ") + kMhdSoname + " (Debian: apt-get install " +
                 "libmicrohttpd12): " + (why != nullptr ? why : "unknown error");
    return;
  }
  MhdLibrary& l = mhd_functions;
  if (ResolveMhd(handle, "MHD_start_daemon", &l.start_daemon) &&
      ResolveMhd(handle, "MHD_stop_daemon", &l.stop_daemon) &&
      ResolveMhd(handle, "MHD_get_connection_info", &l.get_connection_info) &&
      ResolveMhd(handle, "MHD_get_connection_values", &l.get_connection_values) &&
      ResolveMhd(handle, "MHD_create_response_from_callback", &l.create_response_from_callback) &&
      ResolveMhd(handle, "MHD_create_response_from_buffer", &l.create_response_from_buffer) &&
      ResolveMhd(handle, "MHD_add_response_header", &l.add_response_header) &&
      ResolveMhd(handle, "MHD_queue_response", &l.queue_response) &&
      ResolveMhd(handle, "MHD_destroy_response", &l.destroy_response)) {
    mhd_loaded = &mhd_functions;
  }
}

}  // namespace

Result<const MhdLibrary*> LoadMhd() {
  std::call_once(mhd_once, OpenMhd);
  if (mhd_loaded == nullptr) return FailedPrecondition(mhd_error);
  return mhd_loaded;
}

const MhdLibrary& Mhd() { return *mhd_loaded; }

}  // namespace corral::server
