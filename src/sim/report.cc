#include "sim/report.h"

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <map>

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
  return out;
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

json ReplayJson(const std::vector<ReplayResult>& results) {
  json out = {{"mode", "replay"}, {"results", json::array()}};
  for (const auto& r : results) {
    out["results"].push_back({{"policy", r.policy},
                              {"jobs", r.jobs},
                              {"completed", r.completed},
                              {"unfinished", r.unfinished},
                              {"jct_s", DistributionJson(r.jct_s)},
                              {"queue_s", DistributionJson(r.queue_s)},
                              {"makespan_s", r.makespan_s},
                              {"gpu_alloc_pct_mean", Round4(r.gpu_alloc_pct_mean)},
                              {"frag_pct_mean", Round4(r.frag_pct_mean)},
                              {"wall_ms", Round4(r.wall_ms)}});
  }
  return out;
}

std::string ReplayTable(const std::vector<ReplayResult>& results) {
  std::string out = Pad("policy", 12, true) + Pad("jobs", 9) + Pad("done", 9) +
                    Pad("JCT mean", 11) + Pad("JCT p50", 10) + Pad("JCT p99", 10) +
                    Pad("queue mean", 12) + Pad("queue p95", 11) + Pad("makespan", 11) +
                    Pad("GPU alloc%", 12) + Pad("frag%", 8) + "\n";
  for (const auto& r : results) {
    out += Pad(r.policy, 12, true) + Pad(std::to_string(r.jobs), 9) +
           Pad(std::to_string(r.completed), 9) + Pad(Fixed(r.jct_s.mean, 0), 11) +
           Pad(Fixed(r.jct_s.p50, 0), 10) + Pad(Fixed(r.jct_s.p99, 0), 10) +
           Pad(Fixed(r.queue_s.mean, 0), 12) + Pad(Fixed(r.queue_s.p95, 0), 11) +
           Pad(std::to_string(r.makespan_s), 11) + Pad(Fixed(r.gpu_alloc_pct_mean, 2), 12) +
           Pad(Fixed(r.frag_pct_mean, 2), 8) + "\n";
  }
  out += "(times in seconds of virtual time)\n";
  return out;
}

Status WriteReplayOutputs(const std::vector<ReplayResult>& results, const std::string& dir) {
  CORRAL_RETURN_IF_ERROR(MakeDir(dir));
  std::vector<PlotSeries> series;
  for (const auto& r : results) {
    std::string csv = "time_s,gpu_alloc_pct,frag_pct,pending,running\n";
    PlotSeries s{r.policy, {}};
    for (const ReplaySample& p : r.timeline) {
      csv += std::to_string(p.time_s) + "," + Fixed(p.gpu_alloc_pct, 4) + "," +
             Fixed(p.frag_pct, 4) + "," + std::to_string(p.pending) + "," +
             std::to_string(p.running) + "\n";
      s.points.emplace_back(static_cast<double>(p.time_s) / 3600.0, p.gpu_alloc_pct);
    }
    CORRAL_RETURN_IF_ERROR(
        WriteFile(std::filesystem::path(dir) / ("replay_" + r.policy + ".csv"), csv));
    series.push_back(std::move(s));
  }
  return WriteFile(
      std::filesystem::path(dir) / "replay_alloc.svg",
      RenderLinePlot({"GPU allocation over time", "virtual time (hours)", "allocated GPU %"},
                     series));
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
