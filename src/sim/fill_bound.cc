#include "sim/fill_bound.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

namespace corral::sim {

namespace {

constexpr int64_t kGpuMilli = 1000;

// Nodes that are interchangeable for placement: same GPU model, GPU count, CPU and memory.
struct NodeClass {
  std::string model;
  int64_t gpus = 0;
  int64_t cpu = 0;     // milli
  int64_t memory = 0;  // MiB
  int64_t count = 0;
};

// Tasks that are interchangeable: same request and the same acceptable models.
struct TaskShape {
  int64_t gpus = 0;
  int64_t gpu_milli = 0;  // per GPU, at most 1000
  int64_t cpu = 0;
  int64_t memory = 0;
  std::vector<std::string> models;  // sorted; empty = any
  int64_t count = 0;

  int64_t TotalMilli() const { return gpus * gpu_milli; }
  bool FitsOn(const NodeClass& c) const {
    const bool model_ok =
        models.empty() || std::binary_search(models.begin(), models.end(), c.model);
    return model_ok && gpus <= c.gpus && cpu <= c.cpu && memory <= c.memory;
  }
};

std::vector<NodeClass> ClassesOf(const std::vector<model::Node>& nodes) {
  std::map<std::tuple<std::string, int64_t, int64_t, int64_t>, int64_t> count;
  for (const auto& n : nodes) {
    if (n.gpus.empty()) continue;  // holds no GPU milli
    ++count[{n.gpu_model, static_cast<int64_t>(n.gpus.size()), n.cpu.value(), n.memory.value()}];
  }
  std::vector<NodeClass> out;
  for (const auto& [key, n] : count) {
    out.push_back(
        NodeClass{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), n});
  }
  return out;
}

std::vector<TaskShape> ShapesOf(const std::vector<model::TaskResources>& tasks) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, std::vector<std::string>>;
  std::map<Key, int64_t> count;
  for (const auto& t : tasks) {
    if (t.TotalMilli().value() <= 0) continue;  // CPU-only tasks hold no GPU milli
    std::vector<std::string> models = t.gpu_models;
    std::sort(models.begin(), models.end());
    models.erase(std::unique(models.begin(), models.end()), models.end());
    ++count[{t.gpus.value(), std::min(t.gpu_milli.value(), kGpuMilli), t.cpu.value(),
             t.memory.value(), std::move(models)}];
  }
  std::vector<TaskShape> out;
  for (const auto& [key, n] : count) {
    const auto& [gpus, milli, cpu, memory, models] = key;
    out.push_back(TaskShape{gpus, milli, cpu, memory, models, n});
  }
  return out;
}

// A dual feasible function u on [0, 1]: items whose sizes sum to at most 1 have u-values that sum
// to at most 1, so Σ u(size/capacity) over the items of any bin is ≤ 1. Applied to sizes as
// integers over an integer capacity, so that u is evaluated exactly.
struct DualFeasibleFunction {
  enum class Kind {
    kIdentity,   // u(x) = x
    kStep,       // u(x) = x if (k+1)x is integral, else ⌊(k+1)x⌋ / k
    kThreshold,  // u(x) = 1 if x > 1 − ε, x if ε ≤ x ≤ 1 − ε, 0 if x < ε (ε ≤ 1/2)
  };
  Kind kind = Kind::kIdentity;
  int64_t param = 0;  // kStep: k ≥ 1; kThreshold: ε × capacity

  double Apply(int64_t size, int64_t capacity) const {
    const double x = static_cast<double>(size) / static_cast<double>(capacity);
    switch (kind) {
      case Kind::kIdentity:
        return x;
      case Kind::kStep:
        if ((param + 1) * size % capacity == 0) return x;
        return static_cast<double>((param + 1) * size / capacity) / static_cast<double>(param);
      case Kind::kThreshold:
        if (size > capacity - param) return 1;
        return size >= param ? x : 0;
    }
    return x;
  }
};

// The rows a resource gets: the identity, the step functions k = 1..kSteps, and a threshold at
// each item size up to half the capacity (the sizes where it changes anything).
constexpr int64_t kSteps = 10;
std::vector<DualFeasibleFunction> FunctionsFor(const std::set<int64_t>& sizes, int64_t capacity) {
  using Kind = DualFeasibleFunction::Kind;
  std::vector<DualFeasibleFunction> out = {{Kind::kIdentity, 0}};
  for (int64_t k = 1; k <= kSteps; ++k) out.push_back({Kind::kStep, k});
  for (int64_t s : sizes) {
    if (s > 0 && 2 * s <= capacity) out.push_back({Kind::kThreshold, s});
  }
  return out;
}

struct LpRow {
  std::vector<std::pair<int, double>> terms;  // (column, coefficient)
  double rhs = 0;
};

struct GlpkDelete {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// Solves max c·x, rows·x ≤ rhs, 0 ≤ x ≤ upper with GLPK and returns a bound on the optimum
// from its duals by weak duality: for any y ≥ 0, c·x ≤ rhs·y + Σ_j max(0, c_j − (Aᵀy)_j) upper_j
// for every feasible x. Computed here in long double, the bound holds whatever tolerances the
// solver used; it is as tight as the solver's optimum.
Result<double> SolveUpperBound(const std::vector<double>& objective,
                               const std::vector<double>& upper, const std::vector<LpRow>& rows) {
  std::unique_ptr<glp_prob, GlpkDelete> lp(glp_create_prob());
  glp_set_obj_dir(lp.get(), GLP_MAX);
  const int ncols = static_cast<int>(objective.size());
  glp_add_cols(lp.get(), ncols);
  for (int j = 0; j < ncols; ++j) {
    glp_set_col_bnds(lp.get(), j + 1, GLP_DB, 0.0, upper[j]);
    glp_set_obj_coef(lp.get(), j + 1, objective[j]);
  }
  glp_add_rows(lp.get(), static_cast<int>(rows.size()));
  std::vector<int> ia = {0}, ja = {0};
  std::vector<double> ar = {0};
  for (size_t i = 0; i < rows.size(); ++i) {
    glp_set_row_bnds(lp.get(), static_cast<int>(i) + 1, GLP_UP, 0.0, rows[i].rhs);
    for (const auto& [col, coef] : rows[i].terms) {
      ia.push_back(static_cast<int>(i) + 1);
      ja.push_back(col + 1);
      ar.push_back(coef);
    }
  }
  glp_load_matrix(lp.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  glp_smcp parm;
  glp_init_smcp(&parm);
  parm.msg_lev = GLP_MSG_OFF;
  parm.presolve = GLP_ON;
  if (glp_simplex(lp.get(), &parm) != 0 || glp_get_status(lp.get()) != GLP_OPT) {
    return Status(StatusCode::kInternal, "bound: the LP solver found no optimum");
  }
  std::vector<long double> reduced(objective.begin(), objective.end());
  long double bound = 0;
  for (size_t i = 0; i < rows.size(); ++i) {
    const long double y = std::max(0.0, glp_get_row_dual(lp.get(), static_cast<int>(i) + 1));
    if (y == 0) continue;
    bound += y * rows[i].rhs;
    for (const auto& [col, coef] : rows[i].terms) reduced[col] -= y * coef;
  }
  for (int j = 0; j < ncols; ++j) bound += std::max<long double>(0, reduced[j]) * upper[j];
  return static_cast<double>(bound);
}

}  // namespace

Result<double> PlaceableMilliBound(const std::vector<model::Node>& nodes,
                                   const std::vector<model::TaskResources>& tasks) {
  if (tasks.size() > kMaxBoundTasks) return InvalidArgument("bound: too many tasks");
  if (nodes.size() > kMaxBoundNodes) return InvalidArgument("bound: too many nodes");
  const std::vector<NodeClass> classes = ClassesOf(nodes);
  const std::vector<TaskShape> shapes = ShapesOf(tasks);

  // Column (s, c): how many tasks of shape s go to nodes of class c. Objective in whole GPUs.
  std::vector<double> objective, upper;
  std::vector<LpRow> rows(shapes.size());  // row s: Σ_c x(s, c) ≤ count(s)
  std::vector<std::vector<std::pair<int, size_t>>> columns_of_class(classes.size());
  for (size_t s = 0; s < shapes.size(); ++s) {
    rows[s].rhs = static_cast<double>(shapes[s].count);
    for (size_t c = 0; c < classes.size(); ++c) {
      if (!shapes[s].FitsOn(classes[c])) continue;
      const int col = static_cast<int>(objective.size());
      objective.push_back(static_cast<double>(shapes[s].TotalMilli()) / kGpuMilli);
      upper.push_back(static_cast<double>(shapes[s].count));
      rows[s].terms.emplace_back(col, 1.0);
      columns_of_class[c].emplace_back(col, s);
    }
  }

  // Per class and resource, one row per dual feasible function u: summing Σ u(item/capacity) ≤ 1
  // over every bin of the class. Bins: each GPU (capacity 1000 milli; a whole-GPU task puts an
  // item of 1000 on each of its GPUs, a share one item of its milli on one GPU), each node's CPU
  // and each node's memory. A row that cannot bind (even with every task of its shapes there) is
  // left out.
  for (size_t c = 0; c < classes.size(); ++c) {
    const NodeClass& nc = classes[c];
    struct Resource {
      int64_t capacity;
      int64_t bins;
      int64_t (*size)(const TaskShape&);
      int64_t (*items)(const TaskShape&);
    };
    const Resource resources[] = {
        {kGpuMilli, nc.count * nc.gpus, [](const TaskShape& t) { return t.gpu_milli; },
         [](const TaskShape& t) { return t.gpus; }},
        {nc.cpu, nc.count, [](const TaskShape& t) { return t.cpu; },
         [](const TaskShape&) { return int64_t{1}; }},
        {nc.memory, nc.count, [](const TaskShape& t) { return t.memory; },
         [](const TaskShape&) { return int64_t{1}; }},
    };
    for (const Resource& r : resources) {
      if (r.capacity <= 0) continue;  // nothing with a positive size fits (FitsOn)
      std::set<int64_t> sizes;
      for (const auto& [col, s] : columns_of_class[c]) sizes.insert(r.size(shapes[s]));
      for (const DualFeasibleFunction& u : FunctionsFor(sizes, r.capacity)) {
        LpRow row;
        row.rhs = static_cast<double>(r.bins);
        double most = 0;
        for (const auto& [col, s] : columns_of_class[c]) {
          const double coef =
              static_cast<double>(r.items(shapes[s])) * u.Apply(r.size(shapes[s]), r.capacity);
          if (coef <= 0) continue;
          row.terms.emplace_back(col, coef);
          most += coef * static_cast<double>(shapes[s].count);
        }
        if (most > row.rhs) rows.push_back(std::move(row));
      }
    }
  }

  double requested = 0;
  for (const auto& s : shapes) requested += static_cast<double>(s.TotalMilli() * s.count);
  if (objective.empty()) return 0.0;
  auto gpus = SolveUpperBound(objective, upper, rows);
  if (!gpus.ok()) return gpus.status();
  return std::min(requested, *gpus * kGpuMilli);
}

Result<FillResult> RunFillBound(const std::vector<model::Node>& nodes,
                                const std::vector<model::TaskResources>& original, uint64_t seed,
                                double tune) {
  const auto start = std::chrono::steady_clock::now();
  int64_t capacity = 0;
  for (const auto& n : nodes) capacity += static_cast<int64_t>(n.gpus.size()) * kGpuMilli;
  if (capacity == 0) return InvalidArgument("bound: the cluster has no GPUs");
  SeededRng rng(seed);
  const std::vector<model::TaskResources> tasks = TuneWorkload(original, capacity, tune, rng);
  if (tasks.empty()) {
    return InvalidArgument("bound: no tasks to present (empty workload, or --tune too small)");
  }

  FillResult result;
  result.policy = "bound";
  result.seed = seed;
  result.tasks_presented = static_cast<int>(tasks.size());
  std::vector<int64_t> arrived(tasks.size());
  int64_t sum = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    sum += tasks[t].TotalMilli().value();
    arrived[t] = sum;
    FillStep step;
    step.arrived_pct = 100.0 * static_cast<double>(sum) / static_cast<double>(capacity);
    result.steps.push_back(step);
  }

  // The checkpoints: for each reported load, the last step of the band At() reads there.
  std::set<size_t> checkpoints = {tasks.size() - 1};
  for (int x : kFillReportLoads) {
    std::optional<size_t> exact, near;
    size_t closest = 0;
    for (size_t t = 0; t < tasks.size(); ++t) {
      const double pct = result.steps[t].arrived_pct;
      if (std::nearbyint(pct) == x) exact = t;
      if (std::fabs(pct - x) <= 1.0) near = t;
      if (std::fabs(pct - x) < std::fabs(result.steps[closest].arrived_pct - x)) closest = t;
    }
    checkpoints.insert(exact ? *exact : near ? *near : closest);
  }
  size_t from = 0;
  for (size_t k : checkpoints) {
    auto ub = PlaceableMilliBound(nodes, {tasks.begin(), tasks.begin() + k + 1});
    if (!ub.ok()) return ub.status();
    for (; from <= k; ++from) {
      const double held = std::min(static_cast<double>(arrived[from]), *ub);
      // At 0 where the dual bound's rounding lands a hair above capacity.
      result.steps[from].unallocated_pct =
          std::max(0.0, 100.0 - 100.0 * held / static_cast<double>(capacity));
    }
  }
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  return result;
}

}  // namespace corral::sim
