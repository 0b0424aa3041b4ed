#include "sched/policy_config.h"

#include <cmath>

namespace corral::sched {

namespace {

using nlohmann::json;

std::string Path(const std::string& field, const std::string& key) {
  return field.empty() ? key : field + "." + key;
}

Status CheckObject(const json& j, const std::string& field, const std::set<std::string>& known) {
  if (!j.is_object()) {
    return InvalidArgument(field.empty() ? std::string("must be an object")
                                         : "field '" + field + "': must be an object");
  }
  for (const auto& [key, value] : j.items()) {
    if (known.count(key)) continue;
    std::string list;
    for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
    return InvalidArgument("field '" + Path(field, key) + "': unknown (known: " + list + ")");
  }
  return Status::Ok();
}

// Larger numbers (GPUs, seconds, weights) are certainly typos, and would overflow milli-GPU.
constexpr double kMaxNumber = 1e12;

// The number at j[key] (named `field` in messages): >= min (> min when `strict`), at most
// kMaxNumber, whole if `integral`; `fallback` when absent.
Result<double> Number(const json& j, const std::string& key, const std::string& field,
                      double fallback, double min, bool strict, bool integral) {
  if (!j.contains(key)) return fallback;
  const json& v = j[key];
  const bool typed = integral ? v.is_number_integer() : v.is_number();
  const double x = typed ? v.get<double>() : 0;
  if (!typed || !(x >= min && x <= kMaxNumber) || (strict && x == min)) {
    return InvalidArgument("field '" + field + "': must be " +
                           (integral ? "an integer" : "a number") + (strict ? " > " : " >= ") +
                           std::to_string(static_cast<int64_t>(min)) + " and at most 1e12");
  }
  return x;
}

int64_t GpusToMilli(double gpus) { return std::llround(gpus * 1000); }

Status ParseFairShare(const json& f, FairShareConfig& fs) {
  CORRAL_RETURN_IF_ERROR(CheckObject(
      f, "fair_share", {"half_life_s", "fair_share_weight", "age_weight", "age_unit_s"}));
  auto half_life = Number(f, "half_life_s", "fair_share.half_life_s",
                          static_cast<double>(fs.half_life.value()), 0, true, true);
  auto weight = Number(f, "fair_share_weight", "fair_share.fair_share_weight", fs.fair_share_weight,
                       0, false, false);
  auto age = Number(f, "age_weight", "fair_share.age_weight", fs.age_weight, 0, false, false);
  auto unit = Number(f, "age_unit_s", "fair_share.age_unit_s",
                     static_cast<double>(fs.age_unit.value()), 0, true, true);
  for (const auto* r : {&half_life, &weight, &age, &unit}) {
    if (!r->ok()) return r->status();
  }
  fs.half_life = Seconds(static_cast<int64_t>(*half_life));
  fs.fair_share_weight = *weight;
  fs.age_weight = *age;
  fs.age_unit = Seconds(static_cast<int64_t>(*unit));
  return Status::Ok();
}

}  // namespace

std::string_view BlockingName(Blocking blocking) {
  switch (blocking) {
    case Blocking::kSkip:
      return "skip";
    case Blocking::kStrict:
      return "strict";
    case Blocking::kBackfill:
      return "backfill";
  }
  return "skip";
}

Result<ProjectPolicy> ParseProjectSharing(const json& j, const std::string& field) {
  CORRAL_RETURN_IF_ERROR(
      CheckObject(j, field, {"weight", "gpus", "model_gpus", "limit_gpus", "user_limit_gpus"}));
  ProjectPolicy p;
  auto weight = Number(j, "weight", Path(field, "weight"), 1.0, 0, true, false);
  if (!weight.ok()) return weight.status();
  p.weight = *weight;
  auto gpus = Number(j, "gpus", Path(field, "gpus"), 0, 0, false, false);
  if (!gpus.ok()) return gpus.status();
  p.quota_milli = GpusToMilli(*gpus);
  if (j.contains("limit_gpus") && !j["limit_gpus"].is_null()) {  // null: no limit
    auto limit = Number(j, "limit_gpus", Path(field, "limit_gpus"), 0, 0, false, false);
    if (!limit.ok()) return limit.status();
    p.limit_milli = GpusToMilli(*limit);
  }
  if (j.contains("user_limit_gpus") && !j["user_limit_gpus"].is_null()) {
    auto limit = Number(j, "user_limit_gpus", Path(field, "user_limit_gpus"), 0, 0, false, false);
    if (!limit.ok()) return limit.status();
    p.user_limit_milli = GpusToMilli(*limit);
  }
  if (j.contains("model_gpus")) {
    const json& models = j["model_gpus"];
    const std::string where = Path(field, "model_gpus");
    if (!models.is_object()) {
      return InvalidArgument("field '" + where + "': must be an object of model: GPUs");
    }
    for (const auto& [model, n] : models.items()) {
      if (model.empty()) return InvalidArgument("field '" + where + "': a model name is empty");
      auto quota = Number(models, model, where + "." + model, 0, 0, false, false);
      if (!quota.ok()) return quota.status();
      p.model_quota_milli[model] = GpusToMilli(*quota);
    }
  }
  CORRAL_RETURN_IF_ERROR(CheckProjectPolicy(p, field));
  return p;
}

Status CheckProjectPolicy(const ProjectPolicy& policy, const std::string& field) {
  SharingConfig trial;
  trial.projects["p"] = policy;
  if (Status valid = Validate(trial); !valid.ok()) {
    const std::string message = valid.message();
    const size_t at = message.find("field '");
    const std::string rest = at == std::string::npos ? message : message.substr(at + 7);
    return InvalidArgument("field '" + Path(field, rest));
  }
  return Status::Ok();
}

json ProjectSharingJson(const ProjectPolicy& p) {
  json out = {{"weight", p.weight}, {"gpus", static_cast<double>(p.quota_milli) / 1000}};
  json models = json::object();
  for (const auto& [model, milli] : p.model_quota_milli) {
    models[model] = static_cast<double>(milli) / 1000;
  }
  out["model_gpus"] = models;
  if (p.limit_milli) out["limit_gpus"] = static_cast<double>(*p.limit_milli) / 1000;
  if (p.user_limit_milli) {
    out["user_limit_gpus"] = static_cast<double>(*p.user_limit_milli) / 1000;
  }
  return out;
}

Result<SchedulingPolicy> ParseSchedulingPolicy(const json& j,
                                               const std::set<std::string>& accepted) {
  CORRAL_RETURN_IF_ERROR(CheckObject(j, "", accepted));
  SchedulingPolicy p;
  if (j.contains("order")) {
    if (!j["order"].is_string()) return InvalidArgument("field 'order': must be a string");
    auto order = ParseQueueOrder(j["order"].get<std::string>());
    if (!order.ok()) return InvalidArgument("field 'order': " + order.status().message());
    if (PreemptsByRemaining(*order)) {
      // docs/decisions.md: they preempt on estimates and assume a free resume, which a live
      // cluster does not give.
      return InvalidArgument("field 'order': '" + std::string(QueueOrderName(*order)) +
                             "' is for the simulator only (`corral sim replay --order`): it "
                             "preempts by estimated remaining run time and assumes a preempted "
                             "job resumes without loss");
    }
    p.order = *order;
  }
  if (j.contains("blocking")) {
    if (!j["blocking"].is_string()) return InvalidArgument("field 'blocking': must be a string");
    auto blocking = ParseBlocking(j["blocking"].get<std::string>());
    if (!blocking.ok()) return InvalidArgument("field 'blocking': " + blocking.status().message());
    p.blocking = *blocking;
  }
  if (j.contains("reclaim")) {
    if (!j["reclaim"].is_boolean()) {
      return InvalidArgument("field 'reclaim': must be true or false");
    }
    p.sharing.reclaim = j["reclaim"].get<bool>();
  }
  if (j.contains("las_thresholds_gpu_s")) {
    const json& t = j["las_thresholds_gpu_s"];
    if (!t.is_array() || t.empty()) {
      return InvalidArgument("field 'las_thresholds_gpu_s': must be a list of GPU-seconds");
    }
    p.las_thresholds_gpu_s.clear();
    for (const json& v : t) {
      if (!v.is_number_integer() || v.get<int64_t>() <= 0 ||
          (!p.las_thresholds_gpu_s.empty() && v.get<int64_t>() <= p.las_thresholds_gpu_s.back())) {
        return InvalidArgument(
            "field 'las_thresholds_gpu_s': must be positive integers in ascending order");
      }
      p.las_thresholds_gpu_s.push_back(v.get<int64_t>());
    }
  }
  if (j.contains("fair_share")) {
    CORRAL_RETURN_IF_ERROR(ParseFairShare(j["fair_share"], p.sharing.fair_share));
  }
  if (j.contains("projects")) {
    const json& projects = j["projects"];
    if (!projects.is_object()) {
      return InvalidArgument("field 'projects': must be an object of name: sharing");
    }
    for (const auto& [name, project] : projects.items()) {
      if (name.empty()) return InvalidArgument("field 'projects': a project name is empty");
      auto sharing = ParseProjectSharing(project, "projects." + name);
      if (!sharing.ok()) return sharing.status();
      p.sharing.projects[name] = *sharing;
    }
  }
  CORRAL_RETURN_IF_ERROR(Validate(p.sharing));
  return p;
}

}  // namespace corral::sched
