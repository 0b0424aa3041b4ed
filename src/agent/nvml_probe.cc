#include "agent/nvml_probe.h"

#include <dlfcn.h>

#include <cstring>
#include <map>
#include <tuple>

namespace corral::agent {

// The few NVML types and constants we use, declared here (from NVIDIA's public nvml.h) so that
// the build needs no CUDA headers. Layouts must match the C ABI of nvml.h exactly.
namespace nvml {

using Return = int;  // nvmlReturn_t (a C enum)
constexpr Return kSuccess = 0;
struct DeviceSt;
using Device = DeviceSt*;  // nvmlDevice_t

struct Memory {  // nvmlMemory_t
  unsigned long long total;
  unsigned long long free;
  unsigned long long used;
};

struct PciInfo {  // nvmlPciInfo_t (the layout of nvmlDeviceGetPciInfo_v3 and _v2)
  char bus_id_legacy[16];
  unsigned int domain;
  unsigned int bus;
  unsigned int device;
  unsigned int pci_device_id;
  unsigned int pci_subsystem_id;
  char bus_id[32];
};

struct Utilization {  // nvmlUtilization_t
  unsigned int gpu;
  unsigned int memory;
};

struct ProcessInfo {  // nvmlProcessInfo_t (v2 layout, as the _v3 entry points fill it)
  unsigned int pid;
  unsigned long long used_gpu_memory;
  unsigned int gpu_instance_id;
  unsigned int compute_instance_id;
};
constexpr Return kInsufficientSize = 7;                   // NVML_ERROR_INSUFFICIENT_SIZE
constexpr unsigned long long kValueNotAvailable = ~0ull;  // NVML_VALUE_NOT_AVAILABLE

using EnableState = int;  // nvmlEnableState_t
constexpr EnableState kFeatureEnabled = 1;
using TemperatureSensor = int;  // nvmlTemperatureSensors_t
constexpr TemperatureSensor kTemperatureGpu = 0;

constexpr unsigned long long kMiB = 1024ull * 1024;
constexpr unsigned int kMaxLinks = 18;        // NVML_NVLINK_MAX_LINKS (NVLink 4)
constexpr unsigned int kNameBufferSize = 96;  // NVML_DEVICE_NAME_V2_BUFFER_SIZE
constexpr unsigned int kUuidBufferSize = 96;  // NVML_DEVICE_UUID_V2_BUFFER_SIZE

}  // namespace nvml

struct NvmlApi {
  // Required: Create() fails without them.
  nvml::Return (*init)();
  nvml::Return (*shutdown)();
  nvml::Return (*get_count)(unsigned int*);
  nvml::Return (*get_handle_by_index)(unsigned int, nvml::Device*);
  nvml::Return (*get_name)(nvml::Device, char*, unsigned int);
  nvml::Return (*get_uuid)(nvml::Device, char*, unsigned int);
  nvml::Return (*get_memory_info)(nvml::Device, nvml::Memory*);
  // Optional: a feature without its entry point is reported as absent.
  const char* (*error_string)(nvml::Return);
  nvml::Return (*get_pci_info)(nvml::Device, nvml::PciInfo*);
  nvml::Return (*get_nvlink_state)(nvml::Device, unsigned int, nvml::EnableState*);
  nvml::Return (*get_nvlink_remote_pci_info)(nvml::Device, unsigned int, nvml::PciInfo*);
  nvml::Return (*get_utilization)(nvml::Device, nvml::Utilization*);
  nvml::Return (*get_power_usage)(nvml::Device, unsigned int*);
  nvml::Return (*get_temperature)(nvml::Device, nvml::TemperatureSensor, unsigned int*);
  nvml::Return (*get_compute_processes)(nvml::Device, unsigned int*, nvml::ProcessInfo*);

  std::string ErrorText(nvml::Return r) const {
    const char* text = error_string != nullptr ? error_string(r) : nullptr;
    return text != nullptr ? std::string(text) : "NVML error " + std::to_string(r);
  }
};

namespace {

template <typename Fn>
void Resolve(void* handle, const char* name, Fn*& out) {
  out = reinterpret_cast<Fn*>(dlsym(handle, name));
}

// A PCI endpoint of an NVLink: domain, bus, device (the function is always 0 for GPUs/switches).
using PciAddress = std::tuple<unsigned int, unsigned int, unsigned int>;

PciAddress AddressOf(const nvml::PciInfo& info) { return {info.domain, info.bus, info.device}; }

// Union-find over GPUs and link endpoints.
class Components {
 public:
  int Add() {
    parent_.push_back(static_cast<int>(parent_.size()));
    return parent_.back();
  }
  int Find(int x) {
    while (parent_[x] != x) x = parent_[x] = parent_[parent_[x]];
    return x;
  }
  void Join(int a, int b) { parent_[Find(a)] = Find(b); }

 private:
  std::vector<int> parent_;
};

// The compute processes on `device`; empty when the driver cannot list them. The list may grow
// between the sizing call and the filling one: a few attempts with a larger buffer.
std::vector<GpuProcess> ComputeProcesses(const NvmlApi& api, nvml::Device device) {
  std::vector<GpuProcess> processes;
  if (api.get_compute_processes == nullptr) return processes;
  std::vector<nvml::ProcessInfo> infos(4);
  for (int attempt = 0; attempt < 3; ++attempt) {
    unsigned int count = static_cast<unsigned int>(infos.size());
    nvml::Return r = api.get_compute_processes(device, &count, infos.data());
    if (r == nvml::kInsufficientSize) {
      infos.resize(count + 8);
      continue;
    }
    if (r != nvml::kSuccess) return processes;
    for (unsigned int i = 0; i < count && i < infos.size(); ++i) {
      GpuProcess p;
      p.pid = static_cast<int>(infos[i].pid);
      if (infos[i].used_gpu_memory != nvml::kValueNotAvailable) {
        p.memory_used = MemoryMib(static_cast<int64_t>(infos[i].used_gpu_memory / nvml::kMiB));
      }
      processes.push_back(p);
    }
    return processes;
  }
  return processes;
}

}  // namespace

NvmlProbe::NvmlProbe(void* handle, std::unique_ptr<NvmlApi> api)
    : handle_(handle), api_(std::move(api)) {}

NvmlProbe::~NvmlProbe() {
  api_->shutdown();
  dlclose(handle_);
}

Result<std::unique_ptr<NvmlProbe>> NvmlProbe::Create(const std::string& library) {
  void* handle = dlopen(library.c_str(), RTLD_NOW | RTLD_LOCAL);
  if (handle == nullptr) {
    const char* detail = dlerror();
    return NotFound(library + " not found: no NVIDIA driver; use --fake-gpus" +
                    (detail != nullptr ? std::string(" (") + detail + ")" : std::string()));
  }
  auto api = std::make_unique<NvmlApi>();
  struct Required {
    const char* name;
    bool present;
  };
  Resolve(handle, "nvmlInit_v2", api->init);
  Resolve(handle, "nvmlShutdown", api->shutdown);
  Resolve(handle, "nvmlDeviceGetCount_v2", api->get_count);
  Resolve(handle, "nvmlDeviceGetHandleByIndex_v2", api->get_handle_by_index);
  Resolve(handle, "nvmlDeviceGetName", api->get_name);
  Resolve(handle, "nvmlDeviceGetUUID", api->get_uuid);
  Resolve(handle, "nvmlDeviceGetMemoryInfo", api->get_memory_info);
  const Required required[] = {
      {"nvmlInit_v2", api->init != nullptr},
      {"nvmlShutdown", api->shutdown != nullptr},
      {"nvmlDeviceGetCount_v2", api->get_count != nullptr},
      {"nvmlDeviceGetHandleByIndex_v2", api->get_handle_by_index != nullptr},
      {"nvmlDeviceGetName", api->get_name != nullptr},
      {"nvmlDeviceGetUUID", api->get_uuid != nullptr},
      {"nvmlDeviceGetMemoryInfo", api->get_memory_info != nullptr},
  };
  for (const Required& r : required) {
    if (!r.present) {
      dlclose(handle);
      return FailedPrecondition(library + ": missing symbol " + r.name +
                                " (NVIDIA driver too old?)");
    }
  }
  Resolve(handle, "nvmlErrorString", api->error_string);
  Resolve(handle, "nvmlDeviceGetPciInfo_v3", api->get_pci_info);
  if (api->get_pci_info == nullptr) Resolve(handle, "nvmlDeviceGetPciInfo_v2", api->get_pci_info);
  Resolve(handle, "nvmlDeviceGetNvLinkState", api->get_nvlink_state);
  Resolve(handle, "nvmlDeviceGetNvLinkRemotePciInfo_v2", api->get_nvlink_remote_pci_info);
  Resolve(handle, "nvmlDeviceGetUtilizationRates", api->get_utilization);
  Resolve(handle, "nvmlDeviceGetPowerUsage", api->get_power_usage);
  Resolve(handle, "nvmlDeviceGetTemperature", api->get_temperature);
  Resolve(handle, "nvmlDeviceGetComputeRunningProcesses_v3", api->get_compute_processes);

  if (nvml::Return r = api->init(); r != nvml::kSuccess) {
    std::string text = api->ErrorText(r);
    dlclose(handle);
    return FailedPrecondition(library + ": nvmlInit_v2: " + text);
  }
  return std::unique_ptr<NvmlProbe>(new NvmlProbe(handle, std::move(api)));
}

Result<GpuInventory> NvmlProbe::Discover() {
  auto fail = [&](const std::string& call, int index, nvml::Return r) {
    return IoError(call + "(GPU " + std::to_string(index) + "): " + api_->ErrorText(r));
  };
  unsigned int count = 0;
  if (nvml::Return r = api_->get_count(&count); r != nvml::kSuccess) {
    return IoError("nvmlDeviceGetCount_v2: " + api_->ErrorText(r));
  }
  GpuInventory inventory;
  std::vector<nvml::Device> devices(count);
  std::vector<std::string> models(count);
  for (unsigned int i = 0; i < count; ++i) {
    const int index = static_cast<int>(i);
    if (nvml::Return r = api_->get_handle_by_index(i, &devices[i]); r != nvml::kSuccess) {
      return fail("nvmlDeviceGetHandleByIndex_v2", index, r);
    }
    char name[nvml::kNameBufferSize] = {};
    if (nvml::Return r = api_->get_name(devices[i], name, sizeof(name)); r != nvml::kSuccess) {
      return fail("nvmlDeviceGetName", index, r);
    }
    char uuid[nvml::kUuidBufferSize] = {};
    if (nvml::Return r = api_->get_uuid(devices[i], uuid, sizeof(uuid)); r != nvml::kSuccess) {
      return fail("nvmlDeviceGetUUID", index, r);
    }
    nvml::Memory memory{};
    if (nvml::Return r = api_->get_memory_info(devices[i], &memory); r != nvml::kSuccess) {
      return fail("nvmlDeviceGetMemoryInfo", index, r);
    }
    model::Gpu gpu;
    gpu.index = index;
    gpu.uuid = std::string(uuid, strnlen(uuid, sizeof(uuid)));
    gpu.memory = MemoryMib(static_cast<int64_t>(memory.total / nvml::kMiB));
    models[i] = NormalizeGpuModel(std::string_view(name, strnlen(name, sizeof(name))), gpu.memory);
    if (models[i] != models[0]) {
      return InvalidArgument("GPUs of several models on one node: GPU 0 is '" + models[0] +
                             "', GPU " + std::to_string(i) + " is '" + models[i] +
                             "'; corral needs one model per node");
    }
    inventory.gpus.push_back(std::move(gpu));
  }
  if (count > 0) inventory.model = models[0];

  // NVLink domains. Node i < count is GPU i; other nodes are link endpoints that are not GPUs of
  // this node (NVSwitches), added as met.
  Components components;
  std::map<PciAddress, int> node_of_address;
  for (unsigned int i = 0; i < count; ++i) components.Add();
  const bool have_links = api_->get_pci_info != nullptr && api_->get_nvlink_state != nullptr &&
                          api_->get_nvlink_remote_pci_info != nullptr;
  if (have_links) {
    for (unsigned int i = 0; i < count; ++i) {
      nvml::PciInfo pci{};
      if (api_->get_pci_info(devices[i], &pci) == nvml::kSuccess) {
        node_of_address[AddressOf(pci)] = static_cast<int>(i);
      }
    }
    for (unsigned int i = 0; i < count; ++i) {
      for (unsigned int link = 0; link < nvml::kMaxLinks; ++link) {
        nvml::EnableState active = 0;
        // Links a device does not have answer NOT_SUPPORTED or INVALID_ARGUMENT: skip them.
        if (api_->get_nvlink_state(devices[i], link, &active) != nvml::kSuccess) continue;
        if (active != nvml::kFeatureEnabled) continue;
        nvml::PciInfo remote{};
        if (api_->get_nvlink_remote_pci_info(devices[i], link, &remote) != nvml::kSuccess) {
          continue;
        }
        auto [it, added] = node_of_address.try_emplace(AddressOf(remote), 0);
        if (added) it->second = components.Add();
        components.Join(static_cast<int>(i), it->second);
      }
    }
  }
  std::map<int, int> domain_of_root;  // numbered in order of each domain's lowest GPU index
  for (model::Gpu& gpu : inventory.gpus) {
    auto [it, added] = domain_of_root.try_emplace(components.Find(gpu.index),
                                                  static_cast<int>(domain_of_root.size()));
    gpu.nvlink_domain = it->second;
  }
  return inventory;
}

Result<std::vector<GpuSample>> NvmlProbe::Sample() {
  unsigned int count = 0;
  if (nvml::Return r = api_->get_count(&count); r != nvml::kSuccess) {
    return IoError("nvmlDeviceGetCount_v2: " + api_->ErrorText(r));
  }
  std::vector<GpuSample> samples;
  for (unsigned int i = 0; i < count; ++i) {
    nvml::Device device = nullptr;
    if (nvml::Return r = api_->get_handle_by_index(i, &device); r != nvml::kSuccess) {
      return IoError("nvmlDeviceGetHandleByIndex_v2(GPU " + std::to_string(i) +
                     "): " + api_->ErrorText(r));
    }
    GpuSample s;
    s.index = static_cast<int>(i);
    nvml::Utilization util{};
    if (api_->get_utilization != nullptr &&
        api_->get_utilization(device, &util) == nvml::kSuccess) {
      s.gpu_utilization_percent = static_cast<int>(util.gpu);
      s.memory_utilization_percent = static_cast<int>(util.memory);
    }
    nvml::Memory memory{};
    if (api_->get_memory_info(device, &memory) == nvml::kSuccess) {
      s.memory_used = MemoryMib(static_cast<int64_t>(memory.used / nvml::kMiB));
    }
    unsigned int milliwatts = 0;
    if (api_->get_power_usage != nullptr &&
        api_->get_power_usage(device, &milliwatts) == nvml::kSuccess) {
      s.power_milliwatts = static_cast<int>(milliwatts);
    }
    unsigned int celsius = 0;
    if (api_->get_temperature != nullptr &&
        api_->get_temperature(device, nvml::kTemperatureGpu, &celsius) == nvml::kSuccess) {
      s.temperature_celsius = static_cast<int>(celsius);
    }
    s.processes = ComputeProcesses(*api_, device);
    samples.push_back(s);
  }
  return samples;
}

}  // namespace corral::agent
