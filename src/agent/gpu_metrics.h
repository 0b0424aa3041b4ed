// GPU metrics as the agent sends them with its heartbeats (docs/monitoring.md): every GPU's sample,
// the tasks that hold the GPU (from their launches) and the processes on it, each mapped to the
// task it belongs to, so that the server can tell busy, idle and foreign use apart.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <vector>

#include "agent/gpu_probe.h"
#include "agent/runtime.h"
#include "agent/task_setup.h"
#include "protocol/agent_messages.h"

namespace corral::agent {

// A process on a GPU and the task it belongs to; no task: a process corral did not start (or
// one that left its task's process tree).
struct AttributedProcess {
  GpuProcess process;
  std::optional<TaskKey> task;
};

// One GPU's sample with the tasks that hold it (several when a GPU is shared, none when free).
struct AttributedGpu {
  GpuSample sample;  // its `processes` are empty: they are in `processes`, attributed
  std::vector<TaskKey> tasks;
  std::vector<AttributedProcess> processes;
};

// A process's parent pid; nullopt when the process is gone or unreadable.
using ParentOf = std::function<std::optional<int>(int pid)>;
// ParentOf from /proc/<pid>/stat (the field after the parenthesised command name).
std::optional<int> ProcParentOf(int pid);

// Maps the samples to `running`. A GPU belongs to the tasks whose launch lists its index. A
// process belongs to the task whose pid is the process itself or an ancestor (walking
// `parent_of`, at most 64 steps); failing that, to the one container task holding that GPU
// (container processes descend from the engine's monitor, not from the task's pid). Samples
// keep their order.
std::vector<AttributedGpu> Attribute(const std::vector<GpuSample>& samples,
                                     const std::vector<RunningTask>& running,
                                     const ParentOf& parent_of);

// The heartbeat's GPU metrics (protocol::GpuMetrics) of attributed samples taken at
// `sampled_at_ms` (Unix ms); fields the device does not report stay unset.
protocol::GpuMetrics GpuMetricsReport(const std::vector<AttributedGpu>& gpus,
                                      int64_t sampled_at_ms);

}  // namespace corral::agent
