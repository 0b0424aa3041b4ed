// The jobs of the API, with their JSON codecs: the summaries of GET /api/v1/jobs (JobSummary),
// the view of GET /api/v1/jobs/ID (JobView, with its tasks and events), and the answer to a
// submission (SubmitAnswer, POST /api/v1/jobs). The server builds them (Controller), the HTTP
// API and the CLI encode and decode them with these codecs.
//
//   summary: {"id": 7, "name": "train", "user": "alice", "project": "vision",
//             "state": "pending", "priority": 0, "submit_time": 1700000000,
//             "start_time": 1700000010, "end_time": 1700000300,   (once set)
//             "total_gpu_milli": 2000, "reason": "submitted",
//             "array_id": 5, "array_index": 2, "array_max_running": 2,   (array elements)
//             "pending_reason": {"code": "...", "message": "..."},     (while pending)
//             "estimated_start": 1700000600}                            (when estimated)
//   view:    the summary's fields, and "restarts", "spec" (the stored spec without the
//            session's token), "events", "tasks", and
//            "predicted_run_s" ({"estimate", "confidence", "basis"}, while not final),
//            for an elastic job "elastic" (the spec's {"unit", "min", "max", "step"} and "now",
//            the size of its current or last run, absent when unknown) and "resizes"
//   submit:  {"id", "state", "project", "user", "reason", "defaults": [{"field":
//            "resources.cpu_milli", "value": 1000, "why": "1 CPU per process, as the job asks
//            no GPU"}]}; an array's: "array_id" and "ids" (the elements', by index) for "id".
#pragma once

#include <cstdint>
#include <nlohmann/json_fwd.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/allocation.h"
#include "model/job_report.h"
#include "model/states.h"
#include "protocol/job_spec.h"

namespace corral {
struct JsonLimits;  // common/json_parse.h
}  // namespace corral

namespace corral::protocol {

// Why a job still waits (sched/pending_reason.h): a stable code and a sentence.
struct PendingReason {
  std::string code;
  std::string message;
  bool operator==(const PendingReason&) const = default;
};

// An array element's place in its array (docs/control-plane.md, "Job arrays").
struct ArrayMembership {
  JobId array_id;                  // the array's id: its first element's
  std::optional<int> index;        // this element's index
  std::optional<int> max_running;  // elements of the array that may run at once
  bool operator==(const ArrayMembership&) const = default;
};

// A row of the job list.
struct JobSummary {
  JobId id;
  std::string name;
  std::string user;
  std::string project;
  model::JobState state = model::JobState::kPending;
  int priority = 0;
  Seconds submit_time{0};             // Unix seconds
  std::optional<Seconds> start_time;  // when the job last entered running
  std::optional<Seconds> end_time;    // when it ended
  // GPUs over all its tasks, in milli-GPU (tasks × gpus × gpu_milli); what sort=gpus orders by.
  MilliGpu total_gpu_milli{0};
  std::string reason;                           // the last transition's
  std::optional<ArrayMembership> array;         // array elements only
  std::optional<PendingReason> pending_reason;  // while the scheduler has it waiting
  std::optional<Seconds> estimated_start;       // when the scheduler estimates one
  bool operator==(const JobSummary&) const = default;
};

// One transition of a job ("from" is none for its submission).
struct JobEvent {
  Seconds time{0};
  std::optional<model::JobState> from;
  model::JobState to = model::JobState::kPending;
  std::string reason;
  bool operator==(const JobEvent&) const = default;
};

// A task of a job's current or past run, as the job view shows it.
struct TaskView {
  int index = 0;
  int64_t allocation_id = 0;
  int64_t generation = 0;  // the run: 1 the first
  std::string node;        // "" while not placed
  model::TaskState state = model::TaskState::kAssigned;
  // Shown with the task's node repeated inside it ("allocation": {..., "node": "n1"}), as
  // clients have always read it.
  model::Allocation allocation;
  std::optional<int> exit_code;
  std::optional<int> signal;
  std::optional<model::TaskEndCause> end_cause;
  bool operator==(const TaskView&) const = default;
};

// The run time the server predicts for a job (predict/runtime_predictor.h).
// RuntimePrediction::basis when the job's time limit is shorter than what the predictor said:
// the estimate is the limit (sched::PlannedRun).
inline constexpr char kTimeLimitBasis[] = "time_limit";
// RuntimePrediction::basis of a running job that outlived its planned run (sched::ExpectedEndOf):
// the estimate is a bound, not a prediction (confidence 0), and it does not move with the clock.
// Its time limit:
inline constexpr char kOutlivedTimeLimitBasis[] = "outlived:time_limit";
// ... or, with no limit (or in the grace after it), its planned run or limit doubled as often as
// needed to lie beyond the time it has run:
inline constexpr char kOutlivedDoublingBasis[] = "outlived:doubling";

struct RuntimePrediction {
  Seconds estimate{0};
  double confidence = 0;  // 0..1: the predictor's, for its own answer
  // The predictor's key (docs/prediction.md), kTimeLimitBasis, or for a running job that
  // outlived its plan kOutlivedTimeLimitBasis or kOutlivedDoublingBasis.
  std::string basis;
  bool operator==(const RuntimePrediction&) const = default;
};

// One dependency of a job and where it stands (model/dependency.h), as the server checked it
// when the view was read: {"type": "afterok", "job": 12, "status": "met" | "waiting" |
// "never_met"}.
struct DependencyView {
  model::Dependency dependency;
  model::DependencyStatus status = model::DependencyStatus::kWaiting;
};

struct JobView {
  JobSummary summary;  // but estimated_start, set only while pending_reason is
  int restarts = 0;
  JobSpec spec;                  // as stored, without the session's token
  std::vector<JobEvent> events;  // oldest first
  std::vector<TaskView> tasks;
  // None once final. For a running job: never below the time it has run, never beyond its
  // time limit (but in the grace after it).
  std::optional<RuntimePrediction> predicted_run_s;
  std::vector<DependencyView> dependencies;  // the spec's, in its order; absent from older servers
  // The in-job channel (api_job_report.h; docs/in-job.md): what its tasks reported, and the
  // folder they keep checkpoints in ("<checkpoint root>/<job id>"; none without a root).
  model::JobProgress progress;
  std::optional<std::string> checkpoint_dir;
  // An elastic job's (spec.elastic; docs/elastic.md): the size of its current run, or of its
  // last once it ended, in the range's unit (none while pending, or when not known), and the
  // resizes it had (0 for a rigid job). The JSON's "elastic" is the spec's range with "now".
  std::optional<int> elastic_now;
  int resizes = 0;
  // Checkpoint-aware stops (docs/in-job.md, "Preemption and checkpoints"): the GPU-seconds its
  // preemptions and resizes lost (each: GPUs × the time since its last checkpoint), and the
  // grace between SIGTERM and SIGKILL its tasks get when preempted or resized (its
  // checkpoint_grace after the server's cap, else the server's kill grace: "stop_grace_s"; the
  // spec's "checkpoint_grace_s" is the request). 0 from older servers.
  double lost_work_gpu_s = 0;
  Seconds stop_grace{0};
};

// What the server filled in of a submitted spec (server/control/job_submission.h).
struct ResourceDefault {
  std::string field;  // "resources.cpu_milli", "resources.memory_mib"
  int64_t value = 0;  // in the field's unit
  std::string why;    // "1 CPU per process, as the job asks no GPU"
  bool operator==(const ResourceDefault&) const = default;
};
// The defaults as the job's history says them: "resources.cpu_milli 1000 (1 CPU per process,
// as the job asks no GPU); resources.memory_mib ...", "" for none.
std::string ToString(const std::vector<ResourceDefault>& defaults);

struct SubmitAnswer {
  // A job's id; for an array, the array's (its first element's).
  JobId id;
  std::vector<JobId> array_ids;  // an array's elements, by index; empty for a job
  model::JobState state = model::JobState::kPending;
  std::string project;
  std::string user;
  std::string reason;
  std::vector<ResourceDefault> defaults;
  // What the submission did not take as asked: a batch script's directives corral ignores
  // (batch_script.h), "line 5: #SBATCH --mail-type: ignored (...)".
  std::vector<std::string> warnings;
  bool operator==(const SubmitAnswer&) const = default;
};

// Lost work (JobView::lost_work_gpu_s) in words: "0.4 GPU-h", or "90 GPU-s" under a tenth of a
// GPU-hour (the preemption's event, `corral job show`).
std::string LostWorkText(double gpu_s);

nlohmann::json ToJson(const JobSummary& job);
nlohmann::json ToJson(const std::vector<JobSummary>& jobs);
nlohmann::json ToJson(const JobView& job);
nlohmann::json ToJson(const SubmitAnswer& answer);
// Errors name the field: "job: field 'tasks[0].state': unknown task state ...", "jobs: field
// '[2].id': is required", "submit answer: field 'defaults[0].value': must be an integer".
Result<std::vector<JobSummary>> ParseJobSummaries(const nlohmann::json& json);
// The same from the list's text (a server's answer within `limits`), without building its tree:
// a page of 1,000 jobs costs one job's tree at a time.
Result<std::vector<JobSummary>> ParseJobSummaries(std::string_view text, const JsonLimits& limits);
Result<JobView> ParseJobView(const nlohmann::json& json);
Result<SubmitAnswer> ParseSubmitAnswer(const nlohmann::json& json);

}  // namespace corral::protocol
