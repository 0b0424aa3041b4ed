#include "sched/placer.h"

#include <algorithm>
#include <bit>
#include <limits>

namespace corral::sched {

namespace {
constexpr int32_t kNotScored = std::numeric_limits<int32_t>::min();
}  // namespace

Placer::Placer(ClusterState& state, PlacementPolicy& policy, Rng& rng)
    : state_(state), policy_(&policy), rng_(rng) {}

void Placer::SetPolicy(PlacementPolicy& policy) {
  policy_ = &policy;
  models_seen_ = -1;     // the new policy has resolved no models yet
  score_cache_.clear();  // scored by the old one
}

int Placer::ShapeId(const ShapeKey& key) {
  static_assert(std::has_single_bit(static_cast<unsigned>(2 * kCachedShapes)));
  uint64_t hash = 0;
  auto mix = [&hash](uint64_t v) { hash = std::rotl((hash ^ v) * 0x9E3779B97F4A7C15ull, 29); };
  mix(static_cast<uint64_t>(key.gpus));
  mix(static_cast<uint64_t>(key.gpu_milli));
  mix(static_cast<uint64_t>(key.cpu));
  mix(static_cast<uint64_t>(key.memory));
  const size_t mask = shape_slots_.size() - 1;
  size_t slot = hash & mask;
  for (; shape_slots_[slot].id >= 0; slot = (slot + 1) & mask) {
    if (shape_slots_[slot].key == key) return shape_slots_[slot].id;
  }
  // Bounded: a row per class of one slot per shape would grow without end on a workload of
  // thousands of shapes (fgd_diverse: one per task nearly; 1.5 GB resident when unbounded).
  if (shapes_interned_ >= kCachedShapes) {
    std::fill(shape_slots_.begin(), shape_slots_.end(), ShapeSlot{});
    shapes_interned_ = 0;
    score_cache_.clear();
    first_cached_shape_ = next_shape_id_;
    slot = hash & mask;
  }
  ++shapes_interned_;
  shape_slots_[slot] = {key, next_shape_id_};
  return next_shape_id_++;
}

TaskRequest Placer::Resolve(const model::TaskResources& r) {
  TaskRequest t;
  t.gpus = static_cast<int>(r.gpus.value());
  t.gpu_milli = static_cast<int>(r.gpu_milli.value());
  t.cpu = r.cpu.value();
  t.memory = r.memory.value();
  t.any_model = r.gpu_models.empty();
  t.model_names = r.gpu_models;
  for (const auto& name : r.gpu_models) {
    int id = state_.ModelId(name);
    if (id != kNoModel) t.models.push_back(id);
  }
  t.any_runtime = r.runtimes.empty();
  t.runtime_names = r.runtimes;
  for (const auto& name : r.runtimes) t.runtimes |= state_.RuntimeBit(name);
  t.shape = ShapeId({t.gpus, t.gpu_milli, t.cpu, t.memory});
  t.kind = state_.TaskKindId(t.gpus, t.IsShare());
  return t;
}

bool Placer::GpusCouldFit(const TaskRequest& t) const {
  return GpusCouldFitOn(t, t.gpus == 0 ? std::vector<int>{} : AcceptedModels(state_, t));
}

bool Placer::GpusCouldFitOn(const TaskRequest& t, const std::vector<int>& models) const {
  if (t.gpus == 0) return state_.LiveNodes() > 0;
  for (int m : models) {
    const ModelStats& s = state_.model_stats(m);
    if (t.IsShare() ? s.LargestFreeShare() >= t.gpu_milli : s.LargestFreeBlock() >= t.gpus) {
      return true;
    }
  }
  return false;
}

int Placer::CachedScore(int class_id, const NodeClass& c, const TaskRequest& t) {
  const int slot = t.shape - first_cached_shape_;
  if (slot < 0) return policy_->Score(ViewOf(c), t);  // resolved before the start-over
  if (class_id >= static_cast<int>(score_cache_.size())) score_cache_.resize(class_id + 1);
  std::vector<int32_t>& row = score_cache_[class_id];
  if (slot >= static_cast<int>(row.size())) row.resize(slot + 1, kNotScored);
  if (row[slot] == kNotScored) row[slot] = policy_->Score(ViewOf(c), t);
  return row[slot];
}

std::optional<NodeIndex> Placer::PickBestScore(const TaskRequest& t) {
  int best_score = std::numeric_limits<int>::min();
  uint64_t best_rank = 0;
  NodeIndex best = -1;
  const int first_bucket = FirstFitBucket(t);
  for (int m : models_scratch_) {
    // Fit is read from the dense capacities, and only in the buckets that may hold the task's
    // GPUs: most classes do not fit, and loading each one's NodeClass to find out missed the
    // cache (a quarter of fgd_diverse's time); walking them all cost as much once the cluster
    // was nearly full.
    const std::vector<ActiveBucket>& buckets = state_.ActiveBuckets(m);
    for (size_t b = first_bucket; b < buckets.size(); ++b) {
      const std::vector<ClassCapacity>& capacities = buckets[b].capacities;
      const std::vector<int>& ids = buckets[b].ids;
      const size_t size = ids.size();
      for (size_t i = 0; i < size; ++i) {
        if (!Fits(capacities[i], t)) continue;
        const int id = ids[i];
        const NodeClass& c = state_.node_class(id);
        int score = CachedScore(id, c, t);
        const auto& [rank, node] = *c.members.begin();
        if (score > best_score || (score == best_score && rank < best_rank)) {
          best_score = score;
          best_rank = rank;
          best = node;
        }
      }
    }
  }
  if (best < 0) return std::nullopt;
  return best;
}

std::optional<NodeIndex> Placer::PickLeastFree(const TaskRequest& t) {
  // The index is ordered by groups of (free GPU milli G, fully free GPUs, largest free share),
  // G ascending, each group by free CPU. Within a group the score falls as free CPU grows, so the
  // group's best class is its first feasible one (from free CPU >= the task's up), then its ties.
  // Across groups, a group's score is at most that of K at the least CPU the task fits on,
  // which falls as G grows: once below the best found, no later group can win.
  int best_score = std::numeric_limits<int>::min();
  uint64_t best_rank = 0;
  NodeIndex best = -1;
  const int64_t milli = t.TotalMilli();
  for (int m : models_scratch_) {
    const FreeCapacityIndexMap& index = state_.FreeCapacityIndex(m);
    for (auto group = FirstGroupFrom(index, FreeCapacityGroup{milli, 0, 0}); group != index.end();
         ++group) {
      const auto& [head, classes] = *group;
      NodeView bound = ViewOf(state_.node_class(classes.begin()->id));
      bound.cpu_free = t.cpu;
      if (policy_->Score(bound, t) < best_score) break;
      const bool gpus_fit =
          t.gpus == 0 || (t.IsShare() ? head.max_free >= t.gpu_milli : head.full_free >= t.gpus);
      if (!gpus_fit) continue;
      for (auto it =
               std::lower_bound(classes.begin(), classes.end(),
                                FreeCapacityEntry{static_cast<int32_t>(std::min<int64_t>(
                                                      t.cpu, std::numeric_limits<int32_t>::max())),
                                                  0});
           it != classes.end(); ++it) {
        const NodeClass& c = state_.node_class(it->id);
        if (!Fits(c, t)) continue;
        const int score = policy_->Score(ViewOf(c), t);
        if (score < best_score) break;
        const uint64_t rank = c.members.begin()->first;
        if (score > best_score || rank < best_rank) {
          best_score = score;
          best_rank = rank;
          best = c.members.begin()->second;
        }
      }
    }
  }
  if (best < 0) return std::nullopt;
  return best;
}

std::optional<NodeIndex> Placer::PickUniformly(const TaskRequest& t) {
  // Rejection sampling: a uniformly drawn node that is feasible is a uniform draw among the
  // feasible nodes. When feasible nodes are rare, fall back to counting them.
  constexpr int kTries = 32;
  for (int i = 0; i < kTries && state_.NodeSlots() > 0; ++i) {
    const auto index = static_cast<NodeIndex>(rng_.Uniform(state_.NodeSlots()));
    const NodeState& n = state_.node(index);
    if (n.class_id < 0 || !Fits(state_.node_class(n.class_id), t)) continue;
    if (std::find(models_scratch_.begin(), models_scratch_.end(), n.model) ==
        models_scratch_.end()) {
      continue;
    }
    return index;
  }
  int64_t feasible = 0;
  for (int m : models_scratch_) {
    for (int id : state_.ActiveClasses(m)) {
      const NodeClass& c = state_.node_class(id);
      if (Fits(c, t)) feasible += static_cast<int64_t>(c.members.size());
    }
  }
  if (feasible == 0) return std::nullopt;
  int64_t pick = static_cast<int64_t>(rng_.Uniform(static_cast<uint64_t>(feasible)));
  for (int m : models_scratch_) {
    for (int id : state_.ActiveClasses(m)) {
      const NodeClass& c = state_.node_class(id);
      if (!Fits(c, t)) continue;
      if (pick >= static_cast<int64_t>(c.members.size())) {
        pick -= static_cast<int64_t>(c.members.size());
        continue;
      }
      auto it = c.members.begin();
      std::advance(it, pick);
      return it->second;
    }
  }
  return std::nullopt;  // unreachable: pick < feasible
}

void Placer::SyncModels() {
  if (state_.ModelCount() == models_seen_) return;
  policy_->OnModelsChanged(state_);
  models_seen_ = state_.ModelCount();
  score_cache_.clear();  // scores may depend on which models exist (FGD's typical tasks)
}

int Placer::Score(int class_id, const TaskRequest& t) {
  SyncModels();
  return CachedScore(class_id, state_.node_class(class_id), t);
}

std::optional<Allocation> Placer::AllocationOn(NodeIndex node, const TaskRequest& t) {
  const NodeState& n = state_.node(node);
  std::vector<int> gpus = policy_->ChooseGpus(ViewOf(n, state_), t, rng_);
  if (static_cast<int>(gpus.size()) != t.gpus) return std::nullopt;  // policy bug; fail safe
  Allocation a;
  a.node = node;
  a.cpu = CpuMilli(t.cpu);
  a.memory = MemoryMib(t.memory);
  a.gpus.reserve(gpus.size());
  for (int g : gpus) a.gpus.push_back(GpuShare{g, MilliGpu(t.gpu_milli)});
  a.kind = t.gpus > 0 ? t.kind : -1;
  return a;
}

std::optional<Allocation> Placer::Choose(const TaskRequest& t) {
  SyncModels();
  AcceptedModelsInto(state_, t, models_scratch_);
  if (!GpusCouldFitOn(t, models_scratch_)) return std::nullopt;
  std::optional<NodeIndex> node =
      policy_->PicksUniformly()                                               ? PickUniformly(t)
      : policy_->ScoreFallsWithFreeCapacity() && state_.IndexesFreeCapacity() ? PickLeastFree(t)
                                                                              : PickBestScore(t);
  if (!node) return std::nullopt;
  return AllocationOn(*node, t);
}

std::optional<Allocation> Placer::Place(const TaskRequest& t) {
  std::optional<Allocation> a = Choose(t);
  if (a && !state_.Allocate(*a).ok()) return std::nullopt;
  return a;
}

std::optional<Allocation> Placer::PlaceOn(NodeIndex node, const TaskRequest& t) {
  SyncModels();
  const NodeState& n = state_.node(node);
  if (!n.present || !n.schedulable || n.class_id < 0 || !t.AcceptsModel(n.model) ||
      !Fits(state_.node_class(n.class_id), t)) {
    return std::nullopt;
  }
  std::optional<Allocation> a = AllocationOn(node, t);
  if (a && !state_.Allocate(*a).ok()) return std::nullopt;
  return a;
}

}  // namespace corral::sched
