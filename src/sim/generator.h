// A seeded synthetic workload generator: Poisson arrivals, a configurable GPU-count mix with GPU
// shares and gangs, lognormal (or sampled) run times, users in projects. The same config and
// seed give the same trace, byte for byte: all randomness comes from corral::SeededRng (the
// standard distributions are implementation-defined and not used).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "common/status.h"
#include "sim/trace.h"

namespace corral::sim {

// Jobs asking more GPUs than this become gangs (split by SplitIntoGang: 16 -> 2 tasks of 8).
inline constexpr int kMaxGpusPerGeneratedTask = 8;
// The shares a sharing 1-GPU job asks, drawn uniformly.
inline constexpr std::array<int, 3> kGeneratedShareMilli = {250, 500, 750};
// Fraction of GPU jobs that pin one model when GeneratorConfig::gpu_models is not empty.
inline constexpr double kPinnedModelFraction = 0.2;
// Generated durations are clamped to [kMinGeneratedDurationS, kMaxGeneratedDurationS] seconds.
inline constexpr int64_t kMinGeneratedDurationS = 1;
inline constexpr int64_t kMaxGeneratedDurationS = 100'000'000;

struct GeneratorConfig {
  int jobs = 1000;
  uint64_t seed = 1;
  int users = 20;                   // "u00".."u19"; user i belongs to project i % projects
  int projects = 4;                 // "p0".."p3"
  double mean_interarrival_s = 60;  // Poisson arrivals: exponential gaps with this mean (seconds)
  // GPU count mix per job: (gpus, weight); weights need not sum to 1. gpus may exceed
  // kMaxGpusPerGeneratedTask: the job is then a gang (see SplitIntoGang).
  std::vector<std::pair<int, double>> gpu_mix = {{0, 0.05}, {1, 0.5},  {2, 0.15},
                                                 {4, 0.12}, {8, 0.13}, {16, 0.05}};
  double share_fraction = 0.1;  // of 1-GPU jobs, the fraction asking a share (kGeneratedShareMilli)
  // If non-empty, durations are drawn uniformly from these samples (seconds, e.g. from
  // ReadRuntimeSamples("philly_runtime.csv")); else from a lognormal distribution.
  std::vector<double> durations_s;
  double lognormal_mu = 7.5;     // of ln(duration in seconds); the median is e^mu (about 30 min)
  double lognormal_sigma = 1.6;  // of ln(duration in seconds)
  int64_t cpu_milli_per_gpu = 8000;     // per GPU of a task (a CPU-only task gets one GPU's worth)
  int64_t memory_mib_per_gpu = 32768;   // likewise
  std::vector<std::string> gpu_models;  // if non-empty, kPinnedModelFraction of GPU jobs pin one
};

// Checks every field; InvalidArgument "generator config: field 'gpu_mix[1].weight': ...". A mix
// entry must have gpus in 0..1024 that SplitIntoGang can split into tasks of at most
// kMaxGpusPerGeneratedTask, a finite weight >= 0, and the weights must not all be 0.
Status Validate(const GeneratorConfig& config);

// Parses a GPU mix such as "0:0.05,1:0.5,8:0.2" (GPUS:WEIGHT items). InvalidArgument quoting the
// bad item. Only the syntax is checked here; Validate checks the values.
Result<std::vector<std::pair<int, double>>> ParseGpuMix(std::string_view text);

// Run-time samples in seconds from a CSV file with a "runtime" column (philly_runtime.csv: one
// number per line). Errors name the file and line; a file without samples is InvalidArgument.
Result<std::vector<double>> ReadRuntimeSamples(const std::string& path);

// A synthetic workload of config.jobs jobs with ids 0..n-1 in submit order (submit times in whole
// seconds, non-decreasing, the first arrival after one gap), named "job-<id>", each passing
// model::Validate, with expected_duration = duration and durations in
// [kMinGeneratedDurationS, kMaxGeneratedDurationS]. Deterministic for a config. A config that
// fails Validate gives an empty trace (callers validate first to report why).
Trace GenerateWorkload(const GeneratorConfig& config);

}  // namespace corral::sim
