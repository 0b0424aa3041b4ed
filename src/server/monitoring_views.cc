#include "server/monitoring_views.h"

#include "server/metrics_exposition.h"

namespace corral::server {

namespace {

// Every project, for the exposition: Prometheus scrapes with an admin or metrics token.
Principal Everyone() {
  Principal p;
  p.admin = true;
  return p;
}

}  // namespace

std::string MetricsText(Controller& controller, Seconds now) {
  MetricsSnapshot s;
  s.summary = controller.ClusterSummary();
  s.nodes = controller.Nodes();
  auto projects = controller.ProjectsView(Everyone());
  s.projects = projects.ok() ? *projects : nlohmann::json::array();
  s.gpus = controller.Gpus().Gpus();
  s.idle_after_ms = controller.Gpus().options().idle_after_ms;
  s.now_ms = now.value() * 1000;
  s.rejected_gpu_reports = controller.RejectedGpuReports();
  s.waiting_heartbeats = controller.WaitingHeartbeats();
  return RenderMetrics(s);
}

nlohmann::json GpusView(Controller& controller, Seconds now, bool idle_only) {
  const GpuMonitor& monitor = controller.Gpus();
  const int64_t now_ms = now.value() * 1000;
  const int64_t idle_after_ms = monitor.options().idle_after_ms;
  nlohmann::json gpus = nlohmann::json::array();
  for (const GpuStatus& g : idle_only ? monitor.IdleGpus(now_ms) : monitor.Gpus()) {
    gpus.push_back(GpuStatusJson(g, now_ms, idle_after_ms));
  }
  return {{"idle_threshold_percent", monitor.options().idle_threshold_percent},
          {"idle_after_s", idle_after_ms / 1000},
          {"gpus", gpus}};
}

nlohmann::json JobGpusView(Controller& controller, JobId job, Seconds now, Seconds since) {
  const GpuMonitor& monitor = controller.Gpus();
  const int64_t now_ms = now.value() * 1000;
  nlohmann::json gpus = nlohmann::json::array();
  for (const auto& [status, readings] : monitor.JobGpus(job, since.value() * 1000)) {
    nlohmann::json g = GpuStatusJson(status, now_ms, monitor.options().idle_after_ms);
    nlohmann::json series = nlohmann::json::array();
    for (const GpuReading& r : readings) series.push_back(GpuReadingJson(r));
    g["series"] = std::move(series);
    gpus.push_back(std::move(g));
  }
  return {{"job", job.value()}, {"gpus", gpus}};
}

}  // namespace corral::server
