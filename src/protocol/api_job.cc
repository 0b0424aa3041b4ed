#include "protocol/api_job.h"

#include <cmath>
#include <limits>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_job_report.h"
#include "protocol/api_lists.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using api_internal::ReadListText;
using nlohmann::json;

constexpr int64_t kMaxTasks = 1000000;
constexpr size_t kMaxItems = 1000000;  // events, tasks, defaults, ids of one answer

// An enum field read by its parser (model::ParseJobState and the like), which names the field.
template <typename T>
Status ReadEnum(const FieldReader& r, const char* field, bool required,
                Result<T> (*parse)(std::string_view, std::string_view), std::optional<T>& out) {
  std::string name;
  CORRAL_RETURN_IF_ERROR(r.String(field, required, name));
  if (r.Find(field) == nullptr) return Status::Ok();
  auto value = parse(name, r.Path(field));
  CORRAL_RETURN_IF_ERROR(r.Within(value.status()));
  out = *value;
  return Status::Ok();
}

Status ReadId(const FieldReader& r, const char* field, JobId& out) {
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int(field, true, v, 1));
  out = JobId(v);
  return Status::Ok();
}

json PendingReasonJson(const PendingReason& p) {
  return {{"code", p.code}, {"message", p.message}};
}

Status ReadPendingReason(const FieldReader& r, std::optional<PendingReason>& out) {
  return r.Object("pending_reason", false, [&](const FieldReader& p) {
    PendingReason reason;
    CORRAL_RETURN_IF_ERROR(p.String("code", true, reason.code));
    CORRAL_RETURN_IF_ERROR(p.String("message", true, reason.message));
    out = std::move(reason);
    return Status::Ok();
  });
}

Result<JobSummary> ReadSummary(const FieldReader& r) {
  JobSummary j;
  CORRAL_RETURN_IF_ERROR(ReadId(r, "id", j.id));
  CORRAL_RETURN_IF_ERROR(r.String("name", true, j.name));
  CORRAL_RETURN_IF_ERROR(r.String("user", true, j.user));
  CORRAL_RETURN_IF_ERROR(r.String("project", true, j.project));
  std::optional<model::JobState> state;
  CORRAL_RETURN_IF_ERROR(ReadEnum(r, "state", true, model::ParseJobState, state));
  j.state = *state;
  CORRAL_RETURN_IF_ERROR(r.RequiredInt("priority", j.priority));
  std::optional<Seconds> submit;
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("submit_time", submit));
  if (!submit) return r.Bad("submit_time", "is required");
  j.submit_time = *submit;
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("start_time", j.start_time));
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("end_time", j.end_time));
  // Absent from older servers' answers: 0 then.
  int64_t total_gpu_milli = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("total_gpu_milli", false, total_gpu_milli, 0));
  j.total_gpu_milli = MilliGpu(total_gpu_milli);
  CORRAL_RETURN_IF_ERROR(r.String("reason", true, j.reason));
  if (r.Find("array_id") != nullptr) {
    ArrayMembership array;
    CORRAL_RETURN_IF_ERROR(ReadId(r, "array_id", array.array_id));
    CORRAL_RETURN_IF_ERROR(r.OptionalInt("array_index", array.index, 0));
    CORRAL_RETURN_IF_ERROR(r.OptionalInt("array_max_running", array.max_running, 1));
    j.array = array;
  }
  CORRAL_RETURN_IF_ERROR(ReadPendingReason(r, j.pending_reason));
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("estimated_start", j.estimated_start));
  return j;
}

json EventJson(const JobEvent& e) {
  return {{"time", e.time.value()},
          {"from", e.from ? std::string(model::ToString(*e.from)) : ""},
          {"to", model::ToString(e.to)},
          {"reason", e.reason}};
}

Result<JobEvent> ReadEvent(const FieldReader& r) {
  JobEvent e;
  std::optional<Seconds> time;
  CORRAL_RETURN_IF_ERROR(r.OptionalSecs("time", time));
  if (!time) return r.Bad("time", "is required");
  e.time = *time;
  std::string from;
  CORRAL_RETURN_IF_ERROR(r.String("from", true, from));
  if (!from.empty())
    CORRAL_RETURN_IF_ERROR(ReadEnum(r, "from", true, model::ParseJobState, e.from));
  std::optional<model::JobState> to;
  CORRAL_RETURN_IF_ERROR(ReadEnum(r, "to", true, model::ParseJobState, to));
  e.to = *to;
  CORRAL_RETURN_IF_ERROR(r.String("reason", true, e.reason));
  return e;
}

json TaskJson(const TaskView& t) {
  json allocation = model::ToJson(t.allocation);
  allocation["node"] = t.node;
  json out = {{"index", t.index},
              {"allocation_id", t.allocation_id},
              {"generation", t.generation},
              {"node", t.node},
              {"state", model::ToString(t.state)},
              {"allocation", std::move(allocation)}};
  if (t.exit_code) out["exit_code"] = *t.exit_code;
  if (t.signal) out["signal"] = *t.signal;
  if (t.end_cause) out["end_cause"] = model::ToString(*t.end_cause);
  return out;
}

Result<TaskView> ReadTask(const FieldReader& r) {
  TaskView t;
  int64_t v = 0;
  CORRAL_RETURN_IF_ERROR(r.Int("index", true, v, 0, kMaxTasks));
  t.index = static_cast<int>(v);
  CORRAL_RETURN_IF_ERROR(r.Int("allocation_id", true, t.allocation_id, 0));
  CORRAL_RETURN_IF_ERROR(r.Int("generation", true, t.generation, 0));
  CORRAL_RETURN_IF_ERROR(r.String("node", true, t.node));
  std::optional<model::TaskState> state;
  CORRAL_RETURN_IF_ERROR(ReadEnum(r, "state", true, model::ParseTaskState, state));
  t.state = *state;
  const json* allocation = r.Find("allocation");
  if (allocation == nullptr) return r.Bad("allocation", "is required");
  auto parsed = model::AllocationFromJson(*allocation);
  if (!parsed.ok()) return r.Bad("allocation", parsed.status().message());
  t.allocation = std::move(parsed).value();
  CORRAL_RETURN_IF_ERROR(r.OptionalInt("exit_code", t.exit_code));
  CORRAL_RETURN_IF_ERROR(r.OptionalInt("signal", t.signal, 0));
  CORRAL_RETURN_IF_ERROR(ReadEnum(r, "end_cause", false, model::ParseTaskEndCause, t.end_cause));
  return t;
}

json DefaultJson(const ResourceDefault& d) {
  return {{"field", d.field}, {"value", d.value}, {"why", d.why}};
}

Result<ResourceDefault> ReadDefault(const FieldReader& r) {
  ResourceDefault d;
  CORRAL_RETURN_IF_ERROR(r.String("field", true, d.field));
  CORRAL_RETURN_IF_ERROR(r.Int("value", true, d.value, 0));
  CORRAL_RETURN_IF_ERROR(r.String("why", true, d.why));
  return d;
}

// The items of the array `field` (required), each read by `read`.
template <typename T>
Status ReadItems(const FieldReader& r, const char* field, Result<T> (*read)(const FieldReader&),
                 std::vector<T>& out) {
  return r.Objects(field, true, kMaxItems, [&](const FieldReader& item, size_t) {
    auto value = read(item);
    if (!value.ok()) return value.status();
    out.push_back(std::move(value).value());
    return Status::Ok();
  });
}

json DependencyJson(const DependencyView& d) {
  return {{"type", model::ToString(d.dependency.type)},
          {"job", d.dependency.job.value()},
          {"status", model::ToString(d.status)}};
}

Result<DependencyView> ReadDependency(const FieldReader& r) {
  std::string type, status;
  CORRAL_RETURN_IF_ERROR(r.String("type", true, type));
  CORRAL_RETURN_IF_ERROR(r.String("status", true, status));
  DependencyView d;
  CORRAL_RETURN_IF_ERROR(ReadId(r, "job", d.dependency.job));
  auto parsed = model::ParseDependencies(type + ":" + std::to_string(d.dependency.job.value()),
                                         "field 'dependencies.type'");
  if (!parsed.ok()) return parsed.status();
  d.dependency = parsed->front();
  auto parsed_status = model::ParseDependencyStatus(status);
  if (!parsed_status) return r.Bad("status", "must be met, waiting or never_met");
  d.status = *parsed_status;
  return d;
}

}  // namespace

std::string ToString(const std::vector<ResourceDefault>& defaults) {
  std::string text;
  for (const ResourceDefault& d : defaults) {
    text +=
        (text.empty() ? "" : "; ") + d.field + " " + std::to_string(d.value) + " (" + d.why + ")";
  }
  return text;
}

json ToJson(const JobSummary& j) {
  json out = {{"id", j.id.value()},
              {"name", j.name},
              {"user", j.user},
              {"project", j.project},
              {"state", model::ToString(j.state)},
              {"priority", j.priority},
              {"submit_time", j.submit_time.value()},
              {"total_gpu_milli", j.total_gpu_milli.value()},
              {"reason", j.reason}};
  if (j.start_time) out["start_time"] = j.start_time->value();
  if (j.end_time) out["end_time"] = j.end_time->value();
  if (j.array) {
    out["array_id"] = j.array->array_id.value();
    if (j.array->index) out["array_index"] = *j.array->index;
    if (j.array->max_running) out["array_max_running"] = *j.array->max_running;
  }
  if (j.pending_reason) out["pending_reason"] = PendingReasonJson(*j.pending_reason);
  if (j.estimated_start) out["estimated_start"] = j.estimated_start->value();
  return out;
}

json ToJson(const std::vector<JobSummary>& jobs) {
  return ListJson(jobs, [](const JobSummary& j) { return ToJson(j); });
}

std::string LostWorkText(double gpu_s) {
  if (gpu_s < 360) return std::to_string(std::llround(gpu_s)) + " GPU-s";
  const int64_t tenths = std::llround(gpu_s / 360);
  return std::to_string(tenths / 10) + "." + std::to_string(tenths % 10) + " GPU-h";
}

json ToJson(const JobView& j) {
  json out = ToJson(j.summary);
  out["restarts"] = j.restarts;
  out["spec"] = ToJson(j.spec);
  out["events"] = ListJson(j.events, EventJson);
  out["tasks"] = ListJson(j.tasks, TaskJson);
  if (j.predicted_run_s) {
    out["predicted_run_s"] = {{"estimate", j.predicted_run_s->estimate.value()},
                              {"confidence", j.predicted_run_s->confidence},
                              {"basis", j.predicted_run_s->basis}};
  }
  if (!j.dependencies.empty()) out["dependencies"] = ListJson(j.dependencies, DependencyJson);
  AddProgressJson(j.progress, out);
  out["checkpoint_dir"] = j.checkpoint_dir ? json(*j.checkpoint_dir) : json();
  if (j.spec.elastic) {
    out["elastic"] = ElasticJson(*j.spec.elastic);
    if (j.elastic_now) out["elastic"]["now"] = *j.elastic_now;
    out["resizes"] = j.resizes;
  }
  out["lost_work_gpu_s"] = j.lost_work_gpu_s;
  out["stop_grace_s"] = j.stop_grace.value();
  return out;
}

json ToJson(const SubmitAnswer& a) {
  json out = {{"state", model::ToString(a.state)},
              {"project", a.project},
              {"user", a.user},
              {"reason", a.reason},
              {"defaults", ListJson(a.defaults, DefaultJson)}};
  if (!a.warnings.empty()) out["warnings"] = a.warnings;
  if (a.array_ids.empty()) {
    out["id"] = a.id.value();
  } else {
    out["array_id"] = a.id.value();
    out["ids"] = ListJson(a.array_ids, [](JobId id) { return id.value(); });
  }
  return out;
}

Result<std::vector<JobSummary>> ParseJobSummaries(const json& json) {
  return ReadList<JobSummary>(json, "jobs", ReadSummary);
}

Result<std::vector<JobSummary>> ParseJobSummaries(std::string_view text, const JsonLimits& limits) {
  return ReadListText<JobSummary>(text, "jobs", limits, ReadSummary);
}

Result<JobView> ParseJobView(const json& json) {
  auto r = ReadObject(json, "job");
  if (!r.ok()) return r.status();
  JobView j;
  auto summary = ReadSummary(*r);
  if (!summary.ok()) return summary.status();
  j.summary = std::move(summary).value();
  CORRAL_RETURN_IF_ERROR(r->RequiredInt("restarts", j.restarts));
  const nlohmann::json* spec = r->Find("spec");
  if (spec == nullptr) return r->Bad("spec", "is required");
  auto parsed = ParseJobSpec(*spec, SpecOrigin::kShown);
  if (!parsed.ok()) return r->Bad("spec", parsed.status().message());
  j.spec = std::move(parsed).value();
  CORRAL_RETURN_IF_ERROR(ReadItems(*r, "events", ReadEvent, j.events));
  CORRAL_RETURN_IF_ERROR(ReadItems(*r, "tasks", ReadTask, j.tasks));
  CORRAL_RETURN_IF_ERROR(r->Object("predicted_run_s", false, [&](const FieldReader& p) {
    RuntimePrediction prediction;
    int64_t estimate = 0;
    CORRAL_RETURN_IF_ERROR(p.Int("estimate", true, estimate, 0));
    prediction.estimate = Seconds(estimate);
    CORRAL_RETURN_IF_ERROR(p.Number("confidence", true, prediction.confidence, 0));
    CORRAL_RETURN_IF_ERROR(p.String("basis", true, prediction.basis));
    j.predicted_run_s = std::move(prediction);
    return Status::Ok();
  }));
  CORRAL_RETURN_IF_ERROR(r->Objects("dependencies", false, model::kMaxDependencies,
                                    [&](const FieldReader& item, size_t) {
                                      auto d = ReadDependency(item);
                                      if (!d.ok()) return d.status();
                                      j.dependencies.push_back(*d);
                                      return Status::Ok();
                                    }));
  CORRAL_RETURN_IF_ERROR(ReadProgress(*r, j.progress));
  std::string checkpoint_dir;
  CORRAL_RETURN_IF_ERROR(r->String("checkpoint_dir", false, checkpoint_dir));
  if (!checkpoint_dir.empty()) j.checkpoint_dir = checkpoint_dir;
  // The range is the spec's; the view adds its size now.
  CORRAL_RETURN_IF_ERROR(r->Object("elastic", false, [&](const FieldReader& e) {
    return e.OptionalInt("now", j.elastic_now, 0, model::kMaxElasticSize);
  }));
  int64_t resizes = 0;
  CORRAL_RETURN_IF_ERROR(r->Int("resizes", false, resizes, 0, std::numeric_limits<int>::max()));
  j.resizes = static_cast<int>(resizes);
  CORRAL_RETURN_IF_ERROR(r->Number("lost_work_gpu_s", false, j.lost_work_gpu_s, 0));
  std::optional<int64_t> grace;
  CORRAL_RETURN_IF_ERROR(r->OptionalInt64("stop_grace_s", grace, 0, kMaxCheckpointGrace.value()));
  j.stop_grace = Seconds(grace.value_or(0));
  return j;
}

Result<SubmitAnswer> ParseSubmitAnswer(const json& json) {
  auto r = ReadObject(json, "submit answer");
  if (!r.ok()) return r.status();
  SubmitAnswer a;
  if (r->Find("array_id") != nullptr) {
    CORRAL_RETURN_IF_ERROR(ReadId(*r, "array_id", a.id));
    const nlohmann::json* ids = r->Find("ids");
    if (ids == nullptr) return r->Bad("ids", "is required with array_id");
    if (!ids->is_array() || ids->empty()) return r->Bad("ids", "must be a non-empty array of ids");
    for (const nlohmann::json& id : *ids) {
      if (!id.is_number_integer() || id.get<int64_t>() < 1) {
        return r->Bad("ids", "must be a non-empty array of ids");
      }
      a.array_ids.push_back(JobId(id.get<int64_t>()));
    }
  } else {
    CORRAL_RETURN_IF_ERROR(ReadId(*r, "id", a.id));
  }
  std::optional<model::JobState> state;
  CORRAL_RETURN_IF_ERROR(ReadEnum(*r, "state", true, model::ParseJobState, state));
  a.state = *state;
  CORRAL_RETURN_IF_ERROR(r->String("project", true, a.project));
  CORRAL_RETURN_IF_ERROR(r->String("user", true, a.user));
  CORRAL_RETURN_IF_ERROR(r->String("reason", true, a.reason));
  // Absent from the answers of servers before it: read as none.
  if (r->Find("defaults") != nullptr) {
    CORRAL_RETURN_IF_ERROR(ReadItems(*r, "defaults", ReadDefault, a.defaults));
  }
  CORRAL_RETURN_IF_ERROR(r->Strings("warnings", false, a.warnings));
  return a;
}

}  // namespace corral::protocol
