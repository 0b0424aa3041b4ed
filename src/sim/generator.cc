#include "sim/generator.h"

#include <algorithm>
#include <cmath>
#include <numbers>
#include <tuple>

#include "common/rng.h"
#include "sim/csv.h"

namespace corral::sim {

namespace {

constexpr int kMaxJobs = 10'000'000;
constexpr int kMaxUsers = 100'000;
constexpr int kMaxMixGpus = 1024;
constexpr double kMaxMixWeight = 1e12;
constexpr double kMaxInterarrivalS = 1e7;  // keeps jobs × gap far inside int64 seconds
constexpr int64_t kMaxPerGpuQuantity = 1'000'000'000'000;
constexpr double kMaxRuntimeSampleS = 1e12;

Status ConfigError(const std::string& field, const std::string& what) {
  return InvalidArgument("generator config: field '" + field + "': " + what);
}

std::string Number(double value) {
  std::string text = std::to_string(value);
  text.erase(text.find_last_not_of('0') + 1);
  if (text.ends_with('.')) text.pop_back();
  return text;
}

// Error unless min <= value <= max (and value is finite).
Status CheckRange(const std::string& field, double value, double min, double max) {
  if (std::isfinite(value) && value >= min && value <= max) return Status::Ok();
  return ConfigError(
      field, "must be between " + Number(min) + " and " + Number(max) + ", got " + Number(value));
}

Status ValidateGpuMix(const std::vector<std::pair<int, double>>& mix) {
  if (mix.empty()) return ConfigError("gpu_mix", "must not be empty");
  double total = 0;
  for (size_t i = 0; i < mix.size(); ++i) {
    const std::string item = "gpu_mix[" + std::to_string(i) + "]";
    const auto [gpus, weight] = mix[i];
    CORRAL_RETURN_IF_ERROR(CheckRange(item + ".gpus", gpus, 0, kMaxMixGpus));
    if (!SplitIntoGang(gpus, kMaxGpusPerGeneratedTask)) {
      return ConfigError(item + ".gpus", std::to_string(gpus) +
                                             " GPUs cannot be split into equal tasks of at most " +
                                             std::to_string(kMaxGpusPerGeneratedTask) + " GPUs");
    }
    CORRAL_RETURN_IF_ERROR(CheckRange(item + ".weight", weight, 0, kMaxMixWeight));
    total += weight;
  }
  if (!(total > 0)) return ConfigError("gpu_mix", "the weights must not all be 0");
  return Status::Ok();
}

// An exponential gap with the given mean.
double ExponentialSample(Rng& rng, double mean) {
  return -mean * std::log(1.0 - rng.UniformDouble());  // 1 - U is in (0, 1]
}

// A standard normal draw (Box-Muller).
double NormalSample(Rng& rng) {
  const double u1 = 1.0 - rng.UniformDouble();  // (0, 1]: log is finite
  const double u2 = rng.UniformDouble();
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

// A run time in seconds from the configured distribution (lognormal or sampled), unclamped.
double RawDurationSample(Rng& rng, const GeneratorConfig& config) {
  if (!config.durations_s.empty()) {
    return config.durations_s[rng.Uniform(config.durations_s.size())];
  }
  return std::exp(config.lognormal_mu + config.lognormal_sigma * NormalSample(rng));
}

// `seconds` clamped to [kMinGeneratedDurationS, kMaxGeneratedDurationS] and rounded.
Seconds ClampedDuration(double seconds) {
  seconds = std::clamp(seconds, static_cast<double>(kMinGeneratedDurationS),
                       static_cast<double>(kMaxGeneratedDurationS));
  return Seconds(std::llround(seconds));
}

// Index of an entry of `mix`, drawn with probability proportional to its weight.
size_t MixSample(Rng& rng, const std::vector<std::pair<int, double>>& mix, double total_weight) {
  const double r = rng.UniformDouble() * total_weight;
  double cumulative = 0;
  for (size_t i = 0; i < mix.size(); ++i) {
    cumulative += mix[i].second;
    if (r < cumulative) return i;
  }
  // Rounding can leave r just above the last sum: take the last entry with weight.
  size_t last = mix.size() - 1;
  while (last > 0 && mix[last].second <= 0) --last;
  return last;
}

// The resources of one task of a job asking `total_gpus` GPUs, and the number of tasks.
std::pair<model::TaskResources, int> JobShape(Rng& rng, const GeneratorConfig& config,
                                              int total_gpus) {
  const GangShape gang = *SplitIntoGang(total_gpus, kMaxGpusPerGeneratedTask);  // validated
  const int gpus = static_cast<int>(gang.gpus_per_task);
  int milli = gpus > 0 ? 1000 : 0;
  if (gpus == 1 && gang.tasks == 1 && rng.UniformDouble() < config.share_fraction) {
    milli = kGeneratedShareMilli[rng.Uniform(kGeneratedShareMilli.size())];
  }
  std::vector<std::string> models;
  if (gpus > 0 && !config.gpu_models.empty() && rng.UniformDouble() < kPinnedModelFraction) {
    models.push_back(config.gpu_models[rng.Uniform(config.gpu_models.size())]);
  }
  const int64_t scale = std::max(gpus, 1);
  return {model::MakeResources(gpus, milli, config.cpu_milli_per_gpu * scale,
                               config.memory_mib_per_gpu * scale, std::move(models)),
          gang.tasks};
}

// A recurring job of one user (GeneratorConfig::templates_per_user).
struct JobTemplate {
  std::string stem;    // "<user>-<model>-<task>"
  int gpus = 0;        // total GPUs, from gpu_mix
  double scale_s = 0;  // median run time of its jobs, seconds
};

// config.templates_per_user templates for each user, user by user, with distinct (model, task)
// pairs per user.
std::vector<std::vector<JobTemplate>> MakeTemplates(Rng& rng, const GeneratorConfig& config,
                                                    double total_weight) {
  std::vector<std::vector<JobTemplate>> out(config.users);
  for (int user = 0; user < config.users; ++user) {
    // A partial Fisher-Yates shuffle picks templates_per_user distinct (model, task) pairs.
    std::vector<int> pairs(kMaxTemplatesPerUser);
    for (int i = 0; i < kMaxTemplatesPerUser; ++i) pairs[i] = i;
    for (int k = 0; k < config.templates_per_user; ++k) {
      std::swap(pairs[k], pairs[k + rng.Uniform(kMaxTemplatesPerUser - k)]);
      const int pair = pairs[k];
      JobTemplate t;
      t.stem = NumberedName("u", user, 2);
      t.stem += '-';
      t.stem += kTemplateModels[pair / kTemplateTasks.size()];
      t.stem += '-';
      t.stem += kTemplateTasks[pair % kTemplateTasks.size()];
      t.gpus = config.gpu_mix[MixSample(rng, config.gpu_mix, total_weight)].first;
      t.scale_s = std::max(RawDurationSample(rng, config), 1.0);
      out[user].push_back(std::move(t));
    }
  }
  return out;
}

}  // namespace

Status Validate(const GeneratorConfig& config) {
  CORRAL_RETURN_IF_ERROR(CheckRange("jobs", config.jobs, 0, kMaxJobs));
  CORRAL_RETURN_IF_ERROR(CheckRange("users", config.users, 1, kMaxUsers));
  CORRAL_RETURN_IF_ERROR(CheckRange("projects", config.projects, 1, kMaxUsers));
  CORRAL_RETURN_IF_ERROR(
      CheckRange("mean_interarrival_s", config.mean_interarrival_s, 0, kMaxInterarrivalS));
  CORRAL_RETURN_IF_ERROR(ValidateGpuMix(config.gpu_mix));
  CORRAL_RETURN_IF_ERROR(CheckRange("share_fraction", config.share_fraction, 0, 1));
  for (size_t i = 0; i < config.durations_s.size(); ++i) {
    CORRAL_RETURN_IF_ERROR(CheckRange("durations_s[" + std::to_string(i) + "]",
                                      config.durations_s[i], 0, kMaxRuntimeSampleS));
  }
  CORRAL_RETURN_IF_ERROR(CheckRange("lognormal_mu", config.lognormal_mu, -100, 100));
  CORRAL_RETURN_IF_ERROR(CheckRange("lognormal_sigma", config.lognormal_sigma, 0, 100));
  CORRAL_RETURN_IF_ERROR(CheckRange(
      "cpu_milli_per_gpu", static_cast<double>(config.cpu_milli_per_gpu), 0, kMaxPerGpuQuantity));
  CORRAL_RETURN_IF_ERROR(CheckRange(
      "memory_mib_per_gpu", static_cast<double>(config.memory_mib_per_gpu), 0, kMaxPerGpuQuantity));
  for (size_t i = 0; i < config.gpu_models.size(); ++i) {
    if (config.gpu_models[i].empty()) {
      return ConfigError("gpu_models[" + std::to_string(i) + "]", "must not be empty");
    }
  }
  CORRAL_RETURN_IF_ERROR(
      CheckRange("templates_per_user", config.templates_per_user, 0, kMaxTemplatesPerUser));
  CORRAL_RETURN_IF_ERROR(CheckRange("template_sigma", config.template_sigma, 0, 100));
  return Status::Ok();
}

Result<std::vector<std::pair<int, double>>> ParseGpuMix(std::string_view text) {
  std::vector<std::pair<int, double>> mix;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = std::min(text.find(',', start), text.size());
    std::string_view item = text.substr(start, end - start);
    size_t colon = item.find(':');
    std::optional<int64_t> gpus =
        colon == std::string_view::npos ? std::nullopt : ParseInt64(item.substr(0, colon));
    std::optional<double> weight =
        colon == std::string_view::npos ? std::nullopt : ParseFiniteDouble(item.substr(colon + 1));
    if (!gpus || *gpus < 0 || *gpus > kMaxMixGpus || !weight) {
      return InvalidArgument("gpu mix item '" + std::string(item) +
                             "': expected GPUS:WEIGHT, e.g. 1:0.5 (GPUS an integer 0.." +
                             std::to_string(kMaxMixGpus) + ")");
    }
    mix.emplace_back(static_cast<int>(*gpus), *weight);
    start = end + 1;
  }
  return mix;
}

Result<std::vector<double>> ReadRuntimeSamples(const std::string& path) {
  CORRAL_SIM_ASSIGN_OR_RETURN(CsvReader csv, CsvReader::Open(path));
  constexpr std::array<std::string_view, 1> kColumns = {"runtime"};
  CORRAL_RETURN_IF_ERROR(csv.RequireColumns(kColumns));
  std::vector<double> samples;
  while (csv.NextRow()) {
    const double seconds = csv.Double("runtime", 0, kMaxRuntimeSampleS);
    if (!csv.ok()) break;
    samples.push_back(seconds);
  }
  CORRAL_RETURN_IF_ERROR(csv.status());
  if (samples.empty()) return InvalidArgument(path + ": no runtime samples");
  return samples;
}

Trace GenerateWorkload(const GeneratorConfig& config) {
  if (!Validate(config).ok()) return {};
  double total_weight = 0;
  for (const auto& entry : config.gpu_mix) total_weight += entry.second;
  SeededRng rng(config.seed);
  const std::vector<std::vector<JobTemplate>> templates =
      config.templates_per_user > 0 ? MakeTemplates(rng, config, total_weight)
                                    : std::vector<std::vector<JobTemplate>>{};
  Trace trace;
  trace.jobs.reserve(config.jobs);
  double clock = 0;
  for (int id = 0; id < config.jobs; ++id) {
    clock += ExponentialSample(rng, config.mean_interarrival_s);
    const int user = static_cast<int>(rng.Uniform(config.users));
    TraceJob t;
    t.job.id = JobId(id);
    t.job.user = NumberedName("u", user, 2);
    t.job.project = NumberedName("p", user % config.projects, 1);
    t.job.submit_time = Seconds(static_cast<int64_t>(std::floor(clock)));
    if (templates.empty()) {
      const int gpus = config.gpu_mix[MixSample(rng, config.gpu_mix, total_weight)].first;
      t.job.name = NumberedName("job-", id, 0);
      std::tie(t.job.resources, t.job.tasks) = JobShape(rng, config, gpus);
      t.duration = ClampedDuration(RawDurationSample(rng, config));
    } else {
      const JobTemplate& tmpl = templates[user][rng.Uniform(templates[user].size())];
      std::tie(t.job.resources, t.job.tasks) = JobShape(rng, config, tmpl.gpus);
      t.job.name = tmpl.stem;
      t.job.name += "-lr";
      t.job.name += kTemplateLearningRates[rng.Uniform(kTemplateLearningRates.size())];
      t.job.name += "-seed";
      t.job.name += std::to_string(rng.Uniform(kTemplateSeeds));
      t.duration =
          ClampedDuration(tmpl.scale_s * std::exp(config.template_sigma * NormalSample(rng)));
    }
    t.job.expected_duration = t.duration;
    trace.jobs.push_back(std::move(t));
  }
  return trace;
}

}  // namespace corral::sim
