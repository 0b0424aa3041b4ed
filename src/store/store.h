// The durable store of the control plane: users, API tokens (hashes only), projects and
// members, jobs with their event history, task assignments, and nodes. The server is the only
// writer. One SQL code path (sql_store.cc) runs over a small connection interface
// (sql_connection.h) with two drivers: SQLite in WAL mode (the embedded default) and PostgreSQL
// (the server option).
//
// Contracts:
//  - Every write method commits before it returns OK: "durable before visible". SQLite runs with
//    synchronous=FULL (the WAL is fsynced on every commit); PostgreSQL with its own durable commit.
//  - A write that returns an error changed nothing (each write is one transaction), except an
//    IoError saying "outcome unknown": the connection to PostgreSQL broke during the commit.
//  - Methods are safe to call from several threads: the implementation serialises them on one
//    connection behind a mutex. For many concurrent submissions use SubmissionBatcher
//    (submission_batcher.h), and for many concurrent write batches WriteBatcher
//    (write_batcher.h): both commit in groups.
//  - Times are Unix seconds (Seconds) from the server's Clock; ids are assigned by the store and
//    grow monotonically (never reused, also across restarts).
//  - Errors: InvalidArgument for bad input (names the field), NotFound, AlreadyExists,
//    FailedPrecondition for a lost compare-and-set, IoError for the database (the message names
//    the operation and carries the database's message; never a password).
#pragma once

#include <cstdint>
#include <memory>
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
#include "model/submit_limits.h"
#include "store/task_record.h"

namespace corral::store {

// States are model::JobState, TaskState and NodeState (model/states.h); the store keeps their
// names as text (CHECK-constrained), and which transitions are allowed is the server's rule.

struct UserRecord {
  int64_t id = 0;
  std::string name;  // unique
  bool admin = false;
  Seconds created_at{0};
  model::SubmitLimits submit_limits;  // none until an admin sets them (SetUserSubmitLimits)
};

struct TokenRecord {
  int64_t id = 0;
  int64_t user_id = 0;
  std::string name;  // "admin-bootstrap", "laptop", ...
  std::string hash;  // lowercase hex SHA-256 of the secret; the secret itself is never stored
  Seconds created_at{0};
  std::optional<Seconds> revoked_at;  // set once revoked; a revoked token authenticates nobody
  // From this time on the token authenticates nobody (the server refuses it); none: never.
  std::optional<Seconds> expires_at;
};

// Who a token belongs to, and until when (FindTokenOwner).
struct TokenOwner {
  UserRecord user;
  std::optional<Seconds> expires_at;  // the token's (TokenRecord::expires_at)
};

struct ProjectRecord {
  std::string name;  // unique
  std::string description;
  Seconds created_at{0};
  // How the project shares the cluster (quota, weight, limit), as JSON validated by the server;
  // "{}" for the defaults.
  std::string sharing_json = "{}";
  model::SubmitLimits submit_limits;  // none until an admin sets them (SetProjectSubmitLimits)
};

struct JobRecord {
  JobId id;  // assigned by InsertJob(s)
  std::string name;
  std::string user;       // a user's name; the user must exist
  std::string project;    // the project must exist
  std::string spec_json;  // the validated job spec, as submitted (normalised JSON)
  model::JobState state = model::JobState::kPending;  // InsertJob accepts only pending
  int priority = 0;
  int restarts = 0;  // times the job went back to pending; maintained by TransitionJob
  Seconds submit_time{0};
  std::optional<Seconds> start_time;  // set when the job last entered running
  std::optional<Seconds> end_time;    // set when the job entered a final state (or lost)
  std::string reason;                 // the last transition's reason ("submitted" at first)
  // Set by RequestCancel while the job's tasks are being stopped; kept across restarts.
  std::optional<std::string> cancel_reason;
  // Array elements only (InsertArray): the array's id, which is the id of its first element
  // (assigned by the store), this element's index (>= 0, unique in the array), and how many of
  // the array's elements may run at once (>= 1; the same for every element; none: no limit).
  std::optional<JobId> array_id;
  std::optional<int> array_index;
  std::optional<int> array_max_running;
  // GPU capacity the job asks over all its tasks: tasks × resources.gpus × resources.gpu_milli
  // (2 tasks of 4 whole GPUs: 8000). The server sets it from the spec at submission; the
  // listing sorts on it (JobSortKey::kGpus).
  MilliGpu total_gpu_milli{0};
  // GPU time its preemptions and resizes lost (Store::AddLostWork), over all its runs.
  int64_t lost_gpu_ms = 0;
};

// A row of the job listing (ListJobSummaries): what a listing shows, read without the spec.
struct JobSummary {
  JobId id;
  std::string name;
  std::string user;
  std::string project;
  model::JobState state = model::JobState::kPending;
  int priority = 0;
  MilliGpu total_gpu_milli{0};
  Seconds submit_time{0};
  std::optional<Seconds> start_time;
  std::optional<Seconds> end_time;
  std::string reason;
  std::optional<JobId> array_id;
  std::optional<int> array_index;
  std::optional<int> array_max_running;
  bool operator==(const JobSummary&) const = default;
};

// The listing's fields of a whole record.
JobSummary SummaryOf(const JobRecord& job);

struct JobEvent {
  JobId job;
  Seconds time{0};
  std::optional<model::JobState> from_state;  // none for the submission
  model::JobState to_state = model::JobState::kPending;
  std::string reason;
};

// TaskRecord, one task of a job bound to a node, is in store/task_record.h.

// One task of a gang as the server placed it, before the store numbers it (AssignGang).
struct TaskAssignment {
  int task_index = 0;  // >= 0, distinct within the gang
  std::string node;    // a node known to the store (UpsertNode)
  model::Allocation allocation;
};

// One job's gang as a scheduling pass placed it (AssignGangs).
struct GangAssignment {
  JobId job;
  std::vector<TaskAssignment> tasks;
};

// A job's move between states, as TransitionJob takes it (compare-and-set on `from`).
struct JobTransition {
  JobId id;
  model::JobState from = model::JobState::kPending;
  model::JobState to = model::JobState::kPending;
  std::string reason;
};

// A started job's cancellation, as RequestCancel takes it.
struct CancelRequest {
  JobId id;
  std::string reason;
};

// Writes that stand or fall together: what one heartbeat's task reports changed and the job
// transitions they settled, or a cancel (Apply).
struct WriteBatch {
  std::vector<CancelRequest> cancel_requests;  // as RequestCancel, after the tasks
  std::vector<TaskRecord> tasks;               // as UpdateTask, in order, first
  std::vector<JobTransition> transitions;      // as TransitionJob, in order, last
  bool empty() const { return cancel_requests.empty() && tasks.empty() && transitions.empty(); }
};

// A store failing for everyone (I/O, a lost connection, a fenced server: IoError, Internal,
// Unavailable), as opposed to refusing one write (a transition whose job is not in the state
// expected, a row it will not take): only the latter is worth trying write by write.
inline bool IsStoreWide(const Status& s) {
  return s.code() == StatusCode::kIoError || s.code() == StatusCode::kInternal ||
         s.code() == StatusCode::kUnavailable;
}

// A WriteBatch with the time its events carry (ApplyGroup).
struct TimedBatch {
  WriteBatch batch;
  Seconds now;
};

// One aggregated interval of one GPU: the GPU metrics history (docs/monitoring.md), kept at
// two resolutions (10 s and 5 min) with a retention each.
struct GpuMetricRow {
  int resolution_s = 0;  // the interval's length
  int64_t start_s = 0;   // Unix seconds, a multiple of resolution_s
  std::string node;
  int gpu = 0;
  int utilization_permille = 0;  // mean utilisation in tenths of a percent (0..1000)
  int64_t memory_used_mib = 0;   // the largest reading
  int64_t power_mw = 0;          // mean
  int temperature_c = 0;         // the largest reading
  int samples = 0;               // readings in the interval
  // The job that held the GPU in most of the interval's readings (the first such job on a tie;
  // of a shared GPU, its first holder counts); none: free in all of them.
  std::optional<JobId> job;
};

// What PruneGpuMetrics deleted: rows, in batches (deletes that removed rows, each under a hold
// of the store of its own).
struct PruneResult {
  int64_t rows = 0;
  int64_t batches = 0;
};

// GPU time one user spent in one project on one UTC day (accounting, docs/monitoring.md):
// allocated, and used (allocated × utilisation).
struct GpuUsageRow {
  std::string day;  // "YYYY-MM-DD"
  std::string user;
  std::string project;
  int64_t allocated_gpu_ms = 0;
  int64_t used_gpu_ms = 0;
  // Lost to preemptions and resizes (Store::AddLostWork): GPUs × time since the last checkpoint.
  int64_t lost_gpu_ms = 0;
};

// Retention of finished jobs (docs/monitoring.md, "Retention of finished jobs"): the GPU demand
// of the purged jobs in one UTC hour, which capacity planning's forecast adds to the demand of
// the jobs still kept. A job's demand is its total_gpu_milli from its submission to its end.
struct DemandHour {
  int64_t hour_s = 0;       // Unix seconds of the hour's start (a multiple of 3600)
  int64_t milli_gpu_s = 0;  // the demand integrated over the hour: milli-GPU × seconds
  bool operator==(const DemandHour&) const = default;
};

struct NodeRecord {
  std::string name;
  std::string inventory_json;  // GPUs (model, memory, uuid, nvlink), CPU, memory, labels
  model::NodeState state = model::NodeState::kReady;
  Seconds last_heartbeat{0};
  std::string node_id_hash;  // SHA-256 of the agent's secret node id; empty if unknown
  // SHA-256 of the node token its agent was given at its current registration; empty when it
  // has none (never registered, or lost): what every server of the store authenticates its
  // heartbeats with.
  std::string node_token_hash;
};

// The leader's lease (docs/control-plane.md, "Several servers on one PostgreSQL"): one server at
// a time leads, until the lease's expiry by the database's clock (never a server's, so skewed
// server clocks cannot make two leaders).
struct LeaseRecord {
  std::string holder;  // the holding server's id (unique per process); "" before the first
  std::string url;     // the holder's advertised base URL ("http://10.0.0.2:8080")
  // Grows by one at every takeover (0 before the first): the writes of a store that holds an
  // older epoch are refused (fencing).
  int64_t epoch = 0;
  int64_t expires_at_ms = 0;  // by the database's clock, milliseconds since the Unix epoch
  int64_t remaining_ms = 0;   // until then, by the database's clock when read; <= 0: lapsed
};

// Values every server of one store must agree on, kept as what proves agreement without
// revealing the secret (ShareClusterSecret).
enum class ClusterSecret {
  kJoinTokenHash,    // the join token's hash (HashToken)
  kSessionKeyCheck,  // an HMAC of a fixed text under the session key; never the key
};

// One version of an environment asset (docs/environments.md). Versions are immutable: a change
// is a new version (1, 2, 3, ... per name); nothing rewrites a stored one, so a job pinned to
// "NAME@VERSION" runs the same environment on every run.
struct EnvironmentRecord {
  std::string name;
  int64_t version = 0;    // assigned by AddEnvironmentVersion
  std::string owner;      // a user's name; "" for the built-ins (the system)
  std::string spec_json;  // the validated spec (normalised JSON)
  Seconds created_at{0};
  // Projects whose members may see and use the environment (every version), by name.
  std::vector<std::string> projects;
};

// What a job listing is ordered by; ties on the key are broken by id, in the same direction.
// start_time and end_time may be unset (not started, not ended): such jobs come after every job
// with the time set, in both directions (like NULLS LAST), ordered by id among themselves.
enum class JobSortKey { kId, kSubmitTime, kStartTime, kEndTime, kGpus };
enum class SortDirection { kAscending, kDescending };

// Where a page of a listing ended: the last row's sort key (none for JobSortKey::kId, and for
// a row without the start or end time it is sorted by) and id. The next page starts after it.
struct JobListPosition {
  std::optional<int64_t> key;
  JobId id;
  bool operator==(const JobListPosition&) const = default;
};

// The position of `job` in a listing sorted by `sort`.
JobListPosition PositionOf(const JobSummary& job, JobSortKey sort);

// A job listing: every filter field that is set (non-empty, present) must match.
struct JobFilter {
  std::vector<std::string> projects;    // empty = all
  std::vector<model::JobState> states;  // empty = all
  std::vector<std::string> users;       // empty = all
  std::optional<JobId> array;           // only the elements of this array
  std::string name_prefix;              // only jobs whose name starts with it (bytes, exact case)
  std::optional<Seconds> submitted_since;  // only jobs submitted at or after this time
  std::optional<Seconds> live_since;       // only jobs not ended before this (end_time none or >=)
  JobSortKey sort = JobSortKey::kId;
  SortDirection direction = SortDirection::kAscending;
  // Only the jobs after this position in the order above (keyset pagination: the position of
  // the previous page's last row, PositionOf). Its key must be set or unset as the sort says
  // (InvalidArgument naming "after" otherwise).
  std::optional<JobListPosition> after;
  int limit = 1000;  // <= 0: no limit; the first `limit` jobs in this order
};

class Store {
 public:
  virtual ~Store() = default;

  // The cluster's id (model::ValidateClusterId): random, made when the store is first opened by
  // a corral that knows cluster ids (a new store, or one written by an older corral), and never
  // changed after; every server on the store reads the same one. Agents learn it at
  // registration and namespace what they create on their host with it (docs/control-plane.md).
  // Thread-safe: fixed for the store's lifetime.
  virtual const std::string& ClusterId() const = 0;

  // Write transactions committed since the store was opened (each explicit transaction, and
  // each write that commits on its own): /metrics exports it; tests count commits with it.
  virtual int64_t Commits() = 0;
  // Exchanges with a database server that waited for its answer (SqlConnection::RoundTrips):
  // 0 on SQLite. /metrics exports it; tests count a batch's round trips with it.
  virtual int64_t RoundTrips() = 0;

  // Leadership (docs/control-plane.md, "Several servers on one PostgreSQL"). The lease has its
  // own connection, so a renewal never waits behind a long batch of the other methods. Lease
  // writes are not counted by Commits().
  //
  // Takes the lease for `holder` (a server's id, unique per process) advertising `url`, for
  // `duration_ms` from now by the database's clock, when no server holds it, it lapsed, or
  // `holder` holds it already (then it is extended, same epoch). A takeover increments the epoch
  // and waits for the old leader's write transaction in flight, if any, to end. From the first
  // success on, this store fences every write on the epoch returned: each write transaction
  // checks, before it commits and under a lock a takeover waits for, that the epoch is still the
  // store's, and else fails with FailedPrecondition "fenced: this server's epoch E is no longer
  // the leader's (now F)" and changes nothing. Returns the lease as held; FailedPrecondition
  // naming the holder, its URL and the time it still holds when another server holds it.
  virtual Result<LeaseRecord> AcquireLease(const std::string& holder, const std::string& url,
                                           int64_t duration_ms) = 0;
  // Extends the lease that `holder` acquired through this store to `duration_ms` from now (the
  // database's clock). FailedPrecondition when it is no longer ours: it lapsed (even if no other
  // server took it since: a lapsed leader must stop) or another server took it over.
  virtual Status RenewLease(const std::string& holder, int64_t duration_ms) = 0;
  // The lease as the database holds it now (who leads, at which URL, until when).
  virtual Result<LeaseRecord> CurrentLease() = 0;

  // Stores `offer` as `which` when the store has none yet (the first server of a cluster), and
  // returns the stored value, the first offer (also to servers offering at once): "" when none
  // was ever offered. An empty offer only reads. The caller compares.
  virtual Result<std::string> ShareClusterSecret(ClusterSecret which, const std::string& offer) = 0;
  // Applies `batch` in one transaction (one commit, one fsync): every task update (they depend
  // on no job's state), then every cancel request, then every transition (with their events, at
  // `now`), as UpdateTask, RequestCancel and TransitionJob would one by one, and with their errors
  // (each names its write); all or nothing. An empty batch commits nothing.
  virtual Status Apply(const WriteBatch& batch, Seconds now) = 0;
  // Group commit of write batches: every batch of `group`, in order, each as Apply(batch, now)
  // would (a batch sees the writes of the batches before it), all in ONE transaction (one
  // commit, one fsync). All or nothing: one refused write fails the whole group, with that
  // write's error as Apply gives it (when several would fail: the first task update that
  // fails, task updates depending on no job's state, else the first cancel or transition in
  // group order). An empty group, or one of empty batches, commits nothing. The caller may
  // then apply the batches one by one (WriteBatcher does) to find those that can.
  virtual Status ApplyGroup(const std::vector<TimedBatch>& group) = 0;

  // Users and tokens. Names are unique (AlreadyExists).
  virtual Result<UserRecord> CreateUser(const std::string& name, bool admin, Seconds now) = 0;
  virtual Result<UserRecord> FindUser(const std::string& name) = 0;
  virtual Result<std::vector<UserRecord>> ListUsers() = 0;  // by id
  // `hash` must be a lowercase hex SHA-256 (64 characters): anything else is refused with
  // InvalidArgument, so that a secret cannot be stored by mistake. `expires_at`: when it stops
  // authenticating (none: never); kept, not checked against `now` (the server decides).
  virtual Result<TokenRecord> CreateToken(int64_t user_id, const std::string& name,
                                          const std::string& hash, Seconds now,
                                          std::optional<Seconds> expires_at) = 0;
  // A user with their memberships and first token, in one transaction: all or nothing. Each of
  // `projects` must exist (NotFound naming it; repeats are fine); a taken name is AlreadyExists;
  // `token_hash` and `token_expires_at` are as in CreateToken.
  virtual Result<UserRecord> CreateUserWithToken(const std::string& name, bool admin,
                                                 const std::vector<std::string>& projects,
                                                 const std::string& token_name,
                                                 const std::string& token_hash, Seconds now,
                                                 std::optional<Seconds> token_expires_at) = 0;
  // The user owning a token hash, with the token's expiry (an expired token is found: telling
  // it from an unknown one is the server's); NotFound when unknown or revoked.
  virtual Result<TokenOwner> FindTokenOwner(const std::string& hash) = 0;
  // Every token of the user, revoked ones included (with revoked_at), by id.
  virtual Result<std::vector<TokenRecord>> ListTokens(int64_t user_id) = 0;
  // NotFound when the user has no such token; revoking a revoked token is OK and keeps the
  // first revocation time.
  virtual Status RevokeToken(int64_t user_id, int64_t token_id, Seconds now) = 0;
  // Replaces the submit limits of user `name` (each none, or 0..model::kMaxSubmitLimit:
  // InvalidArgument naming the field). NotFound when the user does not exist.
  virtual Status SetUserSubmitLimits(const std::string& name,
                                     const model::SubmitLimits& limits) = 0;

  // Projects.
  virtual Result<ProjectRecord> CreateProject(const std::string& name,
                                              const std::string& description, Seconds now) = 0;
  virtual Result<std::vector<ProjectRecord>> ListProjects() = 0;  // by name
  // Replaces a project's sharing JSON. NotFound when the project does not exist.
  virtual Status SetProjectSharing(const std::string& name, const std::string& sharing_json) = 0;
  // Replaces a project's submit limits, as SetUserSubmitLimits. NotFound when the project does
  // not exist.
  virtual Status SetProjectSubmitLimits(const std::string& name,
                                        const model::SubmitLimits& limits) = 0;
  // Idempotent; NotFound when the project or the user does not exist.
  virtual Status AddMember(const std::string& project, int64_t user_id) = 0;
  virtual Result<std::vector<std::string>> ProjectsOf(int64_t user_id) = 0;  // by name
  // The members of a project, by name; NotFound when the project does not exist.
  virtual Result<std::vector<UserRecord>> MembersOf(const std::string& project) = 0;

  // Jobs. InsertJob assigns the id and records the submission event ("" -> pending) atomically.
  // The store sets id, state (pending), restarts (0) and start/end times; `reason` becomes the
  // submission event's reason ("submitted" when empty).
  virtual Result<JobId> InsertJob(const JobRecord& job) = 0;
  // Group commit: inserts every job (with its submission event) in one transaction and returns
  // their ids in the order given. All or nothing: one invalid job fails the whole call.
  // Array elements are refused here (InvalidArgument naming the field): see InsertArray.
  virtual Result<std::vector<JobId>> InsertJobs(const std::vector<JobRecord>& jobs) = 0;
  // The elements of one array, each inserted as InsertJob does, in one transaction: all or
  // nothing. The first element's id becomes the array's id, stored as every element's array_id
  // (which must be unset in `elements`); each element needs an array_index, unique among them,
  // and all the same array_max_running. Returns the ids in the order given (ascending).
  virtual Result<std::vector<JobId>> InsertArray(const std::vector<JobRecord>& elements) = 0;
  virtual Result<JobRecord> GetJob(JobId id) = 0;
  // Jobs matching every filter field that is set (non-empty, present), in the filter's order;
  // whole records (with the spec), for the server's own use.
  virtual Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) = 0;
  // The same jobs as ListJobs, as listing rows (JobSummary: no spec): what the job-listing API
  // pages through. Each page is read through an index on its sort key (docs/control-plane.md,
  // "Listing jobs").
  virtual Result<std::vector<JobSummary>> ListJobSummaries(const JobFilter& filter) = 0;
  // Moves a job to `to` (recording an event) only if it is in `from`; FailedPrecondition
  // otherwise, so that concurrent transitions cannot both win; NotFound for an unknown job.
  // Entering running sets start_time; entering a final state (model::IsFinal) sets end_time;
  // going back to pending (a requeue) increments restarts and clears both times. `from` and
  // `to` must differ (InvalidArgument).
  virtual Status TransitionJob(JobId id, model::JobState from, model::JobState to,
                               const std::string& reason, Seconds now) = 0;
  // TransitionJob for every job of `ids` in one transaction (one commit): all move or none does
  // (FailedPrecondition or NotFound naming the first job that cannot). No ids: nothing to do.
  virtual Status TransitionJobs(const std::vector<JobId>& ids, model::JobState from,
                                model::JobState to, const std::string& reason, Seconds now) = 0;
  // Records that a started (starting or running) job is being cancelled, with an event; the
  // job ends later (TransitionJob) once its tasks stopped. FailedPrecondition when the job is
  // not started; NotFound for an unknown job.
  virtual Status RequestCancel(JobId id, const std::string& reason, Seconds now) = 0;
  // Records an event that changes no state (from = to = the job's state): a notice in the
  // job's history, such as an idle session's warning. NotFound for an unknown job.
  virtual Status AddJobEvent(JobId id, const std::string& reason, Seconds now) = 0;
  // The job's events in the order they happened; the first is the submission.
  virtual Result<std::vector<JobEvent>> JobEvents(JobId id) = 0;

  // The in-job channel (model/job_report.h, docs/in-job.md). A job not ended may record:
  //  - a report (RecordJobReport): each key's value replaces its latest, numeric values are
  //    appended to the job's history (at most model::kMaxMetricPoints points per job: the
  //    oldest go in the same transaction), and the report's time becomes the job's metrics_at.
  //    InvalidArgument naming "metrics" when the job would keep more than model::kMaxMetricKeys
  //    keys (nothing is recorded then);
  //  - its latest checkpoint (RecordJobCheckpoint), replacing the one before (always kept),
  //    with an event "checkpoint PATH (step N)" at its time when its path differs from the one
  //    before and the job has fewer than model::kMaxCheckpointEvents such events.
  // Both: NotFound for an unknown job, FailedPrecondition for one that has ended. The report's
  // bounds (keys, values, sizes) are the caller's to check (protocol/api_job_report.h).
  virtual Status RecordJobReport(JobId id, const model::JobReport& report) = 0;
  virtual Status RecordJobCheckpoint(JobId id, const model::JobCheckpoint& checkpoint) = 0;
  // Adds `lost_gpu_ms` (> 0, else InvalidArgument) to the job's lost work and to the GPU usage
  // row of `day` ("YYYY-MM-DD"), its user and its project, in one transaction: the work a
  // preemption or a resize lost. NotFound for an unknown job.
  virtual Status AddLostWork(JobId id, int64_t lost_gpu_ms, const std::string& day) = 0;
  // What the job has reported (nothing yet: empty); NotFound for an unknown job.
  virtual Result<model::JobProgress> JobProgress(JobId id) = 0;
  // The job's numeric history, oldest first per key; NotFound for an unknown job.
  virtual Result<model::MetricSeries> JobMetricSeries(JobId id) = 0;

  // Tasks. AssignGang starts a gang in one transaction, before any agent hears of it: it moves
  // the job pending -> starting (with an event whose reason names the nodes), gives every task a
  // fresh allocation id (ids follow the order of `tasks`, are never reused, and grow across
  // restarts and across servers sharing the store) and the generation of the job's current run
  // (its restarts + 1), and writes every task row (state assigned). All or nothing: on any error
  // no id is taken, no row written, and the job stays pending. Returns the written tasks in the
  // order given. InvalidArgument names the bad field ("tasks[1].allocation.gpus[0].milli");
  // FailedPrecondition when the job is not pending; NotFound when the job or a task's node is
  // unknown (nodes come from UpsertNode).
  virtual Result<std::vector<TaskRecord>> AssignGang(JobId id,
                                                     const std::vector<TaskAssignment>& tasks,
                                                     Seconds now) = 0;
  // The gangs of one scheduling pass in one transaction (one commit), each written as AssignGang
  // writes it, ids handed out in the order of `gangs`. All or nothing: the error of the first
  // gang that fails (its message names the job, as AssignGang's does), and nothing written; the
  // caller may then assign the gangs one by one to start those that can. Returns each gang's
  // tasks, in the order given.
  virtual Result<std::vector<std::vector<TaskRecord>>> AssignGangs(
      const std::vector<GangAssignment>& gangs, Seconds now) = 0;
  // An elastic job's resize (docs/control-plane.md, "Elastic jobs"): in one transaction, the
  // job, which must be starting or running and stays so, gets a new generation (its restarts
  // + 1: the run's numbering, as a requeue's) whose task rows are written as AssignGang writes
  // them (fresh allocation ids, state assigned), with an event from its state to itself whose
  // reason is `reason`. The old generation's rows are the caller's (UpdateTask). All or nothing.
  // Errors: as AssignGang's, FailedPrecondition when the job is neither starting nor running.
  virtual Result<std::vector<TaskRecord>> ResizeGang(JobId id,
                                                     const std::vector<TaskAssignment>& tasks,
                                                     const std::string& reason, Seconds now) = 0;
  // Updates state, exit code, signal, times and end cause of the task keyed by (allocation_id,
  // generation); its job, index, node and allocation never change. NotFound when unknown.
  virtual Status UpdateTask(const TaskRecord& task) = 0;
  // The readers below fail (Internal, naming the task) on a task row whose allocation does not
  // decode: a store written by something other than corral.
  virtual Result<std::vector<TaskRecord>> TasksOfJob(JobId id) = 0;  // by index, generation
  virtual Result<std::vector<TaskRecord>> ActiveTasks() = 0;  // assigned or running, by alloc.

  // Environments. AddEnvironmentVersion stores a new version of `name` (1 when the name is new)
  // owned by `owner`; AlreadyExists when the name belongs to another owner (the message does
  // not name it). Returns the record.
  virtual Result<EnvironmentRecord> AddEnvironmentVersion(const std::string& name,
                                                          const std::string& owner,
                                                          const std::string& spec_json,
                                                          Seconds now) = 0;
  // One version (none: the latest); NotFound naming the name (and version).
  virtual Result<EnvironmentRecord> GetEnvironment(const std::string& name,
                                                   std::optional<int64_t> version) = 0;
  // The latest version of every environment, by name.
  virtual Result<std::vector<EnvironmentRecord>> ListEnvironments() = 0;
  // Shares every version of `name` with `project`. Idempotent; NotFound when the environment or
  // the project does not exist.
  virtual Status ShareEnvironment(const std::string& name, const std::string& project) = 0;

  // Nodes.
  virtual Status UpsertNode(const NodeRecord& node) = 0;
  virtual Result<std::vector<NodeRecord>> ListNodes() = 0;  // by name

  // GPU metrics history and accounting.
  // Adds intervals in one transaction; an interval already stored (same resolution, node, GPU
  // and start) is replaced.
  virtual Status AddGpuMetrics(const std::vector<GpuMetricRow>& rows) = 0;
  // Deletes the intervals of `resolution_s` that start before `before_s`, in batches of whole
  // start times: those before the start time of the (batch_rows + 1)-th oldest row (at most
  // `batch_rows`, >= 1), or all those of the oldest start time when they are more. Other calls
  // get in between batches.
  virtual Result<PruneResult> PruneGpuMetrics(int resolution_s, int64_t before_s,
                                              int64_t batch_rows) = 0;
  // The intervals of `resolution_s` starting in [from_s, to_s), of one node (empty: all) and one
  // job (none: any), by node, GPU and start.
  virtual Result<std::vector<GpuMetricRow>> GpuMetrics(int resolution_s, int64_t from_s,
                                                       int64_t to_s, const std::string& node,
                                                       std::optional<JobId> job) = 0;
  // Adds GPU time to the day, user and project of each row (creating the row), in one
  // transaction.
  virtual Status AddGpuUsage(const std::vector<GpuUsageRow>& rows) = 0;
  // The rows of days from `from_day` to `to_day` (inclusive, "YYYY-MM-DD"), by day, user,
  // project.
  virtual Result<std::vector<GpuUsageRow>> GpuUsage(const std::string& from_day,
                                                    const std::string& to_day) = 0;

  // Retention of finished jobs (the leader's JobRetention purges them in batches).
  //
  // A job may be purged once it ended before `before` (end_time < before) and, for an array
  // element, once every element of its array did; an array's first element (whose id is the
  // array's id, which the others reference) only once it is the last one left. Returns such
  // jobs, the earliest end first (then by id), at most `limit` (>= 1, else InvalidArgument).
  // Reads only.
  virtual Result<std::vector<JobId>> PurgeableJobs(Seconds before, int64_t limit) = 0;
  // Deletes those of `ids` that may still be purged at `before` (the others, unknown ones
  // included, are skipped) with their task rows and events, in one transaction, after adding
  // each one's GPU demand to the demand hours (DemandHour), so that what capacity planning reads
  // is the same before and after. Returns the ids deleted, ascending. Job ids are never reused:
  // the next InsertJob gets an id above every id ever given, also above the purged ones and
  // after a restart. At most kMaxPurgeBatch ids (InvalidArgument beyond).
  virtual Result<std::vector<JobId>> PurgeJobs(const std::vector<JobId>& ids, Seconds before) = 0;
  static constexpr size_t kMaxPurgeBatch = 10'000;
  // The demand hours of purged jobs starting in [from, to), by hour; hours without any are
  // absent.
  virtual Result<std::vector<DemandHour>> PurgedDemand(Seconds from, Seconds to) = 0;
};

// "sqlite:PATH" (the file is created, mode 0600, when missing) or "postgres://user@host:port/db" /
// "postgresql://..." (any libpq URI). Runs the schema migrations; a store whose schema is newer
// than this binary knows is refused (FailedPrecondition). Other schemes: InvalidArgument naming
// the scheme.
Result<std::unique_ptr<Store>> OpenStore(const std::string& url);

// The URL with any password replaced by "***" (user:PASSWORD@ and password=PASSWORD), for logs
// and messages.
std::string RedactUrl(std::string_view url);

}  // namespace corral::store
