#include "protocol/api_job_report.h"

#include <cmath>

namespace corral::protocol {

using nlohmann::json;

namespace {

// A value as a report may send it: a finite number, or a string within its bound.
std::optional<model::MetricValue> MetricValueOf(const json& value) {
  if (value.is_number()) {
    const double number = value.get<double>();
    if (std::isfinite(number)) return number;
  } else if (value.is_string()) {
    std::string text = value.get<std::string>();
    if (text.size() <= model::kMaxMetricTextBytes) return text;
  }
  return std::nullopt;
}

}  // namespace

Result<model::JobReport> ParseJobReport(const json& body) {
  auto r = ReadObject(body, "report");
  if (!r.ok()) return r.status();
  const json* metrics = r->Find("metrics");
  if (metrics == nullptr) return r->Bad("metrics", "is required");
  if (!metrics->is_object() || metrics->empty()) {
    return r->Bad("metrics", "must be an object of 1 to " +
                                 std::to_string(model::kMaxMetricsPerReport) + " metrics");
  }
  if (metrics->size() > model::kMaxMetricsPerReport) {
    return r->Bad("metrics", "has " + std::to_string(metrics->size()) +
                                 " keys; a report may have " +
                                 std::to_string(model::kMaxMetricsPerReport));
  }
  model::JobReport report;
  for (const auto& [key, value] : metrics->items()) {
    if (!model::IsMetricKey(key)) {
      return r->Bad("metrics", "key '" + key.substr(0, model::kMaxMetricKeyBytes) +
                                   "' must be 1 to " + std::to_string(model::kMaxMetricKeyBytes) +
                                   " bytes of [A-Za-z0-9_.:/-]");
    }
    std::optional<model::MetricValue> parsed = MetricValueOf(value);
    if (!parsed) {
      return r->Bad("metrics." + key, "must be a finite number or a string of at most " +
                                          std::to_string(model::kMaxMetricTextBytes) + " bytes");
    }
    report.metrics.emplace_back(key, *std::move(parsed));
  }
  return report;
}

Result<model::JobCheckpoint> ParseJobCheckpoint(const json& body) {
  auto r = ReadObject(body, "checkpoint");
  if (!r.ok()) return r.status();
  model::JobCheckpoint checkpoint;
  CORRAL_RETURN_IF_ERROR(r->String("path", true, checkpoint.path));
  if (checkpoint.path.empty() || checkpoint.path[0] != '/' ||
      checkpoint.path.find('\0') != std::string::npos) {
    return r->Bad("path", "must be an absolute path without NUL bytes");
  }
  if (checkpoint.path.size() > model::kMaxCheckpointPathBytes) {
    return r->Bad("path",
                  "must be at most " + std::to_string(model::kMaxCheckpointPathBytes) + " bytes");
  }
  CORRAL_RETURN_IF_ERROR(r->OptionalInt64("step", checkpoint.step, 0));
  return checkpoint;
}

json MetricValueJson(const model::MetricValue& value) {
  return std::visit([](const auto& v) { return json(v); }, value);
}

void AddProgressJson(const model::JobProgress& progress, json& out) {
  json metrics = json::object();
  for (const auto& [key, value] : progress.metrics) metrics[key] = MetricValueJson(value);
  out["metrics"] = std::move(metrics);
  out["metrics_at"] = progress.metrics_at ? json(progress.metrics_at->value()) : json();
  if (const auto& c = progress.checkpoint) {
    out["checkpoint"] = {
        {"path", c->path}, {"step", c->step ? json(*c->step) : json()}, {"time", c->time.value()}};
  } else {
    out["checkpoint"] = nullptr;
  }
}

Status ReadProgress(const FieldReader& r, model::JobProgress& out) {
  if (const json* metrics = r.Find("metrics")) {
    if (!metrics->is_object()) return r.Bad("metrics", "must be an object");
    for (const auto& [key, value] : metrics->items()) {
      std::optional<model::MetricValue> parsed = MetricValueOf(value);
      if (!parsed) return r.Bad("metrics." + key, "must be a finite number or a string");
      out.metrics[key] = *std::move(parsed);
    }
  }
  std::optional<int64_t> at;
  CORRAL_RETURN_IF_ERROR(r.OptionalInt64("metrics_at", at, 0));
  if (at) out.metrics_at = Seconds(*at);
  return r.Object("checkpoint", false, [&](const FieldReader& c) {
    model::JobCheckpoint checkpoint;
    CORRAL_RETURN_IF_ERROR(c.String("path", true, checkpoint.path));
    CORRAL_RETURN_IF_ERROR(c.OptionalInt64("step", checkpoint.step, 0));
    int64_t time = 0;
    CORRAL_RETURN_IF_ERROR(c.Int("time", true, time, 0));
    checkpoint.time = Seconds(time);
    out.checkpoint = std::move(checkpoint);
    return Status::Ok();
  });
}

json MetricSeriesJson(const model::MetricSeries& series) {
  json out = json::object();
  for (const auto& [key, points] : series) {
    json list = json::array();
    for (const auto& [time, value] : points) list.push_back({time.value(), value});
    out[key] = std::move(list);
  }
  return {{"series", std::move(out)}};
}

}  // namespace corral::protocol
