#include "sim/sim_command.h"

#include <array>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <iostream>
#include <limits>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "common/strings.h"
#include "predict/demand_forecast.h"
#include "sched/placement_policy.h"
#include "sched/policy_config.h"
#include "sched/scheduler.h"
#include "sim/fill.h"
#include "sim/fill_bound.h"
#include "sim/fill_tightness.h"
#include "sim/generator.h"
#include "sim/predict_eval.h"
#include "sim/replay.h"
#include "sim/report.h"
#include "sim/sharing_file.h"
#include "sim/trace.h"

namespace corral::sim {

namespace {

constexpr int kExitRunFailed = 1;
constexpr int kExitBadInput = 2;

// Prints a report as JSON. Traces are read as bytes, so names from them (a Helios vc, an openb
// pod name) need not be UTF-8: such bytes are written as U+FFFD rather than ending the run.
void PrintJson(const nlohmann::json& report) {
  std::cout << report.dump(2, ' ', false, nlohmann::json::error_handler_t::replace) << "\n";
}

// --policy's help: the registered names, and which one a cluster uses unless told otherwise.
std::string PolicyHelp() {
  std::string names;
  for (const std::string& name : sched::PolicyNames()) names += (names.empty() ? "" : ", ") + name;
  return "Placement policies, comma-separated, or 'all': " + names +
         " (best is corral's own and the server's default; docs/placement.md)";
}

// Splits "a,b,c"; "all" expands to every registered policy.
Result<std::vector<std::string>> ParsePolicies(const std::string& text) {
  if (text == "all") return sched::PolicyNames();
  std::vector<std::string> out;
  std::vector<std::string> known = sched::PolicyNames();
  for (size_t start = 0; start <= text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    std::string name = text.substr(start, comma - start);
    if (std::find(known.begin(), known.end(), name) == known.end()) {
      auto probe = sched::CreatePolicy(name, {});
      return InvalidArgument("--policy: " + probe.status().message());
    }
    out.push_back(name);
    start = comma + 1;
  }
  return out;
}

// The most seeds `--seeds` may name, all its parts together (`--seeds 0-10000`).
constexpr uint64_t kMaxSeeds = 10001;

// "42-51", "42,45,50" or "7". Errors quote the part as typed ("-3", "42-") and say what is wrong:
// not a number, an empty range, more than kMaxSeeds seeds in all, a seed named twice.
Result<std::vector<uint64_t>> ParseSeeds(const std::string& text) {
  auto number = [](const std::string& s) -> std::optional<uint64_t> {
    if (s.empty() || s.find_first_not_of("0123456789") != std::string::npos || s.size() > 18) {
      return std::nullopt;
    }
    return std::stoull(s);
  };
  std::vector<uint64_t> out;
  std::map<uint64_t, std::string> part_of;  // seed -> the part that named it
  for (size_t start = 0; start <= text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    const size_t dash = part.find('-');
    const auto lo = number(part.substr(0, dash));
    const auto hi = dash == std::string::npos ? lo : number(part.substr(dash + 1));
    if (!lo || !hi) {
      return InvalidArgument("--seeds: '" + part +
                             "' is not a seed or a range LO-HI of non-negative integers (e.g. "
                             "42-51 or 42,45,50)");
    }
    if (*hi < *lo) {
      return InvalidArgument("--seeds: range '" + part + "' is empty (" + std::to_string(*hi) +
                             " < " + std::to_string(*lo) + ")");
    }
    // Checked before the seeds are listed: `0-10000,0-10000,...` must not list billions.
    if (*hi - *lo >= kMaxSeeds - out.size()) {
      const std::string most = std::to_string(kMaxSeeds);
      if (out.empty()) {
        return InvalidArgument("--seeds: range '" + part + "' names more than " + most + " seeds");
      }
      return InvalidArgument("--seeds: '" + text + "' names more than " + most +
                             " seeds in all ('" + part + "' goes past it)");
    }
    for (uint64_t s = *lo; s <= *hi; ++s) {
      const auto [named, inserted] = part_of.try_emplace(s, part);
      if (!inserted) {
        return InvalidArgument("--seeds: seed " + std::to_string(s) + " is named twice ('" +
                               named->second + "' and '" + part + "')");
      }
      out.push_back(s);
    }
    start = comma + 1;
  }
  return out;
}

int Fail(const Status& status, int code) {
  std::cerr << "corral sim: " << status.message() << "\n";
  return code;
}

// The largest GPU count of any node: gangs in Tiresias traces split at this size.
int MaxGpusPerNode(const std::vector<model::Node>& nodes) {
  size_t max = 1;
  for (const auto& n : nodes) max = std::max(max, n.gpus.size());
  return static_cast<int>(max);
}

Result<Trace> LoadTrace(const std::string& path, const std::string& format,
                        const std::vector<model::Node>& nodes) {
  auto f = format.empty() ? DetectTraceFormat(path) : ParseTraceFormat(format);
  if (!f.ok()) return f.status();
  return ReadTrace(path, *f, MaxGpusPerNode(nodes));
}

// The flags `sim fill` and `sim bound` share: the cluster, the workload, its seeds and tuning.
struct FillInputFlags {
  std::string nodes, pods, seeds = "42-51";
  double tune = 1.3;
};

void AddFillInputOptions(CLI::App* app, FillInputFlags& flags) {
  app->add_option("--nodes", flags.nodes, "Node list: openb CSV, nodes .jsonl, or gen:SPEC")
      ->required();
  app->add_option("--pods", flags.pods, "Tasks: openb pod CSV or any trace format")->required();
  app->add_option("--seeds", flags.seeds,
                  "Seeds, one run each: LO-HI, a comma list, or both (42-51,60)")
      ->capture_default_str();
  app->add_option("--tune", flags.tune,
                  "Tune the workload to this multiple of GPU capacity, in (0, 10]")
      ->capture_default_str();
}

struct FillFlags {
  FillInputFlags input;
  std::string policy = "all", out, output = "table", best_params;
  int threads = 0;
};

// What `sim fill` and `sim bound` read: the nodes, one entry per task of the workload, the seeds.
struct FillInputs {
  std::vector<model::Node> nodes;
  std::vector<model::TaskResources> tasks;
  std::vector<uint64_t> seeds;
};

Result<FillInputs> LoadFillInputs(const FillInputFlags& f) {
  FillInputs in;
  auto nodes = LoadNodes(f.nodes);
  if (!nodes.ok()) return nodes.status();
  in.nodes = std::move(nodes).value();
  auto trace = LoadTrace(f.pods, "", in.nodes);
  if (!trace.ok()) return trace.status();
  auto seeds = ParseSeeds(f.seeds);
  if (!seeds.ok()) return seeds.status();
  in.seeds = std::move(seeds).value();
  if (!(f.tune > 0 && f.tune <= 10)) return InvalidArgument("--tune: must be in (0, 10]");
  for (const auto& j : trace->jobs) {
    for (int t = 0; t < j.job.tasks; ++t) in.tasks.push_back(j.job.resources);
  }
  if (in.tasks.empty()) return InvalidArgument("--pods: " + f.pods + " holds no tasks");
  return in;
}

int RunFillCommand(const FillFlags& f) {
  auto in = LoadFillInputs(f.input);
  if (!in.ok()) return Fail(in.status(), kExitBadInput);
  auto policies = ParsePolicies(f.policy);
  if (!policies.ok()) return Fail(policies.status(), kExitBadInput);
  if (!f.best_params.empty() &&
      std::find(policies->begin(), policies->end(), "best") == policies->end()) {
    return Fail(InvalidArgument("--best-params: only the best policy has these parameters, and "
                                "--policy " +
                                f.policy + " does not run it"),
                kExitBadInput);
  }
  auto best = sched::ParseBestParams(f.best_params);
  if (!best.ok()) {
    return Fail(Status(best.status().code(), "--best-params: " + best.status().message()),
                kExitBadInput);
  }
  auto results =
      RunFillMatrix(in->nodes, in->tasks, *policies, in->seeds, f.input.tune, f.threads, *best);
  if (!results.ok()) return Fail(results.status(), kExitRunFailed);
  // Research runs say which parameters best ran with, so that their outputs are not mistaken for
  // the shipped policy's.
  const std::string best_params = f.best_params.empty() ? "" : sched::FormatBestParams(*best);
  if (f.output == "json") {
    nlohmann::json report = FillJson(*results);
    if (!best_params.empty()) report["best_params"] = best_params;
    PrintJson(report);
  } else {
    std::cout << "fill: " << in->nodes.size() << " nodes, " << in->tasks.size() << " tasks from "
              << f.input.pods << ", seeds " << f.input.seeds << ", tuned to " << f.input.tune * 100
              << "% of GPU capacity"
              << (best_params.empty() ? "" : "; best with --best-params " + best_params) << "\n"
              << FillTable(*results);
  }
  if (!f.out.empty()) {
    Status s = WriteFillOutputs(*results, f.out);
    if (!s.ok()) return Fail(s, kExitRunFailed);
  }
  return 0;
}

// "0.25,0.5": numbers in [lo, hi]; errors name the flag.
Result<std::vector<double>> ParseFractions(const std::string& flag, const std::string& text,
                                           double lo, double hi, const std::string& range,
                                           const std::string& whole_unit = "") {
  std::vector<double> out;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    char* end = nullptr;
    const double v = part.size() > 15 ? -1 : std::strtod(part.c_str(), &end);
    if (part.empty() || end != part.c_str() + part.size() || !(v >= lo && v <= hi)) {
      return InvalidArgument(flag + ": '" + part + "': must be numbers in " + range +
                             ", comma-separated");
    }
    if (!whole_unit.empty() && v != std::floor(v)) {
      return InvalidArgument(flag + ": '" + part + "': not a whole " + whole_unit +
                             "; must be numbers in " + range + ", comma-separated");
    }
    out.push_back(v);
    if (out.size() > 32) return InvalidArgument(flag + ": at most 32 values");
    start = comma + 1;
  }
  return out;
}

// `sim bound`; with --exact-nodes, the bound's tightness on sampled clusters instead.
struct BoundFlags {
  FillInputFlags input;
  // Unset: the bound on the whole cluster. The other two need it. Signed, so that an error quotes
  // a negative count as typed.
  std::optional<int64_t> exact_nodes;
  std::optional<double> exact_time_limit;  // seconds; default 60
  std::optional<double> exact_load;        // % of GPU capacity; default 100
  // The configuration LP's bound (unless lp_only): at most this many master solves per solve,
  // at the loads named ("90,100" or "all": every checkpoint; default 100), each solve stopped
  // after this many wall-clock seconds (default: no limit, so that the output does not depend on
  // the machine's load). Unset: the defaults; set, not with --exact-nodes.
  std::optional<size_t> config_iterations;
  std::optional<std::string> config_at_load;
  std::optional<double> config_time_limit;
  bool lp_only = false;  // only the LP bound (dual feasible functions)
  std::string output = "table";
};

// "0.5 s", "300 s", "0.000001 s": seconds in fixed notation, the shortest that reads back as
// the same double (no trailing zeros, no exponent).
std::string FormatSeconds(double seconds) {
  std::array<char, 400> buffer;  // fixed notation of any finite double fits
  const auto end =
      std::to_chars(buffer.data(), buffer.data() + buffer.size(), seconds, std::chars_format::fixed)
          .ptr;
  return std::string(buffer.data(), end) + " s";
}

// --config-at-load: "all" (every checkpoint: an empty list) or comma-separated whole % of GPU
// capacity in [1, 1000]; errors quote the part.
Result<std::vector<int>> ParseConfigLoads(const std::string& text) {
  if (text == "all") return std::vector<int>{};
  const std::string range = "[1, 1000] (whole % of GPU capacity, e.g. 90,100,110,130) or all";
  auto values = ParseFractions("--config-at-load", text, 1, 1000, range, "%");
  if (!values.ok()) return values.status();
  std::vector<int> loads;
  for (double v : *values) loads.push_back(static_cast<int>(v));
  return loads;
}

int RunExactCommand(const BoundFlags& b, const FillInputs& in) {
  const int64_t requested_nodes = *b.exact_nodes;
  const double exact_time_limit = b.exact_time_limit.value_or(60);
  const double exact_load = b.exact_load.value_or(100);
  if (!(exact_time_limit > 0 && exact_time_limit <= kMaxExactSeconds)) {
    return Fail(InvalidArgument("--exact-time-limit: must be in (0, " +
                                std::to_string(static_cast<int>(kMaxExactSeconds)) + "] seconds"),
                kExitBadInput);
  }
  if (!(exact_load > 0 && exact_load <= 1000)) {
    return Fail(InvalidArgument("--exact-load: must be in (0, 1000] (% of GPU capacity)"),
                kExitBadInput);
  }
  const size_t max_nodes = std::min(kMaxExactNodes, in.nodes.size());
  if (requested_nodes < 1 || static_cast<uint64_t>(requested_nodes) > max_nodes) {
    return Fail(InvalidArgument("--exact-nodes: must be in [1, " + std::to_string(max_nodes) +
                                "], got " + std::to_string(requested_nodes)),
                kExitBadInput);
  }
  const size_t exact_nodes = static_cast<size_t>(requested_nodes);
  std::vector<TightnessRow> rows;
  for (uint64_t seed : in.seeds) {
    auto row = RunFillTightness(in.nodes, in.tasks, seed, b.input.tune, exact_nodes, exact_load,
                                exact_time_limit);
    if (!row.ok()) return Fail(row.status(), kExitRunFailed);
    rows.push_back(std::move(row).value());
  }
  std::cout << "bound --exact-nodes " << exact_nodes << ": " << in.tasks.size() << " tasks from "
            << b.input.pods << ", seeds " << b.input.seeds << ", tuned to " << b.input.tune * 100
            << "%, time limit " << exact_time_limit << " s per instance\n"
            << FillTightnessTable(rows);
  return 0;
}

int RunBoundCommand(const BoundFlags& b) {
  const FillInputFlags& f = b.input;
  if (!b.exact_nodes && b.exact_time_limit) {
    return Fail(InvalidArgument("--exact-time-limit: needs --exact-nodes"), kExitBadInput);
  }
  if (!b.exact_nodes && b.exact_load) {
    return Fail(InvalidArgument("--exact-load: needs --exact-nodes"), kExitBadInput);
  }
  // The --config-* flags given, as typed in errors.
  std::vector<std::string> given;
  if (b.config_iterations) given.push_back("--config-iterations");
  if (b.config_at_load) given.push_back("--config-at-load");
  if (b.config_time_limit) given.push_back("--config-time-limit");
  const std::string config_flags = Join(given, ", ");
  if (b.exact_nodes && !given.empty()) {
    const ConfigurationOptions defaults;
    return Fail(InvalidArgument(config_flags +
                                ": not with --exact-nodes (the tightness table runs the "
                                "configuration "
                                "LP with its defaults: at most " +
                                std::to_string(defaults.max_iterations) + " master solves, " +
                                std::to_string(defaults.pricing_nodes) +
                                " search nodes per pricing problem, --exact-time-limit)"),
                kExitBadInput);
  }
  if (b.lp_only && !given.empty()) {
    return Fail(InvalidArgument("--lp-only: not with " + config_flags), kExitBadInput);
  }
  if (b.exact_nodes && b.output != "table") {
    return Fail(InvalidArgument("-o json: not with --exact-nodes"), kExitBadInput);
  }
  if (b.config_time_limit &&
      !(*b.config_time_limit > 0 && *b.config_time_limit <= kMaxExactSeconds)) {
    return Fail(InvalidArgument("--config-time-limit: must be in (0, " +
                                std::to_string(static_cast<int>(kMaxExactSeconds)) + "] seconds"),
                kExitBadInput);
  }
  auto loads = ParseConfigLoads(b.config_at_load.value_or("100"));
  if (!loads.ok()) return Fail(loads.status(), kExitBadInput);
  auto in = LoadFillInputs(f);
  if (!in.ok()) return Fail(in.status(), kExitBadInput);
  if (b.exact_nodes) return RunExactCommand(b, *in);
  const ConfigurationOptions options{
      .max_iterations = b.config_iterations.value_or(ConfigurationOptions{}.max_iterations),
      .time_limit_s = b.config_time_limit,
      .at_loads = *loads};
  std::vector<FillBounds> bounds;
  for (uint64_t seed : in->seeds) {
    if (b.lp_only) {
      auto bound = RunFillBound(in->nodes, in->tasks, seed, f.tune);
      if (!bound.ok()) return Fail(bound.status(), kExitRunFailed);
      bounds.push_back(FillBounds{.lp = std::move(bound).value()});
      continue;
    }
    auto both = RunFillBounds(in->nodes, in->tasks, seed, f.tune, options);
    if (!both.ok()) return Fail(both.status(), kExitRunFailed);
    bounds.push_back(std::move(both).value());
  }
  if (b.output == "json") {
    PrintJson(BoundJson(bounds, !b.lp_only));
    return 0;
  }
  std::cout << "bound: " << in->nodes.size() << " nodes, " << in->tasks.size() << " tasks from "
            << f.pods << ", seeds " << f.seeds << ", tuned to " << f.tune * 100
            << "% of GPU capacity\n";
  std::vector<FillResult> lp, configuration;
  std::string solves;
  for (const FillBounds& one : bounds) {
    lp.push_back(one.lp);
    configuration.push_back(one.configuration);
    solves += ConfigurationSolveLines(one);
  }
  if (b.lp_only) {
    std::cout << "The LP bound (dual feasible functions) only:\n" << FillBoundTable(lp);
    return 0;
  }
  std::cout << "The configuration LP's bound (column generation, at most " << options.max_iterations
            << " master solves"
            << (b.config_time_limit ? " and " + FormatSeconds(*b.config_time_limit) : "")
            << " a solve; each step takes the tightest sound bound that holds for it: the LP's, "
               "or a configuration LP solve at or after it, converged or not):\n"
            << solves << FillBoundTable(configuration, BoundTimeColumn::kBothBounds)
            << "The LP bound (dual feasible functions; what --lp-only prints; both bounds are "
               "computed together, so its time is the table's above):\n"
            << FillBoundTable(lp, BoundTimeColumn::kNone);
  return 0;
}

struct ReplayFlags {
  std::string nodes, trace, format, policy = "fgd", order = "fifo", blocking, estimate = "oracle",
                                    sharing, las_thresholds, out, output = "table",
                                    gang_placement = "together";
  double scale_nodes = 1.0;
  uint64_t seed = 0;
  int64_t pass_interval_s = 0;
  int64_t eta_rows = 0;
  bool strict = false, resume = false, repack = false, no_frag = false;
  // Elastic jobs and checkpoints (docs/elastic.md): shares and alphas are comma-separated lists,
  // every pair replayed (a sweep).
  std::string elastic_share = "0", elastic_alpha = "0.8", victims = "priority";
  sched::ResizeRules resize;
  int64_t resize_cost_s = resize.restart_cost.value(),
          resize_interval_s = resize.min_interval.value();
  int64_t checkpoint_interval_s = 0, checkpoint_grace_s = 0, min_run_s = 0;
};

// "3600,36000": ascending positive GPU-seconds.
Result<std::vector<int64_t>> ParseLasThresholds(const std::string& text) {
  std::vector<int64_t> out;
  for (size_t start = 0; start <= text.size();) {
    size_t comma = text.find(',', start);
    if (comma == std::string::npos) comma = text.size();
    const std::string part = text.substr(start, comma - start);
    if (part.empty() || part.size() > 15 ||
        part.find_first_not_of("0123456789") != std::string::npos || std::stoll(part) == 0 ||
        (!out.empty() && std::stoll(part) <= out.back())) {
      return InvalidArgument("--las-thresholds: '" + part +
                             "': must be positive whole GPU-seconds in ascending order");
    }
    out.push_back(std::stoll(part));
    start = comma + 1;
  }
  return out;
}

// The replay's scheduling rules from the flags; errors name the flag (or the sharing file).
Result<ReplayConfig> ReplayConfigOf(const ReplayFlags& f) {
  ReplayConfig config;
  auto order = sched::ParseQueueOrder(f.order);
  if (!order.ok()) return InvalidArgument("--order: " + order.status().message());
  config.order = *order;
  // --strict is the older spelling of --blocking strict.
  if (f.strict && !f.blocking.empty() && f.blocking != "strict") {
    return InvalidArgument("--strict contradicts --blocking " + f.blocking);
  }
  const std::string blocking_name = f.strict ? "strict" : f.blocking.empty() ? "skip" : f.blocking;
  auto blocking = sched::ParseBlocking(blocking_name);
  if (!blocking.ok()) return InvalidArgument("--blocking: " + blocking.status().message());
  config.blocking = *blocking;
  auto estimate = ParseEstimateSource(f.estimate);
  if (!estimate.ok()) return InvalidArgument("--estimate: " + estimate.status().message());
  config.estimate = *estimate;
  if (!f.sharing.empty()) {
    auto sharing = ReadSharingFile(f.sharing);
    if (!sharing.ok()) return InvalidArgument("--sharing: " + sharing.status().message());
    config.sharing = *sharing;
  }
  if (!f.las_thresholds.empty()) {
    auto thresholds = ParseLasThresholds(f.las_thresholds);
    if (!thresholds.ok()) return thresholds.status();
    config.las_thresholds_gpu_s = *thresholds;
  }
  auto gang_placement = sched::ParseGangPlacement(f.gang_placement);
  if (!gang_placement.ok()) {
    return InvalidArgument("--gang-placement: " + gang_placement.status().message());
  }
  config.gang_placement = *gang_placement;
  config.resume = f.resume;
  config.repack = f.repack;
  config.pass_interval_s = f.pass_interval_s;
  config.eta_queue_rows = f.eta_rows;
  config.seed = f.seed;
  config.track_fragmentation = !f.no_frag;
  auto victims = sched::ParseVictimOrder(f.victims);
  if (!victims.ok()) return InvalidArgument("--victims: " + victims.status().message());
  config.victims = *victims;
  config.resize = f.resize;
  config.resize.restart_cost = Seconds(f.resize_cost_s);
  config.resize.min_interval = Seconds(f.resize_interval_s);
  config.checkpoint_interval_s = f.checkpoint_interval_s;
  config.checkpoint_grace_s = f.checkpoint_grace_s;
  config.min_run_before_preemption_s = f.min_run_s;
  CORRAL_RETURN_IF_ERROR(CheckReplayConfig(config));
  return config;
}

int RunReplayCommand(const ReplayFlags& f) {
  auto config = ReplayConfigOf(f);
  if (!config.ok()) return Fail(config.status(), kExitBadInput);
  auto nodes = LoadNodes(f.nodes);
  if (!nodes.ok()) return Fail(nodes.status(), kExitBadInput);
  auto scaled = ScaleNodes(*nodes, f.scale_nodes, f.seed);
  if (!scaled.ok()) return Fail(scaled.status(), kExitBadInput);
  auto trace = LoadTrace(f.trace, f.format, *scaled);
  if (!trace.ok()) return Fail(trace.status(), kExitBadInput);
  auto policies = ParsePolicies(f.policy);
  if (!policies.ok()) return Fail(policies.status(), kExitBadInput);

  auto shares = ParseFractions("--elastic-share", f.elastic_share, 0, 1, "[0, 1]");
  if (!shares.ok()) return Fail(shares.status(), kExitBadInput);
  auto alphas = ParseFractions("--elastic-alpha", f.elastic_alpha, 0.01, 1, "[0.01, 1]");
  if (!alphas.ok()) return Fail(alphas.status(), kExitBadInput);

  std::vector<ReplayResult> results;
  for (const auto& p : *policies) {
    for (double alpha : *alphas) {
      for (double share : *shares) {
        config->policy = p;
        config->resize.alpha = alpha;
        config->elastic_share = share;
        auto r = RunReplay(*scaled, *trace, *config);
        if (!r.ok()) return Fail(r.status(), kExitRunFailed);
        results.push_back(std::move(r).value());
      }
    }
  }
  if (f.output == "json") {
    PrintJson(ReplayJson(*config, results));
  } else {
    std::cout << "replay: " << scaled->size() << " nodes, " << trace->jobs.size() << " jobs from "
              << f.trace << ", order " << sched::QueueOrderName(config->order) << ", blocking "
              << sched::BlockingName(config->blocking) << ", estimate "
              << EstimateSourceName(config->estimate)
              << (f.sharing.empty() ? "" : ", sharing " + f.sharing)
              << (config->resume ? ", preempted jobs resume" : "")
              << (config->pass_interval_s > 0
                      ? ", a pass every " + std::to_string(config->pass_interval_s) + " s"
                      : "")
              << "\n"
              << ReplayTable(results);
  }
  if (!f.out.empty()) {
    Status s = WriteReplayOutputs(results, f.out);
    if (!s.ok()) return Fail(s, kExitRunFailed);
  }
  return 0;
}

struct PredictFlags {
  std::string trace, format, output = "table";
  predict::PredictorConfig config;
  int64_t default_estimate_s = predict::PredictorConfig{}.default_estimate.value();
};

// No cluster here: a Tiresias job is read as one task of all its GPUs (the predictor's features
// use total GPUs, so how a gang would be split does not matter).
constexpr int kPredictMaxGpusPerTask = std::numeric_limits<int>::max();

int RunPredictCommand(const PredictFlags& f) {
  auto format = f.format.empty() ? DetectTraceFormat(f.trace) : ParseTraceFormat(f.format);
  if (!format.ok()) return Fail(format.status(), kExitBadInput);
  auto trace = ReadTrace(f.trace, *format, kPredictMaxGpusPerTask);
  if (!trace.ok()) return Fail(trace.status(), kExitBadInput);
  predict::PredictorConfig requested = f.config;
  requested.default_estimate = Seconds(f.default_estimate_s);
  // What the predictor will use (a min_samples above the window acts as the window), so that
  // the report states it.
  const predict::PredictorConfig config = predict::RuntimePredictor(requested).config();
  const PredictionEvaluation eval = EvaluatePredictor(*trace, config);
  if (f.output == "json") {
    PrintJson(PredictJson(eval, config));
  } else {
    std::cout << "predict: " << trace->jobs.size() << " jobs from " << f.trace
              << ", online in submit order (window " << config.window << ", min samples "
              << config.min_samples << ", default " << config.default_estimate.value() << " s)\n"
              << PredictTable(eval);
  }
  return 0;
}

struct ForecastFlags {
  std::string trace, format, output = "table";
  int train_days = 28, horizon_days = 7;
};

// The demand forecaster (predict/demand_forecast.h) backtested on a trace's offered load: each
// job asks its GPUs from its submission for its recorded duration.
int RunForecastCommand(const ForecastFlags& f) {
  auto format = f.format.empty() ? DetectTraceFormat(f.trace) : ParseTraceFormat(f.format);
  if (!format.ok()) return Fail(format.status(), kExitBadInput);
  auto trace = ReadTrace(f.trace, *format, kPredictMaxGpusPerTask);
  if (!trace.ok()) return Fail(trace.status(), kExitBadInput);
  if (trace->jobs.empty()) return Fail(InvalidArgument(f.trace + ": no jobs"), kExitBadInput);
  std::vector<predict::DemandInterval> intervals;
  int64_t first = std::numeric_limits<int64_t>::max(), last = 0;
  for (const TraceJob& j : trace->jobs) {
    const int64_t from = j.job.submit_time.value(), to = from + j.duration.value();
    intervals.push_back({from, to, static_cast<double>(j.job.TotalMilli().value()) / 1000.0});
    first = std::min(first, from);
    last = std::max(last, from);
  }
  const int64_t start = first - ((first % 3600) + 3600) % 3600;
  const int hours = static_cast<int>((last - start) / 3600 + 1);
  const std::vector<double> series = predict::HourlyDemand(intervals, start, hours);
  const predict::ForecastAccuracy a =
      predict::Backtest(series, start, f.train_days * 24, f.horizon_days * 24);
  if (a.windows == 0) {
    return Fail(InvalidArgument(f.trace + ": " + std::to_string(hours) +
                                " hours of history; a backtest needs more than " +
                                std::to_string((f.train_days + f.horizon_days) * 24)),
                kExitBadInput);
  }
  if (f.output == "json") {
    PrintJson(nlohmann::json({{"trace", f.trace},
                              {"hours", hours},
                              {"train_days", f.train_days},
                              {"horizon_days", f.horizon_days},
                              {"windows", a.windows},
                              {"mean_demand_gpus", a.mean_demand},
                              {"mae_gpus", a.mae},
                              {"mae_flat_mean_gpus", a.mae_flat_mean},
                              {"mae_seasonal_naive_gpus", a.mae_seasonal_naive}}));
    return 0;
  }
  std::printf(
      "forecast: %d hours of offered load from %s; %d windows (train %d days, forecast %d)\n"
      "mean demand %.1f GPUs\n"
      "%-34s %10s %12s\n"
      "%-34s %10.2f %12.2f\n"
      "%-34s %10.2f %12.2f\n"
      "%-34s %10.2f %12.2f\n",
      hours, f.trace.c_str(), a.windows, f.train_days, f.horizon_days, a.mean_demand, "model",
      "MAE (GPUs)", "MAE / demand", "daily + weekly seasons (corral)", a.mae, a.mae / a.mean_demand,
      "flat mean of the training window", a.mae_flat_mean, a.mae_flat_mean / a.mean_demand,
      "seasonal naive (same hour -1 week)", a.mae_seasonal_naive,
      a.mae_seasonal_naive / a.mean_demand);
  return 0;
}

struct GenFlags {
  GeneratorConfig config;
  std::string gpu_mix, runtimes, gpu_models, out;
};

int RunGenCommand(GenFlags f) {
  if (!f.gpu_mix.empty()) {
    auto mix = ParseGpuMix(f.gpu_mix);
    if (!mix.ok())
      return Fail(InvalidArgument("--gpu-mix: " + mix.status().message()), kExitBadInput);
    f.config.gpu_mix = *mix;
  }
  if (!f.runtimes.empty()) {
    auto samples = ReadRuntimeSamples(f.runtimes);
    if (!samples.ok()) return Fail(samples.status(), kExitBadInput);
    f.config.durations_s = *samples;
  }
  for (size_t start = 0; start < f.gpu_models.size();) {
    size_t comma = f.gpu_models.find(',', start);
    if (comma == std::string::npos) comma = f.gpu_models.size();
    f.config.gpu_models.push_back(f.gpu_models.substr(start, comma - start));
    start = comma + 1;
  }
  Status valid = Validate(f.config);
  if (!valid.ok()) return Fail(valid, kExitBadInput);
  Trace trace = GenerateWorkload(f.config);
  Status written = WriteJsonl(trace, f.out);
  if (!written.ok()) return Fail(written, kExitRunFailed);
  std::cerr << "wrote " << trace.jobs.size() << " jobs to " << f.out << "\n";
  return 0;
}

}  // namespace

void AddSimCommand(CLI::App& app, int* exit_code) {
  CLI::App* sim = app.add_subcommand(kSimCommand, kSimSummary);
  sim->require_subcommand(1);

  auto fill = std::make_shared<FillFlags>();
  CLI::App* f = sim->add_subcommand(
      "fill", "Place tasks one by one, never releasing (the FGD paper's experiment)");
  AddFillInputOptions(f, fill->input);
  f->add_option("--policy", fill->policy, PolicyHelp())->capture_default_str();
  f->add_option("--out", fill->out, "Directory for per-step CSVs and the plot");
  f->add_option("-o,--output", fill->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  f->add_option("--threads", fill->threads, "Worker threads (0 = all cores)")
      ->check(CLI::Range(0, 4096))
      ->capture_default_str();
  f->add_option("--best-params", fill->best_params,
                "Research: the best policy's parameters, k=v,... (needs best in --policy; unset "
                "keys keep the shipped values: " +
                    sched::FormatBestParams(sched::BestParams{}) + "; docs/placement.md)");
  f->callback([fill, exit_code] { *exit_code = RunFillCommand(*fill); });

  auto bound = std::make_shared<BoundFlags>();
  CLI::App* b = sim->add_subcommand(
      "bound", "Lower bound on the unallocated GPU % any policy can reach in `sim fill`");
  AddFillInputOptions(b, bound->input);
  b->add_option("--exact-nodes", bound->exact_nodes,
                "Tightness: sample this many nodes per seed and compare the bound with the exact "
                "optimum and the online policies (at most 200)");
  b->add_option("--exact-time-limit", bound->exact_time_limit,
                "Wall-clock seconds per exact solve (default 60; at most 3600); also caps, "
                "separately, each configuration LP solve in the tightness table");
  b->add_option("--exact-load", bound->exact_load,
                "Arrived load, % of GPU capacity, at which to compare (default 100)");
  const ConfigurationOptions configuration_defaults;
  b->add_option("--config-iterations", bound->config_iterations,
                "The configuration LP's bound (column generation, exact search pricing): at most "
                "this many master solves per solve (default " +
                    std::to_string(configuration_defaults.max_iterations) +
                    "; docs/placement.md, \"The limit (session 44)\")")
      ->check(CLI::Range(1, 1'000'000));
  b->add_option("--config-at-load", bound->config_at_load,
                "Loads at which to solve the configuration LP, comma-separated % of GPU capacity "
                "(default 100; e.g. 90,100,110,130), each at the end of its band, its bound "
                "holding for every step up to it; all: at every checkpoint");
  b->add_option("--config-time-limit", bound->config_time_limit,
                "Wall-clock seconds per configuration LP solve (default none; at most 3600), "
                "checked before each master solve and between pricing problems (one pricing "
                "problem may overrun it; the fills that start the master are outside it): past "
                "it the solve stops, not converged, with a sound bound");
  b->add_flag("--lp-only", bound->lp_only,
              "Only the LP bound (dual feasible functions; seconds, but looser)");
  b->add_option("-o,--output", bound->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}))
      ->capture_default_str();
  b->callback([bound, exit_code] { *exit_code = RunBoundCommand(*bound); });

  auto replay = std::make_shared<ReplayFlags>();
  CLI::App* r = sim->add_subcommand(
      "replay", "Replay a trace: arrivals at submit time, run for the recorded duration");
  r->add_option("--nodes", replay->nodes, "Node list: openb CSV, nodes .jsonl, or gen:SPEC")
      ->required();
  r->add_option("--trace", replay->trace, "Job trace")->required();
  r->add_option("--format", replay->format, "openb, tiresias, helios or jsonl (default: detect)");
  r->add_option("--policy", replay->policy, PolicyHelp())->capture_default_str();
  r->add_option("--order", replay->order,
                "Queue order: fifo, priority, fairshare, sjf, qssf, las (2D-LAS), srtf or srsf "
                "(shortest remaining time / service first, preemptive: need --resume; remaining "
                "times from --estimate)")
      ->capture_default_str();
  r->add_option("--blocking", replay->blocking,
                "A job that does not fit: skip (later jobs pass), strict (nothing passes) or "
                "backfill (EASY: reserved, later jobs pass if they do not delay it)");
  r->add_flag("--strict", replay->strict, "Same as --blocking strict");
  r->add_option("--estimate", replay->estimate,
                "Run-time estimates for qssf, srtf, srsf and backfill: oracle (recorded duration), "
                "predicted "
                "(learnt from finished jobs) or none (time limit, else 1 h)")
      ->capture_default_str();
  r->add_option("--sharing", replay->sharing,
                "Projects' weights, quotas and limits, reclaim, fair share (JSON or YAML)");
  r->add_option("--las-thresholds", replay->las_thresholds,
                "2D-LAS queue thresholds, GPU-seconds of attained service (default 3600)");
  r->add_option("--gang-placement", replay->gang_placement,
                "Tasks of a multi-task job: together (fewest nodes, one switch or rack when "
                "possible; default) or each-task (each where the policy puts a lone task)");
  r->add_flag("--resume", replay->resume,
              "A preempted job keeps its progress (default: it restarts from scratch)");
  r->add_flag("--repack", replay->repack,
              "Re-pack: a job that fits no node moves running one-node jobs to other nodes to "
              "free room for it (a free move: needs --resume)");
  r->add_option("--pass-interval", replay->pass_interval_s,
                "Also run a scheduling pass every this many seconds while jobs wait (0: only at "
                "arrivals and ends)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000'000}));
  r->add_option("--eta", replay->eta_rows,
                "Measure estimated starts: each waiting arrival's, among the queue's first N "
                "jobs, against its actual start (docs/prediction.md; 0: off)")
      ->check(CLI::Range(int64_t{0}, int64_t{1'000'000}));
  r->add_option("--elastic-share", replay->elastic_share,
                "Share of the one-task whole-GPU jobs made elastic (list: a sweep; default 0)");
  r->add_option("--elastic-alpha", replay->elastic_alpha,
                "Elastic throughput ∝ GPUs^A (list: a sweep; default 0.8)");
  // Durations in seconds, at most a year each.
  for (auto [flag, value, help] :
       {std::tuple{"--resize-cost", &replay->resize_cost_s,
                   "Seconds of progress a resize loses (default 60)"},
        {"--resize-interval", &replay->resize_interval_s,
         "No growth sooner than this after a job's last resize, seconds (default 300)"},
        {"--checkpoint-interval", &replay->checkpoint_interval_s,
         "Every job checkpoints this often, seconds (0: never)"},
        {"--checkpoint-grace", &replay->checkpoint_grace_s,
         "Seconds a victim gets to checkpoint before it stops (0: none, as today)"},
        {"--min-run", &replay->min_run_s, "Seconds a job runs before it can be preempted"}}) {
    r->add_option(flag, *value, help)->check(CLI::Range(int64_t{0}, int64_t{365} * 86400));
  }
  r->add_option("--resize-budget", replay->resize.budget, "Resizes per job (default 20)")
      ->check(CLI::Range(0, 1'000'000));
  r->add_option("--victims", replay->victims, "Reclaim victims: priority or least-lost-work");
  r->add_option("--scale-nodes", replay->scale_nodes, "Scale the cluster by this factor");
  r->add_option("--seed", replay->seed, "Seed for tie order and node scaling");
  r->add_flag("--no-frag", replay->no_frag, "Do not track fragmentation over time (faster)");
  r->add_option("--out", replay->out, "Directory for timeline CSVs and the plot");
  r->add_option("-o,--output", replay->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  r->callback([replay, exit_code] { *exit_code = RunReplayCommand(*replay); });

  auto pred = std::make_shared<PredictFlags>();
  CLI::App* pr = sim->add_subcommand(
      "predict", "Replay a trace's jobs through the run-time predictor and report its accuracy");
  pr->add_option("--trace", pred->trace, "Job trace")->required();
  pr->add_option("--format", pred->format, "openb, tiresias, helios or jsonl (default: detect)");
  pr->add_option("--window", pred->config.window, "Durations remembered per key")
      ->check(CLI::Range(1, 1'000'000));
  pr->add_option("--min-samples", pred->config.min_samples,
                 "Durations a key needs before it answers")
      ->check(CLI::Range(1, 1'000'000));
  pr->add_option("--default-estimate", pred->default_estimate_s,
                 "Seconds predicted before anything finished")
      ->check(CLI::Range(int64_t{1}, int64_t{1'000'000'000}));
  pr->add_option("-o,--output", pred->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  pr->callback([pred, exit_code] { *exit_code = RunPredictCommand(*pred); });

  auto fc = std::make_shared<ForecastFlags>();
  CLI::App* fo = sim->add_subcommand(
      "forecast", "Backtest the GPU demand forecaster (capacity planning) on a trace's load");
  fo->add_option("--trace", fc->trace, "Job trace")->required();
  fo->add_option("--format", fc->format, "openb, tiresias, helios or jsonl (default: detect)");
  fo->add_option("--train-days", fc->train_days, "Days of history each forecast learns from")
      ->check(CLI::Range(1, 3650))
      ->capture_default_str();
  fo->add_option("--horizon-days", fc->horizon_days, "Days each forecast looks ahead")
      ->check(CLI::Range(1, 365))
      ->capture_default_str();
  fo->add_option("-o,--output", fc->output, "table or json")
      ->check(CLI::IsMember({"table", "json"}));
  fo->callback([fc, exit_code] { *exit_code = RunForecastCommand(*fc); });

  auto gen = std::make_shared<GenFlags>();
  CLI::App* g = sim->add_subcommand("gen", "Write a seeded synthetic workload as JSON Lines");
  g->add_option("--jobs", gen->config.jobs, "Number of jobs");
  g->add_option("--seed", gen->config.seed, "Seed");
  g->add_option("--users", gen->config.users, "Number of users");
  g->add_option("--projects", gen->config.projects, "Number of projects");
  g->add_option("--interarrival", gen->config.mean_interarrival_s,
                "Mean seconds between arrivals (Poisson)");
  g->add_option("--gpu-mix", gen->gpu_mix, "GPUS:WEIGHT items, e.g. 1:0.6,2:0.2,8:0.2");
  g->add_option("--share-fraction", gen->config.share_fraction,
                "Fraction of 1-GPU jobs asking a share of a GPU");
  g->add_option("--runtimes", gen->runtimes,
                "Sample durations from this file (e.g. philly_runtime.csv)");
  g->add_option("--gpu-models", gen->gpu_models, "Models some jobs pin, comma-separated");
  g->add_option("--templates-per-user", gen->config.templates_per_user,
                "Recurring job templates per user (0 = off; see docs/simulator.md)");
  g->add_option("--template-sigma", gen->config.template_sigma,
                "Spread of ln(duration) around a template's scale");
  g->add_option("--out", gen->out, "Output .jsonl file")->required();
  g->callback([gen, exit_code] { *exit_code = RunGenCommand(*gen); });
}

}  // namespace corral::sim
