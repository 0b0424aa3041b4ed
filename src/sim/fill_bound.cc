#include "sim/fill_bound.h"

#include <glpk.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <exception>
#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>

#include "sched/cluster_state.h"
#include "sim/cbc_library.h"
#include "sim/config_pricing.h"

namespace corral::sim {

namespace {

// Nodes that are interchangeable for placement: same GPU model, GPU count, CPU and memory.
struct NodeClass {
  std::string model;
  int64_t gpus = 0;
  int64_t cpu = 0;     // milli
  int64_t memory = 0;  // MiB
  int64_t count = 0;

  // What makes two nodes interchangeable (ClassesOf orders classes by it).
  auto Key() const { return std::tie(model, gpus, cpu, memory); }
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
  out.reserve(count.size());
  for (const auto& [key, n] : count) {
    out.push_back(
        NodeClass{std::get<0>(key), std::get<1>(key), std::get<2>(key), std::get<3>(key), n});
  }
  return out;
}

// The shapes of a task list (with their counts over the whole list) and the shape of each task
// (none for CPU-only tasks, which hold no GPU milli).
struct Shapes {
  std::vector<TaskShape> shapes;
  std::vector<std::optional<size_t>> of_task;
};

Shapes ShapesOf(const std::vector<model::TaskResources>& tasks) {
  using Key = std::tuple<int64_t, int64_t, int64_t, int64_t, std::vector<std::string>>;
  std::map<Key, size_t> index;
  Shapes out;
  for (const auto& t : tasks) {
    if (t.TotalMilli().value() <= 0) {
      out.of_task.push_back(std::nullopt);
      continue;
    }
    std::vector<std::string> models = t.gpu_models;
    std::sort(models.begin(), models.end());
    models.erase(std::unique(models.begin(), models.end()), models.end());
    Key key{t.gpus.value(), std::min(t.gpu_milli.value(), kGpuMilli), t.cpu.value(),
            t.memory.value(), std::move(models)};
    auto [it, added] = index.try_emplace(key, out.shapes.size());
    if (added) {
      const auto& [gpus, milli, cpu, memory, pins] = key;
      out.shapes.push_back(TaskShape{gpus, milli, cpu, memory, pins, 0});
    }
    ++out.shapes[it->second].count;
    out.of_task.push_back(it->second);
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
      case Kind::kStep: {
        const int64_t steps = (param + 1) * size / capacity;  // ⌊(k+1)x⌋, exact in integers
        if (steps * capacity == (param + 1) * size) return x;
        return static_cast<double>(steps) / static_cast<double>(param);
      }
      case Kind::kThreshold:
        if (size > capacity - param) return 1;
        return size >= param ? x : 0;
    }
    return x;
  }
};

// The rows a resource gets: the identity, the step functions k = 1..kSteps, and a threshold at
// the item sizes up to half the capacity (the sizes where it changes anything): each of them, or
// kMaxThresholds quantiles of them where there are more (every row is valid on its own, so any
// subset keeps the bound sound; fewer rows only loosen it).
constexpr int64_t kSteps = 10;
constexpr size_t kMaxThresholds = 64;
std::vector<DualFeasibleFunction> FunctionsFor(const std::set<int64_t>& sizes, int64_t capacity) {
  using Kind = DualFeasibleFunction::Kind;
  std::vector<DualFeasibleFunction> out = {{Kind::kIdentity, 0}};
  for (int64_t k = 1; k <= kSteps; ++k) out.push_back({Kind::kStep, k});
  std::vector<int64_t> thresholds;
  for (int64_t s : sizes) {
    if (s > 0 && 2 * s <= capacity) thresholds.push_back(s);
  }
  const size_t n = thresholds.size();
  const size_t kept = std::min(n, kMaxThresholds);
  for (size_t i = 0; i < kept; ++i) {
    // The smallest and the largest sizes, and evenly spaced ranks between (all when n ≤ kept).
    const size_t rank = kept == 1 ? 0 : i * (n - 1) / (kept - 1);
    out.push_back({Kind::kThreshold, thresholds[rank]});
  }
  return out;
}

// (class, shape) pairs where the shape fits: the LP's columns.
size_t ColumnsOf(const std::vector<NodeClass>& classes, const std::vector<TaskShape>& shapes) {
  size_t columns = 0;
  for (const auto& s : shapes) {
    for (const auto& c : classes) columns += s.FitsOn(c) ? 1 : 0;
  }
  return columns;
}

// Errors: an LP over `classes` × `shapes` larger than kMaxBoundShapes rows of shapes or
// kMaxBoundColumns columns (each column has at most 1 + 3 × (1 + kSteps + kMaxThresholds)
// nonzeros, so both stay far inside GLPK's int indices).
Status CheckLpSize(const std::vector<NodeClass>& classes, const std::vector<TaskShape>& shapes) {
  if (shapes.size() > kMaxBoundShapes) {
    return InvalidArgument("bound: " + std::to_string(shapes.size()) +
                           " task shapes (distinct requests), more than kMaxBoundShapes = " +
                           std::to_string(kMaxBoundShapes));
  }
  const size_t columns = ColumnsOf(classes, shapes);
  if (columns > kMaxBoundColumns) {
    return InvalidArgument("bound: " + std::to_string(columns) +
                           " (node class, task shape) pairs that fit, more than "
                           "kMaxBoundColumns = " +
                           std::to_string(kMaxBoundColumns));
  }
  return Status::Ok();
}

struct LpRow {
  std::vector<std::pair<int, double>> terms;  // (column, coefficient)
  double rhs = 0;
};

struct GlpkDelete {
  void operator()(glp_prob* p) const { glp_delete_prob(p); }
};

// The LP over node classes × task shapes (docs/placement.md, "The limit"), built once for the
// shapes' largest counts and re-solved for smaller ones from the previous optimal basis. Column
// (s, c) counts tasks of shape s on nodes of class c; the objective is in whole GPUs. Rows: one
// per shape (Σ_c x(s, c) ≤ its count), then per class and resource one per dual feasible function
// u: Σ u(item/capacity) ≤ 1 over every bin of the class. Bins: each GPU (capacity 1000 milli; a
// k-GPU task puts an item of its gpu_milli on each of k GPUs), each node's CPU, each node's memory.
class PlacementLp {
 public:
  PlacementLp(const std::vector<NodeClass>& classes, const std::vector<TaskShape>& shapes)
      : shapes_(shapes) {
    std::vector<std::vector<std::pair<int, size_t>>> columns_of_class(classes.size());
    for (size_t s = 0; s < shapes.size(); ++s) {
      for (size_t c = 0; c < classes.size(); ++c) {
        if (!shapes[s].FitsOn(classes[c])) continue;
        const int col = static_cast<int>(objective_.size());
        objective_.push_back(static_cast<double>(shapes[s].TotalMilli()) / kGpuMilli);
        shape_of_column_.push_back(s);
        columns_of_class[c].emplace_back(col, s);
      }
    }
    rows_.resize(shapes.size());
    for (size_t col = 0; col < shape_of_column_.size(); ++col) {
      rows_[shape_of_column_[col]].terms.emplace_back(static_cast<int>(col), 1.0);
    }
    for (size_t c = 0; c < classes.size(); ++c) AddClassRows(classes[c], columns_of_class[c]);
    if (!objective_.empty()) Load();  // GLPK aborts on an LP without columns
  }

  // An upper bound, in milli-GPU, on what tasks with `counts` of each shape (at most the counts
  // the LP was built for) can hold. Errors: the solver fails.
  Result<double> UpperBoundMilli(const std::vector<int64_t>& counts) {
    if (objective_.empty()) return 0.0;  // no task fits anywhere
    double requested = 0;
    for (size_t s = 0; s < shapes_.size(); ++s) {
      const double n = static_cast<double>(counts[s]);
      requested += n * static_cast<double>(shapes_[s].TotalMilli());
      glp_set_row_bnds(lp_.get(), static_cast<int>(s) + 1, GLP_UP, 0.0, n);
    }
    for (size_t col = 0; col < shape_of_column_.size(); ++col) {
      const double n = static_cast<double>(counts[shape_of_column_[col]]);
      glp_set_col_bnds(lp_.get(), static_cast<int>(col) + 1, n > 0 ? GLP_DB : GLP_FX, 0.0, n);
    }
    glp_smcp parm;
    glp_init_smcp(&parm);
    parm.msg_lev = GLP_MSG_OFF;
    parm.meth = GLP_DUALP;  // new counts move only bounds: the last basis stays dual feasible
    if (glp_simplex(lp_.get(), &parm) != 0 || glp_get_status(lp_.get()) != GLP_OPT) {
      glp_std_basis(lp_.get());  // the previous basis did not serve: start afresh once
      if (glp_simplex(lp_.get(), &parm) != 0 || glp_get_status(lp_.get()) != GLP_OPT) {
        return Status(StatusCode::kInternal, "bound: the LP solver found no optimum");
      }
    }
    return std::min(requested, DualBound(counts) * kGpuMilli);
  }

 private:
  // Adds, per resource of the class, a row for each dual feasible function; a row that cannot
  // bind even with every task of its shapes there is left out.
  void AddClassRows(const NodeClass& nc, const std::vector<std::pair<int, size_t>>& columns) {
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
      for (const auto& [col, s] : columns) sizes.insert(r.size(shapes_[s]));
      for (const DualFeasibleFunction& u : FunctionsFor(sizes, r.capacity)) {
        LpRow row;
        row.rhs = static_cast<double>(r.bins);
        double most = 0;
        for (const auto& [col, s] : columns) {
          const double coef =
              static_cast<double>(r.items(shapes_[s])) * u.Apply(r.size(shapes_[s]), r.capacity);
          if (coef <= 0) continue;
          row.terms.emplace_back(col, coef);
          most += coef * static_cast<double>(shapes_[s].count);
        }
        if (most > row.rhs) rows_.push_back(std::move(row));
      }
    }
  }

  void Load() {
    lp_.reset(glp_create_prob());
    glp_set_obj_dir(lp_.get(), GLP_MAX);
    glp_add_cols(lp_.get(), static_cast<int>(objective_.size()));
    for (size_t j = 0; j < objective_.size(); ++j) {
      glp_set_obj_coef(lp_.get(), static_cast<int>(j) + 1, objective_[j]);
    }
    glp_add_rows(lp_.get(), static_cast<int>(rows_.size()));
    std::vector<int> ia = {0}, ja = {0};
    std::vector<double> ar = {0};
    for (size_t i = 0; i < rows_.size(); ++i) {
      glp_set_row_bnds(lp_.get(), static_cast<int>(i) + 1, GLP_UP, 0.0, rows_[i].rhs);
      for (const auto& [col, coef] : rows_[i].terms) {
        ia.push_back(static_cast<int>(i) + 1);
        ja.push_back(col + 1);
        ar.push_back(coef);
      }
    }
    glp_load_matrix(lp_.get(), static_cast<int>(ia.size()) - 1, ia.data(), ja.data(), ar.data());
  }

  // The optimum's bound by weak duality, from the solver's row duals y clipped to ≥ 0: every
  // feasible x has c·x ≤ rhs·y + Σ_j max(0, c_j − (Aᵀy)_j)·upper_j. Summed here in long double,
  // it holds whatever tolerances the solver used, and is as tight as the solver's optimum.
  double DualBound(const std::vector<int64_t>& counts) const {
    std::vector<long double> reduced(objective_.begin(), objective_.end());
    long double bound = 0;
    for (size_t i = 0; i < rows_.size(); ++i) {
      const long double y = std::max(0.0, glp_get_row_dual(lp_.get(), static_cast<int>(i) + 1));
      if (y == 0) continue;
      const double rhs = i < shapes_.size() ? static_cast<double>(counts[i]) : rows_[i].rhs;
      bound += y * rhs;
      for (const auto& [col, coef] : rows_[i].terms) reduced[col] -= y * coef;
    }
    for (size_t j = 0; j < objective_.size(); ++j) {
      bound += std::max<long double>(0, reduced[j]) *
               static_cast<long double>(counts[shape_of_column_[j]]);
    }
    return static_cast<double>(bound);
  }

  std::vector<TaskShape> shapes_;
  std::vector<double> objective_;
  std::vector<size_t> shape_of_column_;
  std::vector<LpRow> rows_;  // the shapes' rows first, in shape order
  std::unique_ptr<glp_prob, GlpkDelete> lp_;
};

// The integer program over single nodes and GPUs (fill_bound.h, ExactPlaceableMilli), solved by
// CBC (COIN-OR branch and cut; GLPK's branch and bound found no placement at all within minutes on
// 8 openb nodes). Variables: x(s, n) tasks of shape s on node n (where the shape fits); for a share
// shape, y(s, g) of its tasks on GPU g of that node; w(g) = 1 when GPU g is held whole. Rows:
// Σ_n x(s, n) ≤ count(s); per node CPU and memory; Σ_g w(g) = Σ_whole gpus(s)·x(s, n);
// Σ_g y(s, g) = x(s, n); per GPU 1000·w(g) + Σ milli(s)·y(s, g) ≤ 1000; per GPU, node CPU and
// node memory the dual feasible rows of the LP (PlacementLp) for that one bin. Symmetry is broken
// without losing an optimum: the GPUs of a node by (w, used milli) descending and consecutive
// identical nodes by the milli they hold (sort the GPUs of each node, then the nodes of each
// class: both orders hold at once).
// Each node with GPUs as a class of one, identical nodes next to each other (classes in
// ClassesOf's order, input order within a class), and per such node its index in `nodes`.
struct SingleNodes {
  std::vector<NodeClass> nodes;
  std::vector<size_t> source;
};

SingleNodes SingleNodesOf(const std::vector<model::Node>& nodes) {
  SingleNodes in;
  for (size_t i = 0; i < nodes.size(); ++i) {
    const model::Node& n = nodes[i];
    if (n.gpus.empty()) continue;  // holds no milli
    in.nodes.push_back(NodeClass{n.gpu_model, static_cast<int64_t>(n.gpus.size()), n.cpu.value(),
                                 n.memory.value(), 1});
    in.source.push_back(i);
  }
  std::vector<size_t> order(in.nodes.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return in.nodes[a].Key() < in.nodes[b].Key(); });
  SingleNodes out;
  for (size_t i : order) {
    out.nodes.push_back(in.nodes[i]);
    out.source.push_back(in.source[i]);
  }
  return out;
}

class PlacementMip {
 public:
  // `single`: the nodes (SingleNodesOf). `value`: per shape, what one of its tasks adds to the
  // objective (its milli for the exact solve; its reduced value when pricing a configuration).
  // `most`: a bound on the objective of any placement (a row Σ objective ≤ it), none for no row.
  PlacementMip(SingleNodes single, const std::vector<TaskShape>& shapes,
               const std::vector<double>& value, std::optional<double> most)
      : shapes_(shapes), nodes_(std::move(single.nodes)), source_(std::move(single.source)) {
    x_col_.assign(nodes_.size(), std::vector<int>(shapes_.size(), -1));
    y_col_ = x_col_;
    w_col_.resize(nodes_.size());
    std::vector<int> count_row(shapes_.size());
    for (size_t s = 0; s < shapes_.size(); ++s) {
      count_row[s] = AddRow(kNoLimit, static_cast<double>(shapes_[s].count));
    }
    std::vector<Terms> held(nodes_.size());  // GPU milli a node holds, for the symmetry rows
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const NodeClass& node = nodes_[n];
      const int cpu = AddRow(kNoLimit, static_cast<double>(node.cpu));
      const int memory = AddRow(kNoLimit, static_cast<double>(node.memory));
      const int whole = AddRow(0, 0);  // Σ w(g) − Σ gpus(s)·x(s, n) = 0
      std::vector<int> gpu_rows, w_cols;
      std::vector<Terms> used(node.gpus);  // per GPU: 1000·w(g) + Σ milli(s)·y(s, g)
      Terms cpu_items, memory_items;       // per task shape: x(s, n) and its size
      for (int64_t g = 0; g < node.gpus; ++g) {
        gpu_rows.push_back(AddRow(kNoLimit, static_cast<double>(kGpuMilli)));
        const int w = AddColumn(1, 0);
        Add(gpu_rows.back(), w, kGpuMilli);
        Add(whole, w, 1);
        used[g].emplace_back(w, kGpuMilli);
        w_cols.push_back(w);
      }
      w_col_[n] = w_cols;
      for (size_t s = 0; s < shapes_.size(); ++s) {
        const TaskShape& shape = shapes_[s];
        if (!shape.FitsOn(node)) continue;
        const int x = AddColumn(static_cast<double>(shape.count), value[s]);
        placed_.push_back({s, n, x});
        x_col_[n][s] = x;
        Add(count_row[s], x, 1);
        Add(cpu, x, static_cast<double>(shape.cpu));
        Add(memory, x, static_cast<double>(shape.memory));
        cpu_items.emplace_back(x, static_cast<double>(shape.cpu));
        memory_items.emplace_back(x, static_cast<double>(shape.memory));
        held[n].emplace_back(x, static_cast<double>(shape.TotalMilli()));
        if (!IsShare(shape)) {
          Add(whole, x, -static_cast<double>(shape.gpus));
          continue;
        }
        const int link = AddRow(0, 0);  // Σ_g y(s, g) − x(s, n) = 0
        Add(link, x, -1);
        const int64_t per_gpu = std::min(shape.count, kGpuMilli / shape.gpu_milli);
        y_col_[n][s] = static_cast<int>(upper_.size());  // y(s, g) for g = 0.. are consecutive
        for (int64_t g = 0; g < node.gpus; ++g) {
          const int y = AddColumn(static_cast<double>(per_gpu), 0);
          shared_.push_back({s, n, g, y});
          Add(link, y, 1);
          Add(gpu_rows[g], y, static_cast<double>(shape.gpu_milli));
          used[g].emplace_back(y, static_cast<double>(shape.gpu_milli));
        }
      }
      // The LP's dual feasible rows, per bin of this node: they hold for every integer placement
      // and cut fractional ones the capacity rows allow (a 600-milli share half on each of two
      // GPUs), so the bound CBC branches from is tighter.
      for (const Terms& gpu : used) AddDualFeasibleRows(gpu, kGpuMilli);
      AddDualFeasibleRows(cpu_items, node.cpu);
      AddDualFeasibleRows(memory_items, node.memory);
      for (int64_t g = 0; g + 1 < node.gpus; ++g) {
        AddDifferenceRow(used[g], used[g + 1]);
        AddDifferenceRow({{w_cols[g], 1}}, {{w_cols[g + 1], 1}});
      }
      const bool same_as_previous = n > 0 && nodes_[n - 1].Key() == node.Key();
      if (same_as_previous) AddDifferenceRow(held[n - 1], held[n]);
    }
    if (!most) return;
    const int most_row = AddRow(kNoLimit, *most);
    for (size_t col = 0; col < objective_.size(); ++col) {
      if (objective_[col] != 0) Add(most_row, static_cast<int>(col), objective_[col]);
    }
  }

  // A known placement as the MIP's columns, and the milli it holds.
  struct Start {
    std::vector<double> columns;
    int64_t milli = 0;
  };

  // `placement` (one entry per task of the shapes' list, nodes indexed as the constructor's
  // `nodes`; `shape_of_task` from ShapesOf) as columns that meet the symmetry rows: per node its
  // whole GPUs first, then its shared GPUs by used milli descending (which GPU index a task held
  // does not matter, only which shares sit together), and identical nodes by held milli
  // descending. CPU-only tasks are left out (they hold no milli). Checked in integers as a
  // solution is. Errors: a placement longer than the task list, a task on a node without GPUs
  // or where it does not fit, a GPU index not on the node, a share on other than one GPU, a
  // whole-GPU task holding other than its count of GPUs or a GPU another task holds (so no node
  // holds tasks on more GPUs than it has), or a placement that does not check out; each names
  // the first offender (task and node).
  Result<Start> StartFrom(const TaskPlacements& placement,
                          const std::vector<std::optional<size_t>>& shape_of_task) const {
    if (placement.size() > shape_of_task.size()) {
      return InvalidArgument("exact: start: " + std::to_string(placement.size()) +
                             " placements for " + std::to_string(shape_of_task.size()) + " tasks");
    }
    struct Content {
      std::vector<int64_t> tasks;                          // per shape
      std::map<int, std::vector<int64_t>> shares_per_gpu;  // GPU index → tasks per shape
      std::set<int> whole_gpus;                            // GPU indices held whole
      int64_t held = 0;
    };
    std::map<size_t, size_t> mip_node;  // input node → node of the MIP
    for (size_t n = 0; n < source_.size(); ++n) mip_node[source_[n]] = n;
    std::vector<Content> content(nodes_.size(),
                                 Content{std::vector<int64_t>(shapes_.size(), 0), {}, {}, 0});
    auto invalid = [](size_t t, const std::string& why) {
      return InvalidArgument("exact: start: task " + std::to_string(t) + " " + why);
    };
    for (size_t t = 0; t < placement.size(); ++t) {
      if (!placement[t] || !shape_of_task[t]) continue;  // not placed, or holds no milli
      auto node = mip_node.find(placement[t]->node);
      if (node == mip_node.end()) return invalid(t, "is on no node with GPUs");
      const size_t s = *shape_of_task[t], n = node->second;
      if (x_col_[n][s] < 0) return invalid(t, "is on a node it does not fit");
      Content& c = content[n];
      ++c.tasks[s];
      c.held += shapes_[s].TotalMilli();
      const std::vector<model::GpuShare>& gpus = placement[t]->gpus;
      const std::string on_node = " of node " + std::to_string(placement[t]->node);
      for (const model::GpuShare& g : gpus) {
        if (g.index < 0 || g.index >= nodes_[n].gpus) {
          return invalid(t, "holds GPU " + std::to_string(g.index) + on_node + ", which has " +
                                std::to_string(nodes_[n].gpus));
        }
      }
      if (!IsShare(shapes_[s])) {
        if (static_cast<int64_t>(gpus.size()) != shapes_[s].gpus) {
          return invalid(t, "holds " + std::to_string(gpus.size()) + " GPU(s)" + on_node +
                                " but asks for " + std::to_string(shapes_[s].gpus));
        }
        for (const model::GpuShare& g : gpus) {
          if (!c.whole_gpus.insert(g.index).second || c.shares_per_gpu.count(g.index) > 0) {
            return invalid(t, "holds GPU " + std::to_string(g.index) + on_node +
                                  " whole, which another task holds");
          }
        }
        continue;
      }
      if (gpus.size() != 1) return invalid(t, "is a share not on one GPU");
      if (c.whole_gpus.count(gpus.front().index) > 0) {
        return invalid(t, "shares GPU " + std::to_string(gpus.front().index) + on_node +
                              ", which another task holds whole");
      }
      auto& per_shape = c.shares_per_gpu[gpus.front().index];
      per_shape.resize(shapes_.size(), 0);
      ++per_shape[s];
    }
    // Within each class, the nodes' contents by held milli, descending.
    std::vector<size_t> order(nodes_.size());
    for (size_t n = 0; n < order.size(); ++n) order[n] = n;
    for (size_t first = 0, last = 0; first < nodes_.size(); first = last) {
      for (last = first + 1; last < nodes_.size() && nodes_[last].Key() == nodes_[first].Key();) {
        ++last;
      }
      std::stable_sort(order.begin() + static_cast<std::ptrdiff_t>(first),
                       order.begin() + static_cast<std::ptrdiff_t>(last),
                       [&](size_t a, size_t b) { return content[a].held > content[b].held; });
    }
    Start out{std::vector<double>(upper_.size(), 0.0), 0};
    for (size_t n = 0; n < nodes_.size(); ++n) {
      const Content& c = content[order[n]];  // moves to node n, of the same class
      int64_t whole = 0;
      for (size_t s = 0; s < shapes_.size(); ++s) {
        if (c.tasks[s] == 0) continue;
        out.columns[x_col_[n][s]] = static_cast<double>(c.tasks[s]);
        if (!IsShare(shapes_[s])) whole += c.tasks[s] * shapes_[s].gpus;
      }
      std::vector<std::pair<int64_t, const std::vector<int64_t>*>> shared;  // (used milli, tasks)
      for (const auto& [gpu, per_shape] : c.shares_per_gpu) {
        int64_t used = 0;
        for (size_t s = 0; s < shapes_.size(); ++s) used += per_shape[s] * shapes_[s].gpu_milli;
        shared.emplace_back(used, &per_shape);
      }
      std::stable_sort(shared.begin(), shared.end(),
                       [](const auto& a, const auto& b) { return a.first > b.first; });
      for (int64_t g = 0; g < whole; ++g) out.columns[w_col_[n][g]] = 1;
      for (size_t i = 0; i < shared.size(); ++i) {
        const std::vector<int64_t>& per_shape = *shared[i].second;
        for (size_t s = 0; s < shapes_.size(); ++s) {
          if (per_shape[s] == 0) continue;
          out.columns[y_col_[n][s] + whole + static_cast<int64_t>(i)] =
              static_cast<double>(per_shape[s]);
        }
      }
    }
    auto held = CheckedSolutionMilli(out.columns.data());
    if (!held.ok() || !MeetsEveryRow(out.columns)) {
      return InvalidArgument("exact: start: not a placement of the tasks");
    }
    out.milli = *held;
    return out;
  }

  // Errors: CBC cannot be loaded (LoadCbc), throws, or stops without an answer; each names the
  // instance (its size). With `start`, CBC begins from it and `milli` is at least its.
  Result<ExactOptimum> Solve(double time_limit_s, const Start* start) const {
    const auto began = std::chrono::steady_clock::now();
    ExactOptimum out;
    if (start != nullptr) out.start_milli = start->milli;
    if (!upper_.empty()) {
      CORRAL_RETURN_IF_ERROR(
          WithCbc([&](const CbcLibrary& lib) { return SolveWith(lib, time_limit_s, start, out); }));
    }
    out.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - began).count();
    return out;
  }

  // The best configuration of one node (the MIP built over one node: a pricing problem of the
  // configuration LP) and a bound on every configuration's objective.
  struct Priced {
    std::vector<int64_t> tasks;  // per shape: how many tasks of it the configuration holds
    double value = 0;            // the configuration's objective (0: the empty one)
    double upper = 0;            // ≥ every configuration's objective (CBC's bound), ≥ value
  };
  // Errors: as Solve's; more than one node.
  Result<Priced> Price(double time_limit_s) const {
    if (nodes_.size() != 1) {
      return Status(StatusCode::kInternal, "pricing: " + Instance() + " is not one node");
    }
    Priced out;
    out.tasks.assign(shapes_.size(), 0);
    if (upper_.empty()) return out;
    CORRAL_RETURN_IF_ERROR(WithCbc([&](const CbcLibrary& lib) -> Status {
      auto cbc = Run(lib, time_limit_s, nullptr);
      if (!lib.Cbc_isProvenOptimal(cbc.get()) && !lib.Cbc_isSecondsLimitReached(cbc.get())) {
        return Status(StatusCode::kInternal,
                      "pricing: the MIP solver stopped without an answer "
                      "on " +
                          Instance());
      }
      out.upper = BestPossible(lib, cbc.get());
      if (const double* x = lib.Cbc_bestSolution(cbc.get())) {
        CORRAL_RETURN_IF_ERROR(CheckedSolutionMilli(x).status());
        for (const Placed& p : placed_) {
          const int64_t tasks = std::llround(x[p.column]);
          out.tasks[p.shape] += tasks;
          out.value += static_cast<double>(tasks) * objective_[p.column];
        }
      }
      return Status::Ok();
    }));
    out.upper = std::max(out.upper, out.value);
    return out;
  }

 private:
  using Terms = std::vector<std::pair<int, double>>;
  struct Placed {
    size_t shape, node;
    int column;
  };
  struct Shared {
    size_t shape, node;
    int64_t gpu;
    int column;
  };
  struct CbcDelete {
    const CbcLibrary* cbc;
    void operator()(Cbc_Model* m) const { cbc->Cbc_deleteModel(m); }
  };
  static constexpr double kNoLimit = -1e30;  // a row's lower bound when it has none

  static bool IsShare(const TaskShape& s) { return s.gpus == 1 && s.gpu_milli < kGpuMilli; }

  int AddRow(double lower, double upper) {
    row_lower_.push_back(lower);
    row_upper_.push_back(upper);
    return static_cast<int>(row_upper_.size()) - 1;
  }
  // An integer column in [0, upper] (a binary one for upper 1).
  int AddColumn(double upper, double objective) {
    upper_.push_back(upper);
    objective_.push_back(objective);
    entries_.emplace_back();
    return static_cast<int>(upper_.size()) - 1;
  }
  void Add(int row, int col, double coef) { entries_[col].emplace_back(row, coef); }
  // For a bin of `capacity` holding `items` (column, size per unit of the column), a row
  // Σ u(size/capacity)·column ≤ 1 per dual feasible function u (FunctionsFor) that raises some
  // item above size/capacity; the identity is the capacity row itself.
  void AddDualFeasibleRows(const Terms& items, int64_t capacity) {
    if (capacity <= 0 || items.empty()) return;
    std::set<int64_t> sizes;
    for (const auto& [col, size] : items) sizes.insert(static_cast<int64_t>(size));
    for (const DualFeasibleFunction& u : FunctionsFor(sizes, capacity)) {
      const bool raises = std::any_of(sizes.begin(), sizes.end(), [&](int64_t size) {
        return u.Apply(size, capacity) >
               static_cast<double>(size) / static_cast<double>(capacity) + 1e-12;
      });
      if (!raises) continue;
      const int row = AddRow(kNoLimit, 1);
      for (const auto& [col, size] : items) {
        const double coef = u.Apply(static_cast<int64_t>(size), capacity);
        if (coef > 0) Add(row, col, coef);
      }
    }
  }

  // Σ first − Σ second ≥ 0 (a column in both gets its coefficients summed: no duplicate entries).
  void AddDifferenceRow(const Terms& first, const Terms& second) {
    std::map<int, double> coef;
    for (const auto& [col, c] : first) coef[col] += c;
    for (const auto& [col, c] : second) coef[col] -= c;
    const int row = AddRow(0, 1e30);
    for (const auto& [col, c] : coef) {
      if (c != 0) Add(row, col, c);
    }
  }

  // Whether integer `columns` meet every row, the symmetry rows and the LP's included, within
  // 1e-6 (the dual feasible rows' coefficients are fractions), so CBC takes them as a start.
  bool MeetsEveryRow(const std::vector<double>& columns) const {
    constexpr double kTolerance = 1e-6;
    std::vector<double> activity(row_upper_.size(), 0.0);
    for (size_t col = 0; col < columns.size(); ++col) {
      if (columns[col] < 0 || columns[col] > upper_[col]) return false;
      for (const auto& [row, coef] : entries_[col]) activity[row] += coef * columns[col];
    }
    for (size_t row = 0; row < activity.size(); ++row) {
      if (activity[row] < row_lower_[row] - kTolerance ||
          activity[row] > row_upper_[row] + kTolerance) {
        return false;
      }
    }
    return true;
  }

  // The instance as errors name it.
  std::string Instance() const {
    return "the instance of " + std::to_string(nodes_.size()) + " node(s), " +
           std::to_string(shapes_.size()) + " task shape(s) (" + std::to_string(upper_.size()) +
           " columns, " + std::to_string(row_upper_.size()) + " rows)";
  }

  // Runs `solve` with CBC loaded; its exceptions become errors naming the instance.
  template <typename Solve>
  Status WithCbc(Solve&& solve) const {
    auto cbc = LoadCbc();
    if (!cbc.ok()) return cbc.status();
    try {
      return solve(**cbc);
    } catch (const std::exception& e) {
      return Status(StatusCode::kInternal, "CBC failed on " + Instance() + ": " + e.what());
    } catch (...) {  // CBC's own CoinError derives from no standard exception
      return Status(StatusCode::kInternal,
                    "CBC failed on " + Instance() + " (a non-standard exception, CoinError)");
    }
  }

  // The model loaded into CBC, started from `start` if any, and solved within `time_limit_s`
  // (wall time, one thread, no preprocessing). CBC may throw.
  std::unique_ptr<Cbc_Model, CbcDelete> Run(const CbcLibrary& lib, double time_limit_s,
                                            const Start* start) const {
    std::unique_ptr<Cbc_Model, CbcDelete> cbc(lib.Cbc_newModel(), CbcDelete{&lib});
    Load(lib, cbc.get());
    if (start != nullptr) {
      std::vector<int> columns;
      std::vector<double> values;
      for (size_t j = 0; j < start->columns.size(); ++j) {
        if (start->columns[j] == 0) continue;
        columns.push_back(static_cast<int>(j));
        values.push_back(start->columns[j]);
      }
      lib.Cbc_setMIPStartI(cbc.get(), static_cast<int>(columns.size()), columns.data(),
                           values.data());
    }
    // CBC 2.10 counts the limit in CPU time unless told otherwise; the flag's is wall time.
    lib.Cbc_setParameter(cbc.get(), "timeMode", "elapsed");
    lib.Cbc_setMaximumSeconds(cbc.get(), time_limit_s);
    lib.Cbc_setLogLevel(cbc.get(), 0);
    lib.Cbc_setParameter(cbc.get(), "threads", "1");  // deterministic search
    // CBC 2.10's preprocessing crashed (SIGSEGV in CglPreProcess::postProcess, mapping the
    // answer back) on 2 of 5 40-node solves that hit the time limit with a start.
    lib.Cbc_setParameter(cbc.get(), "preprocess", "off");
    lib.Cbc_solve(cbc.get());
    return cbc;
  }

  // The exact solve proper; CBC may throw.
  Status SolveWith(const CbcLibrary& lib, double time_limit_s, const Start* start,
                   ExactOptimum& out) const {
    auto cbc = Run(lib, time_limit_s, start);
    if (lib.Cbc_isProvenOptimal(cbc.get())) {
      out.status = ExactStatus::kOptimal;
    } else if (lib.Cbc_isSecondsLimitReached(cbc.get())) {
      out.status = ExactStatus::kTimeLimit;
    } else {
      return Status(StatusCode::kInternal, "exact: the MIP solver stopped without an answer on " +
                                               Instance() + " (Cbc status " +
                                               std::to_string(lib.Cbc_status(cbc.get())) + ")");
    }
    // Maximising: the best bound is on what is still reachable, so no less than the optimum.
    out.upper_milli = static_cast<int64_t>(std::floor(BestPossible(lib, cbc.get()) + 1e-6));
    if (const double* x = lib.Cbc_bestSolution(cbc.get())) {
      auto held = CheckedSolutionMilli(x);
      if (!held.ok()) return held.status();
      out.milli = *held;
    }
    if (out.milli < out.start_milli) {
      // CBC dropped the start (it holds more than CBC's answer), so its "proven optimal" covers
      // a search that did not take the start in, and its bound may be below it: nothing proves
      // an optimum. Reported as not proven, the range the timed-out case gives: the start (a
      // checked placement) below, CBC's bound, no less than the start, above. Not unit tested:
      // CBC is loaded inside Solve (LoadCbc), with no seam for a fake, and no test can make
      // the real one drop a start.
      out.status = ExactStatus::kTimeLimit;
      out.milli = out.start_milli;
    }
    out.upper_milli = std::max(out.upper_milli, out.milli);
    if (out.status == ExactStatus::kOptimal) out.upper_milli = out.milli;
    return Status::Ok();
  }

  // Maximising: an objective no solution exceeds. CBC's best possible value when it is proven
  // optimal, or when it stopped (a time limit) with a bound above its incumbent. Before its root
  // bound CBC reports the incumbent's value there (±1e50 or COIN_DBL_MAX without one), which no
  // search proved: then Σ over columns of max(0, objective)·upper (every column is ≥ 0).
  double BestPossible(const CbcLibrary& lib, Cbc_Model* cbc) const {
    const double bound = lib.Cbc_getBestPossibleObjValue(cbc);
    if (lib.Cbc_isProvenOptimal(cbc)) return bound;
    bool searched = std::isfinite(bound) && std::fabs(bound) < kNoBound;
    if (const double* x = lib.Cbc_bestSolution(cbc)) {
      double incumbent = 0;
      for (size_t j = 0; j < objective_.size(); ++j) incumbent += objective_[j] * x[j];
      searched = searched && bound > incumbent + kBoundTolerance * (1 + std::fabs(incumbent));
    }
    return searched ? bound : TrivialUpper();
  }
  double TrivialUpper() const {
    double out = 0;
    for (size_t j = 0; j < upper_.size(); ++j) out += std::max(0.0, objective_[j]) * upper_[j];
    return out;
  }
  static constexpr double kBoundTolerance = 1e-9;  // relative: a bound this close is the incumbent
  static constexpr double kNoBound = 1e20;         // CBC's bounds at least this large are none

  void Load(const CbcLibrary& lib, Cbc_Model* cbc) const {
    std::vector<CoinBigIndex> start = {0};
    std::vector<int> index;
    std::vector<double> value;
    for (const auto& column : entries_) {
      for (const auto& [row, coef] : column) {
        index.push_back(row);
        value.push_back(coef);
      }
      start.push_back(static_cast<CoinBigIndex>(index.size()));
    }
    const std::vector<double> lower(upper_.size(), 0.0);
    lib.Cbc_loadProblem(cbc, static_cast<int>(upper_.size()), static_cast<int>(row_upper_.size()),
                        start.data(), index.data(), value.data(), lower.data(), upper_.data(),
                        objective_.data(), row_lower_.data(), row_upper_.data());
    for (size_t j = 0; j < upper_.size(); ++j) lib.Cbc_setInteger(cbc, static_cast<int>(j));
    lib.Cbc_setObjSense(cbc, -1);  // maximise
  }

  // The solver's solution `x` rounded to integers and checked in integer arithmetic against every
  // constraint of the placement (counts, CPU, memory, GPU milli with whole GPUs apart): what it
  // holds is then a placement that exists, whatever the solver's tolerances. Errors: it does not
  // check out.
  Result<int64_t> CheckedSolutionMilli(const double* x) const {
    auto value = [&](int col) { return static_cast<int64_t>(std::llround(x[col])); };
    std::vector<int64_t> count(shapes_.size(), 0), cpu(nodes_.size(), 0), memory(nodes_.size(), 0),
        whole(nodes_.size(), 0);
    std::vector<std::vector<int64_t>> gpu(nodes_.size());
    for (size_t n = 0; n < nodes_.size(); ++n) gpu[n].assign(nodes_[n].gpus, 0);
    std::map<std::pair<size_t, size_t>, int64_t> share_tasks;  // (shape, node) → x − Σ_g y
    int64_t held = 0;
    bool ok = true;
    for (const Placed& p : placed_) {
      const int64_t tasks = value(p.column);
      const TaskShape& s = shapes_[p.shape];
      ok = ok && tasks >= 0;
      count[p.shape] += tasks;
      cpu[p.node] += tasks * s.cpu;
      memory[p.node] += tasks * s.memory;
      held += tasks * s.TotalMilli();
      if (IsShare(s)) {
        share_tasks[{p.shape, p.node}] = tasks;
      } else {
        whole[p.node] += tasks * s.gpus;
      }
    }
    for (const Shared& y : shared_) {
      const int64_t on_gpu = value(y.column);
      ok = ok && on_gpu >= 0;
      gpu[y.node][y.gpu] += on_gpu * shapes_[y.shape].gpu_milli;
      share_tasks[{y.shape, y.node}] -= on_gpu;
    }
    for (size_t s = 0; s < shapes_.size(); ++s) ok = ok && count[s] <= shapes_[s].count;
    for (const auto& [key, left] : share_tasks) ok = ok && left == 0;
    for (size_t n = 0; n < nodes_.size(); ++n) {
      ok = ok && cpu[n] <= nodes_[n].cpu && memory[n] <= nodes_[n].memory;
      // The whole GPUs go on the GPUs without shares.
      ok = ok && whole[n] <= std::count(gpu[n].begin(), gpu[n].end(), 0);
      for (int64_t milli : gpu[n]) ok = ok && milli <= kGpuMilli;
    }
    if (!ok) return Status(StatusCode::kInternal, "exact: the MIP solution is not a placement");
    return held;
  }

  std::vector<TaskShape> shapes_;
  std::vector<NodeClass> nodes_;  // one per node with GPUs (count 1), identical ones adjacent
  std::vector<size_t> source_;    // per node of nodes_: its index in the constructor's `nodes`
  // Per node and shape: the column x(s, n), and y(s, g = 0) (−1: the shape does not fit, or
  // is not a share); per node its w(g) columns.
  std::vector<std::vector<int>> x_col_, y_col_;
  std::vector<std::vector<int>> w_col_;
  std::vector<Placed> placed_;
  std::vector<Shared> shared_;
  std::vector<double> row_lower_, row_upper_;
  std::vector<double> upper_, objective_;                     // per column
  std::vector<std::vector<std::pair<int, double>>> entries_;  // per column: (row, coefficient)
};

// The configuration LP (Gilmore and Gomory, 1961) over node classes (docs/placement.md, "The
// limit (session 42)"): a variable z(c, p) per node class c and configuration p (tasks of each
// shape that fit one node of c at once: GPUs whole and shared, CPU, memory, pins) counts the nodes
// of c holding p; objective Σ value(p)·z in GPUs; rows Σ_p z(c, p) ≤ count(c) and
// Σ_{c,p} tasks_s(p)·z(c, p) ≤ count(s). Columns are generated: from the duals (π_c of the class
// rows, μ_s of the shape rows) each class's pricing problem, max over p of Σ_s (value_s − μ_s)·
// tasks_s(p), is solved by the exact search over one node of c (config_pricing.h) or as the
// PlacementMip of one node of c by CBC; a configuration whose value exceeds π_c enters the
// master, re-solved by GLPK.
//
// The bound is Lagrangian (Farley's), whatever the solvers' tolerances and wherever the column
// generation stops: for any μ ≥ 0 and bounds U_c ≥ every configuration's Σ_s (value_s − μ_s)·
// tasks_s of class c, every placement holds at most Σ_s count_s·μ_s + Σ_c count_c·max(0, U_c)
// (relax the shape rows with μ: each node then takes its best configuration on its own). μ are
// GLPK's duals clipped to ≥ 0, U_c the pricing's bound; the smallest such bound over the iterations
// is kept. When no configuration prices out, it is the configuration LP's optimum (up to the
// tolerances, which only raise it).
class ConfigurationLp {
 public:
  ConfigurationLp(const std::vector<NodeClass>& classes, const std::vector<TaskShape>& shapes,
                  const ConfigurationOptions& options)
      : classes_(classes), shapes_(shapes), options_(options) {}

  // Known configurations of class c (such as the nodes' contents in a policy's fill), columns of
  // the master from its first solve on: good columns from the start give good first duals. Each
  // must fit one node of c (the caller's placements are checked when they are made).
  void AddKnown(size_t c, std::vector<int64_t> tasks) { known_.emplace_back(c, std::move(tasks)); }

  // A bound, in milli-GPU, on what tasks with `counts` of each shape can hold. Columns found for
  // earlier counts stay. Errors: a solver fails.
  Result<ConfigurationBound> UpperBoundMilli(const std::vector<int64_t>& counts) {
    ConfigurationBound out;
    long double requested = 0;
    for (size_t s = 0; s < shapes_.size(); ++s) {
      requested += static_cast<long double>(counts[s]) * Gpus(s);
    }
    long double best = requested;  // nothing holds more than what arrived
    if (lp_ == nullptr) CORRAL_RETURN_IF_ERROR(Start(counts));
    for (size_t s = 0; s < shapes_.size(); ++s) {
      glp_set_row_bnds(lp_.get(), ShapeRow(s), GLP_UP, 0.0, static_cast<double>(counts[s]));
    }
    using Clock = std::chrono::steady_clock;
    const std::optional<Clock::time_point> deadline =
        options_.time_limit_s
            ? std::optional(Clock::now() +
                            std::chrono::duration_cast<Clock::duration>(
                                std::chrono::duration<double>(*options_.time_limit_s)))
            : std::nullopt;
    const auto past_deadline = [&] { return deadline && Clock::now() >= *deadline; };
    out.stop = ConfigurationStop::kIterations;
    for (out.iterations = 1; out.iterations <= options_.max_iterations; ++out.iterations) {
      if (past_deadline()) {
        out.stop = ConfigurationStop::kTimeLimit;
        break;
      }
      glp_smcp parm;
      glp_init_smcp(&parm);
      parm.msg_lev = GLP_MSG_OFF;
      if (glp_simplex(lp_.get(), &parm) != 0 || glp_get_status(lp_.get()) != GLP_OPT) {
        glp_std_basis(lp_.get());  // the previous basis did not serve: start afresh once
        if (glp_simplex(lp_.get(), &parm) != 0 || glp_get_status(lp_.get()) != GLP_OPT) {
          return Status(StatusCode::kInternal, "bound: the configuration LP found no optimum");
        }
      }
      std::vector<double> mu(shapes_.size());
      long double bound = 0;
      for (size_t s = 0; s < shapes_.size(); ++s) {
        mu[s] = std::max(0.0, glp_get_row_dual(lp_.get(), ShapeRow(s)));
        bound += static_cast<long double>(counts[s]) * mu[s];
      }
      size_t added = 0;
      bool priced_out = true;  // every class's bound on its configurations ≤ its dual π_c
      bool complete = true;    // every class priced: `bound` is a bound
      for (size_t c = 0; c < classes_.size(); ++c) {
        if (past_deadline()) {
          complete = false;
          break;
        }
        auto priced = Price(c, counts, mu);
        if (!priced.ok()) return priced.status();
        // The pricing's bound, raised by a tolerance (CBC's, or the search's sums of doubles)
        // so it stays above the true maximum.
        const long double upper =
            priced->upper + kPricingTolerance * (1 + std::fabs(priced->upper));
        bound += static_cast<long double>(classes_[c].count) * std::max<long double>(0, upper);
        const double pi = glp_get_row_dual(lp_.get(), ClassRow(c));
        if (priced->value > pi + kReducedCostTolerance) {
          AddColumn(c, priced->tasks);
          ++added;
        }
        priced_out = priced_out && priced->upper <= pi + kReducedCostTolerance;
      }
      if (!complete) {
        out.stop = ConfigurationStop::kTimeLimit;
        break;
      }
      best = std::min(best, bound);
      if (added == 0) {
        // Without new columns the master and its duals stay: stop. A timed-out pricing may hide
        // a configuration its weak incumbent missed, so only proven bounds make it converged.
        out.stop = priced_out ? ConfigurationStop::kConverged : ConfigurationStop::kPricingCutOff;
        break;
      }
    }
    // Master solves that gave a bound (a time limit may stop one before its pricing ends).
    if (out.stop == ConfigurationStop::kTimeLimit) --out.iterations;
    out.iterations = std::min(out.iterations, options_.max_iterations);
    out.milli = static_cast<double>(best) * kGpuMilli;
    return out;
  }

 private:
  // CBC's bounds are taken as exact up to this relative tolerance (its primal and integer
  // tolerances are 1e-7 and 1e-6 on objectives of a few GPUs).
  static constexpr double kPricingTolerance = 1e-5;
  // A configuration enters only if its reduced cost exceeds this (GPUs).
  static constexpr double kReducedCostTolerance = 1e-6;

  double Gpus(size_t s) const {
    return static_cast<double>(shapes_[s].TotalMilli()) / static_cast<double>(kGpuMilli);
  }
  int ClassRow(size_t c) const { return static_cast<int>(c) + 1; }
  int ShapeRow(size_t s) const { return static_cast<int>(classes_.size() + s) + 1; }

  // The master with a column of one task per (class, shape) pair where the shape fits.
  Status Start(const std::vector<int64_t>& counts) {
    lp_.reset(glp_create_prob());
    glp_set_obj_dir(lp_.get(), GLP_MAX);
    glp_add_rows(lp_.get(), static_cast<int>(classes_.size() + shapes_.size()));
    for (size_t c = 0; c < classes_.size(); ++c) {
      glp_set_row_bnds(lp_.get(), ClassRow(c), GLP_UP, 0.0, static_cast<double>(classes_[c].count));
    }
    for (size_t s = 0; s < shapes_.size(); ++s) {
      glp_set_row_bnds(lp_.get(), ShapeRow(s), GLP_UP, 0.0, static_cast<double>(counts[s]));
    }
    for (size_t c = 0; c < classes_.size(); ++c) {
      for (size_t s = 0; s < shapes_.size(); ++s) {
        if (!shapes_[s].FitsOn(classes_[c])) continue;
        std::vector<int64_t> one(shapes_.size(), 0);
        one[s] = 1;
        AddColumn(c, one);
      }
    }
    for (const auto& [c, tasks] : known_) AddColumn(c, tasks);
    // GLPK aborts on an LP without columns; an empty configuration holds nothing.
    if (glp_get_num_cols(lp_.get()) == 0) {
      AddColumn(0, std::vector<int64_t>(shapes_.size(), 0));
    }
    return Status::Ok();
  }

  void AddColumn(size_t c, const std::vector<int64_t>& tasks) {
    const int col = glp_add_cols(lp_.get(), 1);
    std::vector<int> index = {0, ClassRow(c)};
    std::vector<double> value = {0, 1};
    double gpus = 0;
    for (size_t s = 0; s < shapes_.size(); ++s) {
      if (tasks[s] == 0) continue;
      index.push_back(ShapeRow(s));
      value.push_back(static_cast<double>(tasks[s]));
      gpus += static_cast<double>(tasks[s]) * Gpus(s);
    }
    glp_set_mat_col(lp_.get(), col, static_cast<int>(index.size()) - 1, index.data(), value.data());
    glp_set_col_bnds(lp_.get(), col, GLP_LO, 0.0, 0.0);
    glp_set_obj_coef(lp_.get(), col, gpus);
  }

  // Class c's pricing problem over the shapes that fit it, have tasks and a positive reduced
  // value (a configuration without the others is still one, and holds no less).
  Result<PlacementMip::Priced> Price(size_t c, const std::vector<int64_t>& counts,
                                     const std::vector<double>& mu) const {
    std::vector<TaskShape> kept;
    std::vector<double> value;
    std::vector<size_t> index;
    for (size_t s = 0; s < shapes_.size(); ++s) {
      const double reduced = Gpus(s) - mu[s];
      if (counts[s] == 0 || reduced <= 0 || !shapes_[s].FitsOn(classes_[c])) continue;
      kept.push_back(shapes_[s]);
      kept.back().count = counts[s];
      value.push_back(reduced);
      index.push_back(s);
    }
    Result<PlacementMip::Priced> priced = PlacementMip::Priced{};
    if (options_.pricing == ConfigurationPricing::kSearch) {
      std::vector<PricingShape> offered;
      for (size_t k = 0; k < kept.size(); ++k) {
        const TaskShape& t = kept[k];
        offered.push_back(PricingShape{t.gpus, t.gpu_milli, t.cpu, t.memory, t.count, value[k]});
      }
      const NodeClass& node = classes_[c];
      PricedConfiguration found = BestConfiguration(PricingNode{node.gpus, node.cpu, node.memory},
                                                    offered, options_.pricing_nodes);
      priced = PlacementMip::Priced{std::move(found.tasks), found.value, found.upper};
    } else {
      NodeClass one = classes_[c];
      one.count = 1;
      const PlacementMip mip(SingleNodes{{one}, {0}}, kept, value, std::nullopt);
      priced = mip.Price(options_.pricing_time_limit_s);
      if (!priced.ok()) return priced.status();
    }
    std::vector<int64_t> tasks(shapes_.size(), 0);
    for (size_t k = 0; k < kept.size(); ++k) tasks[index[k]] = priced->tasks[k];
    priced->tasks = std::move(tasks);
    return priced;
  }

  std::vector<NodeClass> classes_;
  std::vector<TaskShape> shapes_;
  ConfigurationOptions options_;
  std::vector<std::pair<size_t, std::vector<int64_t>>> known_;  // AddKnown's, added by Start
  std::unique_ptr<glp_prob, GlpkDelete> lp_;
};

// What both relaxations are built from: the node classes, the task shapes and their counts.
struct Relaxed {
  std::vector<NodeClass> classes;
  std::vector<TaskShape> shapes;
  std::vector<int64_t> counts;  // per shape
};

// Errors: as PlaceableMilliBound's (the sizes).
Result<Relaxed> RelaxedOf(const std::vector<model::Node>& nodes,
                          const std::vector<model::TaskResources>& tasks) {
  if (tasks.size() > kMaxBoundTasks) return InvalidArgument("bound: too many tasks");
  if (nodes.size() > kMaxBoundNodes) return InvalidArgument("bound: too many nodes");
  Relaxed out{ClassesOf(nodes), ShapesOf(tasks).shapes, {}};
  CORRAL_RETURN_IF_ERROR(CheckLpSize(out.classes, out.shapes));
  for (const auto& s : out.shapes) out.counts.push_back(s.count);
  return out;
}

}  // namespace

Result<double> PlaceableMilliBound(const std::vector<model::Node>& nodes,
                                   const std::vector<model::TaskResources>& tasks) {
  auto relaxed = RelaxedOf(nodes, tasks);
  if (!relaxed.ok()) return relaxed.status();
  return PlacementLp(relaxed->classes, relaxed->shapes).UpperBoundMilli(relaxed->counts);
}

std::string ConfigurationStopName(ConfigurationStop stop) {
  switch (stop) {
    case ConfigurationStop::kConverged:
      return "converged";
    case ConfigurationStop::kIterations:
      return "iteration cap";
    case ConfigurationStop::kTimeLimit:
      return "time limit";
    case ConfigurationStop::kPricingCutOff:
      return "pricing cut off";
  }
  return "unknown";
}

Result<ConfigurationBound> ConfigurationMilliBound(const std::vector<model::Node>& nodes,
                                                   const std::vector<model::TaskResources>& tasks,
                                                   const ConfigurationOptions& options) {
  auto relaxed = RelaxedOf(nodes, tasks);
  if (!relaxed.ok()) return relaxed.status();
  return ConfigurationLp(relaxed->classes, relaxed->shapes, options)
      .UpperBoundMilli(relaxed->counts);
}

Result<ExactOptimum> ExactPlaceableMilli(const std::vector<model::Node>& nodes,
                                         const std::vector<model::TaskResources>& tasks,
                                         double time_limit_s,
                                         const std::vector<TaskPlacements>& starts) {
  if (nodes.size() > kMaxExactNodes) {
    return InvalidArgument("exact: " + std::to_string(nodes.size()) +
                           " nodes, more than kMaxExactNodes = " + std::to_string(kMaxExactNodes));
  }
  if (tasks.size() > kMaxExactTasks) {
    return InvalidArgument("exact: " + std::to_string(tasks.size()) +
                           " tasks, more than kMaxExactTasks = " + std::to_string(kMaxExactTasks));
  }
  if (!(time_limit_s > 0 && time_limit_s <= kMaxExactSeconds)) {
    return InvalidArgument("exact: the time limit must be in (0, " +
                           std::to_string(static_cast<int>(kMaxExactSeconds)) + "] s");
  }
  // The LP's bound as a row: sound (no placement holds more), and it spares the search proving
  // what the relaxation already proves.
  auto bound = PlaceableMilliBound(nodes, tasks);
  if (!bound.ok()) return bound.status();
  const Shapes shapes = ShapesOf(tasks);
  std::vector<double> milli;
  for (const TaskShape& shape : shapes.shapes)
    milli.push_back(static_cast<double>(shape.TotalMilli()));
  const PlacementMip mip(SingleNodesOf(nodes), shapes.shapes, milli, std::floor(*bound + 1e-6));
  std::optional<PlacementMip::Start> best;
  for (const TaskPlacements& placement : starts) {
    auto start = mip.StartFrom(placement, shapes.of_task);
    if (!start.ok()) return start.status();
    if (!best || start->milli > best->milli) best = std::move(start).value();
  }
  return mip.Solve(time_limit_s, best ? &*best : nullptr);
}

// LPs per band of the curve: steps of a band between two of them take the later one's bound.
constexpr size_t kCheckpointsPerBand = 8;

std::set<size_t> BoundCheckpoints(const std::vector<FillStep>& steps) {
  if (steps.empty()) return {};
  std::set<size_t> checkpoints = {steps.size() - 1};
  for (int x : kFillReportLoads) {
    std::optional<size_t> first_exact, last_exact, first_near, last_near;
    size_t closest = 0;
    for (size_t t = 0; t < steps.size(); ++t) {
      const double pct = steps[t].arrived_pct;
      if (std::nearbyint(pct) == x) (first_exact ? last_exact : first_exact) = t;
      if (std::fabs(pct - x) <= 1.0) (first_near ? last_near : first_near) = t;
      if (std::fabs(pct - x) < std::fabs(steps[closest].arrived_pct - x)) closest = t;
    }
    size_t first = closest, last = closest;
    if (first_exact) {
      first = *first_exact, last = last_exact.value_or(first);
    } else if (first_near) {
      first = *first_near, last = last_near.value_or(first);
    }
    for (size_t i = 1; i <= kCheckpointsPerBand; ++i) {
      checkpoints.insert(first + (last - first) * i / kCheckpointsPerBand);
    }
  }
  return checkpoints;
}

namespace {

// The policies whose fills start the configuration LP (ConfigurationOptions::at_load).
const char* const kStartPolicies[] = {"fgd", "best", "bestfit"};

// Adds to `configuration`, as known configurations, each node's contents after the first
// `last` + 1 tasks of the fills of kStartPolicies (the same task list: RunFill presents what
// FillTasks draws), for each `last` of `lasts`. Errors: RunFill's.
Status AddPolicyConfigurations(const std::vector<model::Node>& nodes,
                               const std::vector<model::TaskResources>& original, uint64_t seed,
                               double tune, const std::vector<NodeClass>& classes,
                               const Shapes& shapes, const std::set<size_t>& lasts,
                               ConfigurationLp& configuration) {
  std::vector<std::optional<size_t>> class_of(nodes.size());
  for (size_t n = 0; n < nodes.size(); ++n) {
    const model::Node& node = nodes[n];
    const NodeClass key{node.gpu_model, static_cast<int64_t>(node.gpus.size()), node.cpu.value(),
                        node.memory.value(), 0};
    for (size_t c = 0; c < classes.size(); ++c) {
      if (classes[c].Key() == key.Key()) class_of[n] = c;
    }
  }
  std::set<std::pair<size_t, std::vector<int64_t>>> known;
  for (const char* policy : kStartPolicies) {
    auto fill =
        RunFill(nodes, original,
                FillConfig{.policy = policy, .seed = seed, .tune = tune, .keep_placements = true});
    if (!fill.ok()) return fill.status();
    std::map<size_t, std::vector<int64_t>> contents;  // node → tasks per shape
    for (size_t t = 0; !lasts.empty() && t <= *lasts.rbegin(); ++t) {
      const auto& placed = t < fill->placements.size() ? fill->placements[t] : std::nullopt;
      if (placed && shapes.of_task[t] && class_of[placed->node]) {
        auto [it, added] = contents.try_emplace(placed->node, shapes.shapes.size(), 0);
        ++it->second[*shapes.of_task[t]];
      }
      if (!lasts.contains(t)) continue;
      for (const auto& [node, tasks] : contents) known.emplace(*class_of[node], tasks);
    }
  }
  for (const auto& [c, tasks] : known) configuration.AddKnown(c, tasks);
  return Status::Ok();
}

// RunFillBound's and RunFillBounds' curves; the configuration LP's only with `options`.
Result<FillBounds> FillBoundCurves(const std::vector<model::Node>& nodes,
                                   const std::vector<model::TaskResources>& original, uint64_t seed,
                                   double tune,
                                   const std::optional<ConfigurationOptions>& options) {
  const auto start = std::chrono::steady_clock::now();
  if (nodes.size() > kMaxBoundNodes) return InvalidArgument("bound: too many nodes");
  if (original.size() > kMaxBoundTasks) return InvalidArgument("bound: too many tasks");
  // Before tuning: the tuned list's shapes are some of the original's.
  const std::vector<NodeClass> classes = ClassesOf(nodes);
  CORRAL_RETURN_IF_ERROR(CheckLpSize(classes, ShapesOf(original).shapes));
  sched::ClusterState state(sched::ClusterStateOptions{});
  auto list = FillTasks(nodes, original, seed, tune, state);
  if (!list.ok()) return list.status();
  const int64_t capacity = list->capacity_milli;
  const std::vector<model::TaskResources>& tasks = list->tasks;
  if (tasks.size() > kMaxBoundTasks) return InvalidArgument("bound: too many tasks");

  FillBounds out;
  FillResult& result = out.lp;
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

  const std::set<size_t> checkpoints = BoundCheckpoints(result.steps);

  out.configuration = result;
  out.configuration.policy = "config_bound";
  const Shapes shapes = ShapesOf(tasks);
  PlacementLp lp(classes, shapes.shapes);
  std::optional<ConfigurationLp> configuration;
  if (options) configuration.emplace(classes, shapes.shapes, *options);
  std::vector<int64_t> counts(shapes.shapes.size(), 0);
  auto unallocated = [&](double held) {
    // At 0 where the dual bound's rounding lands a hair above capacity.
    return std::max(0.0, 100.0 - 100.0 * held / static_cast<double>(capacity));
  };
  auto solve = [&](size_t t, const std::vector<int64_t>& at,
                   std::optional<int> load) -> Result<double> {
    auto config = configuration->UpperBoundMilli(at);
    if (!config.ok()) return config.status();
    const double arrived_milli = static_cast<double>(arrived[t]);
    out.solves.push_back(ConfigurationSolve{load, t, result.steps[t].arrived_pct,
                                            unallocated(std::min(arrived_milli, config->milli)),
                                            *config});
    return config->milli;
  };
  // With at_loads, the checkpoints the configuration LP is solved at (each for the largest load
  // that names it), and from each step on, the smallest of their bounds that holds for it (those
  // at or after it: OPT_t ≤ OPT_k for t ≤ k).
  std::map<size_t, int> chosen;
  std::vector<double> held_after;
  if (configuration && !options->at_loads.empty()) {
    for (int load : std::set<int>(options->at_loads.begin(), options->at_loads.end())) {
      std::optional<size_t> only;
      for (size_t t : checkpoints) {
        if (std::nearbyint(result.steps[t].arrived_pct) <= load) only = t;
      }
      if (only) chosen[*only] = load;
    }
    std::set<size_t> lasts;
    for (const auto& [t, load] : chosen) lasts.insert(t);
    CORRAL_RETURN_IF_ERROR(AddPolicyConfigurations(nodes, original, seed, tune, classes, shapes,
                                                   lasts, *configuration));
    std::vector<int64_t> at(shapes.shapes.size(), 0);
    std::vector<std::pair<size_t, double>> solved;
    size_t next = 0;
    for (const auto& [t, load] : chosen) {
      for (; next <= t; ++next) {
        if (shapes.of_task[next]) ++at[*shapes.of_task[next]];
      }
      auto milli = solve(t, at, load);
      if (!milli.ok()) return milli.status();
      solved.emplace_back(t, *milli);
    }
    held_after.assign(tasks.size(), std::numeric_limits<double>::infinity());
    double smallest = std::numeric_limits<double>::infinity();
    size_t t = tasks.size();
    for (auto it = solved.rbegin(); it != solved.rend(); ++it) {
      for (; t > it->first + 1; --t) held_after[t - 1] = smallest;
      smallest = std::min(smallest, it->second);
    }
    for (; t > 0; --t) held_after[t - 1] = smallest;
  }
  size_t from = 0;
  for (size_t t = 0; t < tasks.size(); ++t) {
    if (shapes.of_task[t]) ++counts[*shapes.of_task[t]];
    if (!checkpoints.contains(t)) continue;
    auto ub = lp.UpperBoundMilli(counts);
    if (!ub.ok()) return ub.status();
    double tighter = *ub;
    if (configuration && options->at_loads.empty()) {
      auto milli = solve(t, counts, std::nullopt);
      if (!milli.ok()) return milli.status();
      tighter = std::min(tighter, *milli);
    }
    for (; from <= t; ++from) {
      const double arrived_milli = static_cast<double>(arrived[from]);
      const double config_milli =
          held_after.empty() ? tighter : std::min(tighter, held_after[from]);
      result.steps[from].unallocated_pct = unallocated(std::min(arrived_milli, *ub));
      out.configuration.steps[from].unallocated_pct =
          unallocated(std::min(arrived_milli, config_milli));
    }
  }
  result.wall_ms =
      std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  out.configuration.wall_ms = result.wall_ms;
  return out;
}

}  // namespace

Result<FillResult> RunFillBound(const std::vector<model::Node>& nodes,
                                const std::vector<model::TaskResources>& original, uint64_t seed,
                                double tune) {
  auto curves = FillBoundCurves(nodes, original, seed, tune, std::nullopt);
  if (!curves.ok()) return curves.status();
  return std::move(curves->lp);
}

Result<FillBounds> RunFillBounds(const std::vector<model::Node>& nodes,
                                 const std::vector<model::TaskResources>& original, uint64_t seed,
                                 double tune, const ConfigurationOptions& options) {
  return FillBoundCurves(nodes, original, seed, tune, options);
}

}  // namespace corral::sim
