#include "protocol/api_project.h"

#include <cmath>
#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "protocol/api_account.h"
#include "protocol/api_lists.h"
#include "protocol/spec_fields.h"

namespace corral::protocol {
namespace {

using api_internal::ListJson;
using api_internal::ReadList;
using nlohmann::json;

// Larger numbers (GPUs, weights) are certainly typos, and would overflow milli-GPU.
constexpr double kMaxNumber = 1e12;

double Gpus(MilliGpu milli) { return static_cast<double>(milli.value()) / 1000; }

// A number of GPUs (>= 0) in `field`, as milli-GPU; none when absent or null.
Status ReadGpus(const FieldReader& r, const char* field, std::optional<MilliGpu>& out) {
  double gpus = -1;
  CORRAL_RETURN_IF_ERROR(r.Number(field, false, gpus, 0));
  if (r.Find(field) == nullptr) return Status::Ok();
  if (gpus > kMaxNumber) return r.Bad(field, "must be at most 1e12 GPUs");
  out = MilliGpu(std::llround(gpus * 1000));
  return Status::Ok();
}

Status ReadSharing(const FieldReader& r, const json& object, const std::string& prefix,
                   ProjectSharing& s) {
  CORRAL_RETURN_IF_ERROR(r.Within(CheckKeys(
      object, {"weight", "gpus", "model_gpus", "limit_gpus", "user_limit_gpus"}, prefix)));
  CORRAL_RETURN_IF_ERROR(r.Number("weight", false, s.weight));
  if (!(s.weight > 0 && s.weight <= kMaxNumber)) {
    return r.Bad("weight", "must be a number > 0 and at most 1e12");
  }
  std::optional<MilliGpu> quota;
  CORRAL_RETURN_IF_ERROR(ReadGpus(r, "gpus", quota));
  s.quota = quota.value_or(MilliGpu(0));
  CORRAL_RETURN_IF_ERROR(ReadGpus(r, "limit_gpus", s.limit));
  CORRAL_RETURN_IF_ERROR(ReadGpus(r, "user_limit_gpus", s.user_limit));
  return r.Object("model_gpus", false, [&](const FieldReader& models) {
    for (const auto& [model, gpus] : r.Find("model_gpus")->items()) {
      if (model.empty()) return r.Bad("model_gpus", "a model name is empty");
      std::optional<MilliGpu> quota;
      CORRAL_RETURN_IF_ERROR(ReadGpus(models, model.c_str(), quota));
      if (!quota) return models.Bad(model, "must be a number of GPUs");
      s.model_quota[model] = *quota;
    }
    return Status::Ok();
  });
}

constexpr std::pair<ShareStanding, const char*> kStandings[] = {
    {ShareStanding::kUnder, "under"}, {ShareStanding::kAt, "at"}, {ShareStanding::kOver, "over"}};

const char* StandingName(ShareStanding standing) {
  for (const auto& [value, name] : kStandings) {
    if (value == standing) return name;
  }
  return "at";
}

Status ReadStanding(const FieldReader& r, FairShareStandingView& out) {
  std::string standing;
  CORRAL_RETURN_IF_ERROR(r.String("standing", true, standing));
  bool known = false;
  for (const auto& [value, name] : kStandings) {
    if (standing == name) {
      out.standing = value;
      known = true;
    }
  }
  if (!known) return r.Bad("standing", "must be under, at or over");
  CORRAL_RETURN_IF_ERROR(r.Number("gpu_hours_from_share", true, out.gpu_hours_from_share));
  return r.Bool("next_in_line", out.next_in_line);
}

Result<ProjectView> ReadProject(const FieldReader& r) {
  ProjectView p;
  CORRAL_RETURN_IF_ERROR(r.String("name", true, p.name));
  CORRAL_RETURN_IF_ERROR(r.String("description", true, p.description));
  CORRAL_RETURN_IF_ERROR(r.Object("sharing", true, [&](const FieldReader& s) {
    return ReadSharing(s, *r.Find("sharing"), r.Path("sharing."), p.sharing);
  }));
  // Absent from an older server's answer: no limits.
  CORRAL_RETURN_IF_ERROR(r.Object("submit_limits", false, [&](const FieldReader& limits) {
    return api_internal::ReadSubmitLimits(limits, *r.Find("submit_limits"),
                                          r.Path("submit_limits."), p.submit_limits);
  }));
  for (auto [field, out] :
       {std::pair{"running_gpus", &p.running}, {"borrowed_gpus", &p.borrowed}}) {
    std::optional<MilliGpu> gpus;
    CORRAL_RETURN_IF_ERROR(ReadGpus(r, field, gpus));
    if (!gpus) return r.Bad(field, "is required");
    *out = *gpus;
  }
  CORRAL_RETURN_IF_ERROR(r.Number("fair_share_usage", true, p.fair_share_usage, 0));
  // Absent from an older server's answer: "at", 0, not next.
  CORRAL_RETURN_IF_ERROR(r.Object("fair_share", false, [&](const FieldReader& standing) {
    return ReadStanding(standing, p.fair_share);
  }));
  return p;
}

}  // namespace

json ToJson(const ProjectSharing& s) {
  json models = json::object();
  for (const auto& [model, quota] : s.model_quota) models[model] = Gpus(quota);
  json out = {{"weight", s.weight}, {"gpus", Gpus(s.quota)}, {"model_gpus", std::move(models)}};
  if (s.limit) out["limit_gpus"] = Gpus(*s.limit);
  if (s.user_limit) out["user_limit_gpus"] = Gpus(*s.user_limit);
  return out;
}

json ToJson(const ProjectView& p) {
  return {{"name", p.name},
          {"description", p.description},
          {"sharing", ToJson(p.sharing)},
          {"submit_limits", ToJson(p.submit_limits)},
          {"quota_gpus", Gpus(p.sharing.quota)},
          {"weight", p.sharing.weight},
          {"limit_gpus", p.sharing.limit ? json(Gpus(*p.sharing.limit)) : json(nullptr)},
          {"running_gpus", Gpus(p.running)},
          {"borrowed_gpus", Gpus(p.borrowed)},
          {"fair_share_usage", p.fair_share_usage},
          {"fair_share",
           {{"standing", StandingName(p.fair_share.standing)},
            {"gpu_hours_from_share", p.fair_share.gpu_hours_from_share},
            {"next_in_line", p.fair_share.next_in_line}}}};
}

json ToJson(const std::vector<ProjectView>& projects) {
  return ListJson(projects, [](const ProjectView& p) { return ToJson(p); });
}

Result<ProjectRequest> ParseProjectRequest(const json& j) {
  if (!j.is_object()) return InvalidArgument("project request: must be a JSON object");
  CORRAL_RETURN_IF_ERROR(CheckKeys(j, {"name", "description"}, ""));
  ProjectRequest p;
  if (!j.contains("name")) return FieldError("name", "is required");
  auto name = GetName(j["name"], "name", NameKind::kProject);
  if (!name.ok()) return name.status();
  p.name = *name;
  if (j.contains("description")) {
    auto description = GetString(j["description"], "description");
    if (!description.ok()) return description.status();
    p.description = *description;
  }
  return p;
}

Result<ProjectSharing> ParseProjectSharing(const json& json) {
  auto r = ReadObject(json, "project sharing");
  if (!r.ok()) return r.status();
  ProjectSharing s;
  CORRAL_RETURN_IF_ERROR(ReadSharing(*r, json, "", s));
  return s;
}

Result<std::vector<ProjectView>> ParseProjectViews(const json& json) {
  return ReadList<ProjectView>(json, "projects", ReadProject);
}

}  // namespace corral::protocol
