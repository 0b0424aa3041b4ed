#include "server/monitoring/metrics_exposition.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::server {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

GpuStatus HeldGpu(int index, int util, std::optional<int64_t> idle_since_ms) {
  GpuStatus g;
  g.node = "gpu-01";
  g.index = index;
  g.model = "A100-80GB";
  g.uuid = "GPU-" + std::to_string(index);
  g.memory_total_mib = 81920;
  g.latest.at_ms = 995'000;
  g.latest.utilization_percent = util;
  g.latest.memory_used_mib = 2048;
  g.latest.power_mw = 250'500;
  g.latest.temperature_c = 55;
  g.holders.push_back(GpuHolder{JobId(42), "ann \"the\" user\\x\n", "vision", 1.0, false});
  g.idle_since_ms = idle_since_ms;
  return g;
}

TEST(MetricsExpositionTest, RendersClusterProjectAndDcgmNamedGpuMetrics) {
  MetricsSnapshot s;
  s.summary = {.gpus = 16, .allocated = MilliGpu(2500), .jobs_pending = 3, .jobs_running = 1};
  protocol::NodeView ready{.name = "gpu-01", .gpus = 8};
  ready.free = protocol::NodeFree{.gpu_milli = {0, 0, 500, 1000, 1000, 1000, 1000, 1000}};
  protocol::NodeView lost{.name = "gpu-02", .state = model::NodeState::kLost, .gpus = 8};
  s.nodes = {ready, lost};
  protocol::ProjectView vision{.name = "vision", .running = MilliGpu(2500)};
  vision.sharing.quota = MilliGpu(4000);
  s.projects = {vision, {.name = "nlp"}};
  GpuStatus free_gpu;
  free_gpu.node = "gpu-01";
  free_gpu.index = 3;
  free_gpu.uuid = "GPU-3";
  free_gpu.latest.at_ms = 999'000;
  free_gpu.latest.utilization_percent = 0;
  s.gpus = {HeldGpu(0, 97, std::nullopt), HeldGpu(1, 2, 900'000), free_gpu};
  s.idle_after_ms = 60'000;
  s.now_ms = 1'000'000;
  s.rejected_gpu_reports = 2;
  s.store_commits = 41;
  s.store_round_trips = 43;
  const std::string text = RenderMetrics(s);

  EXPECT_THAT(text, HasSubstr("# TYPE corral_nodes gauge\n"));
  EXPECT_THAT(text, HasSubstr("corral_nodes{state=\"ready\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corral_nodes{state=\"lost\"} 1\n"));
  EXPECT_THAT(text, HasSubstr("corral_gpus 16\n"));
  EXPECT_THAT(text, HasSubstr("corral_gpus_allocated 2.5\n"));
  EXPECT_THAT(text, HasSubstr("corral_jobs{state=\"pending\"} 3\n"));
  EXPECT_THAT(text, HasSubstr("corral_node_gpus_allocated{node=\"gpu-01\"} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("corral_project_gpus_allocated{project=\"vision\"} 2.5\n"));
  EXPECT_THAT(text, HasSubstr("corral_project_gpu_quota{project=\"vision\"} 4\n"));
  EXPECT_THAT(text, HasSubstr("corral_project_gpu_quota{project=\"nlp\"} 0\n"));
  // The user's name is escaped: it cannot end the label or the line.
  const std::string labels =
      "{gpu=\"0\",UUID=\"GPU-0\",modelName=\"A100-80GB\",Hostname=\"gpu-01\",job_id=\"42\","
      "user=\"ann \\\"the\\\" user\\\\x\\n\",project=\"vision\"}";
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_UTIL" + labels + " 97\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_FB_USED" + labels + " 2048\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_FB_FREE" + labels + " 79872\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_POWER_USAGE" + labels + " 250.5\n"));
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_TEMP" + labels + " 55\n"));
  // A free GPU has no job labels; what it did not report is left out.
  EXPECT_THAT(text, HasSubstr("DCGM_FI_DEV_GPU_UTIL{gpu=\"3\",UUID=\"GPU-3\",modelName=\"\","
                              "Hostname=\"gpu-01\"} 0\n"));
  EXPECT_THAT(text, Not(HasSubstr("DCGM_FI_DEV_FB_USED{gpu=\"3\"")));
  EXPECT_THAT(text, HasSubstr("corral_gpu_sample_age_seconds{gpu=\"3\",UUID=\"GPU-3\","
                              "modelName=\"\",Hostname=\"gpu-01\"} 1\n"));
  // GPU 1 has been under the threshold for 100 s >= 60 s: flagged.
  EXPECT_THAT(text, HasSubstr("corral_gpu_idle_seconds{gpu=\"1\""));
  EXPECT_THAT(text, HasSubstr("corral_gpu_idle{gpu=\"1\",UUID=\"GPU-1\""));
  EXPECT_THAT(text, HasSubstr("project=\"vision\"} 100\n"));
  EXPECT_THAT(text, HasSubstr("corral_job_gpu_utilization{job_id=\"42\""));
  EXPECT_THAT(text, HasSubstr("} 49.5\n"));  // (97 + 2) / 2
  EXPECT_THAT(text, HasSubstr("corral_gpu_reports_rejected_total 2\n"));
  EXPECT_THAT(text, HasSubstr("corral_store_commits_total 41\n"));
  EXPECT_THAT(text, HasSubstr("corral_store_round_trips_total 43\n"));
  // Every family is declared once.
  size_t count = 0;
  for (size_t p = text.find("# TYPE DCGM_FI_DEV_GPU_UTIL "); p != std::string::npos;
       p = text.find("# TYPE DCGM_FI_DEV_GPU_UTIL ", p + 1)) {
    ++count;
  }
  EXPECT_EQ(count, 1u);
}

TEST(MetricsExpositionTest, EscapesLabelValues) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  EXPECT_EQ(EscapeLabelValue("plain"), "plain");
}

TEST(MetricsExpositionTest, RendersTheSaturationGuardsPoolsWhenGiven) {
  MetricsSnapshot s;
  EXPECT_EQ(RenderMetrics(s).find("corral_http_"), std::string::npos);
  SaturationGuard::Counts counts;
  counts.regular = {64, 12, 3, 1000, 40, 7};
  counts.agent = {96, 33, 0, 500, 0, 0};
  s.saturation = counts;
  const std::string text = RenderMetrics(s);
  for (const char* line : {
           "# TYPE corral_http_requests_refused_total counter\n",
           "corral_http_max_requests_in_flight{pool=\"api\"} 64\n",
           "corral_http_max_requests_in_flight{pool=\"agent\"} 96\n",
           "corral_http_requests_in_flight{pool=\"api\"} 12\n",
           "corral_http_requests_waiting{pool=\"api\"} 3\n",
           "corral_http_requests_admitted_total{pool=\"agent\"} 500\n",
           "corral_http_requests_waited_total{pool=\"api\"} 40\n",
           "corral_http_requests_refused_total{pool=\"api\"} 7\n",
           "corral_http_requests_refused_total{pool=\"agent\"} 0\n",
       }) {
    EXPECT_NE(text.find(line), std::string::npos) << line << text;
  }
}

}  // namespace
}  // namespace corral::server
