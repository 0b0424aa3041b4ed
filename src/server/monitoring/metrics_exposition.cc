#include "server/monitoring/metrics_exposition.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "model/states.h"

namespace corral::server {

namespace {

using Labels = std::vector<std::pair<std::string, std::string>>;

// "{name="value",...}" with the values escaped; "" for no labels.
std::string LabelText(const Labels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    out += (i ? "," : "") + labels[i].first + "=\"" + EscapeLabelValue(labels[i].second) + "\"";
  }
  return out + "}";
}

// Writes families: each metric name gets its HELP and TYPE once, before its first sample.
class Exposition {
 public:
  void Family(const std::string& name, const std::string& type, const std::string& help) {
    out_ << "# HELP " << name << " " << help << "\n# TYPE " << name << " " << type << "\n";
  }
  void Sample(const std::string& name, const Labels& labels, double value) {
    SampleLabelled(name, LabelText(labels), value);
  }
  // `labels` as LabelText wrote them: a GPU's are written once for all its families.
  void SampleLabelled(const std::string& name, const std::string& labels, double value) {
    out_ << name << labels << " ";
    if (std::isnan(value)) {
      out_ << "NaN";
    } else if (value == std::floor(value) && std::fabs(value) < 1e15) {
      out_ << static_cast<int64_t>(value);
    } else {
      out_ << value;
    }
    out_ << "\n";
  }
  std::string Text() const { return out_.str(); }

 private:
  std::ostringstream out_;
};

// The saturation guard's pools (saturation_guard.h), labelled pool="api" or "agent".
void RenderSaturation(Exposition& e, const SaturationGuard::Counts& counts) {
  const std::pair<const char*, const SaturationGuard::PoolCounts*> pools[] = {
      {"api", &counts.regular}, {"agent", &counts.agent}};
  auto family = [&](const std::string& name, const char* type, const std::string& help,
                    auto value) {
    e.Family(name, type, help);
    for (const auto& [pool, c] : pools) {
      e.Sample(name, {{"pool", pool}}, static_cast<double>(value(*c)));
    }
  };
  using Pool = SaturationGuard::PoolCounts;
  family("corral_http_max_requests_in_flight", "gauge",
         "Requests the server handles at once before new ones wait (0: no cap).",
         [](const Pool& p) { return p.cap; });
  family("corral_http_requests_in_flight", "gauge", "Requests being handled now.",
         [](const Pool& p) { return p.in_flight; });
  family("corral_http_requests_waiting", "gauge", "Requests waiting for a place now.",
         [](const Pool& p) { return p.waiting; });
  family("corral_http_requests_admitted_total", "counter", "Requests handled.",
         [](const Pool& p) { return p.admitted; });
  family("corral_http_requests_waited_total", "counter",
         "Requests handled after waiting for a place.", [](const Pool& p) { return p.waited; });
  family("corral_http_requests_refused_total", "counter",
         "Requests answered 503 (server saturated) after waiting --admission-wait.",
         [](const Pool& p) { return p.refused; });
}

// DCGM exporter's labels for one GPU, then corral's for the job holding it (the first holder;
// a shared GPU shows its other holders in corral_gpu_holders). The job's label is "job_id":
// Prometheus keeps "job" for the scrape job (it would rename ours "exported_job").
Labels GpuLabels(const GpuStatus& g) {
  Labels labels = {{"gpu", std::to_string(g.index)},
                   {"UUID", g.uuid},
                   {"modelName", g.model},
                   {"Hostname", g.node}};
  if (!g.holders.empty()) {
    labels.push_back({"job_id", std::to_string(g.holders[0].job.value())});
    labels.push_back({"user", g.holders[0].user});
    labels.push_back({"project", g.holders[0].project});
  }
  return labels;
}

}  // namespace

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string RenderMetrics(const MetricsSnapshot& s) {
  Exposition e;
  const protocol::ClusterSummary& summary = s.summary;

  e.Family("corral_nodes", "gauge", "Nodes known to the server, by state.");
  std::map<std::string, int> by_state;
  for (model::NodeState state : model::kNodeStates) by_state[std::string(model::ToString(state))];
  for (const auto& n : s.nodes) ++by_state[std::string(model::ToString(n.state))];
  for (const auto& [state, count] : by_state) e.Sample("corral_nodes", {{"state", state}}, count);

  e.Family("corral_gpus", "gauge", "GPUs of all known nodes.");
  e.Sample("corral_gpus", {}, static_cast<double>(summary.gpus));
  e.Family("corral_gpus_allocated", "gauge", "GPUs allocated to jobs (shares count as fractions).");
  e.Sample("corral_gpus_allocated", {}, static_cast<double>(summary.allocated.value()) / 1000);
  e.Family("corral_jobs", "gauge", "Jobs not yet ended, by state.");
  for (const auto& [state, count] : {std::pair{model::JobState::kPending, summary.jobs_pending},
                                     {model::JobState::kStarting, summary.jobs_starting},
                                     {model::JobState::kRunning, summary.jobs_running}}) {
    e.Sample("corral_jobs", {{"state", std::string(model::ToString(state))}},
             static_cast<double>(count));
  }

  e.Family("corral_node_gpus_allocated", "gauge", "GPUs allocated on one node.");
  for (const auto& n : s.nodes) {
    if (!n.free) continue;  // a node the scheduler does not model
    int64_t free_milli = 0;
    for (int64_t f : n.free->gpu_milli) free_milli += f;
    e.Sample("corral_node_gpus_allocated", {{"node", n.name}},
             n.gpus - static_cast<double>(free_milli) / 1000);
  }

  e.Family("corral_project_gpus_allocated", "gauge", "GPUs that a project's running jobs hold.");
  for (const auto& p : s.projects) {
    e.Sample("corral_project_gpus_allocated", {{"project", p.name}},
             static_cast<double>(p.running.value()) / 1000);
  }
  e.Family("corral_project_gpu_quota", "gauge", "A project's guaranteed GPUs (its quota).");
  for (const auto& p : s.projects) {
    e.Sample("corral_project_gpu_quota", {{"project", p.name}},
             static_cast<double>(p.sharing.quota.value()) / 1000);
  }

  // GPU readings, DCGM-named. A field a GPU did not report is left out for that GPU.
  struct GpuField {
    const char* name;
    const char* help;
    std::function<std::optional<double>(const GpuStatus&)> value;
  };
  const GpuField fields[] = {
      {"DCGM_FI_DEV_GPU_UTIL", "GPU utilization (in %).",
       [](const GpuStatus& g) -> std::optional<double> {
         const GpuReading& r = g.latest;
         if (!r.utilization_percent) return std::nullopt;
         return *r.utilization_percent;
       }},
      {"DCGM_FI_DEV_MEM_COPY_UTIL", "Memory utilization (in %).",
       [](const GpuStatus& g) -> std::optional<double> {
         const GpuReading& r = g.latest;
         if (!r.memory_utilization_percent) return std::nullopt;
         return *r.memory_utilization_percent;
       }},
      {"DCGM_FI_DEV_FB_USED", "Framebuffer memory used (in MiB).",
       [](const GpuStatus& g) -> std::optional<double> {
         const GpuReading& r = g.latest;
         if (!r.memory_used_mib) return std::nullopt;
         return static_cast<double>(*r.memory_used_mib);
       }},
      {"DCGM_FI_DEV_FB_FREE", "Framebuffer memory free (in MiB).",
       [](const GpuStatus& g) -> std::optional<double> {
         if (!g.latest.memory_used_mib || g.memory_total_mib <= 0) return std::nullopt;
         return static_cast<double>(
             std::max<int64_t>(0, g.memory_total_mib - *g.latest.memory_used_mib));
       }},
      {"DCGM_FI_DEV_POWER_USAGE", "Power draw (in W).",
       [](const GpuStatus& g) -> std::optional<double> {
         const GpuReading& r = g.latest;
         if (!r.power_mw) return std::nullopt;
         return static_cast<double>(*r.power_mw) / 1000.0;
       }},
      {"DCGM_FI_DEV_GPU_TEMP", "GPU temperature (in C).",
       [](const GpuStatus& g) -> std::optional<double> {
         const GpuReading& r = g.latest;
         if (!r.temperature_c) return std::nullopt;
         return *r.temperature_c;
       }},
  };
  std::vector<std::string> labels;  // per GPU, in s.gpus order
  labels.reserve(s.gpus.size());
  for (const GpuStatus& g : s.gpus) labels.push_back(LabelText(GpuLabels(g)));
  for (const GpuField& f : fields) {
    e.Family(f.name, "gauge", f.help);
    for (size_t i = 0; i < s.gpus.size(); ++i) {
      if (auto v = f.value(s.gpus[i])) e.SampleLabelled(f.name, labels[i], *v);
    }
  }

  e.Family("corral_gpu_sample_age_seconds", "gauge", "Seconds since the GPU's last sample.");
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    e.SampleLabelled("corral_gpu_sample_age_seconds", labels[i],
                     static_cast<double>(s.now_ms - s.gpus[i].latest.at_ms) / 1000.0);
  }
  e.Family("corral_gpu_holders", "gauge", "Jobs holding the GPU (more than 1: shared).");
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    e.SampleLabelled("corral_gpu_holders", labels[i],
                     static_cast<double>(s.gpus[i].holders.size()));
  }
  e.Family("corral_gpu_foreign_processes", "gauge",
           "Processes on the GPU that no corral task started.");
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    e.SampleLabelled("corral_gpu_foreign_processes", labels[i], s.gpus[i].foreign_processes);
  }
  e.Family("corral_gpu_idle_seconds", "gauge",
           "Seconds an allocated GPU has stayed under the idle threshold (0: not idle).");
  e.Family("corral_gpu_idle", "gauge",
           "1 when an allocated GPU has been idle for the configured time (flagged), else 0.");
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuStatus& g = s.gpus[i];
    const double idle_s =
        g.idle_since_ms ? static_cast<double>(s.now_ms - *g.idle_since_ms) / 1000.0 : 0.0;
    e.SampleLabelled("corral_gpu_idle_seconds", labels[i], idle_s);
  }
  for (size_t i = 0; i < s.gpus.size(); ++i) {
    const GpuStatus& g = s.gpus[i];
    const bool flagged = g.idle_since_ms && s.now_ms - *g.idle_since_ms >= s.idle_after_ms;
    e.SampleLabelled("corral_gpu_idle", labels[i], flagged ? 1 : 0);
  }

  // Per job: the mean utilisation of the GPUs it holds.
  e.Family("corral_job_gpu_utilization", "gauge",
           "Mean utilization (in %) of the GPUs a running job holds.");
  struct JobUse {
    std::string user, project;
    double sum = 0;
    int gpus = 0;
  };
  std::map<int64_t, JobUse> jobs;
  for (const GpuStatus& g : s.gpus) {
    if (!g.latest.utilization_percent) continue;
    for (const GpuHolder& h : g.holders) {
      JobUse& j = jobs[h.job.value()];
      j.user = h.user;
      j.project = h.project;
      j.sum += *g.latest.utilization_percent;
      ++j.gpus;
    }
  }
  for (const auto& [id, j] : jobs) {
    e.Sample("corral_job_gpu_utilization",
             {{"job_id", std::to_string(id)}, {"user", j.user}, {"project", j.project}},
             j.sum / j.gpus);
  }

  e.Family("corral_gpu_reports_rejected_total", "counter",
           "Heartbeats whose GPU metrics were malformed and dropped.");
  e.Sample("corral_gpu_reports_rejected_total", {}, static_cast<double>(s.rejected_gpu_reports));
  e.Family("corral_heartbeats_waiting", "gauge", "Agent heartbeats waiting (long poll).");
  e.Sample("corral_heartbeats_waiting", {}, s.waiting_heartbeats);
  e.Family("corral_store_commits_total", "counter",
           "Write transactions the server committed to its store (one fsync each on SQLite).");
  e.Sample("corral_store_commits_total", {}, static_cast<double>(s.store_commits));
  e.Family("corral_store_round_trips_total", "counter",
           "Exchanges with the store's database server that waited for its answer (PostgreSQL; "
           "0 on SQLite). A group commit is one.");
  e.Sample("corral_store_round_trips_total", {}, static_cast<double>(s.store_round_trips));
  if (s.saturation) RenderSaturation(e, *s.saturation);
  return e.Text();
}

}  // namespace corral::server
