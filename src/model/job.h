// A job: what a user submits. One or more identical tasks (replicas); a job with several tasks
// is a gang: all its tasks start together or none does.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"

namespace corral::model {

// What one task of a job needs on one node.
//  - gpus == 0: CPU and memory only (gpu_milli must be 0).
//  - gpus == 1, gpu_milli < 1000: a share of one GPU with at least gpu_milli free.
//  - gpus >= 1, gpu_milli == 1000: that many whole GPUs on one node.
struct TaskResources {
  GpuCount gpus{0};
  MilliGpu gpu_milli{0};  // per GPU; 1000 for whole GPUs
  CpuMilli cpu{0};
  MemoryMib memory{0};
  std::vector<std::string> gpu_models;  // acceptable GPU models; empty = any
  // Agent runtimes that can run the task (model::Node::runtimes; "process", "container"), any
  // one of them; empty = any node. Set from the job's environment (docs/environments.md).
  std::vector<std::string> runtimes;

  bool IsShare() const { return gpus.value() == 1 && gpu_milli < kWholeGpu; }
  // GPU capacity asked, in milli-GPU: gpus × gpu_milli.
  MilliGpu TotalMilli() const { return gpu_milli * gpus.value(); }
  bool operator==(const TaskResources&) const = default;
};

// Builds the resources of a task asking `gpus` whole GPUs (or, with gpu_milli < 1000, a share).
TaskResources MakeResources(int gpus, int gpu_milli, int64_t cpu_milli, int64_t memory_mib,
                            std::vector<std::string> gpu_models = {});

// An elastic job (docs/elastic.md): it runs at any size of a range and the scheduler resizes it.
//  - kGpus: one task whose whole GPUs vary (resources.gpus is its size now).
//  - kNodes: a gang whose task count varies, one task per node, each of the same resources
//    (tasks is its size now).
// Sizes: MIN, every power of two strictly between, and MAX; or, with step > 0, MIN, MIN + step,
// ..., and MAX (sched::ElasticRange). A pending elastic job asks for MIN.
enum class ElasticUnit { kGpus, kNodes };
std::string_view ElasticUnitName(ElasticUnit unit);  // "gpus" | "nodes"
struct ElasticBounds {
  ElasticUnit unit = ElasticUnit::kGpus;
  int min = 1;
  int max = 1;
  int step = 0;  // 0: powers of two
  bool operator==(const ElasticBounds&) const = default;
};
// The most GPUs (kGpus) or nodes (kNodes) an elastic range may reach.
inline constexpr int kMaxElasticSize = 4096;

// The most elements one array may have.
inline constexpr int kMaxArrayElements = 10000;

struct Job {
  JobId id;
  std::string name;
  std::string user;
  std::string project;
  int priority = 0;  // higher runs first under the priority order
  Seconds submit_time{0};
  int tasks = 1;                             // replicas; > 1 makes a gang
  TaskResources resources;                   // per task
  std::optional<Seconds> time_limit;         // the job is stopped when it runs longer
  std::optional<Seconds> expected_duration;  // a hint (or, in traces, the recorded run time)
  // An array element: the array's id (the job id of its first element) and how many of the
  // array's elements may run at once (>= 1; none: no limit). Only an element has a limit.
  std::optional<JobId> array_id;
  std::optional<int> array_max_running;
  // Set for an elastic job; its size now is resources.gpus (kGpus) or tasks (kNodes).
  std::optional<ElasticBounds> elastic;

  MilliGpu TotalMilli() const { return resources.TotalMilli() * tasks; }
};

// `job` at `size` in its elastic unit: resources.gpus (kGpus) or tasks (kNodes) set to it; a
// rigid job (no elastic bounds) as it is.
Job WithElasticSize(Job job, int size);

// Checks every field; the error names the field and the job ("job 17: field
// 'resources.gpu_milli': must be 1000 when gpus > 1 (a share is of one GPU), got 500").
Status Validate(const TaskResources& resources);
Status Validate(const Job& job);

// True when `name` may name an environment variable of a task: a letter or '_', then letters,
// digits or '_'.
bool IsEnvName(std::string_view name);

}  // namespace corral::model
