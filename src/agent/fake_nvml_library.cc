// A stand-in for libnvidia-ml.so.1, built as a loadable module for nvml_probe_test: NvmlProbe
// loads it by path with dlopen(), so the test covers symbol lookup, the C ABI of the structs and
// the NVLink grouping without a GPU. The machine it pretends to be is chosen by the environment
// variable FAKE_NVML_MACHINE, read at nvmlInit_v2:
//   "pairs"     4 x "NVIDIA A100-SXM4-40GB", NVLink bridges 0-1 and 2-3 (two domains)
//   "switch"    8 x "NVIDIA H100 80GB HBM3", every GPU linked to two NVSwitches (one domain)
//   "pcie"      2 x "Tesla T4", no NVLink (NOT_SUPPORTED): one domain per GPU
//   "mixed"     2 GPUs, "Tesla T4" and "Tesla V100-SXM2-32GB"
//   "no_driver" nvmlInit_v2 fails with NVML_ERROR_DRIVER_NOT_LOADED
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct PciInfo {
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct Memory {
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct Utilization {
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t as nvmlDeviceGetComputeRunningProcesses_v3 fills it
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};

struct Link {
  unsigned int bus;  // remote endpoint's PCI bus
};

struct FakeGpu {
  std::string name;
  unsigned long long memory_bytes;
  unsigned int bus;
  std::vector<Link> links;  // empty: NVLink not supported
};

std::vector<FakeGpu> gpus;
constexpr int kSuccess = 0;
constexpr int kInvalidArgument = 2;
constexpr int kNotSupported = 3;
constexpr int kInsufficientSize = 7;
constexpr int kDriverNotLoaded = 9;
constexpr unsigned long long kValueNotAvailable = ~0ull;
constexpr unsigned long long kMiB = 1024ull * 1024;

int Index(void* device) { return static_cast<int>(reinterpret_cast<long>(device)) - 1; }

bool Valid(void* device) { return Index(device) >= 0 && Index(device) < (int)gpus.size(); }

void FillPci(unsigned int bus, PciInfo* info) {
  std::memset(info, 0, sizeof(*info));
  info->domain = 0;
  info->bus = bus;
  info->device = 0;
  std::snprintf(info->bus_id, sizeof(info->bus_id), "00000000:%02X:00.0", bus);
  std::snprintf(info->bus_id_legacy, sizeof(info->bus_id_legacy), "0000:%02X:00.0", bus);
}

}  // namespace

// The names and signatures are NVML's C ABI, not ours to style; handles are small integers.
// NOLINTBEGIN(readability-identifier-naming, performance-no-int-to-ptr)
extern "C" {

int nvmlInit_v2() {
  const char* machine = std::getenv("FAKE_NVML_MACHINE");
  std::string m = machine != nullptr ? machine : "";
  gpus.clear();
  if (m == "no_driver") return kDriverNotLoaded;
  if (m == "pairs") {
    for (unsigned int i = 0; i < 4; ++i) {
      unsigned int peer = i ^ 1u;
      // Two links to the peer, as NVLink bridges have.
      gpus.push_back(
          {"NVIDIA A100-SXM4-40GB", 40960 * kMiB, 0x10 + i, {{0x10 + peer}, {0x10 + peer}}});
    }
  } else if (m == "switch") {
    for (unsigned int i = 0; i < 8; ++i) {
      gpus.push_back({"NVIDIA H100 80GB HBM3", 81559 * kMiB, 0x20 + i, {{0xA0}, {0xA1}}});
    }
  } else if (m == "pcie") {
    gpus.push_back({"Tesla T4", 15360 * kMiB, 0x30, {}});
    gpus.push_back({"Tesla T4", 15360 * kMiB, 0x31, {}});
  } else if (m == "mixed") {
    gpus.push_back({"Tesla T4", 15360 * kMiB, 0x30, {}});
    gpus.push_back({"Tesla V100-SXM2-32GB", 32768 * kMiB, 0x31, {}});
  }
  return kSuccess;
}

int nvmlShutdown() { return kSuccess; }

const char* nvmlErrorString(int r) {
  switch (r) {
    case kSuccess:
      return "Success";
    case kInvalidArgument:
      return "Invalid Argument";
    case kNotSupported:
      return "Not Supported";
    case kInsufficientSize:
      return "Insufficient Size";
    case kDriverNotLoaded:
      return "Driver Not Loaded";
    default:
      return "Unknown Error";
  }
}

int nvmlDeviceGetCount_v2(unsigned int* count) {
  *count = static_cast<unsigned int>(gpus.size());
  return kSuccess;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned int index, void** device) {
  if (index >= gpus.size()) return kInvalidArgument;
  *device = reinterpret_cast<void*>(static_cast<long>(index) + 1);
  return kSuccess;
}

int nvmlDeviceGetName(void* device, char* name, unsigned int length) {
  if (!Valid(device)) return kInvalidArgument;
  std::snprintf(name, length, "%s", gpus[Index(device)].name.c_str());
  return kSuccess;
}

int nvmlDeviceGetUUID(void* device, char* uuid, unsigned int length) {
  if (!Valid(device)) return kInvalidArgument;
  std::snprintf(uuid, length, "GPU-00000000-0000-0000-0000-%012d", Index(device));
  return kSuccess;
}

int nvmlDeviceGetMemoryInfo(void* device, Memory* memory) {
  if (!Valid(device)) return kInvalidArgument;
  memory->total = gpus[Index(device)].memory_bytes;
  memory->used = 1024 * kMiB * static_cast<unsigned long long>(Index(device));
  memory->free = memory->total - memory->used;
  return kSuccess;
}

int nvmlDeviceGetPciInfo_v3(void* device, PciInfo* info) {
  if (!Valid(device)) return kInvalidArgument;
  FillPci(gpus[Index(device)].bus, info);
  return kSuccess;
}

int nvmlDeviceGetNvLinkState(void* device, unsigned int link, int* active) {
  if (!Valid(device)) return kInvalidArgument;
  const FakeGpu& gpu = gpus[Index(device)];
  if (gpu.links.empty()) return kNotSupported;
  if (link >= 18) return kInvalidArgument;
  *active = link < gpu.links.size() ? 1 : 0;
  return kSuccess;
}

int nvmlDeviceGetNvLinkRemotePciInfo_v2(void* device, unsigned int link, PciInfo* info) {
  if (!Valid(device)) return kInvalidArgument;
  const FakeGpu& gpu = gpus[Index(device)];
  if (link >= gpu.links.size()) return kInvalidArgument;
  FillPci(gpu.links[link].bus, info);
  return kSuccess;
}

int nvmlDeviceGetUtilizationRates(void* device, Utilization* util) {
  if (!Valid(device)) return kInvalidArgument;
  util->gpu = 10u * static_cast<unsigned int>(Index(device));
  util->memory = 5;
  return kSuccess;
}

int nvmlDeviceGetPowerUsage(void* device, unsigned int* milliwatts) {
  if (!Valid(device)) return kInvalidArgument;
  if (gpus[Index(device)].name == "Tesla T4") return kNotSupported;
  *milliwatts = 250000;
  return kSuccess;
}

// GPU i runs i processes: pids 1000*i + k (k = 1..i), each using k GiB except the last on a
// "switch" machine, whose memory the driver does not tell (NVML_VALUE_NOT_AVAILABLE).
int nvmlDeviceGetComputeRunningProcesses_v3(void* device, unsigned int* count, ProcessInfo* infos) {
  if (!Valid(device)) return kInvalidArgument;
  const unsigned int n = static_cast<unsigned int>(Index(device));
  if (*count < n) {
    *count = n;
    return kInsufficientSize;
  }
  *count = n;
  for (unsigned int k = 1; k <= n; ++k) {
    ProcessInfo& p = infos[k - 1];
    p.pid = 1000 * n + k;
    p.used_gpu_memory = 1024 * kMiB * k;
    if (k == n && gpus[Index(device)].name.find("H100") != std::string::npos) {
      p.used_gpu_memory = kValueNotAvailable;
    }
    p.gpu_instance_id = 0;
    p.compute_instance_id = 0;
  }
  return kSuccess;
}

int nvmlDeviceGetTemperature(void* device, int sensor, unsigned int* celsius) {
  if (!Valid(device) || sensor != 0) return kInvalidArgument;
  *celsius = 40 + static_cast<unsigned int>(Index(device));
  return kSuccess;
}

}  // extern "C"
// NOLINTEND(readability-identifier-naming, performance-no-int-to-ptr)
