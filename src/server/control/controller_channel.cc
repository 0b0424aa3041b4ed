// Controller: the in-job channel (docs/in-job.md): what a job's tasks report (metrics, the
// latest checkpoint) and the job's metric history.

#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {
namespace {

// A job `who` may report on: its own job token's, or one it owns, or any as an admin. NotFound
// for a job `who` may not see (as JobView); PermissionDenied for a member who is not its owner.
Status MayReport(const Principal& who, const store::JobRecord& record) {
  const std::string what = "job " + std::to_string(record.id.value());
  if (!who.CanAccessProject(record.project)) return NotFound(what + " not found");
  if (who.job == record.id || who.admin || (!who.job && who.name == record.user)) {
    return Status::Ok();
  }
  return PermissionDenied(what + " belongs to " + record.user +
                          ": only its job token, its owner or an admin may report on it");
}

}  // namespace

Status Controller::Report(const Principal& who, JobId id, model::JobReport report) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  CORRAL_RETURN_IF_ERROR(MayReport(who, *record));
  report.time = clock_.Now();
  CORRAL_RETURN_IF_ERROR(channel_writes_.Take(id, report.time));
  return store_.RecordJobReport(id, report);
}

Status Controller::RecordCheckpoint(const Principal& who, JobId id,
                                    model::JobCheckpoint checkpoint) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  CORRAL_RETURN_IF_ERROR(MayReport(who, *record));
  checkpoint.time = clock_.Now();
  CORRAL_RETURN_IF_ERROR(channel_writes_.Take(id, checkpoint.time));
  CORRAL_RETURN_IF_ERROR(store_.RecordJobCheckpoint(id, checkpoint));
  // What a preemption would lose counts from now (a job not running yet has nothing to lose).
  auto lock = LockState();
  (void)scheduler_->NoteCheckpoint(id, checkpoint.time);
  NoteGraceCheckpointLocked(id, checkpoint.time);  // a stopped run saving in its grace
  return Status::Ok();
}

Result<model::MetricSeries> Controller::MetricSeries(const Principal& who, JobId id) {
  auto record = store_.GetJob(id);
  if (!record.ok()) return record.status();
  if (!who.CanAccessProject(record->project)) {
    return NotFound("job " + std::to_string(id.value()) + " not found");
  }
  return store_.JobMetricSeries(id);
}

std::optional<std::string> Controller::CheckpointDirOf(JobId id) const {
  if (config_.checkpoint_root.empty()) return std::nullopt;
  return config_.checkpoint_root + "/" + std::to_string(id.value());
}

}  // namespace corral::server
