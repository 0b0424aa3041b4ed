// Gittins ranks over a learnt run-time distribution: the non-clairvoyant order `gittins` of the
// replay (issue 21, point 4). A job that has run `age` seconds is ranked by
//
//   rank(age) = min over Δ > 0 of  E[min(S − age, Δ) | S > age] / P(S − age <= Δ | S > age)
//
// (the inverse of its Gittins index: the expected run per unit of probability of finishing
// within Δ), S drawn from the run times observed so far. Lower ranks run first. With one point
// mass (every job alike and known) the rank is the remaining time, as SRTF's; for heavy tails
// it grows with age, as least attained service does. No oracle: only observed run times and a
// job's own age.
//
// Run times and ages live on log-scale bins, kGittinsBinsPerOctave per doubling (bin b >= 1 holds
// [2^((b-1)/k), 2^(b/k)) seconds, bin 0 holds [0, 1)), each with its count and sum; a job's age is
// rounded down to its bin's lower edge, so a running job's rank changes only when its age crosses
// an edge: at most kGittinsBins changes over its life, which bounds how often two jobs can take
// turns.
#pragma once

#include <array>
#include <cstdint>

namespace corral::sim {

inline constexpr int kGittinsBinsPerOctave = 4;
// A job older than this share of the observed runs is in the tail: it ranks kGittinsTailRank.
inline constexpr double kGittinsTailShare = 0.9;
inline constexpr double kGittinsTailRank = 281474976710656.0;    // 2^48 s, after every other
inline constexpr int kGittinsBins = 48 * kGittinsBinsPerOctave;  // up to 2^48 s

class GittinsRanks {
 public:
  // One observed run time in seconds (clamped to the bins' range).
  void Observe(double seconds);
  // The rank (seconds, > 0) of a job that has run `age` seconds. Without observations, or
  // when none is above the age's bin, the rank is the bin's upper edge (least attained service
  // first). Amortised O(1): the ranks of all bins are recomputed (O(bins²)) after observations.
  double Rank(double age) const;
  int64_t observed() const { return observed_; }

 private:
  static int BinOf(double seconds);
  void Recompute() const;

  std::array<int64_t, kGittinsBins> count_{};
  std::array<double, kGittinsBins> sum_{};
  int64_t observed_ = 0;
  mutable bool dirty_ = true;
  mutable std::array<double, kGittinsBins> rank_{};
};

}  // namespace corral::sim
