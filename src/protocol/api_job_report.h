// The in-job channel's API forms (docs/in-job.md, docs/openapi.yaml): the bodies of
// POST /api/v1/jobs/{id}/report and .../checkpoint, the fields GET /api/v1/jobs/{id} gains, and
// GET /api/v1/jobs/{id}/metrics. Every bound of model/job_report.h is checked here; errors name
// the field: "report: field 'metrics.loss': must be a finite number or a string of at most 256
// bytes".
#pragma once

#include <nlohmann/json.hpp>

#include "common/json_fields.h"
#include "common/status.h"
#include "model/job_report.h"

namespace corral::protocol {

// {"metrics": {KEY: number | string, ...}}: 1..kMaxMetricsPerReport keys (IsMetricKey), finite
// numbers, strings of at most kMaxMetricTextBytes. The report's time is left 0 (the server's).
Result<model::JobReport> ParseJobReport(const nlohmann::json& body);
// {"path": "/abs/path", "step": N (optional, >= 0)}: an absolute path of at most
// kMaxCheckpointPathBytes without NUL bytes. The time is left 0 (the server's).
Result<model::JobCheckpoint> ParseJobCheckpoint(const nlohmann::json& body);

nlohmann::json MetricValueJson(const model::MetricValue& value);  // a number or a string
// Sets "metrics" ({key: value}), "metrics_at" (Unix seconds or null) and "checkpoint"
// ({"path", "step" (or null), "time"} or null) in `out` (a job's view).
void AddProgressJson(const model::JobProgress& progress, nlohmann::json& out);
// Reads what AddProgressJson wrote; absent fields (an older server): nothing reported.
Status ReadProgress(const FieldReader& reader, model::JobProgress& out);
// {"series": {key: [[unix_seconds, value], ...]}}.
nlohmann::json MetricSeriesJson(const model::MetricSeries& series);

}  // namespace corral::protocol
