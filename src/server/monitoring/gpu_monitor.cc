#include "server/monitoring/gpu_monitor.h"

#include <algorithm>
#include <cmath>
#include <ctime>
#include <nlohmann/json.hpp>

namespace corral::server {

std::string UtcDay(int64_t unix_s) {
  const std::time_t t = static_cast<std::time_t>(unix_s);
  std::tm tm{};
  gmtime_r(&t, &tm);
  char buf[16];
  std::strftime(buf, sizeof(buf), "%Y-%m-%d", &tm);
  return buf;
}

namespace {

void AddReadingFields(const GpuReading& r, nlohmann::json& j) {
  if (r.utilization_percent) j["utilization_percent"] = *r.utilization_percent;
  if (r.memory_utilization_percent) j["memory_utilization_percent"] = *r.memory_utilization_percent;
  if (r.memory_used_mib) j["memory_used_mib"] = *r.memory_used_mib;
  if (r.power_mw) j["power_w"] = static_cast<double>(*r.power_mw) / 1000.0;
  if (r.temperature_c) j["temperature_c"] = *r.temperature_c;
}

}  // namespace

std::vector<SeenHolder> HoldersSeen(const GpuStatus& gpu,
                                    const std::function<bool(const std::string&)>& sees) {
  std::vector<SeenHolder> out;
  for (const GpuHolder& h : gpu.holders) {
    out.push_back({sees(h.project) ? std::optional<GpuHolder>(h) : std::nullopt, h.share});
  }
  return out;
}

nlohmann::json GpuStatusJson(const GpuStatus& gpu, const std::vector<SeenHolder>& seen,
                             int64_t now_ms, int64_t idle_after_ms) {
  nlohmann::json holders = nlohmann::json::array();
  for (const SeenHolder& s : seen) {
    if (!s.holder) {
      holders.push_back({{"share", s.share}});
      continue;
    }
    const GpuHolder& h = *s.holder;
    holders.push_back({{"job", h.job.value()},
                       {"user", h.user},
                       {"project", h.project},
                       {"share", h.share},
                       {"session", h.session}});
  }
  nlohmann::json j = {{"node", gpu.node},
                      {"index", gpu.index},
                      {"model", gpu.model},
                      {"uuid", gpu.uuid},
                      {"memory_total_mib", gpu.memory_total_mib},
                      {"sampled_at", gpu.latest.at_ms / 1000},
                      {"holders", holders},
                      {"processes", gpu.processes},
                      {"foreign_processes", gpu.foreign_processes},
                      {"idle", false}};
  AddReadingFields(gpu.latest, j);
  if (gpu.idle_since_ms) {
    j["idle_for_s"] = (now_ms - *gpu.idle_since_ms) / 1000;
    j["idle"] = now_ms - *gpu.idle_since_ms >= idle_after_ms;
  }
  return j;
}

nlohmann::json GpuReadingJson(const GpuReading& reading) {
  nlohmann::json j = {{"t", reading.at_ms}};
  AddReadingFields(reading, j);
  return j;
}

std::vector<ReportedGpu> ReportedGpus(const protocol::GpuMetrics& metrics) {
  std::vector<ReportedGpu> out;
  for (const protocol::GpuMetric& g : metrics.gpus) {
    ReportedGpu r;
    r.index = g.index;
    r.reading.utilization_percent = g.utilization_percent;
    r.reading.memory_utilization_percent = g.memory_utilization_percent;
    r.reading.memory_used_mib = g.memory_used_mib;
    r.reading.power_mw = g.power_mw;
    r.reading.temperature_c = g.temperature_c;
    for (const protocol::TaskKey& key : g.tasks) r.allocations.push_back(key.allocation.value());
    r.processes = static_cast<int>(g.processes.size());
    r.foreign_processes = static_cast<int>(std::count_if(g.processes.begin(), g.processes.end(),
                                                         [](const auto& p) { return !p.task; }));
    out.push_back(std::move(r));
  }
  return out;
}

namespace {

// True when `job` is among `holders`.
bool Holds(const std::vector<GpuHolder>& holders, JobId job) {
  return std::any_of(holders.begin(), holders.end(),
                     [&](const GpuHolder& h) { return h.job == job; });
}

// True when both lists name the same jobs (in any order).
bool SameJobs(const std::vector<GpuHolder>& a, const std::vector<GpuHolder>& b) {
  return a.size() == b.size() &&
         std::all_of(a.begin(), a.end(), [&](const GpuHolder& x) { return Holds(b, x.job); });
}

}  // namespace

GpuMonitor::GpuMonitor(Options options) : options_(options) {}

void GpuMonitor::Record(const std::string& node, const NodeGpus& identity,
                        const std::vector<ReportedGpu>& gpus,
                        const std::map<int64_t, GpuHolder>& holders, int64_t now_ms) {
  std::lock_guard lock(mu_);
  for (const ReportedGpu& g : gpus) {
    if (g.index < 0 || g.index >= static_cast<int>(identity.gpus.size())) continue;
    Entry& e = gpus_[{node, g.index}];
    const int64_t previous_ms = e.status.latest.at_ms;
    e.status.node = node;
    e.status.index = g.index;
    e.status.model = identity.model;
    e.status.uuid = identity.gpus[g.index].uuid;
    e.status.memory_total_mib = identity.gpus[g.index].memory_total_mib;
    e.status.latest = g.reading;
    e.status.latest.at_ms = now_ms;
    e.status.processes = g.processes;
    e.status.foreign_processes = g.foreign_processes;
    const std::vector<GpuHolder> before = std::move(e.status.holders);
    e.status.holders.clear();
    for (int64_t allocation : g.allocations) {
      if (auto it = holders.find(allocation); it != holders.end()) {
        e.status.holders.push_back(it->second);
      }
    }
    // An idle span belongs to the jobs that idled: another job on the GPU starts afresh.
    const bool same_jobs = SameJobs(before, e.status.holders);
    const std::optional<int>& util = g.reading.utilization_percent;
    if (!same_jobs || e.status.holders.empty() || !util ||
        *util >= options_.idle_threshold_percent) {
      e.status.idle_since_ms.reset();
    }
    if (!e.status.holders.empty() && util && *util < options_.idle_threshold_percent &&
        !e.status.idle_since_ms) {
      e.status.idle_since_ms = now_ms;
    }
    e.recent.push_back(e.status.latest);
    while (!e.recent.empty() && e.recent.front().at_ms < now_ms - options_.recent_ms) {
      e.recent.pop_front();
    }
    AddToBucket(e, e.fine, kFineResolutionS, e.status.latest);
    AddToBucket(e, e.coarse, kCoarseResolutionS, e.status.latest);
    if (previous_ms > 0) Accrue(e, before, previous_ms, now_ms);
  }
}

void GpuMonitor::AddToBucket(Entry& e, Accumulator& acc, int resolution_s, const GpuReading& r) {
  const int64_t start_s = r.at_ms / 1000 / resolution_s * resolution_s;
  if (acc.start_s != start_s) {
    CloseBucket(e, acc, resolution_s);
    acc = Accumulator{};
    acc.start_s = start_s;
  }
  ++acc.samples;
  if (r.utilization_percent) {
    acc.utilization_sum += *r.utilization_percent;
    ++acc.utilization_samples;
  }
  if (r.power_mw) {
    acc.power_sum += static_cast<double>(*r.power_mw) / 1000.0;
    ++acc.power_samples;
  }
  if (r.memory_used_mib) acc.memory_max = std::max(acc.memory_max, *r.memory_used_mib);
  if (r.temperature_c) acc.temperature_max = std::max(acc.temperature_max, *r.temperature_c);
  if (!e.status.holders.empty()) {
    const JobId job = e.status.holders[0].job;
    auto it = std::find_if(acc.job_samples.begin(), acc.job_samples.end(),
                           [&](const auto& js) { return js.first == job; });
    if (it == acc.job_samples.end()) {
      acc.job_samples.emplace_back(job, 1);
    } else {
      ++it->second;
    }
  }
}

void GpuMonitor::CloseBucket(const Entry& e, Accumulator& acc, int resolution_s) {
  if (acc.start_s < 0 || acc.samples == 0) return;
  store::GpuMetricRow row;
  row.resolution_s = resolution_s;
  row.start_s = acc.start_s;
  row.node = e.status.node;
  row.gpu = e.status.index;
  row.utilization_permille =
      acc.utilization_samples > 0
          ? static_cast<int>(std::lround(acc.utilization_sum * 10 / acc.utilization_samples))
          : 0;
  row.memory_used_mib = acc.memory_max;
  row.power_mw = acc.power_samples > 0 ? std::llround(acc.power_sum * 1000 / acc.power_samples) : 0;
  row.temperature_c = acc.temperature_max;
  row.samples = acc.samples;
  // The job that held the GPU in the most readings owns the interval, whether or not it held
  // it to the end (the first such job on a tie); any other job that held it has no row for it.
  auto owner = std::max_element(acc.job_samples.begin(), acc.job_samples.end(),
                                [](const auto& a, const auto& b) { return a.second < b.second; });
  if (owner != acc.job_samples.end()) row.job = owner->first;
  closed_.push_back(std::move(row));
  acc.start_s = -1;
}

void GpuMonitor::Accrue(const Entry& e, const std::vector<GpuHolder>& before, int64_t from_ms,
                        int64_t to_ms) {
  const double seconds =
      static_cast<double>(std::clamp<int64_t>(to_ms - from_ms, 0, options_.max_interval_ms)) /
      1000.0;
  if (seconds <= 0) return;
  const double utilization = e.status.latest.utilization_percent.value_or(0) / 100.0;
  const std::string day = UtcDay(to_ms / 1000);
  for (const GpuHolder& h : e.status.holders) {
    // Only a job that held the GPU at both ends of the interval is charged for it: when one job
    // follows another between two samples, neither knows how the interval was shared.
    if (!Holds(before, h.job)) continue;
    auto& [allocated, used] = usage_[{day, h.user, h.project}];
    allocated += seconds * h.share;
    used += seconds * h.share * utilization;
  }
}

void GpuMonitor::ForgetNode(const std::string& node) {
  std::lock_guard lock(mu_);
  for (auto it = gpus_.lower_bound({node, 0}); it != gpus_.end() && it->first.first == node;) {
    CloseBucket(it->second, it->second.fine, kFineResolutionS);
    CloseBucket(it->second, it->second.coarse, kCoarseResolutionS);
    it = gpus_.erase(it);
  }
}

std::vector<GpuStatus> GpuMonitor::Gpus() const {
  std::lock_guard lock(mu_);
  std::vector<GpuStatus> out;
  out.reserve(gpus_.size());
  for (const auto& [key, e] : gpus_) out.push_back(e.status);
  return out;
}

std::vector<std::pair<GpuStatus, std::vector<GpuReading>>> GpuMonitor::JobGpus(
    JobId job, int64_t since_ms) const {
  std::lock_guard lock(mu_);
  std::vector<std::pair<GpuStatus, std::vector<GpuReading>>> out;
  for (const auto& [key, e] : gpus_) {
    if (!Holds(e.status.holders, job)) continue;
    std::vector<GpuReading> readings;
    for (const GpuReading& r : e.recent) {
      if (r.at_ms >= since_ms) readings.push_back(r);
    }
    out.emplace_back(e.status, std::move(readings));
  }
  return out;
}

std::vector<GpuStatus> GpuMonitor::IdleGpus(int64_t now_ms) const {
  std::lock_guard lock(mu_);
  std::vector<GpuStatus> out;
  for (const auto& [key, e] : gpus_) {
    if (Stale(e, now_ms)) continue;
    if (e.status.idle_since_ms && now_ms - *e.status.idle_since_ms >= options_.idle_after_ms) {
      out.push_back(e.status);
    }
  }
  return out;
}

// When GPU `e` was last busy as its holders see it: now unless it is in an idle span.
int64_t GpuMonitor::BusyAt(const Entry& e, int64_t now_ms) {
  return e.status.idle_since_ms.value_or(now_ms);
}

std::map<JobId, GpuMonitor::JobBusy> GpuMonitor::LastBusyByJob(int64_t now_ms) const {
  std::lock_guard lock(mu_);
  std::map<JobId, JobBusy> last;
  for (const auto& [key, e] : gpus_) {
    if (Stale(e, now_ms)) continue;
    // A reading without utilisation ends an idle span (nothing says the GPU idles) but says
    // no more that it works: only a utilisation at or over the threshold is busy now.
    const std::optional<int>& util = e.status.latest.utilization_percent;
    const JobBusy gpu{BusyAt(e, now_ms), util && *util >= options_.idle_threshold_percent};
    for (const GpuHolder& h : e.status.holders) {
      auto [it, added] = last.try_emplace(h.job, gpu);
      if (!added) {
        it->second.last_busy_ms = std::max(it->second.last_busy_ms, gpu.last_busy_ms);
        it->second.busy_now = it->second.busy_now || gpu.busy_now;
      }
    }
  }
  return last;
}

std::optional<int64_t> GpuMonitor::JobLastBusyMs(JobId job, int64_t now_ms) const {
  std::lock_guard lock(mu_);
  std::optional<int64_t> last;
  for (const auto& [key, e] : gpus_) {
    if (Stale(e, now_ms) || !Holds(e.status.holders, job)) continue;
    last = std::max(last.value_or(BusyAt(e, now_ms)), BusyAt(e, now_ms));
  }
  return last;
}

double GpuMonitor::UsedGpus() const {
  std::lock_guard lock(mu_);
  double used = 0;
  for (const auto& [key, e] : gpus_) {
    used += e.status.latest.utilization_percent.value_or(0) / 100.0;
  }
  return used;
}

void GpuMonitor::CloseOpenIntervals() {
  std::lock_guard lock(mu_);
  for (auto& [key, e] : gpus_) {
    CloseBucket(e, e.fine, kFineResolutionS);
    CloseBucket(e, e.coarse, kCoarseResolutionS);
  }
}

std::vector<store::GpuMetricRow> GpuMonitor::TakeClosedIntervals() {
  std::lock_guard lock(mu_);
  std::vector<store::GpuMetricRow> out;
  out.swap(closed_);
  return out;
}

std::vector<store::GpuUsageRow> GpuMonitor::TakeUsage() {
  std::lock_guard lock(mu_);
  std::vector<store::GpuUsageRow> out;
  for (auto it = usage_.begin(); it != usage_.end();) {
    auto& [allocated_s, used_s] = it->second;
    const int64_t allocated_ms = static_cast<int64_t>(allocated_s * 1000);
    const int64_t used_ms = static_cast<int64_t>(used_s * 1000);
    if (allocated_ms > 0 || used_ms > 0) {
      const auto& [day, user, project] = it->first;
      out.push_back({day, user, project, allocated_ms, used_ms});
    }
    allocated_s -= static_cast<double>(allocated_ms) / 1000;
    used_s -= static_cast<double>(used_ms) / 1000;
    // A past day's remainder (under a millisecond) is dropped, not kept for ever.
    if (allocated_ms == 0 && used_ms == 0) {
      it = usage_.erase(it);
    } else {
      ++it;
    }
  }
  return out;
}

}  // namespace corral::server
