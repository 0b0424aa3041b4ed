#include "sched/elastic.h"

#include <algorithm>
#include <cmath>
#include <string>
#include <tuple>
#include <utility>

namespace corral::sched {

Result<ElasticRange> ElasticRange::Create(int min_gpus, int max_gpus, int step) {
  if (min_gpus < 1) return InvalidArgument("min_gpus: must be at least 1");
  if (max_gpus < min_gpus) return InvalidArgument("max_gpus: must be at least min_gpus");
  if (max_gpus > kMaxGpus) {
    return InvalidArgument("max_gpus: must be at most " + std::to_string(kMaxGpus));
  }
  if (step < 0) return InvalidArgument("gpu_step: must be >= 0 (0: powers of two)");
  return ElasticRange(min_gpus, max_gpus, step);
}

Result<ElasticRange> ElasticRange::Of(const model::ElasticBounds& bounds) {
  return Create(bounds.min, bounds.max, bounds.step);
}

ElasticRange::ElasticRange(int min_gpus, int max_gpus, int step)
    : min_(min_gpus), max_(max_gpus), step_(step) {
  sizes_.push_back(min_);
  if (step_ > 0) {
    for (int g = min_ + step_; g < max_; g += step_) sizes_.push_back(g);
  } else {
    for (int g = 1; g < max_; g *= 2) {
      if (g > min_) sizes_.push_back(g);
    }
  }
  if (max_ > min_) sizes_.push_back(max_);
}

int ElasticRange::AtMost(int gpus) const {
  auto it = std::upper_bound(sizes_.begin(), sizes_.end(), gpus);
  return it == sizes_.begin() ? min_ : *(it - 1);
}

Status Validate(const ResizeRules& rules) {
  if (!(rules.alpha > 0 && rules.alpha <= 1)) return InvalidArgument("alpha: must be in (0, 1]");
  if (rules.min_interval.value() < 0) return InvalidArgument("min_interval: must be >= 0");
  if (rules.restart_cost.value() < 0) return InvalidArgument("restart_cost: must be >= 0");
  if (rules.budget < 0) return InvalidArgument("budget: must be >= 0");
  return Status::Ok();
}

std::string_view ResizeReasonName(ResizeReason reason) {
  return reason == ResizeReason::kIdleGpus ? "idle-gpus" : "pending-job";
}

double Speedup(int from, int to, double alpha) {
  return std::pow(static_cast<double>(to) / static_cast<double>(from), alpha);
}

bool GrowthAllowed(const ElasticRun& run, int to, const ResizeRules& rules, Seconds now) {
  if (to <= run.size || run.resizes >= rules.budget) return false;
  if (now.value() - run.last_resize.value() < rules.min_interval.value()) return false;
  const double saved = run.remaining_s * (1.0 - 1.0 / Speedup(run.size, to, rules.alpha));
  return saved > static_cast<double>(rules.restart_cost.value());
}

namespace {

// The node of a kGpus run's one task, or -1 (a kNodes run, or a node outside `nodes` slots).
NodeIndex OneNode(const ElasticRun& run, size_t nodes) {
  if (run.unit != model::ElasticUnit::kGpus || run.nodes.size() != 1) return -1;
  const NodeIndex n = run.nodes.front();
  return n >= 0 && n < static_cast<NodeIndex>(nodes) ? n : -1;
}

}  // namespace

std::vector<Resize> PlanGrowth(const std::vector<ElasticRun>& runs, std::vector<int> free_gpus,
                               const ResizeRules& rules, Seconds now) {
  std::vector<const ElasticRun*> order;
  for (const ElasticRun& r : runs) order.push_back(&r);
  std::sort(order.begin(), order.end(), [](const ElasticRun* a, const ElasticRun* b) {
    return std::make_tuple(a->size, a->job) < std::make_tuple(b->size, b->job);
  });
  std::vector<Resize> out;
  for (const ElasticRun* r : order) {
    const NodeIndex node = OneNode(*r, free_gpus.size());
    if (node < 0) continue;
    int& free = free_gpus[node];
    if (free <= 0) continue;
    const int to = r->range.AtMost(r->size + free);
    if (!GrowthAllowed(*r, to, rules, now)) continue;
    free -= to - r->size;
    out.push_back({r->job, r->size, to, ResizeReason::kIdleGpus});
  }
  return out;
}

namespace {

// GPUs `run` holds above its MIN on `node` (what shrinking it can give back there).
int BorrowedOn(const ElasticRun& run, NodeIndex node) {
  if (run.unit == model::ElasticUnit::kGpus) {
    return !run.nodes.empty() && run.nodes.front() == node ? run.size - run.range.min() : 0;
  }
  int out = 0;
  for (int k = run.range.min(); k < run.size && k < static_cast<int>(run.nodes.size()); ++k) {
    out += run.nodes[k] == node ? run.task_gpus : 0;
  }
  return out;
}

// The size `run` shrinks to so that `node` gets at least `short_by` GPUs back, or as many as
// it borrowed there (BorrowedOn > 0).
int ShrinkTo(const ElasticRun& run, NodeIndex node, int short_by) {
  if (run.unit == model::ElasticUnit::kGpus) {
    // AtMost(g) <= g, so the job gives back at least what is still short, or all it borrowed.
    return run.range.AtMost(std::max(run.range.min(), run.size - short_by));
  }
  int k = run.range.min();
  while (run.nodes[k] != node) ++k;  // its first task above MIN there
  return run.range.AtMost(k);
}

// GPUs that shrinking the kNodes runs borrowing on `node` would free on other nodes too (their
// later tasks go with the one there): among nodes that need as much taken back, the cheapest.
int Collateral(const std::vector<ElasticRun>& runs, NodeIndex node) {
  int out = 0;
  for (const ElasticRun& r : runs) {
    if (r.unit != model::ElasticUnit::kNodes || BorrowedOn(r, node) == 0) continue;
    for (const auto& [n, gpus] : Freed(r, ShrinkTo(r, node, 0))) out += n != node ? gpus : 0;
  }
  return out;
}

// One task's plan (see PlanShrink): its node and the resizes, or nullopt.
std::optional<std::pair<NodeIndex, std::vector<Resize>>> ShrinkForOneTask(
    const std::vector<ElasticRun>& runs, const std::vector<int>& free_gpus,
    const std::vector<bool>& accepts, int need) {
  // GPUs each node could give back: its free ones plus its elastic jobs' borrowed ones.
  std::vector<int> borrowed(free_gpus.size(), 0);
  for (const ElasticRun& r : runs) {
    for (const auto& [node, gpus] : Freed(r, r.range.min())) {
      if (node >= 0 && node < static_cast<NodeIndex>(borrowed.size())) borrowed[node] += gpus;
    }
  }
  NodeIndex best = -1;
  int best_taken = 0, best_collateral = 0;
  for (NodeIndex n = 0; n < static_cast<NodeIndex>(free_gpus.size()); ++n) {
    if (n >= static_cast<NodeIndex>(accepts.size()) || !accepts[n]) continue;
    if (free_gpus[n] + borrowed[n] < need) continue;
    const int taken = std::max(0, need - free_gpus[n]);
    if (best >= 0 && taken > best_taken) continue;
    const int collateral = taken > 0 ? Collateral(runs, n) : 0;
    if (best < 0 || taken < best_taken || collateral < best_collateral) {
      best = n;
      best_taken = taken;
      best_collateral = collateral;
    }
  }
  if (best < 0) return std::nullopt;
  std::vector<Resize> out;
  std::vector<std::pair<int, const ElasticRun*>> on_node;  // (borrowed there, run)
  for (const ElasticRun& r : runs) {
    const int there = BorrowedOn(r, best);
    if (there > 0) on_node.emplace_back(there, &r);
  }
  std::sort(on_node.begin(), on_node.end(), [](const auto& a, const auto& b) {
    return std::make_tuple(-a.first, a.second->job) < std::make_tuple(-b.first, b.second->job);
  });
  int short_by = best_taken;
  for (const auto& [there, r] : on_node) {
    if (short_by <= 0) break;
    const int to = ShrinkTo(*r, best, short_by);
    short_by -= r->unit == model::ElasticUnit::kGpus ? r->size - to : there;
    out.push_back({r->job, r->size, to, ResizeReason::kPendingJob});
  }
  return std::make_pair(best, std::move(out));
}

}  // namespace

std::vector<std::pair<NodeIndex, int>> Freed(const ElasticRun& run, int to) {
  std::vector<std::pair<NodeIndex, int>> out;
  if (run.unit == model::ElasticUnit::kGpus) {
    if (!run.nodes.empty() && run.size > to) out.emplace_back(run.nodes.front(), run.size - to);
    return out;
  }
  for (int k = std::max(0, to); k < run.size && k < static_cast<int>(run.nodes.size()); ++k) {
    out.emplace_back(run.nodes[k], run.task_gpus);
  }
  return out;
}

std::optional<ShrinkPlan> PlanShrink(const std::vector<ElasticRun>& runs,
                                     const std::vector<int>& free_gpus,
                                     const std::vector<bool>& accepts, int need, int tasks) {
  // Each task sees the cluster as the tasks before it left it.
  std::vector<ElasticRun> left = runs;
  std::vector<int> free = free_gpus;
  ShrinkPlan plan;
  for (int task = 0; task < tasks; ++task) {
    auto one = ShrinkForOneTask(left, free, accepts, need);
    if (!one) return std::nullopt;
    const auto& [node, resizes] = *one;
    for (const Resize& z : resizes) {
      for (ElasticRun& r : left) {
        if (r.job != z.job) continue;
        for (const auto& [n, gpus] : Freed(r, z.to)) free[n] += gpus;
        r.size = z.to;
      }
    }
    plan.resizes.insert(plan.resizes.end(), resizes.begin(), resizes.end());
    free[node] -= need;
    plan.nodes.push_back(node);
  }
  plan.resizes = MergeResizes(plan.resizes);
  return plan;
}

std::vector<Resize> MergeResizes(const std::vector<Resize>& resizes) {
  std::vector<Resize> out;
  for (const Resize& z : resizes) {
    auto same =
        std::find_if(out.begin(), out.end(), [&](const Resize& o) { return o.job == z.job; });
    if (same == out.end()) {
      out.push_back(z);
    } else {
      same->to = z.to;
    }
  }
  return out;
}

}  // namespace corral::sched
