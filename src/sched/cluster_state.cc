#include "sched/cluster_state.h"

#include <algorithm>
#include <bit>
#include <cstring>
#include <limits>

#include "common/check.h"
#include "common/rng.h"

namespace corral::sched {

namespace {

constexpr int kFullMilli = 1000;

}  // namespace

int ModelStats::LargestFreeBlock() const {
  for (int k = static_cast<int>(nodes_by_full_free.size()) - 1; k > 0; --k) {
    if (nodes_by_full_free[k] > 0) return k;
  }
  return 0;
}

int ModelStats::LargestFreeShare() const {
  for (int b = static_cast<int>(nodes_by_max_free_block.size()) - 1; b >= 0; --b) {
    if (nodes_by_max_free_block[b] == 0) continue;
    for (int m =
             std::min<int>(static_cast<int>(nodes_by_max_free.size()), (b + 1) * kShareBlock) - 1;
         m >= b * kShareBlock && m > 0; --m) {
      if (nodes_by_max_free[m] > 0) return m;
    }
  }
  return 0;
}

namespace {

ModelStats EmptyStats() {
  ModelStats s;
  s.nodes_by_max_free.assign(kFullMilli + 1, 0);
  s.nodes_by_max_free_block.assign(kFullMilli / ModelStats::kShareBlock + 1, 0);
  return s;
}

}  // namespace

ClusterState::ClusterState(ClusterStateOptions options) : options_(options) {
  active_by_model_.resize(1);
  buckets_by_model_.resize(1);
  stats_by_model_.push_back(EmptyStats());
  stats_by_model_[0].nodes_by_full_free.assign(1, 0);
  free_index_.resize(1);
}

int ClusterState::ModelId(std::string_view model) const {
  auto it = model_ids_.find(std::string(model));
  return it == model_ids_.end() ? kNoModel : it->second;
}

int ClusterState::TaskKindId(int gpus, bool share) {
  int64_t key = share ? -1 : gpus;
  auto [it, inserted] = kind_ids_.try_emplace(key, static_cast<int>(kind_ids_.size()));
  return it->second;
}

const std::vector<int>& ClusterState::ActiveClasses(int model) const {
  return active_by_model_[ModelSlot(model)];
}

const std::vector<ActiveBucket>& ClusterState::ActiveBuckets(int model) const {
  return buckets_by_model_[ModelSlot(model)];
}

const ModelStats& ClusterState::model_stats(int model) const {
  return stats_by_model_[ModelSlot(model)];
}

const FreeCapacityIndexMap& ClusterState::FreeCapacityIndex(int model) const {
  return free_index_[ModelSlot(model)];
}

void ClusterState::IndexFreeCapacity(const NodeClass& c, int id, int sign) {
  FreeCapacityIndexMap& index = free_index_[ModelSlot(c.model)];
  const FreeCapacityGroup group{c.gpu_free_total, c.full_free, c.max_free};
  // A node's CPU is at most model::kMaxNodeCpuMilli (AddNode's Validate, ResizeNode).
  static_assert(model::kMaxNodeCpuMilli <= std::numeric_limits<int32_t>::max());
  CORRAL_CHECK(c.cpu_free <= model::kMaxNodeCpuMilli);
  const FreeCapacityEntry entry{static_cast<int32_t>(c.cpu_free), id};
  auto found = FirstGroupFrom(index, group);
  if (sign > 0) {
    if (found == index.end() || found->group != group) {
      found = index.insert(found, FreeCapacityGroupClasses{group, {}});
    }
    std::vector<FreeCapacityEntry>& classes = found->classes;
    classes.insert(std::lower_bound(classes.begin(), classes.end(), entry), entry);
    return;
  }
  // Indexed when it became active (Attach), unchanged since.
  CORRAL_CHECK(found != index.end() && found->group == group);
  std::vector<FreeCapacityEntry>& classes = found->classes;
  auto it = std::lower_bound(classes.begin(), classes.end(), entry);
  CORRAL_CHECK(it != classes.end() && *it == entry);
  classes.erase(it);
  if (classes.empty()) index.erase(found);
}

uint64_t ClusterState::RuntimeBit(std::string_view runtime) const {
  auto it = runtime_bits_.find(std::string(runtime));
  return it == runtime_bits_.end() ? 0 : it->second;
}

int ClusterState::NodesOffering(uint64_t mask) const {
  int nodes = 0;
  for (const auto& [runtimes, count] : live_by_runtimes_)
    nodes += (runtimes & mask) != 0 ? count : 0;
  return nodes;
}

NodeIndex ClusterState::FindNode(std::string_view name) const {
  auto it = by_name_.find(std::string(name));
  return it == by_name_.end() ? -1 : it->second;
}

Result<NodeIndex> ClusterState::AddNode(const model::Node& spec) {
  CORRAL_RETURN_IF_ERROR(model::Validate(spec));
  if (by_name_.count(spec.name)) return AlreadyExists("node '" + spec.name + "' already exists");

  NodeState node;
  node.name = spec.name;
  const std::vector<std::string> runtimes =
      spec.runtimes.empty() ? std::vector<std::string>{model::kProcessRuntime} : spec.runtimes;
  for (const std::string& runtime : runtimes) {
    auto it = runtime_bits_.find(runtime);
    if (it == runtime_bits_.end()) {
      if (RuntimeCount() == kMaxRuntimes) {
        return InvalidArgument("node '" + spec.name + "': field 'runtimes': more than " +
                               std::to_string(kMaxRuntimes) + " runtime names in the cluster");
      }
      it = runtime_bits_.emplace(runtime, uint64_t{1} << RuntimeCount()).first;
    }
    node.runtimes |= it->second;
  }
  if (!spec.gpus.empty()) {
    auto [it, inserted] = model_ids_.emplace(spec.gpu_model, static_cast<int>(model_names_.size()));
    if (inserted) {
      model_names_.push_back(spec.gpu_model);
      active_by_model_.emplace_back();
      buckets_by_model_.emplace_back();
      stats_by_model_.push_back(EmptyStats());
      free_index_.emplace_back();
    }
    node.model = it->second;
  }
  ModelStats& stats = stats_by_model_[ModelSlot(node.model)];
  if (stats.nodes_by_full_free.size() < spec.gpus.size() + 1) {
    stats.nodes_by_full_free.resize(spec.gpus.size() + 1, 0);
  }
  node.cpu_total = node.cpu_free = spec.cpu.value();
  node.memory_total = node.memory_free = spec.memory.value();
  node.gpu_free.assign(spec.gpus.size(), kFullMilli);
  node.gpu_domain.clear();
  for (const model::Gpu& g : spec.gpus) node.gpu_domain.push_back(g.nvlink_domain);
  node.tie_rank = SplitMix64(options_.seed ^ HashString(spec.name.data(), spec.name.size()));
  node.present = true;
  for (const auto& [level, key] :
       {std::pair{kSwitchLevel, model::kSwitchLabel}, {kRackLevel, model::kRackLabel}}) {
    auto label = spec.labels.find(key);
    if (label == spec.labels.end()) continue;
    auto& ids = topology_ids_[level];
    node.topology[level] = ids.emplace(label->second, static_cast<int>(ids.size())).first->second;
  }

  NodeIndex index = static_cast<NodeIndex>(nodes_.size());
  nodes_.push_back(std::move(node));
  by_name_.emplace(spec.name, index);
  ++live_nodes_;
  ++live_by_runtimes_[nodes_[index].runtimes];
  int64_t milli = static_cast<int64_t>(spec.gpus.size()) * kFullMilli;
  total_gpu_milli_ += milli;
  free_gpu_milli_ += milli;
  Attach(index);
  return index;
}

Status ClusterState::RemoveNode(NodeIndex n) {
  if (n < 0 || n >= NodeSlots() || !nodes_[n].present) return NotFound("no such node");
  Detach(n);
  NodeState& node = nodes_[n];
  int64_t free = 0;
  for (int32_t f : node.gpu_free) free += f;
  total_gpu_milli_ -= static_cast<int64_t>(node.gpu_free.size()) * kFullMilli;
  free_gpu_milli_ -= free;
  by_name_.erase(node.name);
  node.present = false;
  --live_nodes_;
  if (--live_by_runtimes_[node.runtimes] == 0) live_by_runtimes_.erase(node.runtimes);
  return Status::Ok();
}

Status ClusterState::SetSchedulable(NodeIndex n, bool schedulable) {
  if (n < 0 || n >= NodeSlots() || !nodes_[n].present) return NotFound("no such node");
  Detach(n);
  nodes_[n].schedulable = schedulable;
  Attach(n);
  return Status::Ok();
}

Status ClusterState::ResizeNode(NodeIndex n, CpuMilli cpu, MemoryMib memory) {
  if (n < 0 || n >= NodeSlots() || !nodes_[n].present) return NotFound("no such node");
  if (cpu.value() < 0 || memory.value() < 0) {
    return InvalidArgument("node '" + nodes_[n].name + "': CPU and memory must be >= 0");
  }
  if (cpu.value() > model::kMaxNodeCpuMilli) {
    return InvalidArgument("node '" + nodes_[n].name + "': CPU must be at most " +
                           std::to_string(model::kMaxNodeCpuMilli) + " milli");
  }
  NodeState& node = nodes_[n];
  const int64_t cpu_held = node.cpu_total - node.cpu_free;
  const int64_t memory_held = node.memory_total - node.memory_free;
  if (cpu.value() < cpu_held || memory.value() < memory_held) {
    return FailedPrecondition("node '" + node.name + "': its tasks hold " +
                              std::to_string(cpu_held) + " milli-CPU and " +
                              std::to_string(memory_held) + " MiB, more than it would offer");
  }
  Detach(n);
  node.cpu_total = cpu.value();
  node.cpu_free = cpu.value() - cpu_held;
  node.memory_total = memory.value();
  node.memory_free = memory.value() - memory_held;
  Attach(n);
  return Status::Ok();
}

namespace {

// The milli that `a` takes from GPU `index` (shares on one GPU may be listed once each). A
// per-GPU sum without a buffer: allocations list a few GPUs, and this runs per placement.
int64_t MilliOnGpu(const Allocation& a, int index) {
  int64_t sum = 0;
  for (const GpuShare& g : a.gpus) sum += g.index == index ? g.milli.value() : 0;
  return sum;
}

}  // namespace

bool ClusterState::Fits(const Allocation& a) const {
  if (a.node < 0 || a.node >= NodeSlots() || !nodes_[a.node].present) return false;
  const NodeState& node = nodes_[a.node];
  if (a.cpu.value() > node.cpu_free || a.memory.value() > node.memory_free) return false;
  for (const GpuShare& g : a.gpus) {
    if (g.index < 0 || g.index >= static_cast<int>(node.gpu_free.size())) return false;
    if (g.milli.value() <= 0) return false;
    if (MilliOnGpu(a, g.index) > node.gpu_free[g.index]) return false;
  }
  return true;
}

size_t ClusterState::TransitionHash::operator()(const Transition& t) const {
  uint64_t hash = 0;
  auto mix = [&hash](uint64_t v) { hash = std::rotl((hash ^ v) * 0x9E3779B97F4A7C15ull, 29); };
  mix(static_cast<uint64_t>(t.from));
  mix((static_cast<uint64_t>(t.gpus) << 40) ^ (static_cast<uint64_t>(t.before) << 20) ^
      static_cast<uint64_t>(t.milli));
  mix(static_cast<uint64_t>(t.cpu));
  mix(static_cast<uint64_t>(t.memory));
  return static_cast<size_t>(hash);
}

Status ClusterState::Allocate(const Allocation& a) {
  if (!Fits(a)) return FailedPrecondition("allocation does not fit on its node");
  NodeState& node = nodes_[a.node];
  // ClassFor (sorting, hashing and comparing the node's state) was the largest part of a
  // placement's bookkeeping; most placements repeat a transition already seen.
  Transition transition{node.class_id,   static_cast<int>(a.gpus.size()), 0, 0, a.cpu.value(),
                        a.memory.value()};
  bool remembers = node.class_id >= 0 && !options_.track_task_kinds;
  if (remembers && !a.gpus.empty()) {
    transition.before = node.gpu_free[a.gpus.front().index];
    transition.milli = static_cast<int32_t>(a.gpus.front().milli.value());
    for (const GpuShare& g : a.gpus) {
      // Whole GPUs are distinct GPUs (Fits: a GPU holds at most 1000).
      remembers = remembers && (a.gpus.size() == 1 || (node.gpu_free[g.index] == kFullMilli &&
                                                       g.milli.value() == kFullMilli));
    }
  }
  if (remembers && transitions_.empty() && options_.remembered_transitions > 0) {
    transitions_.resize(std::bit_floor(options_.remembered_transitions));
  }
  RememberedTransition* slot =
      remembers && !transitions_.empty()
          ? &transitions_[TransitionHash{}(transition) & (transitions_.size() - 1)]
          : nullptr;
  const int known = slot != nullptr && slot->to >= 0 && slot->key == transition ? slot->to : -1;
  Detach(a.node);
  node.cpu_free -= a.cpu.value();
  node.memory_free -= a.memory.value();
  for (const GpuShare& g : a.gpus) {
    node.gpu_free[g.index] -= static_cast<int32_t>(g.milli.value());
    free_gpu_milli_ -= g.milli.value();
  }
  if (a.kind >= 0 && options_.track_task_kinds) {
    auto it = std::find_if(node.kinds.begin(), node.kinds.end(),
                           [&](const auto& p) { return p.first == a.kind; });
    if (it == node.kinds.end()) {
      node.kinds.emplace_back(a.kind, 1);
      std::sort(node.kinds.begin(), node.kinds.end());
    } else {
      ++it->second;
    }
  }
  if (known >= 0) {
    ++found_;
    Attach(a.node, known);
    return Status::Ok();
  }
  Attach(a.node);
  if (slot != nullptr) {
    (slot->to < 0 ? remembered_ : replaced_) += 1;
    *slot = {transition, node.class_id};
  }
  return Status::Ok();
}

Status ClusterState::Release(const Allocation& a) {
  if (a.node < 0 || a.node >= NodeSlots() || !nodes_[a.node].present) {
    return NotFound("allocation names no live node");
  }
  NodeState& node = nodes_[a.node];
  for (const GpuShare& g : a.gpus) {
    if (g.index < 0 || g.index >= static_cast<int>(node.gpu_free.size())) {
      return InvalidArgument("allocation names GPU " + std::to_string(g.index) + " of node '" +
                             node.name + "', which does not exist");
    }
  }
  for (const GpuShare& g : a.gpus) {
    if (node.gpu_free[g.index] + MilliOnGpu(a, g.index) > kFullMilli) {
      return FailedPrecondition("release would free more of GPU " + std::to_string(g.index) +
                                " on node '" + node.name + "' than is allocated");
    }
  }
  if (node.cpu_free + a.cpu.value() > node.cpu_total ||
      node.memory_free + a.memory.value() > node.memory_total) {
    return FailedPrecondition("release would free more CPU or memory than node '" + node.name +
                              "' has allocated");
  }
  Detach(a.node);
  node.cpu_free += a.cpu.value();
  node.memory_free += a.memory.value();
  for (const GpuShare& g : a.gpus) {
    node.gpu_free[g.index] += static_cast<int32_t>(g.milli.value());
    free_gpu_milli_ += g.milli.value();
  }
  if (a.kind >= 0 && options_.track_task_kinds) {
    auto it = std::find_if(node.kinds.begin(), node.kinds.end(),
                           [&](const auto& p) { return p.first == a.kind; });
    if (it != node.kinds.end() && --it->second == 0) node.kinds.erase(it);
  }
  Attach(a.node);
  return Status::Ok();
}

void ClusterState::AddToStats(const NodeClass& c, int sign) {
  ModelStats& s = stats_by_model_[ModelSlot(c.model)];
  s.nodes += sign;
  s.gpus += sign * static_cast<int64_t>(c.gpu_count);
  s.full_free_gpus += sign * c.full_free;
  s.free_milli += sign * c.gpu_free_total;
  s.nodes_by_full_free[c.full_free] += sign;
  s.nodes_by_max_free[c.max_free] += sign;
  s.nodes_by_max_free_block[c.max_free / ModelStats::kShareBlock] += sign;
}

int ClusterState::ClassFor(const NodeState& node) {
  // The state's signature is hashed and compared field by field with the classes of that hash:
  // no key is built, so finding an existing class allocates nothing (it runs per placement).
  std::vector<int32_t>& sorted = sorted_scratch_;
  sorted.assign(node.gpu_free.begin(), node.gpu_free.end());
  std::sort(sorted.begin(), sorted.end(), std::greater<>());
  uint64_t mask = 0;
  if (options_.track_task_kinds) {
    for (const auto& [kind, count] : node.kinds) {
      if (kind < 64) mask |= (uint64_t{1} << kind);
    }
  }
  int distinct = options_.track_task_kinds ? static_cast<int>(node.kinds.size()) : 0;

  // A multiply-rotate mix (inlined; collisions only cost a comparison).
  uint64_t hash = 0;
  auto mix = [&hash](uint64_t v) { hash = std::rotl((hash ^ v) * 0x9E3779B97F4A7C15ull, 29); };
  mix(static_cast<uint64_t>(node.model));
  mix(node.runtimes);
  mix(static_cast<uint64_t>(node.cpu_total));
  mix(static_cast<uint64_t>(node.cpu_free));
  mix(static_cast<uint64_t>(node.memory_total));
  mix(static_cast<uint64_t>(node.memory_free));
  mix(mask);
  mix(static_cast<uint64_t>(distinct));
  for (int32_t f : sorted) mix(static_cast<uint64_t>(f));

  auto [first, last] = class_ids_.equal_range(hash);
  for (auto it = first; it != last; ++it) {
    const NodeClass& c = classes_[it->second];
    if (c.model == node.model && c.runtimes == node.runtimes && c.cpu_total == node.cpu_total &&
        c.cpu_free == node.cpu_free && c.memory_total == node.memory_total &&
        c.memory_free == node.memory_free && c.kinds_mask == mask && c.kinds_distinct == distinct &&
        c.gpu_free == sorted) {
      return it->second;
    }
  }
  const int id = static_cast<int>(classes_.size());
  class_ids_.emplace(hash, id);
  NodeClass c;
  c.model = node.model;
  c.gpu_count = static_cast<int>(sorted.size());
  c.cpu_total = node.cpu_total;
  c.cpu_free = node.cpu_free;
  c.memory_total = node.memory_total;
  c.memory_free = node.memory_free;
  c.kinds_mask = mask;
  c.kinds_distinct = distinct;
  c.runtimes = node.runtimes;
  for (int32_t f : sorted) {
    c.full_free += (f == kFullMilli);
    c.gpu_free_total += f;
  }
  c.max_free = sorted.empty() ? 0 : sorted.front();
  c.gpu_free = sorted;
  classes_.push_back(std::move(c));
  return id;
}

void ClusterState::Detach(NodeIndex n) {
  NodeState& node = nodes_[n];
  if (node.class_id < 0) return;
  NodeClass& c = classes_[node.class_id];
  c.members.erase({node.tie_rank, n});
  if (c.members.empty() && c.active_pos >= 0) {
    auto& active = active_by_model_[ModelSlot(c.model)];
    int last = active.back();
    active[c.active_pos] = last;
    classes_[last].active_pos = c.active_pos;
    active.pop_back();
    ActiveBucket& bucket = buckets_by_model_[ModelSlot(c.model)][FitBucket(CapacityOf(c))];
    last = bucket.ids.back();
    bucket.ids[c.bucket_pos] = last;
    bucket.capacities[c.bucket_pos] = bucket.capacities.back();
    classes_[last].bucket_pos = c.bucket_pos;
    bucket.ids.pop_back();
    bucket.capacities.pop_back();
    c.bucket_pos = -1;
    c.active_pos = -1;
    if (options_.index_free_capacity) IndexFreeCapacity(c, node.class_id, -1);
  }
  AddToStats(c, -1);
  node.class_id = -1;
}

void ClusterState::Attach(NodeIndex n, int class_id) {
  NodeState& node = nodes_[n];
  if (!node.present || !node.schedulable) return;
  const int id = class_id >= 0 ? class_id : ClassFor(node);
  NodeClass& c = classes_[id];
  c.members.insert({node.tie_rank, n});
  if (c.active_pos < 0) {
    auto& active = active_by_model_[ModelSlot(c.model)];
    c.active_pos = static_cast<int>(active.size());
    active.push_back(id);
    const ClassCapacity capacity = CapacityOf(c);
    std::vector<ActiveBucket>& buckets = buckets_by_model_[ModelSlot(c.model)];
    const int b = FitBucket(capacity);
    if (b >= static_cast<int>(buckets.size())) buckets.resize(b + 1);
    c.bucket_pos = static_cast<int>(buckets[b].ids.size());
    buckets[b].ids.push_back(id);
    buckets[b].capacities.push_back(capacity);
    if (options_.index_free_capacity) IndexFreeCapacity(c, id, +1);
  }
  AddToStats(c, +1);
  node.class_id = id;
}

}  // namespace corral::sched
