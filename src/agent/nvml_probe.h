// GpuProbe over NVIDIA's management library. libnvidia-ml.so.1 ships with the driver, not with
// CUDA, and is loaded with dlopen() at run time: corral builds and runs without any NVIDIA
// software, and a machine without a driver gets a clear error instead of a missing-library crash.
#pragma once

#include <memory>
#include <string>

#include "agent/gpu_probe.h"

namespace corral::agent {

// The NVML entry points corral uses, resolved from the loaded library.
struct NvmlApi;

// Owns one NVML session (nvmlInit_v2 .. nvmlShutdown) and the library handle for its lifetime.
// Not thread-safe: one thread calls Discover() and Sample().
class NvmlProbe final : public GpuProbe {
 public:
  // Loads `library` (a soname searched the usual dlopen way, or a path) and initialises NVML.
  // Errors: NotFound "libnvidia-ml.so.1 not found: no NVIDIA driver; use --fake-gpus" when the
  // library cannot be loaded; FailedPrecondition naming the missing symbol (driver too old) or
  // the nvmlInit_v2 error ("Driver Not Loaded").
  static Result<std::unique_ptr<NvmlProbe>> Create(
      const std::string& library = "libnvidia-ml.so.1");
  ~NvmlProbe() override;
  NvmlProbe(const NvmlProbe&) = delete;
  NvmlProbe& operator=(const NvmlProbe&) = delete;

  // Model (NormalizeGpuModel of device 0's name), and per GPU: index, UUID, total memory, and
  // NVLink domain. Domains are the connected components of the NVLink graph: two GPUs share a
  // domain when an active link joins them directly or through a common endpoint (an NVSwitch).
  // A GPU without active links is a domain of its own. InvalidArgument if the GPUs are of
  // several models.
  Result<GpuInventory> Discover() override;
  // Utilisation, memory used, power and temperature; fields a device does not support are empty.
  Result<std::vector<GpuSample>> Sample() override;

 private:
  NvmlProbe(void* handle, std::unique_ptr<NvmlApi> api);

  void* handle_;  // from dlopen; closed in the destructor after nvmlShutdown
  std::unique_ptr<NvmlApi> api_;
};

}  // namespace corral::agent
