// The one implementation of Store: portable SQL (with `?` placeholders, RETURNING and ON
// CONFLICT, which SQLite 3.35+ and PostgreSQL both accept) over a SqlConnection.
//
// Thread safety: every method locks one mutex and runs on the one connection, so calls from
// several threads are serialised; a write holds the mutex until its commit is durable. Writers
// that need throughput batch their work (InsertJobs and SubmissionBatcher, ApplyGroup and
// WriteBatcher) instead of adding connections. The lease methods are the exception: they run on
// a second connection behind a mutex of their own, so that a renewal never waits behind a batch.
//
// Every write runs in a transaction (InTransaction, or WriteInOneTrip on PostgreSQL's hot paths),
// which is where fencing is checked.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "store/sql_connection.h"
#include "store/store.h"

namespace corral::store {

// A gang of AssignGangs, checked (SqlStore's own; sql_store.cc's CheckGang).
struct CheckedGang {
  std::string op;                        // "assign job 7"
  std::vector<std::string> nodes;        // distinct, in task order
  std::vector<std::string> allocations;  // each task's, as stored
  std::string reason;                    // "assigned to a, b"
};

class SqlStore final : public Store {
 public:
  // Brings the database behind `conn` to the newest schema (migrations.h), gives it a cluster
  // id when it has none (several servers opening one store at once agree on one), and returns a
  // store that owns the connection. `name` names the store in I/O error messages (a redacted
  // URL). `lease_conn` is a second connection to the same database, for the lease methods.
  static Result<std::unique_ptr<SqlStore>> Create(std::unique_ptr<SqlConnection> conn,
                                                  std::unique_ptr<SqlConnection> lease_conn,
                                                  std::string name);

  int64_t Commits() override;
  int64_t RoundTrips() override;
  Status Apply(const WriteBatch& batch, Seconds now) override;
  Status ApplyGroup(const std::vector<TimedBatch>& group) override;
  const std::string& ClusterId() const override { return cluster_id_; }
  Result<LeaseRecord> AcquireLease(const std::string& holder, const std::string& url,
                                   int64_t duration_ms) override;
  Status RenewLease(const std::string& holder, int64_t duration_ms) override;
  Result<LeaseRecord> CurrentLease() override;
  Result<std::string> ShareClusterSecret(ClusterSecret which, const std::string& offer) override;

  Result<UserRecord> CreateUser(const std::string& name, bool admin, Seconds now) override;
  Result<UserRecord> FindUser(const std::string& name) override;
  Result<std::vector<UserRecord>> ListUsers() override;
  Result<TokenRecord> CreateToken(int64_t user_id, const std::string& name, const std::string& hash,
                                  Seconds now, std::optional<Seconds> expires_at) override;
  Result<UserRecord> CreateUserWithToken(const std::string& name, bool admin,
                                         const std::vector<std::string>& projects,
                                         const std::string& token_name,
                                         const std::string& token_hash, Seconds now,
                                         std::optional<Seconds> token_expires_at) override;
  Result<TokenOwner> FindTokenOwner(const std::string& hash) override;
  Result<std::vector<TokenRecord>> ListTokens(int64_t user_id) override;
  Status RevokeToken(int64_t user_id, int64_t token_id, Seconds now) override;
  Status SetUserSubmitLimits(const std::string& name, const model::SubmitLimits& limits) override;

  Result<ProjectRecord> CreateProject(const std::string& name, const std::string& description,
                                      Seconds now) override;
  Result<std::vector<ProjectRecord>> ListProjects() override;
  Status SetProjectSharing(const std::string& name, const std::string& sharing_json) override;
  Status SetProjectSubmitLimits(const std::string& name,
                                const model::SubmitLimits& limits) override;
  Status AddMember(const std::string& project, int64_t user_id) override;
  Result<std::vector<std::string>> ProjectsOf(int64_t user_id) override;
  Result<std::vector<UserRecord>> MembersOf(const std::string& project) override;

  Result<JobId> InsertJob(const JobRecord& job) override;
  Result<std::vector<JobId>> InsertJobs(const std::vector<JobRecord>& jobs) override;
  Result<std::vector<JobId>> InsertArray(const std::vector<JobRecord>& elements) override;
  Result<JobRecord> GetJob(JobId id) override;
  Result<std::vector<JobRecord>> ListJobs(const JobFilter& filter) override;
  Result<std::vector<JobSummary>> ListJobSummaries(const JobFilter& filter) override;
  Status RequestCancel(JobId id, const std::string& reason, Seconds now) override;
  Status AddJobEvent(JobId id, const std::string& reason, Seconds now) override;
  Status TransitionJob(JobId id, model::JobState from, model::JobState to,
                       const std::string& reason, Seconds now) override;
  Status TransitionJobs(const std::vector<JobId>& ids, model::JobState from, model::JobState to,
                        const std::string& reason, Seconds now) override;
  Result<std::vector<JobEvent>> JobEvents(JobId id) override;
  // sql_store_job_reports.cc
  Status RecordJobReport(JobId id, const model::JobReport& report) override;
  Status RecordJobCheckpoint(JobId id, const model::JobCheckpoint& checkpoint) override;
  Status AddLostWork(JobId id, int64_t lost_gpu_ms, const std::string& day) override;
  Result<model::JobProgress> JobProgress(JobId id) override;
  Result<model::MetricSeries> JobMetricSeries(JobId id) override;

  Result<std::vector<TaskRecord>> AssignGang(JobId id, const std::vector<TaskAssignment>& tasks,
                                             Seconds now) override;
  Result<std::vector<TaskRecord>> ResizeGang(JobId id, const std::vector<TaskAssignment>& tasks,
                                             const std::string& reason, Seconds now) override;
  Result<std::vector<std::vector<TaskRecord>>> AssignGangs(const std::vector<GangAssignment>& gangs,
                                                           Seconds now) override;
  Status UpdateTask(const TaskRecord& task) override;
  Result<std::vector<TaskRecord>> TasksOfJob(JobId id) override;
  Result<std::vector<TaskRecord>> ActiveTasks() override;

  Result<EnvironmentRecord> AddEnvironmentVersion(const std::string& name, const std::string& owner,
                                                  const std::string& spec_json,
                                                  Seconds now) override;
  Result<EnvironmentRecord> GetEnvironment(const std::string& name,
                                           std::optional<int64_t> version) override;
  Result<std::vector<EnvironmentRecord>> ListEnvironments() override;
  Status ShareEnvironment(const std::string& name, const std::string& project) override;

  Status UpsertNode(const NodeRecord& node) override;
  Result<std::vector<NodeRecord>> ListNodes() override;

  Status AddGpuMetrics(const std::vector<GpuMetricRow>& rows) override;
  Result<PruneResult> PruneGpuMetrics(int resolution_s, int64_t before_s,
                                      int64_t batch_rows) override;
  Result<std::vector<GpuMetricRow>> GpuMetrics(int resolution_s, int64_t from_s, int64_t to_s,
                                               const std::string& node,
                                               std::optional<JobId> job) override;
  Status AddGpuUsage(const std::vector<GpuUsageRow>& rows) override;
  Result<std::vector<GpuUsageRow>> GpuUsage(const std::string& from_day,
                                            const std::string& to_day) override;
  Result<std::vector<JobId>> PurgeableJobs(Seconds before, int64_t limit) override;
  Result<std::vector<JobId>> PurgeJobs(const std::vector<JobId>& ids, Seconds before) override;
  Result<std::vector<DemandHour>> PurgedDemand(Seconds from, Seconds to) override;

 private:
  SqlStore(std::unique_ptr<SqlConnection> conn, std::unique_ptr<SqlConnection> lease_conn,
           std::string name, std::string cluster_id)
      : conn_(std::move(conn)),
        lease_conn_(std::move(lease_conn)),
        name_(std::move(name)),
        cluster_id_(std::move(cluster_id)) {}

  // ListJobs and ListJobSummaries: the rows of `filter` read as `columns`, each by `from`.
  // Takes mu_.
  template <typename R>
  Result<std::vector<R>> ListJobRows(const JobFilter& filter, const char* columns,
                                     Result<R> (*from)(const SqlRow&));

  // The following run with mu_ held.

  // Runs `body` in a transaction: commits when it returns OK, rolls back otherwise. Once the
  // store holds an epoch (AcquireLease), the transaction first checks it under a lock that a
  // takeover waits for (CheckEpoch), and a fenced one runs nothing.
  Status InTransaction(const std::function<Status()>& body);
  // OK when the store holds no epoch or the database's is still the one it holds; else the
  // Unavailable "fenced: ..." (Fenced). Inside a transaction.
  Status CheckEpoch();
  // The error of a write refused because the store's epoch `held` is no longer the database's
  // (`now`).
  static Status Fenced(int64_t held, int64_t now);
  // A write transaction whose statements need no answer before the next one is decided: BEGIN,
  // the fencing check (the function corral_fence, when the store holds an epoch: PostgreSQL's
  // migration 15), `runs` and COMMIT, in one round trip on PostgreSQL
  // (SqlConnection::QueryManyAndCommit). Returns each run's rows. On an error nothing was
  // written and the transaction is rolled back; the outcome's failed_run is then the run that
  // failed, or runs.size() for the transaction's own error (begin, fencing, commit,
  // connection). A fenced transaction answers Fenced's error.
  CommitOutcome WriteInOneTrip(std::vector<SqlRun> runs);
  // `status` with the operation in front; I/O errors also name the store.
  Status Annotate(const std::string& operation, const Status& status) const;
  // The single statements of CreateUser, CreateToken and AddMember, for use alone or inside a
  // transaction; errors are not yet annotated with the operation.
  Result<int64_t> InsertUser(const std::string& name, bool admin, Seconds now);  // the id
  Result<int64_t> InsertToken(int64_t user_id, const std::string& name, const std::string& hash,
                              Seconds now, std::optional<Seconds> expires_at);  // the id
  Status InsertMember(const std::string& project, int64_t user_id);
  // Inserts validated new jobs with their submission events in one transaction; with `array`,
  // the first job's id becomes every job's array_id. `op` names the operation in errors.
  Result<std::vector<JobId>> InsertNewJobs(const std::string& op,
                                           const std::vector<JobRecord>& jobs, bool array);
  // InsertNewJobs without an array on PostgreSQL: each job and its event in one statement, the
  // whole transaction in one round trip (WriteInOneTrip). Takes mu_.
  Result<std::vector<JobId>> InsertJobsInOneTrip(const std::string& op,
                                                 const std::vector<JobRecord>& jobs);
  // The statements of TransitionJobs and UpdateTask, for use alone or inside a transaction;
  // errors are not yet annotated with the operation.
  Status TransitionRows(const std::vector<JobId>& ids, model::JobState from, model::JobState to,
                        const std::string& reason, Seconds now);
  // Errors name the task (its allocation and generation).
  Status UpdateTaskRows(const std::vector<const TaskRecord*>& tasks);

  // Apply, ApplyGroup and RequestCancel: a batch of a group, referred to (not copied).
  struct BatchRef {
    const WriteBatch* batch;
    Seconds now;
  };
  // A write of a batch to the jobs table: a cancel request or a transition (the other null).
  struct JobWrite {
    const CancelRequest* cancel = nullptr;
    const JobTransition* transition = nullptr;
    Seconds now;
    std::string name() const;  // what its errors are prefixed with
  };
  // Applies `group` in one transaction (nothing when every batch is empty). A refused write's
  // error names the write; the transaction's own (begin, fencing, commit) name `op`. Takes mu_.
  Status ApplyBatches(const std::vector<BatchRef>& group, const std::string& op);
  // The writes of a group, in the order they are made: task updates depend on no job's state
  // and job writes on no task's, so every task goes first; the job writes follow in the group's
  // order.
  struct GroupWrites {
    std::vector<const TaskRecord*> tasks;
    std::vector<JobWrite> jobs;
  };
  // The writes of `group`; refuses a transition the state machine does not allow.
  Result<GroupWrites> CollectGroupWrites(const std::vector<BatchRef>& group);
  // ApplyBatches on PostgreSQL: the group's transaction in one round trip (WriteInOneTrip),
  // each compare-and-set checked by the database. Takes mu_.
  Status ApplyGroupInOneTrip(const GroupWrites& writes, const std::string& op);
  // The job writes with their events, in order; errors named.
  Status JobWriteRows(const std::vector<JobWrite>& writes);
  // Why `write` changed no row: NotFound, or FailedPrecondition naming the job's state.
  Status ExplainRefused(const JobWrite& write);
  // A job's state; NotFound naming the job when there is none.
  Result<model::JobState> JobStateLocked(JobId id);
  // The state of a job not ended; NotFound, or FailedPrecondition once it has (under mu_).
  Result<model::JobState> LiveJobStateLocked(JobId id);
  // The projects `name` is shared with, by name.
  Result<std::vector<std::string>> EnvironmentProjects(const std::string& name);
  // Why a job is not in `expected` state: NotFound, or FailedPrecondition naming its state.
  Status ExplainWrongState(JobId id, model::JobState expected);
  // A gang's task rows of `generation`, their allocation ids taken from the counter (inside the
  // caller's transaction): AssignGangs and ResizeGang.
  Result<std::vector<TaskRecord>> InsertGangRowsLocked(const GangAssignment& gang,
                                                       const CheckedGang& c, int64_t generation);
  // AssignGangs on PostgreSQL: each gang one statement (its job, allocation ids, task rows and
  // event), the pass's transaction in one round trip (WriteInOneTrip). Takes mu_.
  Result<std::vector<std::vector<TaskRecord>>> AssignGangsInOneTrip(
      const std::vector<GangAssignment>& gangs, const std::vector<CheckedGang>& checked,
      Seconds now);
  // Which node of `gang` is not registered, after a foreign-key failure `s` on its task rows of
  // a job that was pending; `s` when every node is there.
  Status ExplainUnknownNode(Status s, const CheckedGang& gang);
  // Which user or project named by `jobs` does not exist (after a foreign-key failure).
  Status ExplainMissingJobOwner(const std::vector<JobRecord>& jobs);
  // SetUserSubmitLimits and SetProjectSubmitLimits: `table` is "users" or "projects", `what`
  // "user" or "project".
  Status SetSubmitLimits(const char* table, const char* what, const std::string& name,
                         const model::SubmitLimits& limits);

  // The lease as the database holds it, read on lease_conn_ (with lease_mu_ held).
  Result<LeaseRecord> ReadLeaseLocked();

  std::mutex mu_;
  std::unique_ptr<SqlConnection> conn_;  // guarded by mu_
  std::mutex lease_mu_;
  std::unique_ptr<SqlConnection> lease_conn_;  // guarded by lease_mu_
  // The lease acquired through this store: its holder and epoch (0: none, writes unfenced).
  std::string lease_holder_;       // guarded by lease_mu_
  std::atomic<int64_t> epoch_{0};  // set under lease_mu_; read by writes under mu_
  const std::string name_;
  const std::string cluster_id_;
};

}  // namespace corral::store
