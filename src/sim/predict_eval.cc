#include "sim/predict_eval.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <numeric>
#include <queue>
#include <tuple>

#include "sim/report.h"

namespace corral::sim {

namespace {

constexpr std::array<const char*, 4> kConfidenceBands = {"[0, 0.25)", "[0.25, 0.5)", "[0.5, 0.75)",
                                                         "[0.75, 1]"};

// One job's prediction against what it really ran.
struct Outcome {
  size_t basis = 0;  // index in predict::BasisNames()
  double predicted = 0;
  double actual = 0;
  double confidence = 0;
};

PredictionAccuracy Summarize(const std::vector<const Outcome*>& outcomes) {
  PredictionAccuracy a;
  std::vector<double> errors;
  int64_t within = 0;
  double confidence = 0;
  for (const Outcome* o : outcomes) {
    ++a.jobs;
    confidence += o->confidence;
    if (o->actual <= 0) continue;
    ++a.scored;
    errors.push_back(std::abs(o->predicted - o->actual) / o->actual);
    const double ratio = o->predicted / o->actual;
    if (ratio >= 0.5 && ratio <= 2.0) ++within;
  }
  if (a.jobs > 0) a.mean_confidence = confidence / static_cast<double>(a.jobs);
  if (a.scored > 0) {
    a.mdape_pct = 100.0 * Median(std::move(errors));
    a.within_2x_pct = 100.0 * static_cast<double>(within) / static_cast<double>(a.scored);
  }
  return a;
}

}  // namespace

PredictionEvaluation EvaluatePredictor(const Trace& trace, const predict::PredictorConfig& config) {
  std::vector<size_t> arrivals(trace.jobs.size());
  std::iota(arrivals.begin(), arrivals.end(), 0);
  std::stable_sort(arrivals.begin(), arrivals.end(), [&](size_t a, size_t b) {
    return trace.jobs[a].job.submit_time < trace.jobs[b].job.submit_time;
  });

  // Running jobs by (finish time, position in submit order), earliest first.
  using Finish = std::tuple<int64_t, size_t>;
  std::priority_queue<Finish, std::vector<Finish>, std::greater<>> running;
  predict::RuntimePredictor predictor(config);
  const std::vector<std::string>& names = predict::BasisNames();
  std::vector<Outcome> outcomes;
  outcomes.reserve(arrivals.size());
  for (size_t pos = 0; pos < arrivals.size(); ++pos) {
    const TraceJob& t = trace.jobs[arrivals[pos]];
    const int64_t now = t.job.submit_time.value();
    while (!running.empty() && std::get<0>(running.top()) <= now) {
      const TraceJob& done = trace.jobs[arrivals[std::get<1>(running.top())]];
      running.pop();
      predictor.Observe(predict::RuntimePredictor::FeaturesOf(done.job), done.duration);
    }
    const predict::Prediction p = predictor.Predict(predict::RuntimePredictor::FeaturesOf(t.job));
    Outcome o;
    o.basis = static_cast<size_t>(std::find(names.begin(), names.end(), p.basis) - names.begin());
    o.predicted = static_cast<double>(p.estimate.value());
    o.actual = static_cast<double>(t.duration.value());
    o.confidence = p.confidence;
    outcomes.push_back(o);
    running.emplace(now + t.duration.value(), pos);
  }

  PredictionEvaluation eval;
  std::vector<const Outcome*> all;
  std::vector<std::vector<const Outcome*>> by_basis(names.size());
  std::vector<std::vector<const Outcome*>> by_band(kConfidenceBands.size());
  for (const Outcome& o : outcomes) {
    all.push_back(&o);
    by_basis[o.basis].push_back(&o);
    const auto band = static_cast<size_t>(std::clamp(o.confidence * 4, 0.0, 3.0));
    by_band[band].push_back(&o);
  }
  eval.total = Summarize(all);
  for (size_t b = 0; b < names.size(); ++b) {
    if (!by_basis[b].empty()) eval.by_basis.emplace_back(names[b], Summarize(by_basis[b]));
  }
  for (size_t b = 0; b < by_band.size(); ++b) {
    if (!by_band[b].empty()) {
      eval.by_confidence.emplace_back(kConfidenceBands[b], Summarize(by_band[b]));
    }
  }
  return eval;
}

}  // namespace corral::sim
