#include "predict/runtime_predictor.h"

#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "common/rng.h"

namespace corral::predict {
namespace {

JobFeatures Job(std::string user, std::string project, std::string name, int gpus) {
  return {std::move(user), std::move(project), std::move(name), gpus};
}

// `prefix` followed by `n` ("u" + to_string(n) trips a GCC 12 -Wrestrict false positive).
std::string Numbered(const char* prefix, uint64_t n) {
  std::string s = prefix;
  s += std::to_string(n);
  return s;
}

void ObserveAll(RuntimePredictor& p, const JobFeatures& job, const std::vector<int64_t>& seconds) {
  for (int64_t s : seconds) p.Observe(job, Seconds(s));
}

TEST(RuntimePredictorTest, DefaultBeforeAnythingIsObserved) {
  PredictorConfig config;
  config.default_estimate = Seconds(1234);
  const RuntimePredictor p(config);
  const Prediction got = p.Predict(Job("alice", "vision", "train", 4));
  EXPECT_EQ(got.estimate, Seconds(1234));
  EXPECT_EQ(got.confidence, 0.0);
  EXPECT_EQ(got.basis, "default");
}

TEST(RuntimePredictorTest, FallsBackFromSpecificToGenericKeysInOrder) {
  RuntimePredictor p;  // min_samples 2
  const JobFeatures query = Job("alice", "vision", "bert-ft-lr0.01-seed1", 4);
  struct Step {
    JobFeatures observed;
    std::vector<int64_t> seconds;
    std::string basis;  // what answers the query once `observed` ran
    int64_t estimate;
  };
  const std::vector<Step> steps = {
      {Job("bob", "nlp", "x", 2), {100, 300}, "all", 200},
      {Job("bob", "nlp", "x", 4), {400, 400}, "gpus", 400},
      {Job("alice", "vision", "y", 1), {500, 700}, "user", 600},
      {Job("carol", "vision", "z", 4), {800, 800}, "project+gpus", 800},
      {Job("alice", "speech", "eval", 4), {900, 900}, "user+gpus", 900},
      {Job("alice", "speech", "BERT_ft_lr0.1_seed5", 8), {1000, 1000}, "user+similar-name", 1000},
      {Job("alice", "speech", "bert-ft-lr0.01-seed1", 8), {1100, 1100}, "user+name", 1100},
  };
  for (const Step& step : steps) {
    SCOPED_TRACE(step.basis);
    // One sample is not enough (min_samples 2): the previous answer stands.
    const Prediction before = p.Predict(query);
    p.Observe(step.observed, Seconds(step.seconds[0]));
    EXPECT_EQ(p.Predict(query).basis, before.basis);
    p.Observe(step.observed, Seconds(step.seconds[1]));
    const Prediction got = p.Predict(query);
    EXPECT_EQ(got.basis, step.basis);
    EXPECT_EQ(got.estimate, Seconds(step.estimate));
    EXPECT_GT(got.confidence, 0.0);
  }
  // Another user with the same name does not match user+name.
  EXPECT_EQ(p.Predict(Job("dave", "vision", "bert-ft-lr0.01-seed1", 4)).basis, "project+gpus");
}

TEST(RuntimePredictorTest, BasisNamesAreTheFallbackOrder) {
  EXPECT_EQ(BasisNames(),
            (std::vector<std::string>{"user+name", "user+similar-name", "user+gpus", "project+gpus",
                                      "user", "gpus", "all", "default"}));
}

TEST(RuntimePredictorTest, EstimateIsTheMedianOfTheRecentWindow) {
  PredictorConfig config;
  config.window = 3;
  RuntimePredictor p(config);
  const JobFeatures job = Job("alice", "vision", "train", 1);
  ObserveAll(p, job, {100, 110, 90});
  EXPECT_EQ(p.Predict(job).estimate, Seconds(100));
  ObserveAll(p, job, {10, 10});  // window now {90, 10, 10}
  EXPECT_EQ(p.Predict(job).estimate, Seconds(10));
  ObserveAll(p, job, {5, 7, 9});  // the old runs are forgotten entirely
  EXPECT_EQ(p.Predict(job).estimate, Seconds(7));
}

TEST(RuntimePredictorTest, MedianIgnoresATailAndEvenCountsAverage) {
  RuntimePredictor p;
  const JobFeatures job = Job("alice", "vision", "train", 1);
  ObserveAll(p, job, {100, 110, 90, 100000});
  EXPECT_EQ(p.Predict(job).estimate, Seconds(105));  // (100 + 110) / 2
}

TEST(RuntimePredictorTest, EstimateIsPositiveAndNegativeDurationsAreIgnored) {
  RuntimePredictor p;
  const JobFeatures job = Job("alice", "vision", "crash", 1);
  ObserveAll(p, job, {0, 0, -5});
  const Prediction got = p.Predict(job);
  EXPECT_EQ(got.basis, "user+name");
  EXPECT_EQ(got.estimate, Seconds(1));
  ObserveAll(p, Job("bob", "x", "y", 3), {-1, -1});
  EXPECT_EQ(p.Predict(Job("bob", "x", "y", 3)).basis, "all");  // bob's runs were not recorded
}

TEST(RuntimePredictorTest, ConfigIsClamped) {
  PredictorConfig config;
  config.window = 0;
  config.min_samples = 5;
  config.max_keys = -1;
  config.default_estimate = Seconds(0);
  const RuntimePredictor p(config);
  EXPECT_EQ(p.config().window, 1);
  EXPECT_EQ(p.config().min_samples, 1);
  EXPECT_EQ(p.config().max_keys, 1);
  EXPECT_EQ(p.Predict(Job("a", "b", "c", 1)).estimate, Seconds(1));
}

TEST(NormalizeJobNameTest, RunsOfOneExperimentMatch) {
  EXPECT_EQ(NormalizeJobName("bert-ft-lr0.001-seed7"), "bert-ft-lr#-seed#");
  EXPECT_EQ(NormalizeJobName("bert-ft-lr0.01-seed9"), "bert-ft-lr#-seed#");
  EXPECT_EQ(NormalizeJobName("BERT_ft_lr0.01_seed9"), "bert-ft-lr#-seed#");
  EXPECT_EQ(NormalizeJobName("bert-ft-lr1e-4-seed10"), "bert-ft-lr#-seed#");
  EXPECT_EQ(NormalizeJobName("resnet50-run-42"), "resnet#-run-#");
  EXPECT_EQ(NormalizeJobName("exp 2021-03-04 run 17"), "exp-#-run-#");
  EXPECT_EQ(NormalizeJobName("exp_20210304_run17"), "exp-#-run#");
  EXPECT_EQ(NormalizeJobName("eval-123e4567-e89b-12d3-a456-426614174000"), "eval-#");
  EXPECT_EQ(NormalizeJobName("ckpt-3f2a9c1/final"), "ckpt-#-final");
  EXPECT_EQ(NormalizeJobName("model.v1.2.3"), "model-v#");
  EXPECT_EQ(NormalizeJobName("  --Train--  "), "train");
  EXPECT_EQ(NormalizeJobName("lr.5"), "lr#");
  EXPECT_EQ(NormalizeJobName("3epochs"), "#epochs");  // an 'e' not followed by digits is a letter
  EXPECT_EQ(NormalizeJobName(""), "");
  // Different experiments stay apart; short hex-looking words are words.
  EXPECT_NE(NormalizeJobName("bert-ft-lr0.01"), NormalizeJobName("bert-pt-lr0.01"));
  EXPECT_EQ(NormalizeJobName("deadbeef-facade"), "deadbeef-facade");  // no digit: words
  EXPECT_EQ(NormalizeJobName("a100-ft"), "a#-ft");
}

TEST(RuntimePredictorTest, SimilarNamesShareAKeyButNumbersAloneDoNot) {
  RuntimePredictor p;
  ObserveAll(p, Job("alice", "v", "sweep-lr0.1-seed1", 1), {100});
  ObserveAll(p, Job("alice", "v", "sweep-lr0.3-seed2", 1), {120});
  const Prediction got = p.Predict(Job("alice", "v", "sweep-lr0.03-seed3", 1));
  EXPECT_EQ(got.basis, "user+similar-name");
  EXPECT_EQ(got.estimate, Seconds(110));
  // Names that normalise to no letter ("#") have no similar-name key.
  ObserveAll(p, Job("bob", "v", "1234", 2), {50});
  ObserveAll(p, Job("bob", "v", "5678", 2), {70});
  EXPECT_EQ(p.Predict(Job("bob", "v", "9999", 2)).basis, "user+gpus");
}

TEST(RuntimePredictorTest, ConfidenceGrowsWithSamplesAndConsistencyAndSpecificity) {
  RuntimePredictor p;
  const JobFeatures few = Job("a", "p", "few", 1);
  const JobFeatures many = Job("b", "p", "many", 1);
  const JobFeatures noisy = Job("c", "p", "noisy", 1);
  ObserveAll(p, few, {100, 100});
  ObserveAll(p, many, std::vector<int64_t>(10, 100));
  ObserveAll(p, noisy, {10, 100, 1000, 10, 100, 1000, 10, 100, 1000, 100});
  const double c_few = p.Predict(few).confidence;
  const double c_many = p.Predict(many).confidence;
  const double c_noisy = p.Predict(noisy).confidence;
  EXPECT_GT(c_many, c_few);
  EXPECT_GT(c_many, c_noisy);
  EXPECT_NEAR(c_few, 0.5, 1e-9);           // 1.0 × 2/(2+2) × 1/(1+log2(1))
  EXPECT_NEAR(c_many, 10.0 / 12.0, 1e-9);  // 1.0 × 10/12 × 1
  // q1 = 32.5, q3 = 775 for the noisy runs.
  EXPECT_NEAR(c_noisy, 10.0 / 12.0 / (1.0 + std::log2(775.0 / 32.5)), 1e-9);
  // The same runs answering through a generic key are trusted less.
  const Prediction generic = p.Predict(Job("b", "p", "other", 2));  // "user": 10 × 100 s
  EXPECT_EQ(generic.basis, "user");
  EXPECT_NEAR(generic.confidence, 0.4 * 10.0 / 12.0, 1e-9);
  for (double c : {c_few, c_many, c_noisy, generic.confidence}) {
    EXPECT_GE(c, 0.0);
    EXPECT_LE(c, 1.0);
  }
}

TEST(RuntimePredictorTest, MemoryIsBoundedByEvictingTheLeastRecentlyObservedKey) {
  PredictorConfig config;
  config.max_keys = 10;
  config.min_samples = 1;
  RuntimePredictor p(config);
  for (int i = 0; i < 100; ++i) {
    p.Observe(Job(Numbered("u", i), "p", Numbered("n", i), 1), Seconds(i + 1));
    EXPECT_LE(p.KeyCount(), 10u);
  }
  EXPECT_EQ(p.KeyCount(), 10u);
  // The newest user is fully known; the first one's own keys are gone, shared ones remain.
  EXPECT_EQ(p.Predict(Job("u99", "p", "n99", 1)).basis, "user+name");
  EXPECT_EQ(p.Predict(Job("u0", "p", "n0", 1)).basis, "project+gpus");

  PredictorConfig big;
  big.max_keys = 1000;
  RuntimePredictor q(big);
  for (int i = 0; i < 5000; ++i) {
    q.Observe(Job(Numbered("u", i), Numbered("p", i % 7), Numbered("job-", i), i % 9), Seconds(60));
  }
  EXPECT_EQ(q.KeyCount(), 1000u);
}

// The server's predictor (default config) stays within kDefaultMaxKeys however many one-off job
// names it sees, and still answers a recurring experiment by its name.
TEST(RuntimePredictorTest, TheDefaultBoundHoldsForOneOffNames) {
  RuntimePredictor p;
  ASSERT_EQ(p.config().max_keys, kDefaultMaxKeys);
  for (int i = 0; i < kDefaultMaxKeys + 5000; ++i) {
    p.Observe(Job("ann", "p", Numbered("rss-", i), i % 2), Seconds(60));
    if (i % 1000 == 0) p.Observe(Job("ann", "p", "nightly-eval", 1), Seconds(600));
  }
  EXPECT_EQ(p.KeyCount(), static_cast<size_t>(kDefaultMaxKeys));
  const Prediction nightly = p.Predict(Job("ann", "p", "nightly-eval", 1));
  EXPECT_EQ(nightly.basis, "user+name");
  EXPECT_EQ(nightly.estimate, Seconds(600));
}

TEST(RuntimePredictorTest, SameCallsSameAnswers) {
  auto run = [] {
    RuntimePredictor p;
    SeededRng rng(42);
    std::vector<std::string> out;
    for (int i = 0; i < 2000; ++i) {
      const JobFeatures job =
          Job(Numbered("u", rng.Uniform(5)), "p",
              Numbered("exp-", rng.Uniform(4)) + Numbered("-seed", rng.Uniform(100)),
              static_cast<int>(rng.Uniform(3)));
      const Prediction got = p.Predict(job);
      out.push_back(got.basis + " " + std::to_string(got.estimate.value()) + " " +
                    std::to_string(got.confidence));
      p.Observe(job, Seconds(static_cast<int64_t>(rng.Uniform(10000))));
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

TEST(RuntimePredictorTest, FeaturesOfAJob) {
  model::Job job;
  job.user = "alice";
  job.project = "vision";
  job.name = "train";
  job.tasks = 2;
  job.resources = model::MakeResources(4, 1000, 0, 0);
  const JobFeatures f = RuntimePredictor::FeaturesOf(job);
  EXPECT_EQ(f.user, "alice");
  EXPECT_EQ(f.project, "vision");
  EXPECT_EQ(f.name, "train");
  EXPECT_EQ(f.gpus, 8);
  job.tasks = 1;
  job.resources = model::MakeResources(1, 250, 0, 0);  // a share counts as one GPU
  EXPECT_EQ(RuntimePredictor::FeaturesOf(job).gpus, 1);
  job.resources = model::MakeResources(0, 0, 1000, 0);
  EXPECT_EQ(RuntimePredictor::FeaturesOf(job).gpus, 0);
}

}  // namespace
}  // namespace corral::predict
