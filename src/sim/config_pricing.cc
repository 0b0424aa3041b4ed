#include "sim/config_pricing.h"

#include <algorithm>
#include <array>
#include <limits>

namespace corral::sim {

namespace {

bool IsShare(const PricingShape& s) { return s.gpus == 1 && s.gpu_milli < kGpuMilli; }

// GPU milli a task of the shape keeps from others: its share, or its GPUs whole.
int64_t HeldMilli(const PricingShape& s) { return IsShare(s) ? s.gpu_milli : s.gpus * kGpuMilli; }

// Depth-first branch and bound. First the shapes that hold GPUs whole, a count each (they take
// fully free GPUs); then the shares, GPU by GPU: each GPU of those left gets a pattern (a count
// per share shape, milli summing to at most 1000), the patterns non-increasing in lexicographic
// order (the GPUs are interchangeable, so every packing has one such order), and a GPU with an
// empty pattern ends the search down that branch. Every search node is a configuration. A node
// is cut when its bound, the value so far plus the fractional knapsack bound of what may still
// enter, is no more than the best configuration found.
class PricingSearch {
 public:
  PricingSearch(const PricingNode& node, const std::vector<PricingShape>& shapes, size_t max_nodes)
      : node_(node), shapes_(shapes), max_nodes_(max_nodes) {
    for (size_t s = 0; s < shapes_.size(); ++s) {
      const PricingShape& p = shapes_[s];
      const bool fits = p.count > 0 && p.value > 0 && p.gpus >= 1 && p.gpus <= node_.gpus &&
                        p.gpu_milli > 0 && p.cpu <= node_.cpu && p.memory <= node_.memory;
      if (!fits) continue;
      (IsShare(p) ? share_ : whole_).push_back(s);
    }
    // Whole shapes by value per GPU; shares by size (as first-fit decreasing), then value.
    std::stable_sort(whole_.begin(), whole_.end(), [&](size_t a, size_t b) {
      return shapes_[a].value / static_cast<double>(shapes_[a].gpus) >
             shapes_[b].value / static_cast<double>(shapes_[b].gpus);
    });
    std::stable_sort(share_.begin(), share_.end(), [&](size_t a, size_t b) {
      if (shapes_[a].gpu_milli != shapes_[b].gpu_milli) {
        return shapes_[a].gpu_milli > shapes_[b].gpu_milli;
      }
      return shapes_[a].value > shapes_[b].value;
    });
    available_.assign(shapes_.size(), 0);
    for (size_t s : whole_) available_[s] = shapes_[s].count;
    for (size_t s : share_) available_[s] = shapes_[s].count;
    tasks_.assign(shapes_.size(), 0);
    best_tasks_ = tasks_;
    // Sized once for the most GPUs shares may get (all of them); all zero between searches.
    patterns_.assign(static_cast<size_t>(node_.gpus), std::vector<int64_t>(share_.size(), 0));
    // The bounds' orders: per resource, the shapes by value per unit of it, descending.
    std::vector<size_t> all = whole_;
    all.insert(all.end(), share_.begin(), share_.end());
    for (size_t r = 0; r < kResources; ++r) {
      order_[r] = all;
      std::stable_sort(order_[r].begin(), order_[r].end(),
                       [&](size_t a, size_t b) { return Density(a, r) > Density(b, r); });
    }
    cpu_left_ = node_.cpu;
    memory_left_ = node_.memory;
    // Per GPU: the most value shares can put in r milli (unbounded knapsack over the share
    // shapes, counts, CPU and memory dropped), and the most a whole-GPU task puts per GPU.
    per_gpu_.assign(kGpuMilli + 1, 0.0);
    for (int64_t r = 1; r <= kGpuMilli; ++r) {
      double most = per_gpu_[r - 1];
      for (size_t s : share_) {
        const int64_t m = shapes_[s].gpu_milli;
        if (m <= r) most = std::max(most, per_gpu_[r - m] + shapes_[s].value);
      }
      per_gpu_[r] = most;
    }
    for (size_t s : whole_) {
      whole_per_gpu_ =
          std::max(whole_per_gpu_, shapes_[s].value / static_cast<double>(shapes_[s].gpus));
    }
  }

  PricedConfiguration Run() {
    Whole(0, node_.gpus, 0.0);
    PricedConfiguration out;
    out.tasks = best_tasks_;
    out.value = best_;
    out.proven = !cut_off_;
    out.upper = std::max(best_, open_upper_);
    out.searched = visited_;
    return out;
  }

 private:
  // Resources of the bound: GPU milli held, CPU, memory, and their sum over the node's capacities
  // (a valid row: the sum of the three capacity rows, each divided by its capacity).
  static constexpr size_t kResources = 4;

  double Weight(size_t s, size_t r) const {
    const PricingShape& p = shapes_[s];
    const double milli = static_cast<double>(HeldMilli(p));
    switch (r) {
      case 0:
        return milli;
      case 1:
        return static_cast<double>(p.cpu);
      case 2:
        return static_cast<double>(p.memory);
      default:
        return milli / static_cast<double>(node_.gpus * kGpuMilli) + Fraction(p.cpu, node_.cpu) +
               Fraction(p.memory, node_.memory);
    }
  }
  static double Fraction(int64_t used, int64_t capacity) {
    return capacity > 0 ? static_cast<double>(used) / static_cast<double>(capacity) : 0.0;
  }
  double Density(size_t s, size_t r) const {
    const double w = Weight(s, r);
    return w > 0 ? shapes_[s].value / w : std::numeric_limits<double>::infinity();
  }

  // Whether a task of shape s may still enter: some left, and it fits what is free alone.
  bool MayEnter(size_t s, int64_t milli_free, int64_t whole_free) const {
    const PricingShape& p = shapes_[s];
    if (available_[s] <= 0 || p.cpu > cpu_left_ || p.memory > memory_left_) return false;
    return IsShare(p) ? p.gpu_milli <= milli_free : p.gpus <= whole_free;
  }

  // ≥ the value any completion of the current node adds: `room` milli on the GPU being filled and
  // `later` GPUs after it (shares may use both), `whole_free` GPUs for the shapes not yet decided
  // that hold GPUs whole. The least of the fractional knapsack bounds and the per-GPU one (each
  // GPU holds no more than its best packing of shares, or its part of a whole-GPU task).
  double Bound(int64_t room, int64_t later, int64_t whole_free) const {
    const int64_t milli_free = room + later * kGpuMilli;
    const double per_gpu =
        per_gpu_[room] + static_cast<double>(later) *
                             std::max(per_gpu_[kGpuMilli], whole_free > 0 ? whole_per_gpu_ : 0.0);
    const double capacity[kResources] = {
        static_cast<double>(milli_free), static_cast<double>(cpu_left_),
        static_cast<double>(memory_left_),
        static_cast<double>(milli_free) / static_cast<double>(node_.gpus * kGpuMilli) +
            Fraction(cpu_left_, node_.cpu) + Fraction(memory_left_, node_.memory)};
    double bound = per_gpu;
    for (size_t r = 0; r < kResources; ++r) {
      double left = capacity[r], sum = 0;
      for (size_t s : order_[r]) {
        if (!MayEnter(s, milli_free, whole_free)) continue;
        const double w = Weight(s, r), n = static_cast<double>(available_[s]);
        if (w <= 0) {
          sum += n * shapes_[s].value;
          continue;
        }
        if (left <= 0) break;
        const double take = std::min(n, left / w);
        sum += take * shapes_[s].value;
        left -= take * w;
      }
      bound = std::min(bound, sum);
    }
    return bound;
  }

  // Counts the node; false (the node's bound kept as open) once the budget is spent, or when the
  // bound cannot beat the best configuration.
  bool Visit(double value, int64_t room, int64_t later, int64_t whole_free) {
    if (value > best_) {
      best_ = value;
      best_tasks_ = tasks_;
    }
    const double bound = value + Bound(room, later, whole_free);
    if (visited_ >= max_nodes_) {
      cut_off_ = true;
      open_upper_ = std::max(open_upper_, bound);
      return false;
    }
    ++visited_;
    return bound > best_;
  }

  // Decides the count of whole_[i] and on, with `free` GPUs not yet held. Once all are decided,
  // the shares' first node is this configuration: Shares visits it (with the tighter bound of
  // no whole-GPU task left to enter), so it is counted once.
  void Whole(size_t i, int64_t free, double value) {
    if (i == whole_.size()) {
      share_gpus_ = static_cast<size_t>(free);
      Shares(0, 0, kGpuMilli, true, value);
      return;
    }
    if (!Visit(value, 0, free, free)) return;
    const size_t s = whole_[i];
    const PricingShape& p = shapes_[s];
    int64_t most = std::min(p.count, free / p.gpus);
    if (p.cpu > 0) most = std::min(most, cpu_left_ / p.cpu);
    if (p.memory > 0) most = std::min(most, memory_left_ / p.memory);
    available_[s] = 0;  // decided below
    for (int64_t x = most; x >= 0; --x) {
      Take(s, x);
      Whole(i + 1, free - x * p.gpus, value + static_cast<double>(x) * p.value);
      Take(s, -x);
    }
    available_[s] = p.count;
  }

  // Decides the count of share_[j] and on on GPU g of the share_gpus_ left for shares
  // (patterns_), with `room` milli free on it; `tight`: its pattern equals GPU g − 1's so far.
  void Shares(size_t g, size_t j, int64_t room, bool tight, double value) {
    const auto gpus = static_cast<int64_t>(share_gpus_);
    const bool past = g == share_gpus_;
    if (!Visit(value, past ? 0 : room, past ? 0 : gpus - static_cast<int64_t>(g) - 1, 0)) return;
    if (past) return;
    if (j == share_.size()) {
      const bool empty = room == kGpuMilli;
      if (!empty) Shares(g + 1, 0, kGpuMilli, true, value);  // after an empty GPU, all are
      return;
    }
    const size_t s = share_[j];
    const PricingShape& p = shapes_[s];
    int64_t most = std::min(available_[s], room / p.gpu_milli);
    if (p.cpu > 0) most = std::min(most, cpu_left_ / p.cpu);
    if (p.memory > 0) most = std::min(most, memory_left_ / p.memory);
    if (tight && g > 0) most = std::min(most, patterns_[g - 1][j]);
    for (int64_t x = most; x >= 0; --x) {
      Take(s, x);
      available_[s] -= x;
      patterns_[g][j] = x;
      Shares(g, j + 1, room - x * p.gpu_milli, tight && g > 0 && x == patterns_[g - 1][j],
             value + static_cast<double>(x) * p.value);
      available_[s] += x;
      Take(s, -x);
    }
    patterns_[g][j] = 0;
  }

  void Take(size_t s, int64_t x) {
    tasks_[s] += x;
    cpu_left_ -= x * shapes_[s].cpu;
    memory_left_ -= x * shapes_[s].memory;
  }

  const PricingNode& node_;
  const std::vector<PricingShape>& shapes_;
  const size_t max_nodes_;
  std::vector<size_t> whole_, share_;  // shape indices in search order
  std::array<std::vector<size_t>, kResources> order_;
  std::vector<int64_t> available_;  // per shape: tasks that may still enter
  std::vector<int64_t> tasks_, best_tasks_;
  // Per GPU (the first share_gpus_ in use): count per share_[j]; all zero outside Shares.
  std::vector<std::vector<int64_t>> patterns_;
  size_t share_gpus_ = 0;        // GPUs left for shares once the whole-GPU shapes are decided
  std::vector<double> per_gpu_;  // by milli free on a GPU: the most shares put there (knapsack)
  double whole_per_gpu_ = 0;     // the most value per GPU of a whole-GPU task
  int64_t cpu_left_ = 0, memory_left_ = 0;
  double best_ = 0;
  double open_upper_ = 0;  // the largest bound of a node left unsearched
  bool cut_off_ = false;
  size_t visited_ = 0;
};

}  // namespace

PricedConfiguration BestConfiguration(const PricingNode& node,
                                      const std::vector<PricingShape>& shapes, size_t max_nodes) {
  return PricingSearch(node, shapes, max_nodes).Run();
}

}  // namespace corral::sim
