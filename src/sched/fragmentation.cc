#include "sched/fragmentation.h"

#include <algorithm>
#include <map>
#include <tuple>

#include "sched/cluster_state.h"
#include "sched/placement_policy.h"

namespace corral::sched {

namespace {

std::string JoinModels(const std::vector<std::string>& models) {
  std::string out;
  for (const auto& m : models) {
    if (!out.empty()) out += '|';
    out += m;
  }
  return out;
}

}  // namespace

std::vector<TypicalTask> ComputeTypicalTasks(const std::vector<model::TaskResources>& tasks,
                                             double coverage) {
  // Key: (cpu, gpu_milli, gpus, models joined) -> its tasks' count and memory sum.
  using Key = std::tuple<int64_t, int, int, std::string>;
  struct Tally {
    int64_t count = 0;
    int64_t memory_sum = 0;  // MiB
  };
  std::map<Key, Tally> tallies;
  for (const auto& t : tasks) {
    Tally& tally =
        tallies[std::make_tuple(t.cpu.value(), static_cast<int>(t.gpu_milli.value()),
                                static_cast<int>(t.gpus.value()), JoinModels(t.gpu_models))];
    ++tally.count;
    tally.memory_sum += t.memory.value();
  }
  std::vector<std::pair<Key, Tally>> sorted(tallies.begin(), tallies.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second.count != b.second.count) return a.second.count > b.second.count;
    return a.first > b.first;  // larger cpu, then gpu_milli, gpus, models first
  });
  std::vector<TypicalTask> out;
  int64_t covered = 0;
  const double target = coverage * static_cast<double>(tasks.size());
  for (const auto& [key, tally] : sorted) {
    if (static_cast<double>(covered) >= target) break;
    TypicalTask t;
    t.cpu = std::get<0>(key);
    t.gpu_milli = std::get<1>(key);
    t.gpus = std::get<2>(key);
    const std::string& joined = std::get<3>(key);
    for (size_t start = 0; start < joined.size();) {
      size_t bar = joined.find('|', start);
      if (bar == std::string::npos) bar = joined.size();
      t.gpu_models.push_back(joined.substr(start, bar - start));
      start = bar + 1;
    }
    t.count = tally.count;
    t.memory = tally.memory_sum / tally.count;
    covered += tally.count;
    out.push_back(std::move(t));
  }
  return out;
}

SortedFree::SortedFree(const std::vector<int32_t>& free) {
  Resize(free.size());
  int32_t* v = data();
  std::copy(free.begin(), free.end(), v);
  std::sort(v, v + size_);
}

SortedFree SortedFree::AfterShare(const SortedFree& before, int32_t from, int32_t milli) {
  SortedFree after = before;
  int32_t* v = after.data();
  // The first GPU with `from` free gives the share; moving it down keeps the order.
  size_t i = static_cast<size_t>(std::lower_bound(v, v + after.size_, from) - v);
  v[i] -= milli;
  for (; i > 0 && v[i - 1] > v[i]; --i) std::swap(v[i - 1], v[i]);
  return after;
}

SortedFree SortedFree::AfterWhole(const SortedFree& before, int gpus) {
  // Fully free GPUs (1000, the most a GPU has free) are the last values; those taken become 0,
  // the first values.
  const std::span<const int32_t> in = before.values();
  size_t taken = 0;
  while (taken < static_cast<size_t>(gpus) && taken < in.size() &&
         in[in.size() - 1 - taken] == 1000) {
    ++taken;
  }
  SortedFree after;
  after.Resize(in.size());
  int32_t* v = after.data();
  std::fill(v, v + taken, 0);
  std::copy(in.begin(), in.end() - static_cast<std::ptrdiff_t>(taken), v + taken);
  return after;
}

void SortedFree::Resize(size_t n) {
  size_ = n;
  if (n > kInline) heap_.resize(n);
}

FragmentationMeter::FragmentationMeter(std::vector<TypicalTask> typical)
    : typical_(std::move(typical)) {
  for (size_t i = 0; i < typical_.size(); ++i) {
    const TypicalTask& t = typical_[i];
    shapes_.push_back(Shape{t.gpus, t.gpu_milli, t.cpu, t.count, t.gpu_models.empty(), i, {}});
    total_count_ += t.count;
  }
  std::stable_sort(shapes_.begin(), shapes_.end(),
                   [](const Shape& a, const Shape& b) { return a.gpu_milli < b.gpu_milli; });
}

void FragmentationMeter::Resolve(const ClusterState& state) {
  for (Shape& s : shapes_) {
    s.accepts.assign(state.ModelCount(), false);
    for (const auto& name : typical_[s.typical].gpu_models) {
      int id = state.ModelId(name);
      if (id != kNoModel) s.accepts[id] = true;
    }
  }
  resolved_models_ = state.ModelCount();
}

int64_t FragmentationMeter::Weighted(const NodeView& node) const {
  return Weighted(SortedFree(*node.gpu_free), node.gpu_free_total, node.cpu_free, node.model);
}

int64_t FragmentationMeter::Weighted(const SortedFree& free, int64_t free_total, int64_t cpu_free,
                                     int model) const {
  if (free_total == 0) return 0;
  int64_t sum = 0;
  VisitFragments(free, free_total, model, [&](const Shape& s, int64_t fragment) {
    sum += s.count * (cpu_free >= s.cpu ? fragment : free_total);
  });
  return sum;
}

}  // namespace corral::sched
