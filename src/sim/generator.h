// A seeded synthetic workload generator: Poisson arrivals, a configurable GPU-count mix with GPU
// shares and gangs, lognormal (or sampled) run times, users in projects, and optionally recurring
// job templates (learnable run times, see GeneratorConfig::templates_per_user). The same config and
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
// What recurring job templates are made of: a template's stem is "<user>-<model>-<task>" with a
// (model, task) pair of its own among these; a run's name appends "-lr<LR>-seed<0..9>".
inline constexpr std::array<std::string_view, 8> kTemplateModels = {
    "resnet50", "bert", "gpt2", "vit", "yolov5", "unet", "t5", "wav2vec2"};
inline constexpr std::array<std::string_view, 4> kTemplateTasks = {"ft", "pretrain", "eval",
                                                                   "sweep"};
inline constexpr std::array<std::string_view, 4> kTemplateLearningRates = {"0.1", "0.01", "0.001",
                                                                           "0.0001"};
inline constexpr int kTemplateSeeds = 10;
inline constexpr int kMaxTemplatesPerUser =
    static_cast<int>(kTemplateModels.size() * kTemplateTasks.size());

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
  // Recurring job templates, 0..kMaxTemplatesPerUser; 0 (the default) turns them off and every
  // job is "job-<id>" with its own GPU count and duration drawn as above. Helios (Hu et al.,
  // SC'21) observed that most jobs of a GPU datacenter recur: a user submits runs of the same
  // experiment again and again, with similar names and similar run times. With K > 0, before
  // any job is drawn each user gets K templates, each with
  //  - a stem "<user>-<model>-<task>" (a (model, task) pair from kTemplateModels ×
  //    kTemplateTasks that no other template of the user has, e.g. "u03-resnet50-ft"),
  //  - a GPU count drawn from gpu_mix,
  //  - a duration scale drawn like a job's duration above (lognormal or sampled).
  // Each job then picks one of its user's templates uniformly, takes its GPU count (GPU shares,
  // gangs and pinned models as above, per job), is named "<stem>-lr<LR>-seed<S>" (LR from
  // kTemplateLearningRates, S in 0..kTemplateSeeds-1, both uniform and not affecting the run
  // time) and runs scale × e^(template_sigma × N(0,1)) seconds (clamped as above): the
  // template's scale is the median of its runs.
  int templates_per_user = 0;
  double template_sigma = 0.5;  // of ln(duration) around the template's scale
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
// seconds, non-decreasing, the first arrival after one gap), named "job-<id>" (or after their
// template when config.templates_per_user > 0), each passing
// model::Validate, with expected_duration = duration and durations in
// [kMinGeneratedDurationS, kMaxGeneratedDurationS]. Deterministic for a config. A config that
// fails Validate gives an empty trace (callers validate first to report why).
Trace GenerateWorkload(const GeneratorConfig& config);

}  // namespace corral::sim
