#include "sim/gittins.h"

#include <algorithm>
#include <cmath>

namespace corral::sim {
namespace {

double LowerEdge(int bin) {
  return bin == 0 ? 0.0 : std::exp2(static_cast<double>(bin - 1) / kGittinsBinsPerOctave);
}
double UpperEdge(int bin) { return std::exp2(static_cast<double>(bin) / kGittinsBinsPerOctave); }

}  // namespace

int GittinsRanks::BinOf(double seconds) {
  if (!(seconds >= 1.0)) return 0;  // also NaN
  int bin = static_cast<int>(std::floor(std::log2(seconds) * kGittinsBinsPerOctave)) + 1;
  // The logarithm may round a value next to an edge into the wrong bin.
  if (seconds < LowerEdge(bin)) --bin;
  if (seconds >= UpperEdge(bin)) ++bin;
  return std::min(bin, kGittinsBins - 1);
}

void GittinsRanks::Observe(double seconds) {
  const int bin = BinOf(seconds);
  ++count_[bin];
  sum_[bin] += std::clamp(seconds, LowerEdge(bin), UpperEdge(bin));
  ++observed_;
  dirty_ = true;
}

void GittinsRanks::Recompute() const {
  for (int b0 = 0; b0 < kGittinsBins; ++b0) {
    const double age = LowerEdge(b0);
    int64_t above = 0;  // observations in bins >= b0: the runs that outlive `age`
    for (int b = b0; b < kGittinsBins; ++b) above += count_[b];
    double best = above > 0 ? INFINITY : UpperEdge(b0);  // none: least attained service
    // Δ reaching the end of bin j: the runs of bins b0..j end within it (at their bin's mean),
    // the others run all of Δ.
    double done_work = 0;  // Σ (S − age) over the runs ended by then
    int64_t ended = 0;
    for (int j = b0; j < kGittinsBins && above > 0; ++j) {
      done_work += sum_[j] - static_cast<double>(count_[j]) * age;
      ended += count_[j];
      if (count_[j] == 0) continue;
      const double delta = UpperEdge(j) - age;
      const double work = done_work + static_cast<double>(above - ended) * delta;
      best = std::min(best, work / static_cast<double>(ended));
    }
    rank_[b0] = std::max(1.0, best);
  }
  // The tail: from the bin by which kGittinsTailShare of the runs have ended, one rank after
  // every other, which does not move as observations come (a job's rank there equals another's
  // exactly: FIFO among them, sched::Scheduler's multi-GPU rule).
  int64_t ended = 0;
  for (int b = 0; b < kGittinsBins && observed_ > 0; ++b) {
    ended += count_[b];
    if (static_cast<double>(ended) < kGittinsTailShare * static_cast<double>(observed_)) continue;
    for (int later = b + 1; later < kGittinsBins; ++later) rank_[later] = kGittinsTailRank;
    break;
  }
  dirty_ = false;
}

double GittinsRanks::Rank(double age) const {
  if (dirty_) Recompute();
  return rank_[BinOf(age)];
}

}  // namespace corral::sim
