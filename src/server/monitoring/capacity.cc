#include "server/monitoring/capacity.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>

#include "server/control/job_submission.h"
#include "sim/replay.h"

namespace corral::server {

namespace {

constexpr int64_t kHour = 3600;
constexpr size_t kMaxExtraCounts = 8;
constexpr int kMaxExtraGpus = 100'000;
constexpr int64_t kDefaultRunS = 3600;  // a job that never started: its time limit, else this
// How often a what-if also passes while jobs wait, when its rules can decide something between
// arrivals and ends (WhatIf).
constexpr int64_t kWhatIfPassIntervalS = 60;

// The spec of a record; nullopt when it cannot be read (a record from a newer server).
std::optional<JobSpec> SpecOf(const store::JobRecord& record) {
  auto spec =
      ParseJobSpec(nlohmann::json::parse(record.spec_json, nullptr, false), SpecOrigin::kStored);
  if (!spec.ok()) return std::nullopt;
  return *spec;
}

double GpusOf(const JobSpec& spec) {
  return static_cast<double>(spec.resources.TotalMilli().value()) * spec.tasks / 1000.0;
}

// The node extra GPUs come on: a copy of the most common shape among nodes with GPUs (GPU
// count and model), without its labels; with no GPU node to copy, 8 GPUs of an unnamed model.
model::Node AddedNodeShape(const std::vector<model::Node>& nodes) {
  std::map<std::pair<size_t, std::string>, int> shapes;
  const model::Node* most = nullptr;
  int best = 0;
  for (const model::Node& n : nodes) {
    if (n.gpus.empty()) continue;
    const int count = ++shapes[{n.gpus.size(), n.gpu_model}];
    if (count > best) {
      best = count;
      most = &n;
    }
  }
  model::Node shape;
  if (most != nullptr) {
    shape = *most;
  } else {
    shape.cpu = CpuMilli(64000);
    shape.memory = MemoryMib(512 * 1024);
    for (int i = 0; i < 8; ++i) {
      model::Gpu g;
      g.index = i;
      g.memory = MemoryMib(81920);
      shape.gpus.push_back(g);
    }
  }
  shape.labels.clear();
  return shape;
}

}  // namespace

std::vector<predict::DemandInterval> DemandOf(const std::vector<store::JobRecord>& jobs,
                                              Seconds now) {
  std::vector<predict::DemandInterval> out;
  for (const store::JobRecord& r : jobs) {
    auto spec = SpecOf(r);
    if (!spec) continue;
    const int64_t end = r.end_time ? r.end_time->value() : now.value();
    out.push_back({r.submit_time.value(), end, GpusOf(*spec)});
  }
  return out;
}

nlohmann::json ForecastView(const std::vector<store::JobRecord>& jobs, int capacity_gpus,
                            Seconds now, int history_days, int horizon_days,
                            const std::vector<store::DemandHour>& purged) {
  const int64_t this_hour = now.value() / kHour * kHour;
  const int history_hours = history_days * 24;
  const int64_t start = this_hour - history_hours * kHour;
  std::vector<predict::DemandInterval> demand = DemandOf(jobs, now);
  for (const store::DemandHour& h : purged) {
    // The hour's mean demand in GPUs: milli-GPU seconds / 1000 / 3600.
    demand.push_back({h.hour_s, h.hour_s + kHour, static_cast<double>(h.milli_gpu_s) / 3.6e6});
  }
  // Demand now: the jobs submitted and not ended at `now` (the history's last entry is the
  // hour before this one, which holds none of this hour's jobs).
  double demand_now = 0;
  for (const store::JobRecord& r : jobs) {
    if (r.submit_time > now || (r.end_time && *r.end_time <= now)) continue;
    if (auto spec = SpecOf(r)) demand_now += GpusOf(*spec);
  }
  const std::vector<double> history = predict::HourlyDemand(demand, start, history_hours);
  const predict::DemandForecast f = predict::ForecastDemand(history, start, horizon_days * 24);
  nlohmann::json past = nlohmann::json::array(), ahead = nlohmann::json::array();
  for (size_t i = 0; i < history.size(); ++i) {
    past.push_back({{"t", start + kHour * static_cast<int64_t>(i)}, {"demand_gpus", history[i]}});
  }
  for (size_t k = 0; k < f.mean.size(); ++k) {
    ahead.push_back({{"t", this_hour + kHour * static_cast<int64_t>(k)},
                     {"demand_gpus", f.mean[k]},
                     {"low", f.low[k]},
                     {"high", f.high[k]}});
  }
  return {{"capacity_gpus", capacity_gpus},
          {"step_s", kHour},
          {"demand_now_gpus", demand_now},
          {"history", past},
          {"forecast", ahead},
          {"residual_stddev", f.residual_stddev}};
}

sim::Trace TraceOf(const std::vector<store::JobRecord>& jobs, Seconds since, Seconds now) {
  sim::Trace trace;
  for (const store::JobRecord& r : jobs) {
    if (r.submit_time < since || r.submit_time >= now) continue;
    if (!r.start_time && r.end_time) continue;  // cancelled (or failed) before it ever ran
    auto spec = SpecOf(r);
    if (!spec) continue;
    int64_t run_s = spec->time_limit_s > 0 ? spec->time_limit_s : kDefaultRunS;
    if (r.start_time) {
      const int64_t end = r.end_time ? r.end_time->value() : now.value();
      run_s = std::max<int64_t>(1, end - r.start_time->value());
    }
    sim::TraceJob j;
    j.job = ToModelJob(*spec, r);
    j.job.time_limit.reset();  // the replay plays the recorded length, not a limit
    j.job.expected_duration = Seconds(run_s);
    j.duration = Seconds(run_s);
    trace.jobs.push_back(std::move(j));
  }
  return trace;
}

std::vector<model::Node> WithExtraGpus(const std::vector<model::Node>& nodes, int extra_gpus) {
  std::vector<model::Node> out = nodes;
  if (extra_gpus <= 0) return out;
  const model::Node shape = AddedNodeShape(nodes);
  const int per_node = static_cast<int>(shape.gpus.size());
  for (int k = 0, left = extra_gpus; left > 0; ++k, left -= per_node) {
    model::Node n = shape;
    n.name = "whatif-" + std::to_string(k);
    n.gpus.resize(std::min(per_node, left));
    for (size_t i = 0; i < n.gpus.size(); ++i) {
      n.gpus[i].uuid = n.name + "-" + std::to_string(i);
    }
    out.push_back(std::move(n));
  }
  return out;
}

Result<WhatIfRequest> ParseWhatIf(const nlohmann::json& body) {
  WhatIfRequest r;
  if (!body.is_object()) return InvalidArgument("body: must be a JSON object");
  for (const auto& [key, value] : body.items()) {
    if (key != "since" && key != "extra_gpus" && key != "target_p90_wait_s") {
      return InvalidArgument("field '" + key + "': unknown (since, extra_gpus, target_p90_wait_s)");
    }
  }
  if (body.contains("since")) {
    if (!body["since"].is_string()) return InvalidArgument("field 'since': must be a string");
    r.since = body["since"];
  }
  if (body.contains("extra_gpus")) {
    const auto& list = body["extra_gpus"];
    if (!list.is_array() || list.empty() || list.size() > kMaxExtraCounts) {
      return InvalidArgument("field 'extra_gpus': an array of 1 to " +
                             std::to_string(kMaxExtraCounts) + " GPU counts");
    }
    r.extra_gpus.clear();
    for (const auto& v : list) {
      if (!v.is_number_integer() || v.get<int64_t>() < 0 || v.get<int64_t>() > kMaxExtraGpus) {
        return InvalidArgument("field 'extra_gpus': each must be an integer 0.." +
                               std::to_string(kMaxExtraGpus));
      }
      r.extra_gpus.push_back(v.get<int>());
    }
    std::sort(r.extra_gpus.begin(), r.extra_gpus.end());
    r.extra_gpus.erase(std::unique(r.extra_gpus.begin(), r.extra_gpus.end()), r.extra_gpus.end());
  }
  if (body.contains("target_p90_wait_s")) {
    const auto& v = body["target_p90_wait_s"];
    if (!v.is_number_integer() || v.get<int64_t>() < 0) {
      return InvalidArgument("field 'target_p90_wait_s': must be an integer >= 0");
    }
    r.target_p90_wait_s = v.get<int64_t>();
  }
  return r;
}

Result<nlohmann::json> WhatIf(const std::vector<model::Node>& nodes, const sim::Trace& trace,
                              const WhatIfRequest& request,
                              const sched::SchedulerConfig& scheduling) {
  sim::ReplayConfig config;
  config.policy = scheduling.policy;
  config.order = scheduling.order;
  config.blocking = scheduling.blocking;
  config.sharing = scheduling.sharing;
  config.las_thresholds_gpu_s = scheduling.las_thresholds_gpu_s;
  config.gang_placement = scheduling.gang_placement;
  config.estimate = sim::EstimateSource::kPredicted;
  config.track_fragmentation = false;
  config.timeline_points = 1;
  // The server passes every second; a replay passes at arrivals and ends only, which misses a
  // 2D-LAS preemption, or a reclaim (reclaim on and a project with a quota), decided between
  // them. With those rules it also passes every minute while jobs wait; without, such passes
  // would decide nothing and only cost time.
  const bool any_quota = std::any_of(
      scheduling.sharing.projects.begin(), scheduling.sharing.projects.end(), [](const auto& p) {
        return p.second.quota_milli > 0 || !p.second.model_quota_milli.empty();
      });
  if (scheduling.order == sched::QueueOrder::kLas || (scheduling.sharing.reclaim && any_quota)) {
    config.pass_interval_s = kWhatIfPassIntervalS;
  }
  // Jobs whose tasks ask more GPUs than any node (real or added) has can start in none of the
  // replays: they are set aside and reported, not counted against every size tried.
  size_t largest = AddedNodeShape(nodes).gpus.size();
  for (const model::Node& n : nodes) largest = std::max(largest, n.gpus.size());
  sim::Trace fitting;
  int64_t too_big = 0;
  for (const sim::TraceJob& j : trace.jobs) {
    if (static_cast<size_t>(j.job.resources.gpus.value()) > largest) {
      ++too_big;
    } else {
      fitting.jobs.push_back(j);
    }
  }
  nlohmann::json results = nlohmann::json::array();
  nlohmann::json smallest = nullptr;
  for (int extra : request.extra_gpus) {
    const std::vector<model::Node> cluster = WithExtraGpus(nodes, extra);
    auto replay = sim::RunReplay(cluster, fitting, config);
    if (!replay.ok()) return replay.status();
    // A job that never started waited longer than any that did: an infinite wait in the p90;
    // the mean and the max are those of the jobs that started.
    std::vector<double> waits, started;
    for (const sim::ReplayJob& j : replay->job_outcomes) {
      if (j.first_start_s < 0) {
        waits.push_back(std::numeric_limits<double>::infinity());
        continue;
      }
      started.push_back(static_cast<double>(j.first_start_s - j.submit_s));
      waits.push_back(started.back());
    }
    const double p90_wait = sim::Summarize(waits).p90;
    const double mean_wait = sim::Summarize(started).mean;
    int64_t gpus = 0;
    for (const model::Node& n : cluster) gpus += static_cast<int64_t>(n.gpus.size());
    const double max_wait = started.empty() ? 0 : *std::max_element(started.begin(), started.end());
    // JSON has no infinity: a p90 among the jobs that never started is null.
    const nlohmann::json p90 =
        std::isinf(p90_wait) ? nlohmann::json(nullptr) : nlohmann::json(p90_wait);
    results.push_back({{"extra_gpus", extra},
                       {"gpus", gpus},
                       {"p90_wait_s", p90},
                       {"mean_wait_s", mean_wait},
                       {"max_wait_s", max_wait},
                       {"unfinished", replay->unfinished}});
    if (smallest.is_null() && !p90.is_null() &&
        p90_wait <= static_cast<double>(request.target_p90_wait_s)) {
      smallest = extra;
    }
  }
  return nlohmann::json{{"jobs", fitting.jobs.size()},
                        {"too_big", too_big},
                        {"target_p90_wait_s", request.target_p90_wait_s},
                        {"results", results},
                        {"smallest_meeting_target", smallest}};
}

}  // namespace corral::server
