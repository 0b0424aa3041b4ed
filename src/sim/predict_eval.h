// How well the run-time predictor (predict::RuntimePredictor) would have done on a trace:
// `corral sim predict`. The jobs are replayed online without a scheduler: each job is predicted
// at its submit time from the jobs that had finished by then, then learnt from once it finishes.
#pragma once

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "predict/runtime_predictor.h"
#include "sim/trace.h"

namespace corral::sim {

// Accuracy of the predictions made for a set of jobs.
struct PredictionAccuracy {
  int64_t jobs = 0;            // jobs predicted
  int64_t scored = 0;          // of which the actual duration is > 0: the two error measures
                               // below are over these (a relative error of 0 s is undefined)
  double mdape_pct = 0;        // median of |predicted - actual| / actual, in %; 0 if none scored
  double within_2x_pct = 0;    // % of scored jobs with predicted / actual in [0.5, 2]
  double mean_confidence = 0;  // mean Prediction::confidence over all `jobs`
};

struct PredictionEvaluation {
  PredictionAccuracy total;
  // The same over the jobs each basis answered: one entry per basis that answered at least one
  // job, in predict::BasisNames() order.
  std::vector<std::pair<std::string, PredictionAccuracy>> by_basis;
  // The same by band of confidence, to check that it ranks estimates: "[0, 0.25)",
  // "[0.25, 0.5)", "[0.5, 0.75)", "[0.75, 1]", lowest first, non-empty bands only.
  std::vector<std::pair<std::string, PredictionAccuracy>> by_confidence;
};

// The evaluation protocol. Jobs are taken in submit order (ties in trace order). A job submitted
// at t is predicted (RuntimePredictor::FeaturesOf its job) after every job whose finish time,
// submit + duration, is <= t has been observed, in order of finish time (ties in submit order):
// no queueing, so a job's run time is known exactly when it would have ended had it started at
// once. Jobs still running at t are unknown to the prediction. Deterministic.
PredictionEvaluation EvaluatePredictor(const Trace& trace, const predict::PredictorConfig& config);

}  // namespace corral::sim
