// SqlStore's part of the in-job channel (store.h, RecordJobReport and the calls after it): the
// latest value of each reported key (job_metrics), the numeric history (job_metric_points), the
// latest checkpoint (job_checkpoints). Values are kept as their JSON text: a number or a string.

#include <nlohmann/json.hpp>

#include "store/sql_store.h"

namespace corral::store {
namespace {

std::string JobText(JobId id) { return "job " + std::to_string(id.value()); }

std::string ValueText(const model::MetricValue& value) {
  return std::visit([](const auto& v) { return nlohmann::json(v).dump(); }, value);
}

Result<model::MetricValue> ValueOf(const std::string& text, const std::string& what) {
  const nlohmann::json value = nlohmann::json::parse(text, nullptr, false);
  if (value.is_number()) return model::MetricValue(value.get<double>());
  if (value.is_string()) return model::MetricValue(value.get<std::string>());
  return Status(StatusCode::kInternal, what + ": stored value unreadable: " + text);
}

}  // namespace

Result<model::JobState> SqlStore::LiveJobStateLocked(JobId id) {
  auto state = JobStateLocked(id);
  if (!state.ok()) return state.status();
  if (model::IsFinal(*state)) {
    return FailedPrecondition(JobText(id) + " has ended (" + std::string(model::ToString(*state)) +
                              ")");
  }
  return state;
}

Status SqlStore::RecordJobReport(JobId id, const model::JobReport& report) {
  const std::string op = "record a report of " + JobText(id);
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      op, InTransaction([&]() -> Status {
        CORRAL_RETURN_IF_ERROR(LiveJobStateLocked(id).status());
        std::vector<SqlParams> latest;
        std::vector<SqlParams> points;
        for (const auto& [key, value] : report.metrics) {
          latest.push_back({id.value(), key, ValueText(value), report.time.value()});
          if (std::holds_alternative<double>(value)) {
            points.push_back({id.value(), key, report.time.value(), ValueText(value)});
          }
        }
        CORRAL_RETURN_IF_ERROR(
            conn_
                ->QueryEach("INSERT INTO job_metrics (job_id, name, value_json, time) VALUES "
                            "(?, ?, ?, ?) ON CONFLICT (job_id, name) DO UPDATE SET value_json = "
                            "excluded.value_json, time = excluded.time",
                            latest)
                .status());
        auto keys = conn_->Query("SELECT COUNT(*) FROM job_metrics WHERE job_id = ?", {id.value()});
        if (!keys.ok()) return keys.status();
        if (!keys->empty() && (*keys)[0].Int(0) > static_cast<int64_t>(model::kMaxMetricKeys)) {
          return InvalidArgument(
              "field 'metrics': a job keeps at most " + std::to_string(model::kMaxMetricKeys) +
              " metric keys; this report would make " + std::to_string((*keys)[0].Int(0)));
        }
        if (points.empty()) return Status::Ok();
        CORRAL_RETURN_IF_ERROR(
            conn_
                ->QueryEach("INSERT INTO job_metric_points (job_id, name, time, value_json) VALUES "
                            "(?, ?, ?, ?)",
                            points)
                .status());
        // The oldest beyond the cap go (ids grow with every insert).
        return conn_
            ->Execute(
                "DELETE FROM job_metric_points WHERE job_id = ? AND id NOT IN (SELECT id FROM "
                "job_metric_points WHERE job_id = ? ORDER BY id DESC LIMIT ?)",
                {id.value(), id.value(), static_cast<int64_t>(model::kMaxMetricPoints)})
            .status();
      }));
}

Status SqlStore::RecordJobCheckpoint(JobId id, const model::JobCheckpoint& checkpoint) {
  const std::string op = "record a checkpoint of " + JobText(id);
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      op, InTransaction([&]() -> Status {
        auto state = LiveJobStateLocked(id);
        if (!state.ok()) return state.status();
        auto before =
            conn_->Query("SELECT path FROM job_checkpoints WHERE job_id = ?", {id.value()});
        if (!before.ok()) return before.status();
        const bool same_path = !before->empty() && (*before)[0].Text(0) == checkpoint.path;
        const SqlValue step = checkpoint.step ? SqlValue(*checkpoint.step) : SqlValue();
        CORRAL_RETURN_IF_ERROR(
            conn_
                ->Execute(
                    "INSERT INTO job_checkpoints (job_id, path, step, time) VALUES (?, ?, ?, ?) "
                    "ON CONFLICT (job_id) DO UPDATE SET path = excluded.path, step = "
                    "excluded.step, time = excluded.time",
                    {id.value(), checkpoint.path, step, checkpoint.time.value()})
                .status());
        // An event only for a new path, and at most model::kMaxCheckpointEvents a job: a job that
        // checkpoints every second must not flood its history (the latest is always kept above).
        if (same_path) return Status::Ok();
        auto events = conn_->Query(
            "SELECT COUNT(*) FROM job_events WHERE job_id = ? AND from_state = to_state AND "
            "reason LIKE 'checkpoint %'",
            {id.value()});
        if (!events.ok()) return events.status();
        if ((*events)[0].Int(0) >= model::kMaxCheckpointEvents) return Status::Ok();
        const std::string state_name(model::ToString(*state));
        std::string reason = "checkpoint " + checkpoint.path;
        if (checkpoint.step) reason += " (step " + std::to_string(*checkpoint.step) + ")";
        return conn_
            ->Execute(
                "INSERT INTO job_events (job_id, time, from_state, to_state, reason) VALUES "
                "(?, ?, ?, ?, ?)",
                {id.value(), checkpoint.time.value(), state_name, state_name, reason})
            .status();
      }));
}

Status SqlStore::AddLostWork(JobId id, int64_t lost_gpu_ms, const std::string& day) {
  if (lost_gpu_ms <= 0) {
    return InvalidArgument("lost work: must be positive, got " + std::to_string(lost_gpu_ms));
  }
  const std::string op = "record the lost work of " + JobText(id);
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      op, InTransaction([&]() -> Status {
        auto job = conn_->Query(
            "UPDATE jobs SET lost_gpu_ms = lost_gpu_ms + ? WHERE id = ? RETURNING user_name, "
            "project",
            {lost_gpu_ms, id.value()});
        if (!job.ok()) return job.status();
        if (job->empty()) return NotFound(JobText(id) + " not found");
        return conn_
            ->Execute(
                "INSERT INTO gpu_usage (day, user_name, project, allocated_gpu_ms, used_gpu_ms, "
                "lost_gpu_ms) VALUES (?, ?, ?, 0, 0, ?) ON CONFLICT (day, user_name, project) DO "
                "UPDATE SET lost_gpu_ms = gpu_usage.lost_gpu_ms + excluded.lost_gpu_ms",
                {day, (*job)[0].Text(0), (*job)[0].Text(1), lost_gpu_ms})
            .status();
      }));
}

Result<model::JobProgress> SqlStore::JobProgress(JobId id) {
  const std::string op = "read the reports of " + JobText(id);
  std::lock_guard<std::mutex> lock(mu_);
  CORRAL_RETURN_IF_ERROR(Annotate(op, JobStateLocked(id).status()));
  model::JobProgress out;
  auto rows =
      conn_->Query("SELECT name, value_json, time FROM job_metrics WHERE job_id = ?", {id.value()});
  if (!rows.ok()) return Annotate(op, rows.status());
  for (const SqlRow& row : *rows) {
    auto value = ValueOf(row.Text(1), JobText(id) + " metric " + row.Text(0));
    if (!value.ok()) return value.status();
    out.metrics[row.Text(0)] = *std::move(value);
    const Seconds time(row.Int(2));
    if (!out.metrics_at || *out.metrics_at < time) out.metrics_at = time;
  }
  auto checkpoint =
      conn_->Query("SELECT path, step, time FROM job_checkpoints WHERE job_id = ?", {id.value()});
  if (!checkpoint.ok()) return Annotate(op, checkpoint.status());
  if (!checkpoint->empty()) {
    const SqlRow& row = (*checkpoint)[0];
    out.checkpoint = model::JobCheckpoint{row.Text(0), row.OptInt(1), Seconds(row.Int(2))};
  }
  return out;
}

Result<model::MetricSeries> SqlStore::JobMetricSeries(JobId id) {
  const std::string op = "read the metric history of " + JobText(id);
  std::lock_guard<std::mutex> lock(mu_);
  CORRAL_RETURN_IF_ERROR(Annotate(op, JobStateLocked(id).status()));
  auto rows = conn_->Query(
      "SELECT name, time, value_json FROM job_metric_points WHERE job_id = ? ORDER BY id",
      {id.value()});
  if (!rows.ok()) return Annotate(op, rows.status());
  model::MetricSeries series;
  for (const SqlRow& row : *rows) {
    auto value = ValueOf(row.Text(2), JobText(id) + " metric " + row.Text(0));
    if (!value.ok()) return value.status();
    if (const double* number = std::get_if<double>(&*value)) {
      series[row.Text(0)].emplace_back(Seconds(row.Int(1)), *number);
    }
  }
  return series;
}

}  // namespace corral::store
