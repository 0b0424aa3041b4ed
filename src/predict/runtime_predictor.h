// Run-time prediction learned online from finished jobs, in the spirit of the Helios estimator
// (Hu et al., "Characterization and Prediction of Deep Learning Workloads in Large-Scale GPU
// Datacenters", SC'21): most jobs recur, with similar names and similar durations per user, so
// the recent run times of a user's jobs with the same (or a similar) name predict the next one.
//
// Keys and fallbacks. A finished job's duration is remembered under every key below; a
// prediction is answered by the first key, in this order, that holds at least
// PredictorConfig::min_samples durations (the `basis` of the answer):
//   1. "user+name"          same user, exactly the same job name (skipped for an empty name)
//   2. "user+similar-name"  same user, same NormalizeJobName(name) (skipped when the normalised
//                           name has no letter, e.g. a name that is only a number or a hash)
//   3. "user+gpus"          same user, same total GPU count
//   4. "project+gpus"       same project, same total GPU count
//   5. "user"               same user
//   6. "gpus"               same total GPU count, anyone
//   7. "all"                every job
//   8. "default"            nothing answered: PredictorConfig::default_estimate, confidence 0
//
// Estimate. The median of the key's window (its `window` most recent durations; for an even
// count the mean of the two middle values), rounded to whole seconds and at least 1 s, so that
// a handful of very long or crashed runs does not drag it (run times are heavy-tailed).
//
// Confidence, in [0, 1]: how much to trust the estimate,
//     confidence = generality(basis) × n / (n + 2) × 1 / (1 + log2(q3 / q1))
// where n is the number of durations in the window, q1 and q3 its lower and upper quartiles
// (linear interpolation between order statistics; both at least 1 s) and generality is 1.0 for
// user+name, 0.9 user+similar-name, 0.6 user+gpus, 0.5 project+gpus, 0.4 user, 0.3 gpus, 0.2
// all and 0 for default. So it grows with the sample count (0.5 at 2 samples, 0.94 at 32),
// halves when the interquartile ratio q3/q1 is 2, and a specific key is trusted more than a
// generic one. It is a ranking aid (which estimates to rely on), not a calibrated probability.
//
// Memory is bounded: at most PredictorConfig::max_keys keys (kDefaultMaxKeys: 20,000, about
// 4 MiB in a server with one-off job names, ~200 bytes a key), each holding at most `window`
// durations; beyond that the least recently observed key is forgotten (Predict does not count
// as a use, so it stays const). A finished job adds at most one key that no other job shares
// (its user+name), so the bound keeps the names of roughly the last 20,000 distinct experiments.
// Deterministic: the same Observe/Predict calls give the same answers. Not thread-safe: callers
// serialise access (the scheduler is single-threaded).
#pragma once

#include <cstdint>
#include <list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "common/units.h"
#include "model/job.h"

namespace corral::predict {

// What the predictor knows about a job before it runs.
struct JobFeatures {
  std::string user, project, name;
  int gpus = 0;  // total GPUs of the job (tasks x GPUs per task; a share counts as 1)
};

struct Prediction {
  Seconds estimate{0};    // > 0 once anything was observed; else the configured default
  double confidence = 0;  // 0..1: how much to trust it (0 = pure default)
  std::string basis;      // which key answered: "user+name", ..., "default" (see above)
};

inline constexpr int kDefaultMaxKeys = 20'000;

struct PredictorConfig {
  Seconds default_estimate{3600};  // before anything was observed
  int window = 32;                 // durations remembered per key (most recent)
  int min_samples = 2;             // a key answers only with at least this many
  int max_keys = kDefaultMaxKeys;  // keys kept; the least recently observed beyond are forgotten
};

// The basis names, in fallback order ("user+name" first, "default" last).
const std::vector<std::string>& BasisNames();

// The name of a run of one experiment, so that its runs match under "user+similar-name":
//  1. lowercase;
//  2. each UUID (8-4-4-4-12 hex digits) and each run of at least 6 hex digits containing a digit
//     (a hash, a short git sha), bounded by non-alphanumerics or the ends, becomes '#';
//  3. each number becomes '#': digits with an optional fraction and exponent ("7", "0.001",
//     ".5", "1e-4", "3E+2"), wherever it is ("lr0.01" -> "lr#", "seed3" -> "seed#"); adjacent
//     '#'s merge ("v1.2.3" -> "v#");
//  4. every run of characters other than [a-z0-9#] (separators: '-', '_', '.', ' ', '/', ...)
//     becomes one '-', trimmed at both ends, and consecutive parts that are only '#' merge
//     (dates, versions: "exp-#-#-#" -> "exp-#").
// E.g. "bert-ft-lr0.001-seed7" and "BERT_ft_lr0.01_seed9" -> "bert-ft-lr#-seed#";
// "exp 2021-03-04 run 17" -> "exp-#-run-#"; "ckpt-3f2a9c1" -> "ckpt-#"; "vgg16" -> "vgg#".
std::string NormalizeJobName(std::string_view name);

// Learns run times online (Observe) and predicts them (Predict). See the top of this file.
class RuntimePredictor {
 public:
  // Values below 1 for window, min_samples or max_keys are taken as 1, a min_samples above
  // window as window, and a default_estimate below 1 s as 1 s.
  explicit RuntimePredictor(PredictorConfig config = {});

  Prediction Predict(const JobFeatures& job) const;
  // Records a finished job's run time (seconds, >= 0; negative durations are ignored).
  void Observe(const JobFeatures& job, Seconds duration);

  // The features of a model::Job: user, project, name, gpus = tasks × GPUs per task (a share
  // of one GPU counts as 1).
  static JobFeatures FeaturesOf(const model::Job& job);

  const PredictorConfig& config() const { return config_; }
  // Number of keys currently remembered (<= config().max_keys).
  size_t KeyCount() const { return keys_.size(); }

 private:
  // One key's recent durations and their summary, updated on every Observe.
  struct Window {
    std::vector<int64_t> durations;  // ring buffer of at most config_.window entries
    size_t next = 0;                 // where the next duration goes once the buffer is full
    Seconds median{0};
    double confidence_factor = 0;  // n / (n + 2) × 1 / (1 + log2(q3 / q1)), without generality
    std::list<std::string>::iterator lru;  // position in lru_
  };

  // The keys of `job`, one per basis before "default"; an empty string means "no such key".
  static std::vector<std::string> KeysOf(const JobFeatures& job);
  void Add(const std::string& key, int64_t duration);

  PredictorConfig config_;
  std::unordered_map<std::string, Window> keys_;
  std::list<std::string> lru_;  // most recently observed first
};

}  // namespace corral::predict
