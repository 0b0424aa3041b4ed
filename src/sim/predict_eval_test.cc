#include "sim/predict_eval.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <string>

#include "sim/generator.h"
#include "sim/report.h"

namespace corral::sim {
namespace {

TraceJob Job(int64_t id, std::string user, std::string name, int gpus, int64_t submit,
             int64_t duration) {
  TraceJob t;
  t.job.id = JobId(id);
  t.job.user = std::move(user);
  t.job.project = "p";
  t.job.name = std::move(name);
  t.job.submit_time = Seconds(submit);
  t.job.resources = model::MakeResources(gpus, gpus > 0 ? 1000 : 0, 0, 0);
  t.duration = Seconds(duration);
  return t;
}

// The confidence of an answer from `samples` (see runtime_predictor.h).
double Confidence(double generality, double n, double q1, double q3) {
  return generality * n / (n + 2) / (1 + std::log2(q3 / q1));
}

// A hand-made trace, default config (min_samples 2, default estimate 3600 s). Submit order:
//  job 0 alice train-1  1 GPU  t=0    ran 100 (ends 100)  predicted 3600 (default)
//  job 1 alice train-2  1 GPU  t=10   ran 200 (ends 210)  predicted 3600 (default: nothing ended)
//  job 2 bob   eval     2 GPU  t=300  ran 50  (ends 350)  predicted 150 = median{100,200} (all)
//  job 3 alice train-3  1 GPU  t=400  ran 160 (ends 560)  predicted 150 (user+similar-name
//                                                         "train-#": {100,200})
//  job 4 carol x        0 GPU  t=400  ran 0   (ends 400)  predicted 100 = median{100,200,50} (all)
//  job 5 bob   eval     2 GPU  t=600  ran 60              predicted 100 = median{100,200,50,160,0}
//                                                         (all: bob's own keys have one sample)
// Job 4 ran 0 s: predicted and counted in `jobs` and the confidence, not scored.
// Errors |p - a| / a: 35, 17, 2, 0.0625, -, 0.6667; within 2x: jobs 3 and 5.
TEST(PredictEvalTest, HandComputedTrace) {
  Trace trace;
  // Not in submit order on purpose: the evaluation sorts by submit time (ties in trace order).
  trace.jobs = {Job(0, "alice", "train-1", 1, 0, 100),  Job(2, "bob", "eval", 2, 300, 50),
                Job(1, "alice", "train-2", 1, 10, 200), Job(3, "alice", "train-3", 1, 400, 160),
                Job(4, "carol", "x", 0, 400, 0),        Job(5, "bob", "eval", 2, 600, 60)};
  const PredictionEvaluation eval = EvaluatePredictor(trace, {});

  EXPECT_EQ(eval.total.jobs, 6);
  EXPECT_EQ(eval.total.scored, 5);
  EXPECT_NEAR(eval.total.mdape_pct, 200.0, 1e-9);  // median of {0.0625, 0.667, 2, 17, 35}
  EXPECT_NEAR(eval.total.within_2x_pct, 40.0, 1e-9);
  const double c2 = Confidence(0.2, 2, 125, 175);  // all {100, 200}
  const double c3 = Confidence(0.9, 2, 125, 175);  // user+similar-name {100, 200}
  const double c4 = Confidence(0.2, 3, 75, 150);   // all {50, 100, 200}
  const double c5 = Confidence(0.2, 5, 50, 160);   // all {0, 50, 100, 160, 200}
  EXPECT_NEAR(eval.total.mean_confidence, (c2 + c3 + c4 + c5) / 6, 1e-9);

  ASSERT_EQ(eval.by_basis.size(), 3u);
  const auto& [similar_name, similar] = eval.by_basis[0];
  EXPECT_EQ(similar_name, "user+similar-name");
  EXPECT_EQ(similar.jobs, 1);
  EXPECT_NEAR(similar.mdape_pct, 6.25, 1e-9);
  EXPECT_NEAR(similar.within_2x_pct, 100.0, 1e-9);
  EXPECT_NEAR(similar.mean_confidence, c3, 1e-9);
  const auto& [all_name, all] = eval.by_basis[1];
  EXPECT_EQ(all_name, "all");
  EXPECT_EQ(all.jobs, 3);
  EXPECT_EQ(all.scored, 2);
  EXPECT_NEAR(all.mdape_pct, 100.0 * (2.0 + 40.0 / 60.0) / 2, 1e-9);
  EXPECT_NEAR(all.within_2x_pct, 50.0, 1e-9);
  EXPECT_NEAR(all.mean_confidence, (c2 + c4 + c5) / 3, 1e-9);
  const auto& [default_name, fallback] = eval.by_basis[2];
  EXPECT_EQ(default_name, "default");
  EXPECT_EQ(fallback.jobs, 2);
  EXPECT_NEAR(fallback.mdape_pct, 2600.0, 1e-9);  // median of {35, 17}
  EXPECT_EQ(fallback.within_2x_pct, 0.0);
  EXPECT_EQ(fallback.mean_confidence, 0.0);

  // Confidences: 0, 0, c2 ≈ 0.07, c3 ≈ 0.30, c4 = 0.06, c5 ≈ 0.05.
  ASSERT_EQ(eval.by_confidence.size(), 2u);
  EXPECT_EQ(eval.by_confidence[0].first, "[0, 0.25)");
  EXPECT_EQ(eval.by_confidence[0].second.jobs, 5);
  EXPECT_EQ(eval.by_confidence[1].first, "[0.25, 0.5)");
  EXPECT_EQ(eval.by_confidence[1].second.jobs, 1);
  EXPECT_NEAR(eval.by_confidence[1].second.mdape_pct, 6.25, 1e-9);

  const nlohmann::json json = PredictJson(eval, {});
  EXPECT_EQ(json["mode"], "predict");
  EXPECT_EQ(json["jobs"], 6);
  EXPECT_EQ(json["mdape_pct"], 200.0);
  EXPECT_EQ(json["config"]["window"], 32);
  EXPECT_EQ(json["by_basis"][1]["basis"], "all");
  EXPECT_EQ(json["by_confidence"][1]["confidence"], "[0.25, 0.5)");
  EXPECT_NE(PredictTable(eval).find("user+similar-name"), std::string::npos);
}

TEST(PredictEvalTest, EmptyTraceAndUnscoredBasis) {
  const PredictionEvaluation empty = EvaluatePredictor({}, {});
  EXPECT_EQ(empty.total.jobs, 0);
  EXPECT_TRUE(empty.by_basis.empty());
  Trace zeros;
  zeros.jobs = {Job(0, "a", "x", 1, 0, 0)};
  const PredictionEvaluation eval = EvaluatePredictor(zeros, {});
  EXPECT_EQ(eval.total.scored, 0);
  EXPECT_EQ(eval.total.mdape_pct, 0.0);
  const std::string table = PredictTable(eval);
  const std::string total = table.substr(table.find("\ntotal") + 1);
  EXPECT_EQ(total.substr(0, total.find('\n')).find('%'), std::string::npos);  // "-", not "0.0%"
}

// Recurring templates are learnable; independent "job-<id>" durations are not.
TEST(PredictEvalTest, TemplatedWorkloadsArePredictable) {
  GeneratorConfig config;
  config.jobs = 4000;
  config.seed = 5;
  config.templates_per_user = 4;
  const PredictionEvaluation templated = EvaluatePredictor(GenerateWorkload(config), {});
  config.templates_per_user = 0;
  const PredictionEvaluation independent = EvaluatePredictor(GenerateWorkload(config), {});
  EXPECT_GT(templated.total.within_2x_pct, 60.0);
  EXPECT_LT(independent.total.within_2x_pct, 40.0);
  EXPECT_LT(templated.total.mdape_pct, independent.total.mdape_pct);
  EXPECT_GT(templated.total.mean_confidence, independent.total.mean_confidence);
  // Deterministic.
  EXPECT_EQ(PredictJson(independent, {}),
            PredictJson(EvaluatePredictor(GenerateWorkload(config), {}), {}));
}

TEST(PredictEvalTest, TiresiasTrace) {
  const char* dir = std::getenv("CORRAL_SHARED_TRACES");
  std::error_code ec;
  if (dir == nullptr ||
      !std::filesystem::is_regular_file(std::string(dir) + "/tiresias_60_job.csv", ec)) {
    GTEST_SKIP() << "CORRAL_SHARED_TRACES has no tiresias_60_job.csv (" << (dir ? dir : "unset")
                 << "); skipping the real-trace check";
  }
  auto trace = ReadTiresias(std::string(dir) + "/tiresias_60_job.csv", 1'000'000);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  const PredictionEvaluation eval = EvaluatePredictor(*trace, {});
  EXPECT_EQ(eval.total.jobs, 60);
  ASSERT_FALSE(eval.by_basis.empty());
  EXPECT_EQ(eval.by_basis[0].first, "user+name");  // model_name is the job name
}

}  // namespace
}  // namespace corral::sim
