#include "server/monitoring/monitoring_views.h"

#include <algorithm>
#include <ctime>

#include "server/monitoring/capacity.h"
#include "server/monitoring/gpu_history.h"
#include "server/monitoring/metrics_exposition.h"

namespace corral::server {

namespace {

// Every project, for the exposition: Prometheus scrapes with an admin or metrics token.
Principal Everyone() {
  Principal p;
  p.admin = true;
  return p;
}

}  // namespace

std::string MetricsText(Controller& controller, Seconds now,
                        std::optional<SaturationGuard::Counts> saturation) {
  MetricsSnapshot s;
  s.summary = controller.ClusterSummary();
  s.nodes = controller.Nodes(Everyone());
  auto projects = controller.ProjectsView(Everyone());
  if (projects.ok()) s.projects = std::move(projects).value();
  s.gpus = controller.Gpus().Gpus();
  s.idle_after_ms = controller.Gpus().options().idle_after_ms;
  s.now_ms = now.value() * 1000;
  s.rejected_gpu_reports = controller.RejectedGpuReports();
  s.waiting_heartbeats = controller.WaitingHeartbeats();
  s.store_commits = controller.StoreCommits();
  s.store_round_trips = controller.StoreRoundTrips();
  s.saturation = saturation;
  return RenderMetrics(s);
}

namespace {

// `gpu`'s holders as `who` may see them.
std::vector<SeenHolder> SeenBy(const Controller& controller, const Principal& who,
                               const GpuStatus& gpu) {
  return HoldersSeen(
      gpu, [&](const std::string& project) { return controller.SeesWorkOf(who, project); });
}

}  // namespace

nlohmann::json GpusView(Controller& controller, const Principal& who, Seconds now, bool idle_only) {
  const GpuMonitor& monitor = controller.Gpus();
  const int64_t now_ms = now.value() * 1000;
  const int64_t idle_after_ms = monitor.options().idle_after_ms;
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuStatus& g : idle_only ? monitor.IdleGpus(now_ms) : monitor.Gpus()) {
    gpus.push_back(GpuStatusJson(g, SeenBy(controller, who, g), now_ms, idle_after_ms));
  }
  return {{"idle_threshold_percent", monitor.options().idle_threshold_percent},
          {"idle_after_s", idle_after_ms / 1000},
          {"gpus", gpus}};
}

nlohmann::json JobGpusView(Controller& controller, const Principal& who, JobId job, Seconds now,
                           Seconds since) {
  const GpuMonitor& monitor = controller.Gpus();
  const int64_t now_ms = now.value() * 1000;
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& [status, readings] : monitor.JobGpus(job, since.value() * 1000)) {
    nlohmann::json g = GpuStatusJson(status, SeenBy(controller, who, status), now_ms,
                                     monitor.options().idle_after_ms);
    nlohmann::json series = nlohmann::json::array();
    for (const GpuReading& r : readings) series.push_back(GpuReadingJson(r));
    g["series"] = std::move(series);
    gpus.push_back(std::move(g));
  }
  return {{"job", job.value()}, {"gpus", gpus}};
}

namespace {

// Unix seconds of 00:00 UTC of a "YYYY-MM-DD" day (checked by ParseDayRange).
Seconds StartOfDay(const std::string& day) {
  std::tm tm{};
  tm.tm_year = std::stoi(day.substr(0, 4)) - 1900;
  tm.tm_mon = std::stoi(day.substr(5, 2)) - 1;
  tm.tm_mday = std::stoi(day.substr(8, 2));
  return Seconds(static_cast<int64_t>(timegm(&tm)));
}

int CapacityGpus(const std::vector<model::Node>& nodes) {
  int gpus = 0;
  for (const model::Node& n : nodes) gpus += static_cast<int>(n.gpus.size());
  return gpus;
}

}  // namespace

Result<nlohmann::json> JobGpuHistoryView(GpuHistory& history, JobId job, Seconds since,
                                         Seconds until) {
  auto rows = history.JobHistory(job, since, until);
  if (!rows.ok()) return rows.status();
  nlohmann::json intervals = nlohmann::json::array();
  for (const store::GpuMetricRow& r : *rows) {
    intervals.push_back({{"node", r.node},
                         {"gpu", r.gpu},
                         {"t", r.start_s},
                         {"resolution_s", r.resolution_s},
                         {"utilization_percent", r.utilization_permille / 10.0},
                         {"memory_used_mib", r.memory_used_mib},
                         {"power_w", static_cast<double>(r.power_mw) / 1000.0},
                         {"temperature_c", r.temperature_c}});
  }
  return nlohmann::json{{"job", job.value()}, {"intervals", intervals}};
}

Result<nlohmann::json> CapacityForecastView(Controller& controller, Seconds now, int history_days,
                                            int horizon_days) {
  const Seconds since(now.value() - int64_t{history_days} * 86400);
  // The purged jobs' hours from the first hour of the history on (ForecastView cuts the rest),
  // read before the jobs: a purge between the two reads then leaves a job out of this answer
  // rather than counting it twice.
  auto purged = controller.PurgedDemand(Seconds(since.value() / 3600 * 3600 - 3600), now);
  if (!purged.ok()) return purged.status();
  auto jobs = controller.JobsLiveSince(since);
  if (!jobs.ok()) return jobs.status();
  return ForecastView(*jobs, CapacityGpus(controller.LiveNodes()), now, history_days, horizon_days,
                      *purged);
}

Result<nlohmann::json> ForecastCache::Get(int history_days, int horizon_days, Seconds now,
                                          const std::function<Result<nlohmann::json>()>& compute) {
  const std::pair<int, int> key{history_days, horizon_days};
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(key);
    if (it != entries_.end()) {
      const int64_t at = it->second.computed_at.value();
      // The view's series are whole hours up to the current one: an answer of another hour is
      // stale however recent. So is one "computed" after now (the clock stepped back).
      if (now.value() >= at && now.value() - at < ttl_.value() && now.value() / 3600 == at / 3600) {
        return it->second.view;
      }
    }
  }
  Result<nlohmann::json> view = compute();
  if (!view.ok()) return view;
  std::lock_guard lock(mu_);
  entries_[key] = {now, *view};
  while (entries_.size() > kMaxEntries) {
    auto oldest =
        std::min_element(entries_.begin(), entries_.end(), [](const auto& a, const auto& b) {
          return a.second.computed_at.value() < b.second.computed_at.value();
        });
    entries_.erase(oldest);
  }
  return view;
}

Result<nlohmann::json> WhatIfView(Controller& controller, Seconds now, const nlohmann::json& body) {
  auto request = ParseWhatIf(body);
  if (!request.ok()) return request.status();
  auto range = ParseDayRange(request->since, "", now);
  if (!range.ok()) return range.status();
  const Seconds since = StartOfDay(range->first);
  auto jobs = controller.JobsLiveSince(since);
  if (!jobs.ok()) return jobs.status();
  auto answer = WhatIf(controller.LiveNodes(), TraceOf(*jobs, since, now), *request,
                       controller.SchedulerRules());
  if (!answer.ok()) return answer.status();
  (*answer)["since"] = range->first;
  return answer;
}

}  // namespace corral::server
