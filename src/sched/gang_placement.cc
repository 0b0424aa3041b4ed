#include "sched/gang_placement.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>
#include <map>
#include <tuple>

namespace corral::sched {

Result<GangPlacement> ParseGangPlacement(std::string_view name) {
  if (name == "together") return GangPlacement::kTogether;
  if (name == "each-task") return GangPlacement::kEachTask;
  return InvalidArgument("unknown gang placement '" + std::string(name) +
                         "' (known: together, each-task)");
}

std::string_view GangPlacementName(GangPlacement placement) {
  return placement == GangPlacement::kTogether ? "together" : "each-task";
}

int TasksThatFit(const NodeClass& c, const TaskRequest& task) {
  constexpr int64_t kUnbounded = std::numeric_limits<int>::max();
  int64_t fit = kUnbounded;
  if (task.cpu > 0) fit = std::min(fit, c.cpu_free / task.cpu);
  if (task.memory > 0) fit = std::min(fit, c.memory_free / task.memory);
  if (task.IsShare()) {
    int64_t shares = 0;
    for (int32_t free : c.gpu_free) shares += free / task.gpu_milli;
    fit = std::min(fit, shares);
  } else if (task.gpus > 0) {
    fit = std::min<int64_t>(fit, c.full_free / task.gpus);
  }
  return static_cast<int>(std::max<int64_t>(0, fit));
}

namespace {

struct Candidate {
  NodeIndex node = -1;
  int fit = 0;  // tasks it holds, at most the gang's count
  int score = 0;
  uint64_t rank = 0;
  std::array<int, kTopologyLevels> topology{};
};

// Candidates in preference order for ties: higher score first, then tie order.
bool Preferred(const Candidate* a, const Candidate* b) {
  return std::tie(b->score, a->rank) < std::tie(a->score, b->rank);
}

// The nodes (with how many tasks each) that hold `count` tasks on the fewest nodes of `pool`
// (in Preferred order), by the rule in the header; empty when the pool cannot hold them.
std::vector<std::pair<const Candidate*, int>> Choose(const std::vector<const Candidate*>& pool,
                                                     int count) {
  // By room, most first (stable: Preferred order among equals).
  std::vector<const Candidate*> by_fit = pool;
  std::stable_sort(by_fit.begin(), by_fit.end(),
                   [](const Candidate* a, const Candidate* b) { return a->fit > b->fit; });
  // The fewest nodes: the roomiest ones until the count is reached.
  int nodes = 0;
  for (int64_t room = 0; room < count; ++nodes) {
    if (nodes == static_cast<int>(by_fit.size())) return {};
    room += by_fit[nodes]->fit;
  }
  // Then, node by node, the tightest one that still lets the nodes left reach the count (the
  // roomiest others make up the rest), so that roomy nodes stay free where that costs nothing.
  std::vector<std::pair<const Candidate*, int>> chosen;
  std::vector<bool> used(by_fit.size(), false);
  int left = count;
  for (int n = nodes; n > 0; --n) {
    // Room of the n - 1 roomiest unused nodes, and of the n-th (to replace a chosen one of them).
    int64_t top = 0;
    int taken = 0, nth = 0;
    for (size_t i = 0; i < by_fit.size() && taken < n; ++i) {
      if (used[i]) continue;
      if (taken < n - 1)
        top += by_fit[i]->fit;
      else
        nth = by_fit[i]->fit;
      ++taken;
    }
    int pick = -1;
    for (size_t i = 0, rank = 0; i < by_fit.size(); ++i) {
      if (used[i]) continue;
      const int fit = by_fit[i]->fit;
      // The others' best: the n - 1 roomiest, or, when this node is one of them, the n-th too.
      const int64_t others = rank < static_cast<size_t>(n - 1) ? top - fit + nth : top;
      ++rank;
      if (std::min(fit, left) + others < left) continue;
      if (pick < 0 || fit < by_fit[pick]->fit ||
          (fit == by_fit[pick]->fit && Preferred(by_fit[i], by_fit[pick]))) {
        pick = static_cast<int>(i);
      }
    }
    used[pick] = true;  // exists: the roomiest unused node always qualifies
    const int take = std::min(left, by_fit[pick]->fit);
    chosen.emplace_back(by_fit[pick], take);
    left -= take;
  }
  return chosen;
}

int64_t Room(const std::vector<const Candidate*>& pool) {
  int64_t room = 0;
  for (const Candidate* c : pool) room += c->fit;
  return room;
}

// The nodes for a gang that no single node holds, narrowest topology level first (see the
// header).
std::vector<std::pair<const Candidate*, int>> ChooseNodes(const std::vector<const Candidate*>& all,
                                                          int count) {
  for (int level = 0; level < kTopologyLevels; ++level) {
    std::map<int, std::vector<const Candidate*>> domains;  // domain → nodes, Preferred order
    for (const Candidate* c : all) {
      if (c->topology[level] != kNoTopologyDomain) domains[c->topology[level]].push_back(c);
    }
    std::vector<std::pair<const Candidate*, int>> best;
    int64_t best_spare = 0;
    for (const auto& [domain, pool] : domains) {
      const int64_t room = Room(pool);
      if (room < count) continue;
      std::vector<std::pair<const Candidate*, int>> nodes = Choose(pool, count);
      const int64_t spare = room - count;
      if (best.empty() || nodes.size() < best.size() ||
          (nodes.size() == best.size() && spare < best_spare)) {
        best = std::move(nodes);
        best_spare = spare;
      }
    }
    if (!best.empty()) return best;
  }
  return Choose(all, count);
}

}  // namespace

std::optional<std::vector<Allocation>> PlaceGang(Placer& placer, const TaskRequest& task, int count,
                                                 GangPlacement placement) {
  ClusterState& state = placer.state();
  // A policy that picks uniformly has no preference to honour: each task is a random draw.
  if (count == 1 || placement == GangPlacement::kEachTask || placer.policy().PicksUniformly()) {
    std::vector<Allocation> placed;
    for (int i = 0; i < count; ++i) {
      std::optional<Allocation> a = placer.Place(task);
      if (!a) {
        for (const Allocation& p : placed) (void)state.Release(p);
        return std::nullopt;
      }
      placed.push_back(std::move(*a));
    }
    return placed;
  }
  if (!placer.GpusCouldFit(task)) return std::nullopt;
  auto place_on = [&](const std::vector<std::pair<NodeIndex, int>>& nodes)
      -> std::optional<std::vector<Allocation>> {
    std::vector<Allocation> placed;
    for (const auto& [node, tasks] : nodes) {
      for (int i = 0; i < tasks; ++i) {
        std::optional<Allocation> a = placer.PlaceOn(node, task);
        if (!a) {  // TasksThatFit promised room: a bug, but fail safe
          for (const Allocation& p : placed) (void)state.Release(p);
          return std::nullopt;
        }
        placed.push_back(std::move(*a));
      }
    }
    return placed;
  };
  // One pass over the node classes that fit: one node when one holds the whole gang (found
  // without visiting nodes), else the classes whose nodes become candidates.
  // Scores are taken only where they decide: for classes that hold the whole gang, and for
  // the candidates when none does.
  struct FittingClass {
    int id;
    const NodeClass* c;
    int fit;
  };
  std::vector<FittingClass> fitting;
  const FittingClass* one = nullptr;
  int one_score = 0;
  int64_t room = 0;
  for (int model : AcceptedModels(state, task)) {
    for (int id : state.ActiveClasses(model)) {
      const NodeClass& c = state.node_class(id);
      if (!Fits(c, task)) continue;
      fitting.push_back({id, &c, std::min(count, TasksThatFit(c, task))});
      room += static_cast<int64_t>(fitting.back().fit) * static_cast<int64_t>(c.members.size());
    }
  }
  for (const FittingClass& f : fitting) {
    if (f.fit < count) continue;
    const int score = placer.Score(f.id, task);
    if (one == nullptr || f.fit < one->fit || (f.fit == one->fit && score > one_score) ||
        (f.fit == one->fit && score == one_score &&
         f.c->members.begin()->first < one->c->members.begin()->first)) {
      one = &f;
      one_score = score;
    }
  }
  if (one != nullptr) return place_on({{one->c->members.begin()->second, count}});
  if (room < count) return std::nullopt;
  // Without topology domains Choose reads, of each room (fit), only the first `count` nodes in
  // Preferred order (it uses at most `count` nodes, and a later node of a room never beats an
  // earlier unused one of the same room): each class gives at most its `count` first members
  // (its members share score and room, in tie order), and the rest of a room is dropped.
  const bool topology = state.HasTopology();
  std::vector<Candidate> candidates;
  for (const FittingClass& f : fitting) {
    const int score = placer.Score(f.id, task);
    int taken = 0;
    for (const auto& [rank, node] : f.c->members) {
      if (!topology && taken++ == count) break;
      candidates.push_back({node, f.fit, score, rank, state.node(node).topology});
    }
  }
  std::vector<const Candidate*> all;
  all.reserve(candidates.size());
  for (const Candidate& c : candidates) all.push_back(&c);
  if (topology) {
    std::sort(all.begin(), all.end(), Preferred);
  } else {
    std::sort(all.begin(), all.end(), [](const Candidate* a, const Candidate* b) {
      return a->fit != b->fit ? a->fit > b->fit : Preferred(a, b);
    });
    std::vector<const Candidate*> kept;
    for (size_t i = 0, same = 0; i < all.size(); ++i) {
      same = i > 0 && all[i]->fit == all[i - 1]->fit ? same + 1 : 0;
      if (same < static_cast<size_t>(count)) kept.push_back(all[i]);
    }
    all = std::move(kept);
  }

  std::vector<std::pair<NodeIndex, int>> nodes;
  for (const auto& [candidate, tasks] : ChooseNodes(all, count)) {
    nodes.emplace_back(candidate->node, tasks);
  }
  return place_on(nodes);
}

}  // namespace corral::sched
