// GPU discovery: what GPUs a node has (for the inventory sent at registration) and how busy they
// are (for metrics). The real implementation reads NVML (nvml_probe.h); machines without GPUs use
// FakeProbe (fake_probe.h) behind the same interface.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "common/units.h"
#include "model/node.h"

namespace corral::agent {

// The GPUs of one node. Every GPU of a node has the same model (docs/decisions.md); a node
// without GPUs has an empty model and no GPUs.
struct GpuInventory {
  std::string model;             // normalised, e.g. "A100-80GB" (see NormalizeGpuModel)
  std::vector<model::Gpu> gpus;  // gpus[i].index == i; nvlink_domain numbered 0.. in index order
};

// A process that holds a context on a GPU (NVML's compute processes).
struct GpuProcess {
  int pid = 0;                           // in the agent's pid namespace
  std::optional<MemoryMib> memory_used;  // empty when the driver does not tell (e.g. MIG, vGPU)
};

// One reading of one GPU's activity. A field the device does not report is empty.
struct GpuSample {
  int index = 0;
  std::optional<int> gpu_utilization_percent;     // 0..100, over the driver's last sample period
  std::optional<int> memory_utilization_percent;  // memory-bus activity, 0..100
  std::optional<MemoryMib> memory_used;
  std::optional<int> power_milliwatts;
  std::optional<int> temperature_celsius;
  std::vector<GpuProcess> processes;  // empty when none, or when the driver cannot list them
};

class GpuProbe {
 public:
  virtual ~GpuProbe() = default;
  // Lists the node's GPUs. Errors: the driver cannot be queried, or the GPUs are of several
  // models (InvalidArgument naming both).
  virtual Result<GpuInventory> Discover() = 0;
  // One sample per GPU, in index order.
  virtual Result<std::vector<GpuSample>> Sample() = 0;
};

// Turns a device name as NVML reports it into corral's GPU model name, the name jobs ask for:
//  1. drop vendor words: "NVIDIA", "Tesla", "Quadro", "GeForce";
//  2. split the rest on spaces and '-'; drop form-factor and memory-technology words (SXM,
//     SXM2..SXM5, PCIe, NVL, HBM2, HBM2e, HBM3, HBM3e); a word "<N>GB" is the memory size;
//  3. the remaining words, joined with '-', are the family ("A100", "H100", "RTX-A6000");
//  4. families sold in several memory sizes that the traces tell apart get the size: A100 and
//     A800 as "A100-80GB", V100 as "V100M32"/"V100M16" (the openb trace convention). The size is
//     the "<N>GB" word, or else `memory` rounded to whole GiB. Every other family is the family
//     alone ("H100", "H200", "T4"), so that one model name covers all its form factors.
// Examples: "NVIDIA A100-SXM4-80GB" -> "A100-80GB", "NVIDIA A100 80GB PCIe" -> "A100-80GB",
// "Tesla V100-SXM2-32GB" -> "V100M32", "NVIDIA H100 80GB HBM3" -> "H100", "Tesla T4" -> "T4".
std::string NormalizeGpuModel(std::string_view nvml_name, MemoryMib memory);

// Device memory of a known model, for fakes: A100-80GB 81920, A100-40GB 40960, H100 81920,
// H200 143771, V100/V100M16 16384, V100M32 32768, T4 15360; any other model 16384.
MemoryMib KnownModelMemory(std::string_view model);

}  // namespace corral::agent
