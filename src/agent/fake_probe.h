// A GpuProbe for machines without GPUs (development, CI, `corral dev`): the GPUs come from a spec
// string given with --fake-gpus.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_probe.h"

namespace corral::agent {

// Spec grammar: GROUP[,GROUP...] where GROUP is "<count>x<model>", e.g. "8xA100-80GB" or
// "4xV100M32,4xV100M32". Every group is one NVLink domain (an 8-GPU group is one NVSwitch
// domain; "4xM,4xM" is two 4-GPU islands); indices run on across groups. All groups must name
// the same model (one model per node). The empty spec is a node without GPUs.
//  - count: 1..64 per group, at most 64 GPUs in all;
//  - model: letters, digits, '-', '_' and '.'; memory from KnownModelMemory();
//  - uuid: "GPU-fake-<hostname>-<index>", stable across restarts.
class FakeProbe final : public GpuProbe {
 public:
  // Errors name the offending group: "fake GPU spec '8xA100,2x': group 2 ('2x'): model must not
  // be empty".
  static Result<FakeProbe> Create(std::string_view spec, std::string_view hostname);

  Result<GpuInventory> Discover() override { return inventory_; }
  // Idle GPUs (0 %, 0 MiB used, 30 °C, 0 W) unless SetSample() said otherwise.
  Result<std::vector<GpuSample>> Sample() override { return samples_; }
  // Replaces the sample of GPU sample.index; InvalidArgument if there is no such GPU.
  Status SetSample(const GpuSample& sample);

 private:
  explicit FakeProbe(GpuInventory inventory);

  GpuInventory inventory_;
  std::vector<GpuSample> samples_;
};

}  // namespace corral::agent
