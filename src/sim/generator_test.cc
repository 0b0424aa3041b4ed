#include "sim/generator.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <set>
#include <sstream>

#include "common/rng.h"
#include "sim/testdata_path.h"

namespace corral::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;

// The JSON Lines bytes of a generated workload.
std::string JsonlBytes(const GeneratorConfig& config, const std::string& name) {
  const std::string path = ::testing::TempDir() + "/" + name;
  EXPECT_TRUE(WriteJsonl(GenerateWorkload(config), path).ok());
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

TEST(GeneratorTest, SameSeedSameBytesOtherSeedOtherBytes) {
  GeneratorConfig config;
  config.jobs = 500;
  config.gpu_models = {"V100", "A100-80GB"};
  const std::string a = JsonlBytes(config, "gen_a.jsonl");
  const std::string b = JsonlBytes(config, "gen_b.jsonl");
  EXPECT_FALSE(a.empty());
  EXPECT_EQ(a, b);
  config.seed = 2;
  EXPECT_NE(a, JsonlBytes(config, "gen_c.jsonl"));
}

TEST(GeneratorTest, JobsAreValidSortedAndNumbered) {
  GeneratorConfig config;
  config.jobs = 2000;
  config.seed = 7;
  const Trace trace = GenerateWorkload(config);
  ASSERT_EQ(trace.jobs.size(), 2000u);
  std::set<std::string> users;
  for (size_t i = 0; i < trace.jobs.size(); ++i) {
    const TraceJob& t = trace.jobs[i];
    ASSERT_TRUE(model::Validate(t.job).ok()) << model::Validate(t.job).ToString();
    EXPECT_EQ(t.job.id, JobId(static_cast<int64_t>(i)));
    EXPECT_EQ(t.job.name, "job-" + std::to_string(i));
    EXPECT_GE(t.duration, Seconds(1));
    EXPECT_EQ(t.job.expected_duration, t.duration);
    if (i > 0) {
      EXPECT_GE(t.job.submit_time, trace.jobs[i - 1].job.submit_time);
    }
    // User uNN is in project p(NN % 4).
    const int user = std::stoi(t.job.user.substr(1));
    EXPECT_EQ(t.job.user.size(), 3u);
    EXPECT_EQ(t.job.project, NumberedName("p", user % 4, 1));
    users.insert(t.job.user);
  }
  EXPECT_EQ(users.size(), 20u);
  EXPECT_EQ(*users.begin(), "u00");
  EXPECT_EQ(*users.rbegin(), "u19");
}

TEST(GeneratorTest, MixRoughlyMatchesTheConfig) {
  GeneratorConfig config;
  config.jobs = 20000;
  config.seed = 3;
  config.gpu_models = {"V100", "T4"};
  const Trace trace = GenerateWorkload(config);
  std::map<int64_t, int> by_gpus;  // total GPUs per job
  int one_gpu = 0, shares = 0, pinned = 0, gpu_jobs = 0;
  for (const TraceJob& t : trace.jobs) {
    const auto& r = t.job.resources;
    by_gpus[r.gpus.value() * t.job.tasks]++;
    if (r.gpus.value() > 0) {
      ++gpu_jobs;
      EXPECT_EQ(r.cpu, CpuMilli(8000 * r.gpus.value()));
      EXPECT_EQ(r.memory, MemoryMib(32768 * r.gpus.value()));
    }
    if (r.gpus.value() == 1 && t.job.tasks == 1) {
      ++one_gpu;
      if (r.IsShare()) {
        ++shares;
        EXPECT_TRUE(r.gpu_milli == MilliGpu(250) || r.gpu_milli == MilliGpu(500) ||
                    r.gpu_milli == MilliGpu(750));
      }
    }
    if (!r.gpu_models.empty()) ++pinned;
    if (r.gpus.value() * t.job.tasks == 16) {
      EXPECT_EQ(t.job.tasks, 2);
      EXPECT_EQ(r.gpus, GpuCount(8));
    }
  }
  const double n = config.jobs;
  for (const auto& [gpus, weight] : config.gpu_mix) {
    SCOPED_TRACE(gpus);
    EXPECT_NEAR(by_gpus[gpus] / n, weight, 0.015);
  }
  EXPECT_EQ(by_gpus.size(), config.gpu_mix.size());
  EXPECT_NEAR(static_cast<double>(shares) / one_gpu, config.share_fraction, 0.015);
  EXPECT_NEAR(static_cast<double>(pinned) / gpu_jobs, kPinnedModelFraction, 0.015);
  // Poisson arrivals with a mean gap of 60 s.
  const double mean_gap = static_cast<double>(trace.jobs.back().job.submit_time.value()) / n;
  EXPECT_NEAR(mean_gap, config.mean_interarrival_s, 2.0);
  // Lognormal durations: the median is about e^mu.
  std::vector<int64_t> durations;
  for (const TraceJob& t : trace.jobs) durations.push_back(t.duration.value());
  const auto middle = durations.begin() + static_cast<std::ptrdiff_t>(durations.size() / 2);
  std::nth_element(durations.begin(), middle, durations.end());
  EXPECT_NEAR(static_cast<double>(*middle), std::exp(config.lognormal_mu), 150);
}

TEST(GeneratorTest, SamplesDurationsFromRuntimes) {
  auto samples = ReadRuntimeSamples(TestData("runtime.csv"));
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_THAT(*samples, ElementsAre(0.0, 12.5, 3600.0));
  GeneratorConfig config;
  config.jobs = 300;
  config.durations_s = *samples;
  std::set<int64_t> seen;
  for (const TraceJob& t : GenerateWorkload(config).jobs) seen.insert(t.duration.value());
  EXPECT_EQ(seen, (std::set<int64_t>{1, 13, 3600}));  // 0 -> 1 s minimum; 12.5 rounds to 13
}

TEST(GeneratorTest, RuntimeFileErrors) {
  auto bad = ReadRuntimeSamples(TestData("runtime_bad.csv"));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(bad.status().message(), HasSubstr("runtime_bad.csv:3: field 'runtime'"));
  EXPECT_EQ(ReadRuntimeSamples(TestData("absent.csv")).status().code(), StatusCode::kIoError);
  EXPECT_THAT(ReadRuntimeSamples(TestData("tiresias.csv")).status().message(),
              HasSubstr("missing column 'runtime'"));
}

TEST(GeneratorTest, ValidateNamesTheField) {
  EXPECT_TRUE(Validate(GeneratorConfig{}).ok());
  struct Case {
    std::function<void(GeneratorConfig&)> mutate;
    std::string want;
  };
  const std::vector<Case> cases = {
      {[](GeneratorConfig& c) { c.jobs = -1; }, "field 'jobs'"},
      {[](GeneratorConfig& c) { c.users = 0; }, "field 'users'"},
      {[](GeneratorConfig& c) { c.projects = 0; }, "field 'projects'"},
      {[](GeneratorConfig& c) { c.mean_interarrival_s = -1; }, "field 'mean_interarrival_s'"},
      {[](GeneratorConfig& c) { c.gpu_mix.clear(); }, "field 'gpu_mix': must not be empty"},
      {[](GeneratorConfig& c) { c.gpu_mix.emplace_back(9, 1); },
       "field 'gpu_mix[6].gpus': 9 GPUs cannot be split"},
      {[](GeneratorConfig& c) { c.gpu_mix[0].second = -0.5; }, "field 'gpu_mix[0].weight'"},
      {[](GeneratorConfig& c) { c.gpu_mix.assign(1, std::pair(1, 0.0)); }, "must not all be 0"},
      {[](GeneratorConfig& c) { c.share_fraction = 1.5; }, "field 'share_fraction'"},
      {[](GeneratorConfig& c) { c.durations_s.assign(2, NAN); }, "field 'durations_s[0]'"},
      {[](GeneratorConfig& c) { c.lognormal_sigma = -1; }, "field 'lognormal_sigma'"},
      {[](GeneratorConfig& c) { c.cpu_milli_per_gpu = -1; }, "field 'cpu_milli_per_gpu'"},
      {[](GeneratorConfig& c) { c.gpu_models.assign(2, ""); }, "field 'gpu_models[0]'"},
      {[](GeneratorConfig& c) { c.templates_per_user = 33; }, "field 'templates_per_user'"},
      {[](GeneratorConfig& c) { c.templates_per_user = -1; }, "field 'templates_per_user'"},
      {[](GeneratorConfig& c) { c.template_sigma = -0.1; }, "field 'template_sigma'"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.want);
    GeneratorConfig config;
    c.mutate(config);
    const Status status = Validate(config);
    EXPECT_EQ(status.code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.want));
    EXPECT_TRUE(GenerateWorkload(config).jobs.empty());  // invalid config -> empty trace
  }
}

// The default output must not change when options are added: this is the FNV-1a hash of the
// JSON Lines that `corral sim gen --jobs 5000 --seed 3` wrote before templates existed.
TEST(GeneratorTest, DefaultOutputIsUnchanged) {
  GeneratorConfig config;
  config.jobs = 5000;
  config.seed = 3;
  const std::string bytes = JsonlBytes(config, "gen_default.jsonl");
  EXPECT_EQ(bytes.size(), 1091243u);
  EXPECT_EQ(HashString(bytes.data(), bytes.size()), 0x7cebeb8584c195b6ULL);
}

TEST(GeneratorTest, TemplatesRecurWithTheirOwnGpusAndDurationScale) {
  GeneratorConfig config;
  config.jobs = 20000;
  config.seed = 11;
  config.users = 10;
  config.templates_per_user = 3;
  config.template_sigma = 0.5;
  const Trace trace = GenerateWorkload(config);
  ASSERT_EQ(trace.jobs.size(), 20000u);
  struct Stem {
    std::set<int64_t> gpus;  // total GPUs of its jobs
    std::vector<double> log_durations;
  };
  std::map<std::string, Stem> stems;
  std::map<std::string, std::set<std::string>> stems_of_user;
  std::set<std::string> names;
  for (const TraceJob& t : trace.jobs) {
    ASSERT_TRUE(model::Validate(t.job).ok()) << model::Validate(t.job).ToString();
    // "<user>-<model>-<task>-lr<LR>-seed<S>"
    const std::string& name = t.job.name;
    const size_t lr = name.rfind("-lr");
    const size_t seed = name.rfind("-seed");
    ASSERT_NE(lr, std::string::npos) << name;
    ASSERT_NE(seed, std::string::npos) << name;
    ASSERT_LT(lr, seed) << name;
    EXPECT_TRUE(name.starts_with(t.job.user + "-")) << name;
    const std::string stem = name.substr(0, lr);
    const std::string rate = name.substr(lr + 3, seed - lr - 3);
    EXPECT_NE(std::find(kTemplateLearningRates.begin(), kTemplateLearningRates.end(), rate),
              kTemplateLearningRates.end())
        << name;
    const int s = std::stoi(name.substr(seed + 5));
    EXPECT_TRUE(s >= 0 && s < kTemplateSeeds) << name;
    stems[stem].gpus.insert(t.job.resources.gpus.value() * t.job.tasks);
    stems[stem].log_durations.push_back(std::log(static_cast<double>(t.duration.value())));
    stems_of_user[t.job.user].insert(stem);
    names.insert(name);
  }
  EXPECT_EQ(stems_of_user.size(), 10u);
  for (const auto& [user, user_stems] : stems_of_user) {
    EXPECT_EQ(user_stems.size(), 3u) << user;
  }
  EXPECT_GT(names.size(), 30u * 10);  // learning rates and seeds vary the names of one template
  for (const auto& [stem, info] : stems) {
    SCOPED_TRACE(stem);
    EXPECT_EQ(info.gpus.size(), 1u);  // a template's jobs all ask the same GPUs
    // Around the template's scale with the configured spread of ln(duration).
    double mean = 0, var = 0;
    for (double v : info.log_durations) mean += v;
    mean /= static_cast<double>(info.log_durations.size());
    for (double v : info.log_durations) var += (v - mean) * (v - mean);
    const double sd = std::sqrt(var / static_cast<double>(info.log_durations.size() - 1));
    if (mean > 2) {  // far from the 1 s clamp
      EXPECT_NEAR(sd, config.template_sigma, 0.1);
    }
  }
  // Templates differ from each other: their scales are spread like job durations.
  std::vector<double> means;
  for (const auto& [stem, info] : stems) {
    double mean = 0;
    for (double v : info.log_durations) mean += v;
    means.push_back(mean / static_cast<double>(info.log_durations.size()));
  }
  EXPECT_GT(
      *std::max_element(means.begin(), means.end()) - *std::min_element(means.begin(), means.end()),
      2.0);
}

TEST(GeneratorTest, TemplatesAreDeterministicAndOptIn) {
  GeneratorConfig config;
  config.jobs = 500;
  config.templates_per_user = 4;
  const std::string a = JsonlBytes(config, "gen_t_a.jsonl");
  EXPECT_EQ(a, JsonlBytes(config, "gen_t_b.jsonl"));
  config.templates_per_user = 0;
  EXPECT_NE(a, JsonlBytes(config, "gen_t_c.jsonl"));
  EXPECT_EQ(GenerateWorkload(config).jobs[0].job.name, "job-0");
  // Sampled durations work with templates too; every job stays within the clamp.
  config.templates_per_user = kMaxTemplatesPerUser;
  config.durations_s = {0.0, 50.0, 7200.0};
  for (const TraceJob& t : GenerateWorkload(config).jobs) {
    EXPECT_GE(t.duration, Seconds(kMinGeneratedDurationS));
    EXPECT_LE(t.duration, Seconds(kMaxGeneratedDurationS));
  }
}

TEST(GeneratorTest, ParsesGpuMix) {
  auto mix = ParseGpuMix("0:0.05,1:0.5,16:2");
  ASSERT_TRUE(mix.ok()) << mix.status().ToString();
  EXPECT_THAT(*mix, ElementsAre(Pair(0, 0.05), Pair(1, 0.5), Pair(16, 2.0)));
  for (const char* bad : {"", "1", "1:", ":0.5", "a:0.5", "1:x", "1:0.5,", "-1:0.5"}) {
    SCOPED_TRACE(bad);
    auto result = ParseGpuMix(bad);
    ASSERT_FALSE(result.ok());
    EXPECT_THAT(result.status().message(), HasSubstr("expected GPUS:WEIGHT"));
  }
  EXPECT_THAT(ParseGpuMix("1:0.5,x:1").status().message(), HasSubstr("item 'x:1'"));
}

}  // namespace
}  // namespace corral::sim
