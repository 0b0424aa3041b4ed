// best: corral's recommended placement (docs/placement.md). FGD's fragmentation gradient
// (fgd_policy.cc) plus CPU- and memory-stranding terms. FGD counts a node's free GPUs as lost
// only when no typical task fits there any more; on the openb trace the tasks that fail under
// FGD fail mostly for CPU, and under the CPU term alone mostly for memory: the 8-GPU nodes have
// 12 cores and 48 GiB per GPU, GPU tasks ask ~11 cores and ~42 GiB per GPU, and tasks placed
// there on FGD's ties leave GPUs that no later task can get cores or memory for. So free GPU
// milli that the node's free CPU (memory) cannot back at the typical tasks' CPU (memory) per
// GPU milli c (m) counts as stranded, S_cpu = max(0, gpu_free − cpu_free / c), S_mem likewise,
// and
//   Δ = Σ_m w_m (F(node, m) before − after) / Σ_m w_m
//       − cpu_weight × (S_cpu after − before) − memory_weight × (S_mem after − before)
//       − usable_weight × (U after − before);
//   w_m = count_m × demand_m^demand_exp;   score = ⌊levels / (1 + e^(−Δ/scale))⌋.
// U = Σ_m w_m (free GPU milli that m cannot use: more than the node can host of m at once by its
// GPUs, CPU and memory) / Σ_m w_m: at its small default weight it mostly breaks F's ties toward
// the node whose free capacity the typical tasks can still use.
// The stranding rule (session 43) works after the sigmoid: a GPU remainder f (0 < f < 1000) is
// stranded when the typical single-GPU shares that fit in f are under strand_share of the typical
// GPU tasks on its model, and the score loses strand_levels points per 1000 stranded milli added:
// a share that would strand a fraction goes to the best node (or GPU) that does not, unless that
// one is more than the penalty behind. Unlike the Δ terms it is not squashed by the sigmoid, so it
// can overrule F by a fixed margin. Session 44 blends in a lookahead (strand_expect): the points
// are lost per 1000 milli of expected waste added, the stranded milli blended with the waste a
// remainder is expected to end with when typical tasks fill it one after another (ResolveWaste).
// GPU choice is FGD's: a share goes on the GPU that scores best (lowest index on ties); whole
// GPUs are the lowest-index fully free ones. Without a workload profile it scores as bestfit.
#include "sched/policies/best_policy.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <iterator>
#include <limits>
#include <sstream>

#include "common/strings.h"
#include "sched/policies/policies.h"

namespace corral::sched {
namespace {

constexpr int32_t kFullMilli = 1000;  // a whole GPU (model::TaskResources::gpu_milli)

// Typical tasks reweighed by demand; weights are integers (× 1000) so that the meter's sums
// stay exact and equal states score equally.
std::vector<TypicalTask> Reweigh(std::vector<TypicalTask> typical, double demand_exp) {
  for (TypicalTask& t : typical) {
    const double demand = t.gpus * t.gpu_milli / 1000.0;
    t.count = std::llround(static_cast<double>(t.count) * 1000.0 * std::pow(demand, demand_exp));
  }
  return typical;
}

// CPU milli (`resource` = &TypicalTask::cpu) or memory MiB (&TypicalTask::memory) the typical
// GPU tasks ask per GPU milli (0 when none asks a GPU).
double PerGpuMilli(const std::vector<TypicalTask>& typical, int64_t TypicalTask::*resource) {
  double asked = 0, milli = 0;
  for (const TypicalTask& t : typical) {
    if (t.gpus == 0) continue;
    asked += static_cast<double>(t.count) * static_cast<double>(t.*resource);
    milli += static_cast<double>(t.count) * t.gpus * t.gpu_milli;
  }
  return milli > 0 ? asked / milli : 0;
}

// Fully free GPUs (kFullMilli free).
int FullFree(const std::vector<int32_t>& free) {
  return static_cast<int>(std::count(free.begin(), free.end(), kFullMilli));
}

// Free GPU milli that `free` (CPU milli or memory MiB) cannot back at `per_milli` per GPU milli.
double Stranded(int64_t gpu_free, int64_t free, double per_milli) {
  if (per_milli <= 0) return 0;
  return std::max(0.0, static_cast<double>(gpu_free) - static_cast<double>(free) / per_milli);
}

class BestPolicy final : public PlacementPolicy {
 public:
  BestPolicy(const std::vector<TypicalTask>& typical, const BestParams& params)
      : params_(params),
        meter_(Reweigh(typical, params.demand_exp)),
        cpu_per_milli_(PerGpuMilli(typical, &TypicalTask::cpu)),
        memory_per_milli_(PerGpuMilli(typical, &TypicalTask::memory)) {}

  std::string_view name() const override { return "best"; }

  void OnModelsChanged(const ClusterState& state) override {
    meter_.Resolve(state);
    ResolveStrandBelow(state.ModelCount());
  }

  int Score(const NodeView& node, const TaskRequest& task) const override {
    if (meter_.total_count() == 0) return BestFitScore(node, task);  // no workload profile
    const bool in_use = node.cpu_free < node.cpu_total ||
                        node.gpu_free_total < static_cast<int64_t>(node.gpu_count()) * kFullMilli;
    return (in_use ? params_.used_bonus : 0) + GradientScore(node, task);
  }

  // waste_ of `model` (ExpectedWasteTable).
  const std::vector<double>& WasteTable(int model) const { return waste_.at(model); }

  std::vector<int> ChooseGpus(const NodeView& node, const TaskRequest& task,
                              Rng& /*rng*/) const override {
    if (!task.IsShare() || meter_.total_count() == 0) return TightestFitGpus(node, task);
    const int gpu = BestShareGpu(node, task).gpu;
    return gpu < 0 ? std::vector<int>{} : std::vector<int>{gpu};
  }

 private:
  // FGD's scoring, without the bonus: a share is tried on each distinct free amount that fits.
  int GradientScore(const NodeView& node, const TaskRequest& task) const {
    if (!task.IsShare()) return ScoreAfter(node, meter_.Weighted(node), task, -1);
    return BestShareGpu(node, task).score;
  }

  struct ShareChoice {
    int score = std::numeric_limits<int>::min();  // scores go below 0 with the stranding rule
    int gpu = -1;  // lowest index among the best-scoring GPUs; -1 when none fits
  };

  // The GPU whose share scores best (GPUs with equal free milli score equally: one try each).
  ShareChoice BestShareGpu(const NodeView& node, const TaskRequest& task) const {
    const int64_t before = meter_.Weighted(node);
    std::vector<std::pair<int32_t, int>> tried;  // (free milli, score)
    ShareChoice best;
    for (int i = 0; i < node.gpu_count(); ++i) {
      const int32_t f = (*node.gpu_free)[i];
      if (f < task.gpu_milli) continue;
      auto seen =
          std::find_if(tried.begin(), tried.end(), [f](const auto& t) { return t.first == f; });
      const int score = seen != tried.end() ? seen->second : ScoreAfter(node, before, task, f);
      if (seen == tried.end()) tried.emplace_back(f, score);
      if (score > best.score) best = ShareChoice{score, i};
    }
    return best;
  }

  // The node's free GPUs after the task: a share from the GPU with `share_from` free milli
  // (-1: whole GPUs, the lowest-index fully free ones; CPU-only tasks take none).
  static std::vector<int32_t> FreeAfter(const NodeView& node, const TaskRequest& task,
                                        int32_t share_from) {
    std::vector<int32_t> after = *node.gpu_free;
    if (share_from >= 0) {
      *std::find(after.begin(), after.end(), share_from) -= task.gpu_milli;
      return after;
    }
    int needed = task.gpus;
    for (auto it = after.begin(); needed > 0 && it != after.end(); ++it) {
      if (*it == kFullMilli) *it = 0, --needed;
    }
    return after;
  }

  int ScoreAfter(const NodeView& node, int64_t before, const TaskRequest& task,
                 int32_t share_from) const {
    const std::vector<int32_t> after = FreeAfter(node, task, share_from);
    NodeView next = node;
    next.gpu_free = &after;
    next.gpu_free_total =
        node.gpu_free_total -
        (share_from >= 0 ? task.gpu_milli : static_cast<int64_t>(task.gpus) * kFullMilli);
    next.cpu_free = node.cpu_free - task.cpu;
    next.memory_free = node.memory_free - task.memory;
    const double delta = static_cast<double>(before - meter_.Weighted(next)) /
                             static_cast<double>(meter_.total_count()) -
                         params_.cpu_weight * (CpuStranded(next) - CpuStranded(node)) -
                         params_.memory_weight * (MemoryStranded(next) - MemoryStranded(node)) -
                         params_.usable_weight * (Unusable(next) - Unusable(node));
    const double added_waste = (ExpectedWaste(next) - ExpectedWaste(node)) / kFullMilli;
    return static_cast<int>(std::floor(params_.levels / (1.0 + std::exp(-delta / params_.scale)) -
                                       params_.strand_levels * added_waste));
  }

  // Per model, the free milli below which a GPU's remainder is stranded (BestParams::
  // strand_share): the smallest typical share milli at which the single-GPU shares up to it
  // reach strand_share of the typical GPU tasks running on the model (kFullMilli when they
  // never do; 0 when the rule is off or no typical GPU task runs there). Then the waste the
  // rule counts per free amount (ResolveWaste).
  void ResolveStrandBelow(int models) {
    strand_below_.assign(models, 0);
    waste_.assign(models, std::vector<double>(kFullMilli + 1, 0.0));
    if (params_.strand_levels == 0) return;
    for (int m = 0; m < models; ++m) {
      auto runs = [m](const FragmentationMeter::Shape& s) {
        return s.gpus > 0 &&
               (s.any_model || (m < static_cast<int>(s.accepts.size()) && s.accepts[m]));
      };
      int64_t total = 0;
      for (const FragmentationMeter::Shape& s : meter_.shapes()) total += runs(s) ? s.count : 0;
      if (total == 0) continue;
      strand_below_[m] = kFullMilli;
      int64_t fits = 0;  // shapes() is by gpu_milli ascending
      for (const FragmentationMeter::Shape& s : meter_.shapes()) {
        if (s.gpus != 1 || s.gpu_milli >= kFullMilli || !runs(s)) continue;
        fits += s.count;
        if (static_cast<double>(fits) >= params_.strand_share * static_cast<double>(total)) {
          strand_below_[m] = s.gpu_milli;
          break;
        }
      }
      ResolveWaste(m, runs);
    }
  }

  // waste_[m][f]: the milli a GPU of model m with f free is expected to end with, blended by
  // strand_expect between the threshold rule (f when stranded, else 0) and a lookahead: a
  // stranded remainder is wasted whole; any other is filled by a typical task drawn by count
  // among those that fit it (single-GPU shares; a whole-GPU task fills a free GPU), and its
  // expected waste is the mean over them of what each leaves (f when none fits).
  template <typename Runs>
  void ResolveWaste(int m, const Runs& runs) {
    std::vector<double> expected(kFullMilli + 1, 0.0);
    for (int f = 1; f <= kFullMilli; ++f) {
      double weight = 0, sum = 0;
      if (f >= strand_below_[m]) {
        for (const FragmentationMeter::Shape& s : meter_.shapes()) {
          if (!runs(s) || s.gpu_milli > f || (s.gpu_milli < kFullMilli && s.gpus != 1)) continue;
          weight += static_cast<double>(s.count);
          sum += static_cast<double>(s.count) *
                 (s.gpu_milli < kFullMilli ? expected[f - s.gpu_milli] : 0.0);
        }
      }
      expected[f] = weight > 0 ? sum / weight : f;
    }
    const double a = params_.strand_expect;
    for (int f = 1; f < kFullMilli; ++f) {
      waste_[m][f] = (1 - a) * (f < strand_below_[m] ? f : 0) + a * expected[f];
    }
    waste_[m][kFullMilli] = a * expected[kFullMilli];
  }

  // The expected waste of the node's free GPUs, summed (waste_; the stranded milli at
  // strand_expect=0).
  double ExpectedWaste(const NodeView& node) const {
    if (node.model < 0 || node.model >= static_cast<int>(waste_.size())) return 0;
    const std::vector<double>& waste = waste_[node.model];
    double sum = 0;
    for (int32_t f : *node.gpu_free) sum += waste[std::clamp<int32_t>(f, 0, kFullMilli)];
    return sum;
  }

  // The unusable-capacity measure (BestParams::usable_weight), in milli-GPU: per typical shape,
  // the node's free GPU milli that no more tasks of that shape could use, weighted by count.
  // Two known simplifications: a share shape (gpu_milli < kFullMilli) with gpus > 1 is counted
  // as Σ f / gpu_milli tasks over the free shares f, as if each task took one GPU's share; and
  // a CPU-only typical shape (gpus == 0) counts all the node's free GPU milli as unusable, a
  // constant shift over the candidate nodes of one task, which acts only through the score's
  // rounding.
  double Unusable(const NodeView& node) const {
    if (params_.usable_weight == 0 || node.gpu_free_total == 0) return 0;
    const std::vector<int32_t>& free = *node.gpu_free;
    const int full = FullFree(free);
    int64_t sum = 0;
    for (const FragmentationMeter::Shape& s : meter_.shapes()) {
      const bool runs = s.gpus > 0 && node.model >= 0 &&
                        (s.any_model || (node.model < static_cast<int>(s.accepts.size()) &&
                                         s.accepts[node.model]));
      int64_t units = 0;
      if (runs) {
        if (s.gpu_milli < kFullMilli) {
          for (int32_t f : free) units += f / s.gpu_milli;
        } else {
          units = full / s.gpus;
        }
        if (s.cpu > 0) units = std::min(units, node.cpu_free / s.cpu);
        const int64_t memory = meter_.typical()[s.typical].memory;
        if (memory > 0) units = std::min(units, node.memory_free / memory);
      }
      const int64_t usable =
          std::min(node.gpu_free_total, units * s.gpus * static_cast<int64_t>(s.gpu_milli));
      sum += s.count * (node.gpu_free_total - usable);
    }
    return static_cast<double>(sum) / static_cast<double>(meter_.total_count());
  }

  double CpuStranded(const NodeView& node) const {
    return Stranded(node.gpu_free_total, node.cpu_free, cpu_per_milli_);
  }
  double MemoryStranded(const NodeView& node) const {
    return Stranded(node.gpu_free_total, node.memory_free, memory_per_milli_);
  }

  BestParams params_;
  FragmentationMeter meter_;
  double cpu_per_milli_;
  double memory_per_milli_;
  std::vector<int32_t> strand_below_;       // by model id (ResolveStrandBelow)
  std::vector<std::vector<double>> waste_;  // by model id, then free milli (ResolveWaste)
};

// The real-valued keys of ParseBestParams and their bounds (levels and used_bonus are integers).
struct RealKey {
  std::string_view name;
  double low, high;
  double BestParams::*field;
};
constexpr RealKey kRealKeys[] = {
    {"demand_exp", 0, 3, &BestParams::demand_exp},
    {"scale", 10, 100000, &BestParams::scale},
    {"cpu_weight", 0, 100, &BestParams::cpu_weight},
    {"memory_weight", 0, 100, &BestParams::memory_weight},
    {"usable_weight", 0, 100, &BestParams::usable_weight},
    {"strand_levels", 0, 1000, &BestParams::strand_levels},
    {"strand_share", 0, 1, &BestParams::strand_share},
    {"strand_expect", 0, 1, &BestParams::strand_expect},
};

Status CheckRange(std::string_view key, double value, double low, double high) {
  if (value >= low && value <= high) return Status();
  std::ostringstream s;
  s << key << " must be in [" << low << ", " << high << "], got " << value;
  return InvalidArgument(s.str());
}

}  // namespace

Result<BestParams> ParseBestParams(std::string_view text) {
  BestParams p;
  if (Trim(text).empty()) return p;
  for (const std::string& item : Split(text, ',')) {
    const size_t eq = item.find('=');
    const std::string key = Trim(item.substr(0, eq));
    if (eq == std::string::npos) {
      return InvalidArgument("'" + item + "' is not key=value");
    }
    const std::string value_text = Trim(item.substr(eq + 1));
    double value = 0;
    auto [end, ec] =
        std::from_chars(value_text.data(), value_text.data() + value_text.size(), value);
    if (ec != std::errc() || end != value_text.data() + value_text.size()) {
      return InvalidArgument(key + " is not a number: '" + value_text + "'");
    }
    const auto real = std::find_if(std::begin(kRealKeys), std::end(kRealKeys),
                                   [&key](const RealKey& k) { return k.name == key; });
    if (real != std::end(kRealKeys)) {
      CORRAL_RETURN_IF_ERROR(CheckRange(key, value, real->low, real->high));
      p.*(real->field) = value;
    } else if (key == "levels" || key == "used_bonus") {
      const bool levels = key == "levels";
      CORRAL_RETURN_IF_ERROR(CheckRange(key, value, levels ? 2 : 0, 1000000));
      if (value != std::floor(value)) {
        return InvalidArgument(key + " must be an integer, got " + value_text);
      }
      (levels ? p.levels : p.used_bonus) = static_cast<int>(value);
    } else {
      std::string known = "levels, used_bonus";
      for (const RealKey& k : kRealKeys) known.append(", ").append(k.name);
      return InvalidArgument("unknown key '" + key + "' (known: " + known + ")");
    }
  }
  return p;
}

std::string FormatBestParams(const BestParams& p) {
  std::ostringstream s;
  s << "demand_exp=" << p.demand_exp << ",scale=" << p.scale << ",levels=" << p.levels
    << ",used_bonus=" << p.used_bonus << ",cpu_weight=" << p.cpu_weight
    << ",memory_weight=" << p.memory_weight << ",usable_weight=" << p.usable_weight
    << ",strand_levels=" << p.strand_levels << ",strand_share=" << p.strand_share
    << ",strand_expect=" << p.strand_expect;
  return s.str();
}

std::vector<double> ExpectedWasteTable(const std::vector<TypicalTask>& typical,
                                       const BestParams& params, const ClusterState& state,
                                       int model) {
  BestPolicy policy(typical, params);
  policy.OnModelsChanged(state);
  return policy.WasteTable(model);
}

std::unique_ptr<PlacementPolicy> MakeBestPolicy(const PolicyContext& context) {
  return std::make_unique<BestPolicy>(context.typical_tasks, context.best);
}

}  // namespace corral::sched
