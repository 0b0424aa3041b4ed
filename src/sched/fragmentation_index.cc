#include "sched/fragmentation_index.h"

#include <algorithm>
#include <cassert>
#include <numeric>

namespace corral::sched {

namespace {

size_t HashState(int model, std::span<const int32_t> free) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ static_cast<uint64_t>(static_cast<uint32_t>(model));
  for (int32_t f : free) {
    h ^= static_cast<uint64_t>(static_cast<uint32_t>(f)) + 0x9e3779b97f4a7c15ULL + (h << 6) +
         (h >> 2);
  }
  return static_cast<size_t>(h);
}

}  // namespace

size_t FragmentationIndex::KeyHash::operator()(const Key& key) const {
  return HashState(key[0], std::span<const int32_t>(key).subspan(1));
}

size_t FragmentationIndex::KeyHash::operator()(const KeyView& key) const {
  return HashState(key.model, key.free);
}

bool FragmentationIndex::KeyEq::operator()(const KeyView& a, const Key& b) const {
  return b[0] == a.model && b.size() == a.free.size() + 1 &&
         std::equal(a.free.begin(), a.free.end(), b.begin() + 1);
}

FragmentationIndex::FragmentationIndex(const FragmentationMeter& meter, size_t max_entries)
    : meter_(meter), max_entries_(max_entries) {
  for (const FragmentationMeter::Shape& s : meter_.shapes()) thresholds_.push_back(s.cpu);
  std::sort(thresholds_.begin(), thresholds_.end());
  thresholds_.erase(std::unique(thresholds_.begin(), thresholds_.end()), thresholds_.end());
  for (const FragmentationMeter::Shape& s : meter_.shapes()) {
    position_.push_back(static_cast<int>(
        std::lower_bound(thresholds_.begin(), thresholds_.end(), s.cpu) - thresholds_.begin()));
  }
}

void FragmentationIndex::Clear() {
  steps_.clear();
  entries_ = 0;
}

std::vector<int64_t> FragmentationIndex::Tabulate(const SortedFree& free, int64_t free_total,
                                                  int model) const {
  // With no shape's CPU available every shape counts the whole free_total; a shape whose CPU
  // is there counts its fragment instead, from its threshold up.
  std::vector<int64_t> steps(thresholds_.size() + 1, 0);
  int64_t none_run = 0;
  size_t i = 0;
  meter_.VisitFragments(free, free_total, model,
                        [&](const FragmentationMeter::Shape& s, int64_t fragment) {
                          none_run += s.count * free_total;
                          steps[position_[i++] + 1] -= s.count * (free_total - fragment);
                        });
  steps[0] = none_run;
  for (size_t k = 1; k < steps.size(); ++k) steps[k] += steps[k - 1];
  return steps;
}

int64_t FragmentationIndex::Weighted(const SortedFree& free, int64_t free_total, int64_t cpu_free,
                                     int model) {
  if (meter_.shapes().size() <= kSweepShapes) {
    return meter_.Weighted(free, free_total, cpu_free, model);
  }
  assert(free_total == std::accumulate(free.values().begin(), free.values().end(), int64_t{0}));
  if (free_total == 0) return 0;  // as the meter: nothing free, nothing fragmented
  const KeyView view{model, free.values()};
  auto it = steps_.find(view);
  if (it == steps_.end()) {
    const size_t cost = kStateEntries + (view.free.size() + 2) / 2 + thresholds_.size() + 1;
    if (entries_ + cost > max_entries_) Clear();
    Key key;
    key.reserve(view.free.size() + 1);
    key.push_back(model);
    key.insert(key.end(), view.free.begin(), view.free.end());
    it = steps_.emplace(std::move(key), Tabulate(free, free_total, model)).first;
    entries_ += cost;
  }
  const auto k =
      std::upper_bound(thresholds_.begin(), thresholds_.end(), cpu_free) - thresholds_.begin();
  return it->second[static_cast<size_t>(k)];
}

}  // namespace corral::sched
