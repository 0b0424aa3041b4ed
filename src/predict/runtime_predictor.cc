#include "predict/runtime_predictor.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

namespace corral::predict {

namespace {

// Index of each basis in BasisNames(); the keys of a job come in this order.
enum Basis : size_t {
  kUserName,
  kUserSimilarName,
  kUserGpus,
  kProjectGpus,
  kUser,
  kGpus,
  kAll,
  kDefault,
  kBasisCount,
};

// How much a basis is trusted for being specific to the job (see the header's formula).
constexpr std::array<double, kBasisCount> kGenerality = {1.0, 0.9, 0.6, 0.5, 0.4, 0.3, 0.2, 0.0};
// n / (n + kSampleHalfWeight): the sample-count factor is 1/2 at this many samples.
constexpr double kSampleHalfWeight = 2;
// Hex runs at least this long (with a digit) are hashes, not words.
constexpr size_t kMinHexRun = 6;

bool IsDigit(char c) { return c >= '0' && c <= '9'; }
bool IsLower(char c) { return c >= 'a' && c <= 'z'; }
bool IsAlnum(char c) { return IsDigit(c) || IsLower(c); }  // after lowercasing
bool IsHex(char c) { return IsDigit(c) || (c >= 'a' && c <= 'f'); }

// True when `s` at `pos` starts a UUID (8-4-4-4-12 hex digits) bounded by non-alphanumerics.
bool UuidAt(const std::string& s, size_t pos) {
  constexpr std::array<size_t, 5> kGroups = {8, 4, 4, 4, 12};
  constexpr size_t kLength = 36;
  if (pos > 0 && IsAlnum(s[pos - 1])) return false;
  if (s.size() - pos < kLength) return false;
  if (pos + kLength < s.size() && IsAlnum(s[pos + kLength])) return false;
  size_t i = pos;
  for (size_t g = 0; g < kGroups.size(); ++g) {
    if (g > 0 && s[i++] != '-') return false;
    for (size_t k = 0; k < kGroups[g]; ++k) {
      if (!IsHex(s[i++])) return false;
    }
  }
  return true;
}

// Step 2: UUIDs and long hex runs with a digit become '#'.
std::string CollapseHex(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    if (UuidAt(s, i)) {
      out += '#';
      i += 36;
      continue;
    }
    if (!IsAlnum(s[i])) {
      out += s[i++];
      continue;
    }
    size_t end = i;
    bool all_hex = true, has_digit = false;
    while (end < s.size() && IsAlnum(s[end])) {
      all_hex = all_hex && IsHex(s[end]);
      has_digit = has_digit || IsDigit(s[end]);
      ++end;
    }
    if (all_hex && has_digit && end - i >= kMinHexRun) {
      out += '#';
    } else {
      out.append(s, i, end - i);
    }
    i = end;
  }
  return out;
}

// Length of the digits starting at `pos`.
size_t DigitsAt(const std::string& s, size_t pos) {
  size_t n = 0;
  while (pos + n < s.size() && IsDigit(s[pos + n])) ++n;
  return n;
}

// Step 3: numbers (digits, optional fraction, optional exponent) become '#'; adjacent '#'s merge.
std::string CollapseNumbers(const std::string& s) {
  std::string out;
  out.reserve(s.size());
  size_t i = 0;
  while (i < s.size()) {
    const bool starts_number =
        IsDigit(s[i]) || (s[i] == '.' && i + 1 < s.size() && IsDigit(s[i + 1]));
    if (!starts_number) {
      out += s[i++];
      continue;
    }
    i += DigitsAt(s, i);
    if (i + 1 < s.size() && s[i] == '.' && IsDigit(s[i + 1])) i += 1 + DigitsAt(s, i + 1);
    if (i < s.size() && s[i] == 'e') {
      size_t sign = i + 1;
      if (sign < s.size() && (s[sign] == '+' || s[sign] == '-')) ++sign;
      const size_t digits = DigitsAt(s, sign);
      if (digits > 0) i = sign + digits;
    }
    if (out.empty() || out.back() != '#') out += '#';
  }
  return out;
}

// Step 4: separators become single '-', trimmed; consecutive '#'-only parts merge.
std::string JoinParts(const std::string& s) {
  std::vector<std::string> parts;
  std::string part;
  auto flush = [&] {
    if (part.empty()) return;
    if (!(part == "#" && !parts.empty() && parts.back() == "#")) parts.push_back(part);
    part.clear();
  };
  for (char c : s) {
    if (IsAlnum(c) || c == '#') {
      part += c;
    } else {
      flush();
    }
  }
  flush();
  std::string out;
  for (const std::string& p : parts) {
    if (!out.empty()) out += '-';
    out += p;
  }
  return out;
}

// A key that cannot collide with another basis or another split of the same fields: the basis
// index, then each field prefixed by its length.
std::string MakeKey(Basis basis, std::initializer_list<std::string_view> fields) {
  std::string key = std::to_string(static_cast<size_t>(basis));
  for (std::string_view f : fields) {
    key += '|';
    key += std::to_string(f.size());
    key += ':';
    key += f;
  }
  return key;
}

// Quantile p of sorted, non-empty `v` by linear interpolation between order statistics.
double Quantile(const std::vector<int64_t>& v, double p) {
  const double pos = p * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(pos));
  const size_t hi = std::min(lo + 1, v.size() - 1);
  const double frac = pos - static_cast<double>(lo);
  return static_cast<double>(v[lo]) + frac * static_cast<double>(v[hi] - v[lo]);
}

}  // namespace

const std::vector<std::string>& BasisNames() {
  static const std::vector<std::string> kNames = {
      "user+name", "user+similar-name", "user+gpus", "project+gpus", "user", "gpus", "all",
      "default"};
  return kNames;
}

std::string NormalizeJobName(std::string_view name) {
  std::string lower(name);
  for (char& c : lower) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return JoinParts(CollapseNumbers(CollapseHex(lower)));
}

RuntimePredictor::RuntimePredictor(PredictorConfig config) : config_(config) {
  config_.window = std::max(config_.window, 1);
  config_.min_samples = std::clamp(config_.min_samples, 1, config_.window);
  config_.max_keys = std::max(config_.max_keys, 1);
  config_.default_estimate = std::max(config_.default_estimate, Seconds(1));
}

std::vector<std::string> RuntimePredictor::KeysOf(const JobFeatures& job) {
  const std::string gpus = std::to_string(job.gpus);
  const std::string similar = NormalizeJobName(job.name);
  const bool similar_has_letter = std::any_of(similar.begin(), similar.end(), IsLower);
  std::vector<std::string> keys(kDefault);
  if (!job.name.empty()) keys[kUserName] = MakeKey(kUserName, {job.user, job.name});
  if (similar_has_letter) keys[kUserSimilarName] = MakeKey(kUserSimilarName, {job.user, similar});
  keys[kUserGpus] = MakeKey(kUserGpus, {job.user, gpus});
  keys[kProjectGpus] = MakeKey(kProjectGpus, {job.project, gpus});
  keys[kUser] = MakeKey(kUser, {job.user});
  keys[kGpus] = MakeKey(kGpus, {gpus});
  keys[kAll] = MakeKey(kAll, {});
  return keys;
}

Prediction RuntimePredictor::Predict(const JobFeatures& job) const {
  const std::vector<std::string> keys = KeysOf(job);
  for (size_t basis = 0; basis < keys.size(); ++basis) {
    if (keys[basis].empty()) continue;
    auto it = keys_.find(keys[basis]);
    if (it == keys_.end()) continue;
    const Window& w = it->second;
    if (static_cast<int>(w.durations.size()) < config_.min_samples) continue;
    return {w.median, kGenerality[basis] * w.confidence_factor, BasisNames()[basis]};
  }
  return {config_.default_estimate, 0.0, BasisNames()[kDefault]};
}

void RuntimePredictor::Observe(const JobFeatures& job, Seconds duration) {
  if (duration.value() < 0) return;
  for (const std::string& key : KeysOf(job)) {
    if (!key.empty()) Add(key, duration.value());
  }
}

void RuntimePredictor::Add(const std::string& key, int64_t duration) {
  auto it = keys_.find(key);
  if (it == keys_.end()) {
    if (keys_.size() >= static_cast<size_t>(config_.max_keys)) {
      keys_.erase(lru_.back());
      lru_.pop_back();
    }
    lru_.push_front(key);
    it = keys_.emplace(key, Window{}).first;
    it->second.lru = lru_.begin();
  } else {
    lru_.splice(lru_.begin(), lru_, it->second.lru);
  }
  Window& w = it->second;
  if (w.durations.size() < static_cast<size_t>(config_.window)) {
    w.durations.push_back(duration);
  } else {
    w.durations[w.next] = duration;
    w.next = (w.next + 1) % w.durations.size();
  }
  std::vector<int64_t> sorted = w.durations;
  std::sort(sorted.begin(), sorted.end());
  const double n = static_cast<double>(sorted.size());
  w.median = Seconds(std::max<int64_t>(1, std::llround(Quantile(sorted, 0.5))));
  const double q1 = std::max(1.0, Quantile(sorted, 0.25));
  const double q3 = std::max(1.0, Quantile(sorted, 0.75));
  w.confidence_factor = n / (n + kSampleHalfWeight) / (1.0 + std::log2(q3 / q1));
}

JobFeatures RuntimePredictor::FeaturesOf(const model::Job& job) {
  const int64_t per_task = job.resources.IsShare() ? 1 : job.resources.gpus.value();
  const int64_t total = per_task * std::max(job.tasks, 0);
  JobFeatures f;
  f.user = job.user;
  f.project = job.project;
  f.name = job.name;
  f.gpus = static_cast<int>(std::min<int64_t>(total, std::numeric_limits<int>::max()));
  return f;
}

}  // namespace corral::predict
