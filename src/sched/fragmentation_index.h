// FGD's fragmentation F(node) looked up instead of swept. For one GPU model and one multiset of
// free GPU shares, F is a step function of the node's free CPU (a typical task counts as able
// to run once the node has its CPU), so it is tabulated once per such GPU state at the typical
// tasks' CPU thresholds, and every later node in that state costs a binary search. On diverse
// clusters (sched_bench's fgd_diverse: thousands of typical shapes, nodes that differ mostly in
// free CPU) this replaces an O(shapes) sweep per score.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "sched/fragmentation.h"

namespace corral::sched {

class FragmentationIndex {
 public:
  // Borrows `meter` (it must outlive the index); reads its shapes and resolved models. Holds
  // at most `max_entries` entries (see entries()).
  explicit FragmentationIndex(const FragmentationMeter& meter, size_t max_entries = kMaxEntries);

  // Exactly meter.Weighted(free, free_total, cpu_free, model). Tabulates the GPU state (model,
  // free shares) on first sight; with at most kSweepShapes shapes it asks the meter (a sweep
  // that short costs less than hashing the state: fgd/10000, ~30 shapes, ran slower tabulated).
  // `free_total` must be the sum of `free`'s values: the state's key leaves it out (checked in
  // debug builds).
  int64_t Weighted(const SortedFree& free, int64_t free_total, int64_t cpu_free, int model);

  // Forgets every table: call after meter.Resolve (the models a shape accepts may have changed).
  void Clear();

  // Memory held now, in 8-byte entries: per GPU state its table (one int64 per entry), its key
  // (two int32 per entry, rounded up) and kStateEntries for the hash node and the two vectors'
  // headers and allocations. Bounded: a state that would take it past max_entries makes the
  // index start over (one state is always kept, whatever it costs), so kMaxEntries is 64 MiB.
  size_t entries() const { return entries_; }
  static constexpr size_t kMaxEntries = size_t{1} << 23;
  static constexpr size_t kStateEntries = 16;  // 128 B
  static constexpr size_t kSweepShapes = 64;

 private:
  // A GPU state: the model id, then the free shares ascending.
  using Key = std::vector<int32_t>;
  struct KeyView {
    int model;
    std::span<const int32_t> free;
  };
  struct KeyHash {
    using is_transparent = void;
    size_t operator()(const Key& key) const;
    size_t operator()(const KeyView& key) const;
  };
  struct KeyEq {
    using is_transparent = void;
    bool operator()(const Key& a, const Key& b) const { return a == b; }
    bool operator()(const KeyView& a, const Key& b) const;
    bool operator()(const Key& a, const KeyView& b) const { return (*this)(b, a); }
  };

  // [k] = F when exactly the first k of thresholds_ are <= the node's free CPU.
  std::vector<int64_t> Tabulate(const SortedFree& free, int64_t free_total, int model) const;

  const FragmentationMeter& meter_;
  size_t max_entries_;
  std::vector<int64_t> thresholds_;  // the shapes' CPU (milli), distinct, ascending
  std::vector<int> position_;        // by meter shape: its CPU's index in thresholds_
  std::unordered_map<Key, std::vector<int64_t>, KeyHash, KeyEq> steps_;
  size_t entries_ = 0;  // as entries() says, over steps_
};

}  // namespace corral::sched
