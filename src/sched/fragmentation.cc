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
  // Key: (cpu, gpu_milli, gpus, models joined) -> count.
  std::map<std::tuple<int64_t, int, int, std::string>, int64_t> counts;
  for (const auto& t : tasks) {
    ++counts[{t.cpu.value(), static_cast<int>(t.gpu_milli.value()),
              static_cast<int>(t.gpus.value()), JoinModels(t.gpu_models)}];
  }
  std::vector<std::pair<std::tuple<int64_t, int, int, std::string>, int64_t>> sorted(counts.begin(),
                                                                                     counts.end());
  std::sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) {
    if (a.second != b.second) return a.second > b.second;
    return a.first > b.first;  // larger cpu, then gpu_milli, gpus, models first
  });
  std::vector<TypicalTask> out;
  int64_t covered = 0;
  const double target = coverage * static_cast<double>(tasks.size());
  for (const auto& [key, count] : sorted) {
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
    t.count = count;
    covered += count;
    out.push_back(std::move(t));
  }
  return out;
}

FragmentationMeter::FragmentationMeter(std::vector<TypicalTask> typical)
    : typical_(std::move(typical)) {
  for (const auto& t : typical_) {
    shapes_.push_back(Shape{t.gpus, t.gpu_milli, t.cpu, t.count, t.gpu_models.empty(), {}});
    total_count_ += t.count;
  }
}

void FragmentationMeter::Resolve(const ClusterState& state) {
  for (size_t i = 0; i < shapes_.size(); ++i) {
    Shape& s = shapes_[i];
    s.accepts.assign(state.ModelCount(), false);
    for (const auto& name : typical_[i].gpu_models) {
      int id = state.ModelId(name);
      if (id != kNoModel) s.accepts[id] = true;
    }
  }
  resolved_models_ = state.ModelCount();
}

int64_t FragmentationMeter::Weighted(const NodeView& node) const {
  const std::vector<int32_t>& free = *node.gpu_free;
  const int64_t total_free = node.gpu_free_total;
  if (total_free == 0) return 0;
  int64_t sum = 0;
  for (const Shape& s : shapes_) {
    bool runs =
        s.gpus > 0 && node.cpu_free >= s.cpu && node.model != kNoModel &&
        (s.any_model || (node.model < static_cast<int>(s.accepts.size()) && s.accepts[node.model]));
    int64_t fragment = total_free;
    if (runs) {
      // GPUs that can host one unit of this shape, and the free milli of those that cannot.
      int fitting = 0;
      int64_t too_small = 0;
      for (int32_t f : free) {
        if (f >= s.gpu_milli) {
          ++fitting;
        } else {
          too_small += f;
        }
      }
      if (fitting >= s.gpus) fragment = too_small;
    }
    sum += s.count * fragment;
  }
  return sum;
}

}  // namespace corral::sched
