#include "protocol/api_cluster.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_lists.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using nlohmann::json;

constexpr size_t kMaxSummaries = 7 * 24 * 60 + 1;  // a week of minutes

Status ReadClusterSummary(const FieldReader& r, ClusterSummary& s) {
  int64_t time = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("time", true, time, 0));
  s.time = Seconds(time);
  CORRAL_RETURN_IF_ERROR(r.Int("nodes", true, s.nodes, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("nodes_ready", true, s.nodes_ready, 0, s.nodes));
  CORRAL_RETURN_IF_ERROR(r.Int("gpus", true, s.gpus, 0));
  double allocated = 0;
  CORRAL_RETURN_IF_ERROR(r.Number("gpus_allocated", true, allocated, 0));
  s.allocated = MilliGpu(std::llround(allocated * 1000));
  CORRAL_RETURN_IF_ERROR(r.Number("gpus_used", true, s.gpus_used, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("jobs_pending", true, s.jobs_pending, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("jobs_starting", true, s.jobs_starting, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("jobs_running", true, s.jobs_running, 0));
  return Status::Ok();
}

}  // namespace

json ToJson(const ClusterSummary& s) {
  return {{"time", s.time.value()},
          {"nodes", s.nodes},
          {"nodes_ready", s.nodes_ready},
          {"gpus", s.gpus},
          {"gpus_allocated", static_cast<double>(s.allocated.value()) / 1000},
          {"gpus_used", s.gpus_used},
          {"jobs_pending", s.jobs_pending},
          {"jobs_starting", s.jobs_starting},
          {"jobs_running", s.jobs_running}};
}

json ToJson(const SummaryHistory& h) {
  return {{"step_s", h.step.value()},
          {"summaries", ListJson(h.summaries, [](const ClusterSummary& s) { return ToJson(s); })}};
}

Result<ClusterSummary> ParseClusterSummary(const json& json) {
  auto r = ReadObject(json, "summary");
  if (!r.ok()) return r.status();
  ClusterSummary s;
  CORRAL_RETURN_IF_ERROR(ReadClusterSummary(*r, s));
  return s;
}

Result<SummaryHistory> ParseSummaryHistory(const json& json) {
  auto r = ReadObject(json, "summary history");
  if (!r.ok()) return r.status();
  SummaryHistory h;
  int64_t step = 0;
  CORRAL_RETURN_IF_ERROR(r->Int("step_s", true, step, 1));
  h.step = Seconds(step);
  CORRAL_RETURN_IF_ERROR(
      r->Objects("summaries", true, kMaxSummaries, [&](const FieldReader& item, size_t) {
        ClusterSummary s;
        CORRAL_RETURN_IF_ERROR(ReadClusterSummary(item, s));
        h.summaries.push_back(s);
        return Status::Ok();
      }));
  return h;
}

}  // namespace corral::protocol
