// A GpuProbe for machines without GPUs (development, CI, `corral dev`): the GPUs come from a spec
// string given with --fake-gpus.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/runtime.h"

namespace corral::agent {

// Spec grammar: GROUP[,GROUP...] where GROUP is "<count>x<model>", e.g. "8xA100-80GB" or
// "4xV100M32,4xV100M32". Every group is one NVLink domain (an 8-GPU group is one NVSwitch
// domain; "4xM,4xM" is two 4-GPU islands); indices run on across groups. All groups must name
// the same model (one model per node). The empty spec is a node without GPUs.
//  - count: 1..64 per group, at most 64 GPUs in all;
//  - model: letters, digits, '-', '_' and '.'; memory from KnownModelMemory();
//  - uuid: "GPU-fake-<hostname>-<index>", stable across restarts.
//
// Samples: a GPU no task holds is idle (0 %, 0 MiB, 30 °C, idle power) unless SetSample() said
// otherwise. A running task (from the task source) loads each GPU of its launch with the
// utilisation it declares in its environment, FAKE_GPU_UTILIZATION (an integer 0..100; else the
// probe's default) and FAKE_GPU_MEMORY_MIB (else 40 % of the GPU's memory), scaled by its GPU
// share (gpu_milli / 1000); loads on one GPU add up to at most 100 % and the GPU's memory. The
// task's pid is listed as a process on the GPU. Power and temperature follow the utilisation:
// idle power + (board power - idle power) × utilisation, 30 °C + 0.45 °C per percent; memory
// bus activity is half the utilisation. So tests and `corral dev` can show busy and idle jobs.
class FakeProbe final : public GpuProbe {
 public:
  // Errors name the offending group: "fake GPU spec '8xA100,2x': group 2 ('2x'): model must not
  // be empty".
  static Result<FakeProbe> Create(std::string_view spec, std::string_view hostname);

  Result<GpuInventory> Discover() override { return inventory_; }
  Result<std::vector<GpuSample>> Sample() override;
  // Replaces the idle sample of GPU sample.index (what it shows without tasks); InvalidArgument
  // if there is no such GPU.
  Status SetSample(const GpuSample& sample);
  // Where the running tasks come from (the agent loop's RunningTasks); none: every GPU stays
  // idle. The source is called from Sample(), on the caller's thread: it must be thread-safe.
  void SetTaskSource(std::function<std::vector<RunningTask>()> source) {
    tasks_ = std::move(source);
  }
  // The utilisation of a task that declares none (0..100, clamped); default 80.
  void SetDefaultUtilization(int percent);

 private:
  explicit FakeProbe(GpuInventory inventory);

  GpuInventory inventory_;
  std::vector<GpuSample> samples_;  // the idle samples
  std::function<std::vector<RunningTask>()> tasks_;
  int default_utilization_ = 80;
};

// The board power of a known model in watts, for fakes: A100 400, H100/H200 700, V100 300,
// T4 70; any other model 300.
int KnownModelPowerWatts(std::string_view model);

}  // namespace corral::agent
