#include "sim/report.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "sched/policy_config.h"
#include "sim/svg_plot.h"

namespace corral::sim {

namespace {

using nlohmann::json;

// Rounds for reports: 4 decimals keeps JSON stable and readable.
double Round4(double v) { return std::round(v * 1e4) / 1e4; }

std::string Fixed(double v, int decimals) {
  char buf[64];
  std::snprintf(buf, sizeof buf, "%.*f", decimals, v);
  return buf;
}

std::string Pad(std::string s, size_t width, bool left = false) {
  if (s.size() >= width) return s;
  return left ? s + std::string(width - s.size(), ' ') : std::string(width - s.size(), ' ') + s;
}

// Results grouped by policy, in first-seen order.
std::vector<std::pair<std::string, std::vector<const FillResult*>>> ByPolicy(
    const std::vector<FillResult>& results) {
  std::vector<std::pair<std::string, std::vector<const FillResult*>>> out;
  for (const auto& r : results) {
    auto it =
        std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == r.policy; });
    if (it == out.end()) {
      out.emplace_back(r.policy, std::vector<const FillResult*>{});
      it = out.end() - 1;
    }
    it->second.push_back(&r);
  }
  return out;
}

Status WriteFile(const std::filesystem::path& path, const std::string& text) {
  std::ofstream out(path);
  out << text;
  out.close();
  if (!out) return IoError("cannot write '" + path.string() + "'");
  return Status::Ok();
}

Status MakeDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return IoError("cannot create directory '" + dir + "': " + ec.message());
  return Status::Ok();
}

json DistributionJson(const Distribution& d) {
  return {{"mean", Round4(d.mean)},
          {"p50", Round4(d.p50)},
          {"p95", Round4(d.p95)},
          {"p99", Round4(d.p99)}};
}

}  // namespace

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  size_t n = v.size();
  return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

json FillJson(const std::vector<FillResult>& results) {
  json out = {{"mode", "fill"}, {"results", json::array()}, {"summary", json::array()}};
  for (const auto& r : results) {
    json unalloc = json::object(), frag = json::object();
    for (int x : kFillReportLoads) {
      FillPoint p = r.At(x);
      unalloc[std::to_string(x)] = Round4(p.unallocated_pct);
      frag[std::to_string(x)] = Round4(p.frag_pct_of_capacity);
    }
    out["results"].push_back({{"policy", r.policy},
                              {"seed", r.seed},
                              {"tasks_presented", r.tasks_presented},
                              {"tasks_placed", r.tasks_placed},
                              {"unallocated_gpu_pct", unalloc},
                              {"frag_pct_of_capacity", frag},
                              {"wall_ms", Round4(r.wall_ms)}});
  }
  for (const auto& [policy, runs] : ByPolicy(results)) {
    json median = json::object(), frag = json::object();
    for (int x : kFillReportLoads) {
      std::vector<double> u, f;
      for (const FillResult* r : runs) {
        FillPoint p = r->At(x);
        u.push_back(p.unallocated_pct);
        f.push_back(p.frag_pct_of_capacity);
      }
      median[std::to_string(x)] = Round4(Median(u));
      frag[std::to_string(x)] = Round4(Median(f));
    }
    out["summary"].push_back({{"policy", policy},
                              {"unallocated_gpu_pct_median", median},
                              {"frag_pct_of_capacity_median", frag}});
  }
  return out;
}

std::string FillTable(const std::vector<FillResult>& results) {
  std::string out = "Unallocated GPU % (median over seeds) at arrived load; lower is better\n";
  out += Pad("policy", 12, true);
  for (int x : kFillReportLoads) out += Pad(std::to_string(x) + "%", 9);
  out += Pad("100% mean±sd", 16) + Pad("frag@100%", 11) + Pad("ms/seed", 9) + "\n";
  for (const auto& [policy, runs] : ByPolicy(results)) {
    out += Pad(policy, 12, true);
    for (int x : kFillReportLoads) {
      std::vector<double> u;
      for (const FillResult* r : runs) u.push_back(r->At(x).unallocated_pct);
      out += Pad(Fixed(Median(u), 2), 9);
    }
    double sum = 0, sq = 0, ms = 0;
    std::vector<double> frag;
    for (const FillResult* r : runs) {
      double v = r->At(100).unallocated_pct;
      sum += v;
      sq += v * v;
      ms += r->wall_ms;
      frag.push_back(r->At(100).frag_pct_of_capacity);
    }
    const double n = static_cast<double>(runs.size());
    const double mean = sum / n, sd = std::sqrt(std::max(0.0, sq / n - mean * mean));
    out += Pad(Fixed(mean, 2) + "±" + Fixed(sd, 2), 17) + Pad(Fixed(Median(frag), 2), 11) +
           Pad(Fixed(ms / n, 0), 9) + "\n";
  }
  return out +
         "(N%: arrived load, % of GPU capacity; frag@100%: free GPU capacity the typical tasks "
         "cannot use (FGD's fragmentation), % of capacity)\n";
}

std::string FillBoundTable(const std::vector<FillResult>& bounds, BoundTimeColumn time) {
  std::string out = "Lower bound on unallocated GPU % that any policy can reach, at arrived load\n";
  out += Pad("seed", 12, true);
  for (int x : kFillReportLoads) out += Pad(std::to_string(x) + "%", 9);
  const auto time_cell = [time](const std::string& cell) {
    if (time == BoundTimeColumn::kNone) return std::string();
    return Pad(cell, time == BoundTimeColumn::kBothBounds ? 11 : 9);
  };
  out += time_cell(time == BoundTimeColumn::kBothBounds ? "ms (both)" : "ms") + "\n";
  std::vector<double> mean(kFillReportLoads.size(), 0.0);
  double ms = 0;
  for (const FillResult& b : bounds) {
    out += Pad(std::to_string(b.seed), 12, true);
    for (size_t i = 0; i < kFillReportLoads.size(); ++i) {
      const double v = b.At(kFillReportLoads[i]).unallocated_pct;
      mean[i] += v / static_cast<double>(bounds.size());
      out += Pad(Fixed(v, 2), 9);
    }
    ms += b.wall_ms / static_cast<double>(bounds.size());
    out += time_cell(Fixed(b.wall_ms, 0)) + "\n";
  }
  out += Pad("mean", 12, true);
  for (double v : mean) out += Pad(Fixed(v, 2), 9);
  return out + time_cell(Fixed(ms, 0)) + "\n";
}

std::string ConfigurationSolveLines(const FillBounds& bounds) {
  std::string out;
  for (const ConfigurationSolve& s : bounds.solves) {
    out += "  seed " + std::to_string(bounds.lp.seed) + ", " +
           (s.load ? std::to_string(*s.load) + "%" : std::string("checkpoint")) + " (step " +
           std::to_string(s.step + 1) + ", arrived " + Fixed(s.arrived_pct, 2) + "%): ";
    out += s.bound.converged() ? "converged, bound " + Fixed(s.unallocated_pct, 2) + "%"
                               : "not converged (" + ConfigurationStopName(s.bound.stop) +
                                     "), sound bound = " + Fixed(s.unallocated_pct, 2) + "%";
    out += ", " + std::to_string(s.bound.iterations) + " master solves\n";
  }
  return out;
}

json BoundJson(const std::vector<FillBounds>& bounds, bool configuration) {
  const auto at_loads = [](const FillResult& r) {
    json out;
    for (int x : kFillReportLoads) out[std::to_string(x)] = Round4(r.At(x).unallocated_pct);
    return out;
  };
  json out = {{"mode", "bound"}, {"results", json::array()}};
  std::vector<double> lp_mean(kFillReportLoads.size(), 0.0), mean(kFillReportLoads.size(), 0.0);
  size_t solves = 0, converged = 0;
  for (const FillBounds& b : bounds) {
    json row = {{"seed", b.lp.seed},
                {"unallocated_gpu_pct", configuration ? at_loads(b.configuration) : json()},
                {"lp_unallocated_gpu_pct", at_loads(b.lp)},
                {"solves", json::array()},
                {"wall_ms", Round4(b.lp.wall_ms)}};
    for (const ConfigurationSolve& s : b.solves) {
      row["solves"].push_back({{"load", s.load ? json(*s.load) : json()},
                               {"step", s.step + 1},
                               {"arrived_pct", Round4(s.arrived_pct)},
                               {"unallocated_gpu_pct", Round4(s.unallocated_pct)},
                               {"status", ConfigurationStopName(s.bound.stop)},
                               {"converged", s.bound.converged()},
                               {"iterations", s.bound.iterations}});
      ++solves;
      converged += s.bound.converged() ? 1 : 0;
    }
    for (size_t i = 0; i < kFillReportLoads.size(); ++i) {
      const double n = static_cast<double>(bounds.size());
      lp_mean[i] += b.lp.At(kFillReportLoads[i]).unallocated_pct / n;
      if (configuration) mean[i] += b.configuration.At(kFillReportLoads[i]).unallocated_pct / n;
    }
    out["results"].push_back(std::move(row));
  }
  json lp_means, means;
  for (size_t i = 0; i < kFillReportLoads.size(); ++i) {
    lp_means[std::to_string(kFillReportLoads[i])] = Round4(lp_mean[i]);
    if (configuration) means[std::to_string(kFillReportLoads[i])] = Round4(mean[i]);
  }
  out["mean"] = {{"unallocated_gpu_pct", means}, {"lp_unallocated_gpu_pct", lp_means}};
  out["solves"] = solves;
  out["converged"] = converged;
  return out;
}

std::string FillTightnessTable(const std::vector<TightnessRow>& rows) {
  std::string out =
      "Unallocated GPU % at the last step with arrived load <= the load asked: LP bound, "
      "configuration LP bound, exact "
      "optimum, online policies (timed out: exact, lp_gap and online_gap are the ranges the "
      "solver left open)\n";
  out += Pad("seed", 6, true) + Pad("nodes", 6) + Pad("tasks", 6) + Pad("arrived", 8) +
         Pad("lp", 7) + Pad("config", 7) + Pad("exact", 14);
  for (const std::string& p : kTightnessPolicies) out += Pad(p, 8);
  out += Pad("lp_gap", 12) + Pad("online_gap", 13) + Pad("solve_s", 9) + "\n";
  const size_t best =
      static_cast<size_t>(std::find(kTightnessPolicies.begin(), kTightnessPolicies.end(), "best") -
                          kTightnessPolicies.begin());
  std::vector<double> mean(4 + kTightnessPolicies.size(), 0.0);  // lp, exact, policies.., gaps
  size_t solved = 0;
  double config_mean = 0;
  for (const TightnessRow& r : rows) {
    const bool optimal = r.exact.status == ExactStatus::kOptimal;
    out += Pad(std::to_string(r.seed), 6, true) + Pad(std::to_string(r.nodes), 6) +
           Pad(std::to_string(r.tasks), 6) + Pad(Fixed(r.arrived_pct, 2), 8) +
           Pad(Fixed(r.lp_bound_pct, 2), 7) + Pad(Fixed(r.config_bound_pct, 2), 7) +
           Pad((optimal ? "" : Fixed(r.exact_low_pct, 2) + "-") + Fixed(r.exact_pct, 2), 14);
    for (double v : r.policy_pct) out += Pad(Fixed(v, 2), 8);
    // Rounded to the hundredths printed, then + 0.0: equal numbers print a gap of 0.00, not -0.00.
    auto gap = [](double v) { return std::round(v * 100) / 100 + 0.0; };
    const double lp_gap = gap(r.exact_pct - r.lp_bound_pct);
    const double online_gap = gap(r.policy_pct[best] - r.exact_pct);
    // Timed out: OPT lies in [exact_low_pct, exact_pct] (in unallocated %), so each gap lies in
    // a range too: the LP gap in [low − lp, high − lp], the online gap in [best − high, best −
    // low].
    const std::string lp_range =
        Fixed(gap(r.exact_low_pct - r.lp_bound_pct), 2) + "-" + Fixed(lp_gap, 2);
    const std::string online_range =
        Fixed(online_gap, 2) + "-" + Fixed(gap(r.policy_pct[best] - r.exact_low_pct), 2);
    out += optimal ? Pad(Fixed(lp_gap, 2), 12) + Pad(Fixed(online_gap, 2), 13)
                   : Pad(lp_range, 12) + Pad(online_range, 13);
    out += Pad(Fixed(r.exact.seconds, 1), 9) + "\n";
    if (!optimal) continue;
    ++solved;
    mean[0] += r.lp_bound_pct;
    config_mean += r.config_bound_pct;
    mean[1] += r.exact_pct;
    for (size_t i = 0; i < r.policy_pct.size(); ++i) mean[2 + i] += r.policy_pct[i];
    mean[2 + kTightnessPolicies.size()] += lp_gap;
    mean[3 + kTightnessPolicies.size()] += online_gap;
  }
  out += "mean of " + std::to_string(solved) + " solved of " + std::to_string(rows.size());
  if (solved == 0) return out + "\n";
  for (double& v : mean) v /= static_cast<double>(solved);
  config_mean /= static_cast<double>(solved);
  out += ": lp " + Fixed(mean[0], 2) + ", config " + Fixed(config_mean, 2) + ", exact " +
         Fixed(mean[1], 2);
  for (size_t i = 0; i < kTightnessPolicies.size(); ++i) {
    out += ", " + kTightnessPolicies[i] + " " + Fixed(mean[2 + i], 2);
  }
  return out + ", lp_gap " + Fixed(mean[2 + kTightnessPolicies.size()], 2) + ", online_gap " +
         Fixed(mean[3 + kTightnessPolicies.size()], 2) + "\n";
}

Status WriteFillOutputs(const std::vector<FillResult>& results, const std::string& dir) {
  CORRAL_RETURN_IF_ERROR(MakeDir(dir));
  for (const auto& r : results) {
    std::string csv =
        "step,arrived_pct,unallocated_gpu_pct,frag_pct_of_capacity,frag_pct_of_idle,placed\n";
    for (size_t i = 0; i < r.steps.size(); ++i) {
      const FillStep& s = r.steps[i];
      csv += std::to_string(i) + "," + Fixed(s.arrived_pct, 4) + "," + Fixed(s.unallocated_pct, 4) +
             "," + Fixed(s.frag_pct_of_capacity, 4) + "," + Fixed(s.frag_pct_of_idle, 4) + "," +
             (s.placed ? "1" : "0") + "\n";
    }
    CORRAL_RETURN_IF_ERROR(WriteFile(
        std::filesystem::path(dir) / ("fill_" + r.policy + "_" + std::to_string(r.seed) + ".csv"),
        csv));
  }
  std::vector<PlotSeries> series;
  for (const auto& [policy, runs] : ByPolicy(results)) {
    PlotSeries s{policy, {}};
    for (int x = 0; x <= 130; ++x) {
      std::vector<double> u;
      for (const FillResult* r : runs) u.push_back(r->At(x).unallocated_pct);
      s.points.emplace_back(x, Median(u));
    }
    series.push_back(std::move(s));
  }
  return WriteFile(std::filesystem::path(dir) / "fill_unallocated.svg",
                   RenderLinePlot({"Unallocated GPU % against arrived load (median over seeds)",
                                   "arrived GPU load, % of capacity", "unallocated GPU %"},
                                  series));
}

namespace {

json OptionalSeconds(const std::optional<int64_t>& s) { return s ? json(*s) : json(nullptr); }

// The fairness under contention; Jain's index only where there was contention to judge.
std::string ContentionLine(const ReplayResult& r) {
  if (r.projects.size() < 2) return "fairness under contention: n/a (one project)\n";
  if (r.fairness.contended_s == 0) {
    return "fairness under contention: no contention (never did >= 2 projects want more than "
           "the cluster has)\n";
  }
  return "contended " + std::to_string(r.fairness.contended_s) +
         " s (>= 2 projects want more than the cluster has): Jain's index of alloc/ent " +
         Fixed(r.fairness.jain_mean, 3) + ", GPU alloc " + Fixed(r.fairness.gpu_alloc_pct_mean, 2) +
         "%\n";
}

std::string GpuHours(double gpu_s) { return Fixed(gpu_s / 3600.0, 1); }

// One row per project: its jobs, times, GPU-hours, preemptions and fairness.
std::string ProjectTable(const ReplayResult& r) {
  std::string out = "  " + Pad("project", 14, true) + Pad("weight", 7) + Pad("jobs", 8) +
                    Pad("done", 8) + Pad("JCT mean", 10) + Pad("JCT p50", 9) + Pad("JCT p95", 9) +
                    Pad("queue mean", 11) + Pad("queue p50", 10) + Pad("queue p95", 10) +
                    Pad("GPU-h", 9) + Pad("preempt", 8) + Pad("lost GPU-h", 11) +
                    Pad("90% ent.", 10) + Pad("alloc/ent", 10) + "\n";
  for (const ProjectResult& p : r.projects) {
    out += "  " + Pad(p.project, 14, true) + Pad(Fixed(p.weight, 2), 7) +
           Pad(std::to_string(p.jobs), 8) + Pad(std::to_string(p.completed), 8) +
           Pad(Fixed(p.jct_s.mean, 0), 10) + Pad(Fixed(p.jct_s.p50, 0), 9) +
           Pad(Fixed(p.jct_s.p95, 0), 9) + Pad(Fixed(p.queue_s.mean, 0), 11) +
           Pad(Fixed(p.queue_s.p50, 0), 10) + Pad(Fixed(p.queue_s.p95, 0), 10) +
           Pad(GpuHours(p.gpu_s), 9) + Pad(std::to_string(p.preemptions), 8) +
           Pad(GpuHours(p.lost_gpu_s), 11) +
           Pad(p.entitlement_90_s ? std::to_string(*p.entitlement_90_s) : "-", 10) +
           Pad(Fixed(p.share_of_entitlement_mean, 3), 10) + "\n";
  }
  return out;
}

}  // namespace

json ReplayJson(const ReplayConfig& config, const std::vector<ReplayResult>& results) {
  json out = {{"mode", "replay"},
              {"config",
               {{"order", std::string(sched::QueueOrderName(config.order))},
                {"blocking", std::string(sched::BlockingName(config.blocking))},
                {"estimate", std::string(EstimateSourceName(config.estimate))},
                {"resume", config.resume},
                {"pass_interval_s", config.pass_interval_s},
                {"eta_queue_rows", config.eta_queue_rows},
                {"las_thresholds_gpu_s", config.las_thresholds_gpu_s},
                {"gang_placement", std::string(sched::GangPlacementName(config.gang_placement))},
                {"reclaim", config.sharing.reclaim},
                {"victims", std::string(sched::VictimOrderName(config.victims))},
                {"min_run_before_preemption_s", config.min_run_before_preemption_s},
                {"checkpoint_interval_s", config.checkpoint_interval_s},
                {"checkpoint_grace_s", config.checkpoint_grace_s},
                {"resize_cost_s", config.resize.restart_cost.value()},
                {"resize_interval_s", config.resize.min_interval.value()},
                {"resize_budget", config.resize.budget}}},
              {"results", json::array()}};
  for (const auto& r : results) {
    json projects = json::array();
    for (const ProjectResult& p : r.projects) {
      projects.push_back({{"project", p.project},
                          {"weight", p.weight},
                          {"jobs", p.jobs},
                          {"completed", p.completed},
                          {"jct_s", DistributionJson(p.jct_s)},
                          {"queue_s", DistributionJson(p.queue_s)},
                          {"gpu_s", Round4(p.gpu_s)},
                          {"preemptions", p.preemptions},
                          {"lost_gpu_s", Round4(p.lost_gpu_s)},
                          {"entitlement_90_s", OptionalSeconds(p.entitlement_90_s)},
                          {"share_of_entitlement_mean", Round4(p.share_of_entitlement_mean)}});
    }
    const json frag = r.frag_pct_mean ? json(Round4(*r.frag_pct_mean)) : json(nullptr);
    out["results"].push_back({{"policy", r.policy},
                              {"jobs", r.jobs},
                              {"completed", r.completed},
                              {"unfinished", r.unfinished},
                              {"jct_s", DistributionJson(r.jct_s)},
                              {"queue_s", DistributionJson(r.queue_s)},
                              {"run_s_mean", Round4(r.run_s_mean)},
                              {"delay_s_mean", Round4(r.delay_s_mean)},
                              {"makespan_s", r.makespan_s},
                              {"gpu_alloc_pct_mean", Round4(r.gpu_alloc_pct_mean)},
                              {"gpu_alloc_pct_arrivals", Round4(r.gpu_alloc_pct_arrivals)},
                              {"frag_pct_mean", frag},
                              {"gpu_s", Round4(r.gpu_s)},
                              {"preemptions", r.preemptions},
                              {"lost_gpu_s", Round4(r.lost_gpu_s)},
                              {"gangs",
                               {{"starts", r.gang_starts},
                                {"nodes_mean", Round4(r.gang_nodes_mean)},
                                {"one_rack", r.gang_starts_one_rack}}},
                              {"fairness",
                               {{"contended_s", r.fairness.contended_s},
                                {"jain_mean", Round4(r.fairness.jain_mean)},
                                {"gpu_alloc_pct_mean", Round4(r.fairness.gpu_alloc_pct_mean)}}},
                              {"elastic",
                               {{"share", Round4(r.elastic_share)},
                                {"alpha", Round4(r.elastic_alpha)},
                                {"jobs", r.elastic_jobs},
                                {"grows", r.grows},
                                {"shrinks", r.shrinks}}},
                              {"projects", projects},
                              {"wall_ms", Round4(r.wall_ms)}});
    if (r.eta) {
      out["results"].back()["eta"] = {{"waited", r.eta->waited},
                                      {"estimated", r.eta->estimated},
                                      {"scored", r.eta->scored},
                                      {"abs_error_s", DistributionJson(r.eta->abs_error_s)},
                                      {"started_early_pct", Round4(r.eta->started_early_pct)}};
    }
  }
  return out;
}

std::string ReplayTable(const std::vector<ReplayResult>& results) {
  std::string out = Pad("policy", 12, true) + Pad("jobs", 9) + Pad("done", 9) +
                    Pad("JCT mean", 11) + Pad("JCT p50", 10) + Pad("JCT p99", 10) +
                    Pad("run mean", 11) + Pad("delay mean", 12) + Pad("queue mean", 12) +
                    Pad("queue p95", 11) + Pad("makespan", 11) + Pad("GPU alloc%", 12) +
                    Pad("frag%", 8) + Pad("preempt", 9) + "\n";
  for (const auto& r : results) {
    out += Pad(r.policy, 12, true) + Pad(std::to_string(r.jobs), 9) +
           Pad(std::to_string(r.completed), 9) + Pad(Fixed(r.jct_s.mean, 0), 11) +
           Pad(Fixed(r.jct_s.p50, 0), 10) + Pad(Fixed(r.jct_s.p99, 0), 10) +
           Pad(Fixed(r.run_s_mean, 0), 11) + Pad(Fixed(r.delay_s_mean, 0), 12) +
           Pad(Fixed(r.queue_s.mean, 0), 12) + Pad(Fixed(r.queue_s.p95, 0), 11) +
           Pad(std::to_string(r.makespan_s), 11) + Pad(Fixed(r.gpu_alloc_pct_mean, 2), 12) +
           Pad(r.frag_pct_mean ? Fixed(*r.frag_pct_mean, 2) : "n/a", 8) +
           Pad(std::to_string(r.preemptions), 9) + "\n";
  }
  for (const auto& r : results) {
    if (r.projects.size() < 2 && r.preemptions == 0) continue;
    out += "\n" + r.policy + " per project (lost GPU-h: runs thrown away by preemption):\n" +
           ProjectTable(r);
    out += "  " + ContentionLine(r);
  }
  bool elastic = false;
  for (const auto& r : results) elastic = elastic || r.elastic_share > 0;
  if (elastic) {
    out +=
        "\nelastic jobs (F: share made elastic, A: throughput ∝ GPUs^A; lost GPU-h: "
        "preemption):\n" +
        Pad("policy", 12, true) + Pad("F", 6) + Pad("A", 6) + Pad("elastic", 9) + Pad("grows", 8) +
        Pad("shrinks", 9) + Pad("JCT mean", 11) + Pad("JCT p95", 10) + Pad("GPU alloc%", 12) +
        Pad("lost GPU-h", 12) + "\n";
    for (const auto& r : results) {
      out += Pad(r.policy, 12, true) + Pad(Fixed(r.elastic_share, 2), 6) +
             Pad(Fixed(r.elastic_alpha, 2), 6) + Pad(std::to_string(r.elastic_jobs), 9) +
             Pad(std::to_string(r.grows), 8) + Pad(std::to_string(r.shrinks), 9) +
             Pad(Fixed(r.jct_s.mean, 0), 11) + Pad(Fixed(r.jct_s.p95, 0), 10) +
             Pad(Fixed(r.gpu_alloc_pct_mean, 2), 12) + Pad(Fixed(r.lost_gpu_s / 3600, 1), 12) +
             "\n";
    }
  }
  for (const auto& r : results) {
    if (!r.eta) continue;
    out += "\n" + r.policy + " estimated starts: " + std::to_string(r.eta->waited) +
           " jobs waited after arriving, " + std::to_string(r.eta->estimated) + " estimated, " +
           std::to_string(r.eta->scored) + " started; |estimate - start| mean " +
           Fixed(r.eta->abs_error_s.mean, 0) + " s, p50 " + Fixed(r.eta->abs_error_s.p50, 0) +
           ", p90 " + Fixed(r.eta->abs_error_s.p90, 0) + "; " + Fixed(r.eta->started_early_pct, 1) +
           "% started before their estimate\n";
  }
  out +=
      "(times in seconds of virtual time; 90% ent.: seconds from a project's first submit until "
      "it held\n 90% of its entitlement; alloc/ent: time-weighted over contended time)\n";
  return out;
}

Status WriteReplayOutputs(const std::vector<ReplayResult>& results, const std::string& dir) {
  CORRAL_RETURN_IF_ERROR(MakeDir(dir));
  std::vector<PlotSeries> series;
  for (const auto& r : results) {
    std::string csv = "time_s,gpu_alloc_pct,frag_pct,pending,running\n";
    std::string projects_csv = "time_s,project,gpu_alloc_pct,entitled_pct\n";
    PlotSeries s{r.policy, {}};
    std::vector<PlotSeries> project_series;
    for (const ProjectResult& p : r.projects) project_series.push_back({p.project, {}});
    for (const ReplaySample& p : r.timeline) {
      csv += std::to_string(p.time_s) + "," + Fixed(p.gpu_alloc_pct, 4) + "," +
             (r.frag_pct_mean ? Fixed(p.frag_pct, 4) : "") + "," + std::to_string(p.pending) + "," +
             std::to_string(p.running) + "\n";
      const double hours = static_cast<double>(p.time_s) / 3600.0;
      s.points.emplace_back(hours, p.gpu_alloc_pct);
      for (size_t k = 0; k < r.projects.size(); ++k) {
        projects_csv += std::to_string(p.time_s) + "," + r.projects[k].project + "," +
                        Fixed(p.project_alloc_pct[k], 4) + "," +
                        Fixed(p.project_entitled_pct[k], 4) + "\n";
        project_series[k].points.emplace_back(hours, p.project_alloc_pct[k]);
      }
    }
    CORRAL_RETURN_IF_ERROR(
        WriteFile(std::filesystem::path(dir) / ("replay_" + r.policy + ".csv"), csv));
    CORRAL_RETURN_IF_ERROR(WriteFile(
        std::filesystem::path(dir) / ("replay_" + r.policy + "_projects.csv"), projects_csv));
    CORRAL_RETURN_IF_ERROR(
        WriteFile(std::filesystem::path(dir) / ("replay_" + r.policy + "_projects.svg"),
                  RenderLinePlot({"GPU allocation per project (" + r.policy + ")",
                                  "virtual time (hours)", "allocated GPU % of the cluster"},
                                 project_series)));
    series.push_back(std::move(s));
  }
  CORRAL_RETURN_IF_ERROR(WriteFile(
      std::filesystem::path(dir) / "replay_alloc.svg",
      RenderLinePlot({"GPU allocation over time", "virtual time (hours)", "allocated GPU %"},
                     series)));
  // An elastic sweep: mean JCT and allocation against the elastic share, one line per alpha.
  std::map<double, PlotSeries> jct_by_alpha, alloc_by_alpha;
  for (const auto& r : results) {
    const std::string name = r.policy + " A=" + Fixed(r.elastic_alpha, 2);
    jct_by_alpha.try_emplace(r.elastic_alpha, PlotSeries{name, {}})
        .first->second.points.emplace_back(r.elastic_share, r.jct_s.mean / 3600.0);
    alloc_by_alpha.try_emplace(r.elastic_alpha, PlotSeries{name, {}})
        .first->second.points.emplace_back(r.elastic_share, r.gpu_alloc_pct_mean);
  }
  if (results.size() < 2 || jct_by_alpha.begin()->second.points.size() < 2) return Status::Ok();
  auto values = [](std::map<double, PlotSeries>& by_alpha) {
    std::vector<PlotSeries> out;
    for (auto& [alpha, s] : by_alpha) {
      std::sort(s.points.begin(), s.points.end());
      out.push_back(std::move(s));
    }
    return out;
  };
  CORRAL_RETURN_IF_ERROR(WriteFile(
      std::filesystem::path(dir) / "elastic_jct.svg",
      RenderLinePlot({"Mean JCT against the elastic share", "elastic share F", "mean JCT (hours)"},
                     values(jct_by_alpha))));
  return WriteFile(std::filesystem::path(dir) / "elastic_alloc.svg",
                   RenderLinePlot({"GPU allocation against the elastic share", "elastic share F",
                                   "allocated GPU % (makespan mean)"},
                                  values(alloc_by_alpha)));
}

namespace {

json AccuracyJson(const PredictionAccuracy& a) {
  return {{"jobs", a.jobs},
          {"scored", a.scored},
          {"mdape_pct", Round4(a.mdape_pct)},
          {"within_2x_pct", Round4(a.within_2x_pct)},
          {"mean_confidence", Round4(a.mean_confidence)}};
}

std::string AccuracyRow(const std::string& label, const PredictionAccuracy& a) {
  const bool scored = a.scored > 0;
  return Pad(label, 19, true) + Pad(std::to_string(a.jobs), 8) + Pad(std::to_string(a.scored), 8) +
         Pad(scored ? Fixed(a.mdape_pct, 1) + "%" : "-", 10) +
         Pad(scored ? Fixed(a.within_2x_pct, 1) + "%" : "-", 11) +
         Pad(Fixed(a.mean_confidence, 3), 12) + "\n";
}

}  // namespace

json PredictJson(const PredictionEvaluation& eval, const predict::PredictorConfig& config) {
  json out = {{"mode", "predict"},
              {"config",
               {{"window", config.window},
                {"min_samples", config.min_samples},
                {"default_estimate_s", config.default_estimate.value()}}}};
  out.update(AccuracyJson(eval.total));
  out["by_basis"] = json::array();
  for (const auto& [basis, a] : eval.by_basis) {
    json row = {{"basis", basis}};
    row.update(AccuracyJson(a));
    out["by_basis"].push_back(row);
  }
  out["by_confidence"] = json::array();
  for (const auto& [band, a] : eval.by_confidence) {
    json row = {{"confidence", band}};
    row.update(AccuracyJson(a));
    out["by_confidence"].push_back(row);
  }
  return out;
}

std::string PredictTable(const PredictionEvaluation& eval) {
  std::string out = Pad("basis", 19, true) + Pad("jobs", 8) + Pad("scored", 8) + Pad("MdAPE", 10) +
                    Pad("within 2x", 11) + Pad("confidence", 12) + "\n";
  for (const auto& [basis, a] : eval.by_basis) out += AccuracyRow(basis, a);
  out += AccuracyRow("total", eval.total);
  for (const auto& [band, a] : eval.by_confidence) out += AccuracyRow("conf " + band, a);
  out +=
      "(MdAPE: median |predicted - actual| / actual; within 2x: predicted / actual in [0.5, 2];\n"
      " both over scored jobs, those with actual > 0; confidence: mean over all jobs)\n";
  return out;
}

}  // namespace corral::sim
