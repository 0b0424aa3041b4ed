#include "server/scheduling_policy.h"

#include <cmath>
#include <set>

namespace corral::server {

namespace {

using nlohmann::json;

Status CheckKeys(const json& j, const std::string& where, const std::set<std::string>& known) {
  if (!j.is_object()) return InvalidArgument(where + ": must be an object");
  for (const auto& [key, value] : j.items()) {
    if (!known.count(key)) {
      std::string list;
      for (const auto& k : known) list += (list.empty() ? "" : ", ") + k;
      return InvalidArgument(where + ": unknown field '" + key + "' (known: " + list + ")");
    }
  }
  return Status::Ok();
}

// A number >= min (and, if integral, a whole number) under `name`, or `fallback` when absent.
Result<double> Number(const json& j, const std::string& name, double fallback, double min,
                      bool integral) {
  if (!j.contains(name)) return fallback;
  const json& v = j[name];
  const bool ok = integral ? v.is_number_integer() : v.is_number();
  if (!ok || v.get<double>() < min || !std::isfinite(v.get<double>())) {
    return InvalidArgument("field '" + name + "': must be " +
                           (integral ? "an integer" : "a number") +
                           " >= " + std::to_string(static_cast<int64_t>(min)));
  }
  return v.get<double>();
}

// Milli-GPUs, saturated far beyond any valid value (Validate then names the field).
int64_t GpusToMilli(double gpus) {
  return static_cast<int64_t>(std::llround(std::min(gpus, 1e12) * 1000));
}

}  // namespace

Result<SchedulingPolicy> ParseSchedulingPolicy(const json& j) {
  CORRAL_RETURN_IF_ERROR(CheckKeys(
      j, "policy", {"order", "blocking", "reclaim", "fair_share", "las_thresholds_gpu_s"}));
  SchedulingPolicy p;
  if (j.contains("order")) {
    if (!j["order"].is_string()) return InvalidArgument("field 'order': must be a string");
    auto order = sched::ParseQueueOrder(j["order"].get<std::string>());
    if (!order.ok()) return InvalidArgument("field 'order': " + order.status().message());
    p.order = *order;
  }
  if (j.contains("blocking")) {
    if (!j["blocking"].is_string()) return InvalidArgument("field 'blocking': must be a string");
    auto blocking = sched::ParseBlocking(j["blocking"].get<std::string>());
    if (!blocking.ok()) return InvalidArgument("field 'blocking': " + blocking.status().message());
    p.blocking = *blocking;
  }
  if (j.contains("reclaim")) {
    if (!j["reclaim"].is_boolean()) return InvalidArgument("field 'reclaim': must be a boolean");
    p.reclaim = j["reclaim"].get<bool>();
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
    const json& f = j["fair_share"];
    CORRAL_RETURN_IF_ERROR(CheckKeys(
        f, "fair_share", {"half_life_s", "fair_share_weight", "age_weight", "age_unit_s"}));
    auto half_life = Number(f, "half_life_s", p.fair_share.half_life.value(), 1, true);
    auto weight = Number(f, "fair_share_weight", p.fair_share.fair_share_weight, 0, false);
    auto age = Number(f, "age_weight", p.fair_share.age_weight, 0, false);
    auto unit = Number(f, "age_unit_s", p.fair_share.age_unit.value(), 1, true);
    for (const auto* r : {&half_life, &weight, &age, &unit}) {
      if (!r->ok()) return InvalidArgument("fair_share: " + r->status().message());
    }
    p.fair_share.half_life = Seconds(static_cast<int64_t>(*half_life));
    p.fair_share.fair_share_weight = *weight;
    p.fair_share.age_weight = *age;
    p.fair_share.age_unit = Seconds(static_cast<int64_t>(*unit));
  }
  return p;
}

json SchedulingPolicyJson(const SchedulingPolicy& p) {
  static const char* kBlocking[] = {"skip", "strict", "backfill"};
  return {{"order", std::string(sched::QueueOrderName(p.order))},
          {"blocking", kBlocking[static_cast<int>(p.blocking)]},
          {"reclaim", p.reclaim},
          {"las_thresholds_gpu_s", p.las_thresholds_gpu_s},
          {"fair_share",
           {{"half_life_s", p.fair_share.half_life.value()},
            {"fair_share_weight", p.fair_share.fair_share_weight},
            {"age_weight", p.fair_share.age_weight},
            {"age_unit_s", p.fair_share.age_unit.value()}}}};
}

Result<sched::ProjectPolicy> ParseProjectSharing(const json& j) {
  CORRAL_RETURN_IF_ERROR(CheckKeys(j, "sharing", {"weight", "gpus", "model_gpus", "limit_gpus"}));
  sched::ProjectPolicy p;
  auto weight = Number(j, "weight", 1.0, 0, false);
  if (!weight.ok()) return weight.status();
  p.weight = *weight;
  auto gpus = Number(j, "gpus", 0, 0, false);
  if (!gpus.ok()) return gpus.status();
  p.quota_milli = GpusToMilli(*gpus);
  if (j.contains("limit_gpus") && !j["limit_gpus"].is_null()) {
    auto limit = Number(j, "limit_gpus", 0, 0, false);
    if (!limit.ok()) return limit.status();
    p.limit_milli = GpusToMilli(*limit);
  }
  if (j.contains("model_gpus")) {
    if (!j["model_gpus"].is_object()) {
      return InvalidArgument("field 'model_gpus': must be an object of model: GPUs");
    }
    for (const auto& [model, n] : j["model_gpus"].items()) {
      if (model.empty() || !n.is_number() || n.get<double>() < 0) {
        return InvalidArgument("field 'model_gpus." + model + "': must be a number >= 0");
      }
      p.model_quota_milli[model] = GpusToMilli(n.get<double>());
    }
  }
  // The scheduler's own bounds (weights, sizes), with the field named.
  sched::SharingConfig trial;
  trial.projects["project"] = p;
  Status valid = sched::Validate(trial);
  if (!valid.ok()) {
    const std::string message = valid.message();
    const size_t field = message.find("field '");
    return InvalidArgument(field == std::string::npos ? message : message.substr(field));
  }
  return p;
}

json ProjectSharingJson(const sched::ProjectPolicy& p) {
  json out = {{"weight", p.weight}, {"gpus", static_cast<double>(p.quota_milli) / 1000}};
  json models = json::object();
  for (const auto& [model, milli] : p.model_quota_milli) {
    models[model] = static_cast<double>(milli) / 1000;
  }
  out["model_gpus"] = models;
  if (p.limit_milli) out["limit_gpus"] = static_cast<double>(*p.limit_milli) / 1000;
  return out;
}

}  // namespace corral::server
