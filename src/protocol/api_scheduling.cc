#include "protocol/api_scheduling.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_lists.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

Result<QueueRow> ReadRow(const FieldReader& r) {
  QueueRow q;
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("position", q.position));
  if (q.position < 1) return r.Bad("position", "must be >= 1");
  int64_t id = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("id", true, id, 1));
  q.id = JobId(id);
  CORRAL_RETURN_IF_ERROR(r.String("name", true, q.name));
  CORRAL_RETURN_IF_ERROR(r.String("user", true, q.user));
  CORRAL_RETURN_IF_ERROR(r.String("project", true, q.project));
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("priority", q.priority));
  double gpus = 0;
  CORRAL_RETURN_IF_ERROR(r.Number("gpus", true, gpus, 0));
  q.gpus = MilliGpu(std::llround(gpus * 1000));
  CORRAL_RETURN_IF_ERROR(r.Secs("submit_time", true, q.submit_time));
  CORRAL_RETURN_IF_ERROR(r.Object("pending_reason", true, [&](const FieldReader& p) {
    CORRAL_RETURN_IF_ERROR(p.String("code", true, q.pending_reason.code));
    return p.String("message", true, q.pending_reason.message);
  }));
  std::optional<int64_t> start;
  CORRAL_RETURN_IF_ERROR(r.OptionalInt64("estimated_start", start, 0));
  if (start) q.estimated_start = Seconds(*start);
  return q;
}

Status ReadRules(const FieldReader& r, SchedulingRules& rules) {
  CORRAL_RETURN_IF_ERROR(r.String("order", true, rules.order));
  CORRAL_RETURN_IF_ERROR(r.String("blocking", true, rules.blocking));
  if (r.Find("reclaim") == nullptr) return r.Bad("reclaim", "is required");
  CORRAL_RETURN_IF_ERROR(r.Bool("reclaim", rules.reclaim));
  const json* thresholds = r.Find("las_thresholds_gpu_s");
  if (thresholds == nullptr) return r.Bad("las_thresholds_gpu_s", "is required");
  if (!thresholds->is_array()) return r.Bad("las_thresholds_gpu_s", "must be an array");
  for (const json& t : *thresholds) {
    if (!t.is_number_integer()) return r.Bad("las_thresholds_gpu_s", "must be integers");
    rules.las_thresholds_gpu_s.push_back(t.get<int64_t>());
  }
  return r.Object("fair_share", true, [&](const FieldReader& f) {
    CORRAL_RETURN_IF_ERROR(f.Secs("half_life_s", true, rules.half_life));
    CORRAL_RETURN_IF_ERROR(f.Number("fair_share_weight", true, rules.fair_share_weight, 0));
    CORRAL_RETURN_IF_ERROR(f.Number("age_weight", true, rules.age_weight, 0));
    return f.Secs("age_unit_s", true, rules.age_unit);
  });
}

}  // namespace

json ToJson(const std::vector<QueueRow>& queue) {
  return ListJson(queue, [](const QueueRow& q) {
    return json{
        {"position", q.position},
        {"id", q.id.value()},
        {"name", q.name},
        {"user", q.user},
        {"project", q.project},
        {"priority", q.priority},
        {"gpus", static_cast<double>(q.gpus.value()) / 1000},
        {"submit_time", q.submit_time.value()},
        {"pending_reason",
         {{"code", q.pending_reason.code}, {"message", q.pending_reason.message}}},
        {"estimated_start", q.estimated_start ? json(q.estimated_start->value()) : json(nullptr)}};
  });
}

json ToJson(const PolicyView& p) {
  const SchedulingRules& r = p.rules;
  return {{"policy",
           {{"order", r.order},
            {"blocking", r.blocking},
            {"reclaim", r.reclaim},
            {"las_thresholds_gpu_s", r.las_thresholds_gpu_s},
            {"fair_share",
             {{"half_life_s", r.half_life.value()},
              {"fair_share_weight", r.fair_share_weight},
              {"age_weight", r.age_weight},
              {"age_unit_s", r.age_unit.value()}}}}},
          {"placement", p.placement},
          {"profile_jobs", p.profile_jobs},
          {"typical_tasks", p.typical_tasks},
          {"uses_profile", p.uses_profile},
          {"profile_min_jobs", p.profile_min_jobs},
          {"file", p.file},
          {"file_error", p.file_error ? json(*p.file_error) : json(nullptr)}};
}

Result<std::vector<QueueRow>> ParseQueue(const json& json) {
  return ReadList<QueueRow>(json, "queue", ReadRow);
}

Result<PolicyView> ParsePolicyView(const json& json) {
  auto r = ReadObject(json, "policy");
  if (!r.ok()) return r.status();
  PolicyView p;
  CORRAL_RETURN_IF_ERROR(r->Object(
      "policy", true, [&](const FieldReader& rules) { return ReadRules(rules, p.rules); }));
  CORRAL_RETURN_IF_ERROR(r->String("placement", true, p.placement));
  CORRAL_RETURN_IF_ERROR(r->Int("profile_jobs", false, p.profile_jobs, 0));
  CORRAL_RETURN_IF_ERROR(r->Int("typical_tasks", false, p.typical_tasks, 0));
  CORRAL_RETURN_IF_ERROR(r->Bool("uses_profile", p.uses_profile));
  CORRAL_RETURN_IF_ERROR(r->Int("profile_min_jobs", false, p.profile_min_jobs, 0));
  CORRAL_RETURN_IF_ERROR(r->String("file", true, p.file));
  if (r->Find("file_error") != nullptr) {
    std::string error;
    CORRAL_RETURN_IF_ERROR(r->String("file_error", true, error));
    p.file_error = std::move(error);
  }
  return p;
}

}  // namespace corral::protocol
