#include "store/sql_store.h"

#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "common/random_id.h"
#include "model/node.h"
#include "store/migrations.h"

namespace corral::store {
namespace {

// Column lists, in the order the *From(row) readers below expect.
constexpr char kUserColumns[] =
    "id, name, admin, created_at, max_pending_jobs, max_submits_per_minute";
constexpr char kTokenColumns[] = "id, user_id, name, hash, created_at, revoked_at, expires_at";
constexpr char kJobColumns[] =
    "id, name, user_name, project, spec_json, state, priority, restarts, submit_time, "
    "start_time, end_time, reason, cancel_reason, array_id, array_index, array_max_running, "
    "total_gpu_milli, lost_gpu_ms";
// What a listing shows (JobSummary), in the order JobSummaryFrom expects: no spec.
constexpr char kJobSummaryColumns[] =
    "id, name, user_name, project, state, priority, total_gpu_milli, submit_time, start_time, "
    "end_time, reason, array_id, array_index, array_max_running";
constexpr char kTaskColumns[] =
    "job_id, task_index, allocation_id, generation, node, allocation, state, exit_code, "
    "signal, start_time, end_time, end_cause";
constexpr char kNodeColumns[] =
    "name, inventory_json, state, last_heartbeat, node_id_hash, node_token_hash";

constexpr char kInsertJob[] =
    "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, restarts, "
    "submit_time, reason, array_id, array_index, array_max_running, total_gpu_milli) "
    "VALUES (?, ?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?) RETURNING id";
constexpr char kInsertEvent[] =
    "INSERT INTO job_events (job_id, time, from_state, to_state, reason) VALUES (?, ?, ?, ?, ?)";
constexpr char kInsertTask[] =
    "INSERT INTO tasks (job_id, task_index, allocation_id, generation, node, allocation, state) "
    "VALUES (?, ?, ?, ?, ?, ?, ?)";

constexpr char kSubmittedReason[] = "submitted";

std::string Select(const char* columns, const std::string& rest) {
  return std::string("SELECT ") + columns + " FROM " + rest;
}

SqlValue OptValue(const std::optional<Seconds>& t) {
  if (!t) return std::monostate{};
  return t->value();
}
SqlValue OptValue(const std::optional<int>& v) {
  if (!v) return std::monostate{};
  return int64_t{*v};
}
SqlValue OptValue(const std::optional<int64_t>& v) {
  if (!v) return std::monostate{};
  return *v;
}
std::optional<Seconds> OptSeconds(const SqlRow& row, size_t i) {
  auto v = row.OptInt(i);
  if (!v) return std::nullopt;
  return Seconds(*v);
}
std::optional<int> OptInt32(const SqlRow& row, size_t i) {
  auto v = row.OptInt(i);
  if (!v) return std::nullopt;
  return static_cast<int>(*v);
}
std::string JobName(JobId id) { return "job " + std::to_string(id.value()); }

// States are names in the database (model/states.h); the CHECK constraints keep them known, so
// a name this corral cannot read is an Internal error naming the row.
template <typename E>
Result<E> StateColumn(const SqlRow& row, size_t i, const std::string& what,
                      Result<E> (*parse)(std::string_view, std::string_view)) {
  Result<E> state = parse(row.Text(i), "state");
  if (!state.ok()) return Status(StatusCode::kInternal, what + ": " + state.status().message());
  return state;
}
SqlValue StateValue(auto state) { return std::string(model::ToString(state)); }

// Submit limits in columns max_pending_jobs and max_submits_per_minute at `first` and after.
model::SubmitLimits SubmitLimitsFrom(const SqlRow& row, size_t first) {
  return {row.OptInt(first), row.OptInt(first + 1)};
}
UserRecord UserFrom(const SqlRow& row) {
  return {row.Int(0), row.Text(1), row.Int(2) != 0, Seconds(row.Int(3)), SubmitLimitsFrom(row, 4)};
}
TokenRecord TokenFrom(const SqlRow& row) {
  return {row.Int(0),          row.Int(1),         row.Text(2),       row.Text(3),
          Seconds(row.Int(4)), OptSeconds(row, 5), OptSeconds(row, 6)};
}
Result<JobRecord> JobFrom(const SqlRow& row) {
  JobRecord j;
  j.id = JobId(row.Int(0));
  j.name = row.Text(1);
  j.user = row.Text(2);
  j.project = row.Text(3);
  j.spec_json = row.Text(4);
  auto state = StateColumn(row, 5, JobName(j.id), &model::ParseJobState);
  if (!state.ok()) return state.status();
  j.state = *state;
  j.priority = static_cast<int>(row.Int(6));
  j.restarts = static_cast<int>(row.Int(7));
  j.submit_time = Seconds(row.Int(8));
  j.start_time = OptSeconds(row, 9);
  j.end_time = OptSeconds(row, 10);
  j.reason = row.Text(11);
  if (!row.IsNull(12)) j.cancel_reason = row.Text(12);
  if (!row.IsNull(13)) j.array_id = JobId(row.Int(13));
  j.array_index = OptInt32(row, 14);
  j.array_max_running = OptInt32(row, 15);
  j.total_gpu_milli = MilliGpu(row.Int(16));
  j.lost_gpu_ms = row.Int(17);
  return j;
}
Result<JobSummary> JobSummaryFrom(const SqlRow& row) {
  JobSummary j;
  j.id = JobId(row.Int(0));
  j.name = row.Text(1);
  j.user = row.Text(2);
  j.project = row.Text(3);
  auto state = StateColumn(row, 4, JobName(j.id), &model::ParseJobState);
  if (!state.ok()) return state.status();
  j.state = *state;
  j.priority = static_cast<int>(row.Int(5));
  j.total_gpu_milli = MilliGpu(row.Int(6));
  j.submit_time = Seconds(row.Int(7));
  j.start_time = OptSeconds(row, 8);
  j.end_time = OptSeconds(row, 9);
  j.reason = row.Text(10);
  if (!row.IsNull(11)) j.array_id = JobId(row.Int(11));
  j.array_index = OptInt32(row, 12);
  j.array_max_running = OptInt32(row, 13);
  return j;
}
// The tasks table keeps a task's allocation as model::ToJson's text (docs/decisions.md).
std::string AllocationText(const model::Allocation& allocation) {
  return model::ToJson(allocation).dump();
}

Result<TaskRecord> TaskFrom(const SqlRow& row) {
  TaskRecord t;
  t.job = JobId(row.Int(0));
  t.task_index = static_cast<int>(row.Int(1));
  t.allocation_id = row.Int(2);
  t.generation = row.Int(3);
  t.node = row.Text(4);
  auto allocation = model::AllocationFromJson(
      nlohmann::json::parse(row.Text(5), nullptr, /*allow_exceptions=*/false));
  const std::string what = "task allocation " + std::to_string(t.allocation_id) + " generation " +
                           std::to_string(t.generation);
  if (!allocation.ok()) {
    // Only corral writes the table, and it writes what the codec reads back.
    return Status(StatusCode::kInternal, what + ": " + allocation.status().message());
  }
  t.allocation = std::move(allocation).value();
  auto state = StateColumn(row, 6, what, &model::ParseTaskState);
  if (!state.ok()) return state.status();
  t.state = *state;
  t.exit_code = OptInt32(row, 7);
  t.signal = OptInt32(row, 8);
  t.start_time = OptSeconds(row, 9);
  t.end_time = OptSeconds(row, 10);
  if (!row.IsNull(11)) {
    auto cause = model::ParseTaskEndCause(row.Text(11));
    if (!cause.ok()) return Status(StatusCode::kInternal, what + ": " + cause.status().message());
    t.end_cause = *cause;
  }
  return t;
}
Result<NodeRecord> NodeFrom(const SqlRow& row) {
  auto state = StateColumn(row, 2, "node '" + row.Text(0) + "'", &model::ParseNodeState);
  if (!state.ok()) return state.status();
  return NodeRecord{row.Text(0),         row.Text(1), *state,
                    Seconds(row.Int(3)), row.Text(4), row.Text(5)};
}
// Each row read by `from` (JobFrom, TaskFrom, NodeFrom), in order; the first unreadable row's
// error.
template <typename R>
Result<std::vector<R>> RowsFrom(const SqlRows& rows, Result<R> (*from)(const SqlRow&)) {
  std::vector<R> out;
  out.reserve(rows.size());
  for (const SqlRow& row : rows) {
    Result<R> record = from(row);
    if (!record.ok()) return record.status();
    out.push_back(std::move(record).value());
  }
  return out;
}

bool IsHexSha256(const std::string& hash) {
  return hash.size() == 64 && std::all_of(hash.begin(), hash.end(), [](char c) {
           return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f');
         });
}

// "?, ?, ?" for n values, appending them to params.
std::string InList(const std::vector<std::string>& values, SqlParams& params) {
  std::string out;
  for (const std::string& v : values) {
    out += out.empty() ? "?" : ", ?";
    params.emplace_back(v);
  }
  return out;
}

// The submission event's reason, which is also the new job's `reason`.
std::string SubmitReason(const JobRecord& job) {
  return job.reason.empty() ? std::string(kSubmittedReason) : job.reason;
}

Status ValidateNewJob(const JobRecord& job) {
  if (job.user.empty()) return InvalidArgument("field 'user': must not be empty");
  if (job.project.empty()) return InvalidArgument("field 'project': must not be empty");
  if (job.state != model::JobState::kPending) {
    return InvalidArgument("field 'state': a new job is pending, got '" +
                           std::string(model::ToString(job.state)) + "'");
  }
  if (job.array_id) return InvalidArgument("field 'array_id': assigned by the store");
  if (job.total_gpu_milli.value() < 0) {
    return InvalidArgument("field 'total_gpu_milli': must not be negative");
  }
  return {};
}

// An error of jobs[i] (of a batch of n), named "jobs[i]: ..." when there are several.
Status InBatch(const Status& s, size_t i, size_t n) {
  if (s.ok() || n == 1) return s;
  return s.WithPrefix("jobs[" + std::to_string(i) + "]: ");
}

// The insert's parameters for `job`, an element of array `array_id` (NULL: not yet known, or
// not an element).
SqlParams NewJobParams(const JobRecord& job, SqlValue array_id) {
  return {job.name,
          job.user,
          job.project,
          job.spec_json,
          StateValue(model::JobState::kPending),
          int64_t{job.priority},
          job.submit_time.value(),
          SubmitReason(job),
          std::move(array_id),
          OptValue(job.array_index),
          OptValue(job.array_max_running),
          job.total_gpu_milli.value()};
}

// The store's cluster id, written first when it has none. Servers opening one store together
// both offer an id; the first insert wins (ON CONFLICT DO NOTHING) and both read the winner. A
// store that has one is only read (no write lock taken at every open).
Result<std::string> LoadOrCreateClusterId(SqlConnection& conn) {
  for (bool offered = false;; offered = true) {
    auto rows = conn.Query("SELECT id FROM cluster WHERE singleton = 1", {});
    if (!rows.ok()) return rows.status();
    if (!rows->empty()) {
      std::string id = (*rows)[0].Text(0);
      if (Status valid = model::ValidateClusterId(id); !valid.ok()) {
        return Status(StatusCode::kInternal, "stored " + valid.message());
      }
      return id;
    }
    if (offered) return Status(StatusCode::kInternal, "the cluster row is missing");
    Result<std::string> offer = RandomHexId(model::kClusterIdLength / 2);
    if (!offer.ok()) return offer.status();
    auto inserted = conn.Execute(
        "INSERT INTO cluster (singleton, id) VALUES (1, ?) ON CONFLICT (singleton) DO NOTHING",
        {*offer});
    if (!inserted.ok()) return inserted.status();
  }
}

// The database's clock in milliseconds since the Unix epoch, as an SQL expression: the lease's
// only clock (PostgreSQL's clock_timestamp() moves within a transaction, unlike now()).
std::string DatabaseNowMs(Dialect dialect) {
  return dialect == Dialect::kPostgres
             ? "CAST(EXTRACT(EPOCH FROM clock_timestamp()) * 1000 AS BIGINT)"
             : "CAST((julianday('now') - 2440587.5) * 86400000.0 AS INTEGER)";
}

// The cluster table's column that keeps `which`.
const char* SecretColumn(ClusterSecret which) {
  switch (which) {
    case ClusterSecret::kJoinTokenHash:
      return "join_token_hash";
    case ClusterSecret::kSessionKeyCheck:
      return "session_key_check";
  }
  return "";
}

}  // namespace

Result<std::unique_ptr<SqlStore>> SqlStore::Create(std::unique_ptr<SqlConnection> conn,
                                                   std::unique_ptr<SqlConnection> lease_conn,
                                                   std::string name) {
  Status s = ApplyMigrations(*conn, StoreMigrations());
  if (!s.ok()) {
    return Status(s.code(), "open store " + name + ": " + s.message());
  }
  Result<std::string> cluster_id = LoadOrCreateClusterId(*conn);
  if (!cluster_id.ok()) {
    return Status(cluster_id.status().code(),
                  "open store " + name + ": cluster id: " + cluster_id.status().message());
  }
  return std::unique_ptr<SqlStore>(new SqlStore(std::move(conn), std::move(lease_conn),
                                                std::move(name), std::move(cluster_id).value()));
}

Status SqlStore::InTransaction(const std::function<Status()>& body) {
  CORRAL_RETURN_IF_ERROR(conn_->Begin());
  Status s = CheckEpoch();
  if (s.ok()) s = body();
  if (s.ok()) s = conn_->Commit();
  if (!s.ok()) conn_->Rollback();  // the first error is the one worth reporting
  return s;
}

Status SqlStore::CheckEpoch() {
  const int64_t held = epoch_.load();
  if (held == 0) return {};
  // PostgreSQL: the shared row lock conflicts with a takeover's update of the row, so a takeover
  // waits for this transaction, and this one, if it comes later, reads the new epoch. SQLite:
  // the transaction holds the database's write lock already (BEGIN IMMEDIATE).
  auto rows = conn_->Query(std::string("SELECT epoch FROM leader_epoch WHERE singleton = 1") +
                               (conn_->dialect() == Dialect::kPostgres ? " FOR SHARE" : ""),
                           {});
  if (!rows.ok()) return rows.status();
  const int64_t now = rows->empty() ? 0 : (*rows)[0].Int(0);
  if (now == held) return {};
  return Fenced(held, now);
}

Status SqlStore::Fenced(int64_t held, int64_t now) {
  // Rolled back, so nothing was done: the client may send it again, to the new leader.
  return Unavailable("fenced: this server's epoch " + std::to_string(held) +
                         " is no longer the leader's (now " + std::to_string(now) + ")",
                     Seconds(1));
}

CommitOutcome SqlStore::WriteInOneTrip(std::vector<SqlRun> runs) {
  const size_t count = runs.size();
  const int64_t held = epoch_.load();
  if (held != 0) runs.insert(runs.begin(), SqlRun{"SELECT corral_fence(?)", {held}});
  const size_t first = held != 0 ? 1 : 0;  // where runs[0] is in what is sent
  if (Status s = conn_->Begin(); !s.ok()) return {s, count};
  CommitOutcome out = conn_->QueryManyAndCommit(runs);
  if (out.rows.ok()) {
    out.rows->erase(out.rows->begin(), out.rows->begin() + static_cast<std::ptrdiff_t>(first));
    return {std::move(out.rows), count};
  }
  conn_->Rollback();
  if (first == 1 && out.failed_run == 0 &&
      out.rows.status().code() == StatusCode::kUnavailable) {  // corral_fence raised
    auto epoch = conn_->Query("SELECT epoch FROM leader_epoch WHERE singleton = 1", {});
    return {Fenced(held, epoch.ok() && !epoch->empty() ? (*epoch)[0].Int(0) : 0), count};
  }
  const bool names_a_run = out.failed_run >= first && out.failed_run < runs.size();
  return {out.rows.status(), names_a_run ? out.failed_run - first : count};
}

// ---- Leadership ----

Result<LeaseRecord> SqlStore::ReadLeaseLocked() {
  const std::string now = DatabaseNowMs(lease_conn_->dialect());
  auto rows = lease_conn_->Query("SELECT holder, url, epoch, expires_at_ms, expires_at_ms - " +
                                     now + " FROM leader_lease WHERE singleton = 1",
                                 {});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return Status(StatusCode::kInternal, "the leader_lease row is missing");
  const SqlRow& row = (*rows)[0];
  return LeaseRecord{row.Text(0), row.Text(1), row.Int(2), row.Int(3), row.Int(4)};
}

Result<LeaseRecord> SqlStore::AcquireLease(const std::string& holder, const std::string& url,
                                           int64_t duration_ms) {
  const std::string op = "acquire the leader's lease";
  if (holder.empty()) return Annotate(op, InvalidArgument("field 'holder': must not be empty"));
  if (duration_ms < 1) return Annotate(op, InvalidArgument("field 'duration_ms': must be >= 1"));
  std::lock_guard<std::mutex> lock(lease_mu_);
  const std::string now = DatabaseNowMs(lease_conn_->dialect());
  LeaseRecord lease;
  CORRAL_RETURN_IF_ERROR(Annotate(op, lease_conn_->Begin()));
  Status s = [&]() -> Status {
    if (lease_conn_->dialect() == Dialect::kPostgres) {
      // A takeover waits for the old leader's write in flight (below), but not past half a
      // lease: then it gives up and the follower tries again at its next poll. A frozen old
      // leader's transaction ends when PostgreSQL's idle-in-transaction timeout ends its session
      // (postgres_connection.h).
      auto set = lease_conn_->Execute(
          "SET LOCAL lock_timeout = " + std::to_string(std::max<int64_t>(duration_ms / 2, 1)), {});
      if (!set.ok()) return set.status();
    }
    // Ours and live: extended, same epoch. Lapsed (or never held): taken over, next epoch.
    auto taken = lease_conn_->Query(
        "UPDATE leader_lease SET holder = ?, url = ?, expires_at_ms = " + now +
            " + ?, epoch = CASE WHEN holder = ? AND expires_at_ms > " + now +
            " THEN epoch ELSE epoch + 1 END WHERE singleton = 1 AND ((holder = ? AND "
            "expires_at_ms > " +
            now + ") OR expires_at_ms <= " + now + ") RETURNING epoch, expires_at_ms",
        {holder, url, duration_ms, holder, holder});
    if (!taken.ok()) return taken.status();
    if (taken->empty()) {
      auto current = ReadLeaseLocked();
      if (!current.ok()) return current.status();
      return FailedPrecondition("the lease is held by server " + current->holder + " (" +
                                current->url + ") for another " +
                                std::to_string(current->remaining_ms) + " ms");
    }
    lease = {holder, url, (*taken)[0].Int(0), (*taken)[0].Int(1), duration_ms};
    // Only a takeover moves the epoch row: its update waits for the old leader's write in
    // flight (which holds the row FOR SHARE), and every later write of the old leader reads
    // the new epoch and is fenced.
    return lease_conn_
        ->Execute("UPDATE leader_epoch SET epoch = ? WHERE singleton = 1 AND epoch <> ?",
                  {lease.epoch, lease.epoch})
        .status();
  }();
  if (s.ok()) s = lease_conn_->Commit();
  if (!s.ok()) {
    lease_conn_->Rollback();
    return Annotate(op, s);
  }
  lease_holder_ = holder;
  epoch_.store(lease.epoch);
  return lease;
}

Status SqlStore::RenewLease(const std::string& holder, int64_t duration_ms) {
  const std::string op = "renew the leader's lease";
  if (duration_ms < 1) return Annotate(op, InvalidArgument("field 'duration_ms': must be >= 1"));
  std::lock_guard<std::mutex> lock(lease_mu_);
  const int64_t epoch = epoch_.load();
  if (epoch == 0 || holder != lease_holder_) {
    return Annotate(op, FailedPrecondition("this store never acquired the lease for " + holder));
  }
  const std::string now = DatabaseNowMs(lease_conn_->dialect());
  auto renewed = lease_conn_->Execute(
      "UPDATE leader_lease SET expires_at_ms = " + now +
          " + ? WHERE singleton = 1 AND holder = ? AND epoch = ? AND expires_at_ms > " + now,
      {duration_ms, holder, epoch});
  if (!renewed.ok()) return Annotate(op, renewed.status());
  if (*renewed == 1) return {};
  auto current = ReadLeaseLocked();
  if (!current.ok()) return Annotate(op, current.status());
  if (current->epoch == epoch) {
    return Annotate(op,
                    FailedPrecondition("the lease of epoch " + std::to_string(epoch) + " lapsed " +
                                       std::to_string(-current->remaining_ms) + " ms ago"));
  }
  return Annotate(
      op, FailedPrecondition("the lease of epoch " + std::to_string(epoch) +
                             " was taken over by server " + current->holder + " (" + current->url +
                             "), epoch " + std::to_string(current->epoch)));
}

Result<LeaseRecord> SqlStore::CurrentLease() {
  std::lock_guard<std::mutex> lock(lease_mu_);
  auto lease = ReadLeaseLocked();
  if (!lease.ok()) return Annotate("read the leader's lease", lease.status());
  return lease;
}

Result<std::string> SqlStore::ShareClusterSecret(ClusterSecret which, const std::string& offer) {
  const std::string column = SecretColumn(which);
  const std::string op = "share the cluster's " + column;
  std::lock_guard<std::mutex> lock(mu_);
  std::string stored;
  Status s = InTransaction([&]() -> Status {
    if (!offer.empty()) {
      auto offered = conn_->Execute(
          "UPDATE cluster SET " + column + " = ? WHERE singleton = 1 AND " + column + " = ''",
          {offer});
      if (!offered.ok()) return offered.status();
    }
    auto rows = conn_->Query("SELECT " + column + " FROM cluster WHERE singleton = 1", {});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return Status(StatusCode::kInternal, "the cluster row is missing");
    stored = (*rows)[0].Text(0);
    return Status::Ok();
  });
  if (!s.ok()) return Annotate(op, s);
  return stored;
}

Status SqlStore::Annotate(const std::string& operation, const Status& status) const {
  if (status.ok()) return status;
  if (status.code() == StatusCode::kIoError || status.code() == StatusCode::kInternal) {
    return status.WithPrefix(operation + ": store " + name_ + ": ");
  }
  return status.WithPrefix(operation + ": ");
}

Result<model::JobState> SqlStore::JobStateLocked(JobId id) {
  auto rows = conn_->Query("SELECT state FROM jobs WHERE id = ?", {id.value()});
  if (!rows.ok()) return rows.status();
  if (rows->empty()) return NotFound(JobName(id) + " not found");
  return StateColumn((*rows)[0], 0, JobName(id), &model::ParseJobState);
}

Status SqlStore::ExplainWrongState(JobId id, model::JobState expected) {
  auto state = JobStateLocked(id);
  if (!state.ok()) return state.status();
  return FailedPrecondition(JobName(id) + " is " + std::string(model::ToString(*state)) + ", not " +
                            std::string(model::ToString(expected)));
}

Status SqlStore::ExplainMissingJobOwner(const std::vector<JobRecord>& jobs) {
  std::set<std::string> users, projects;
  for (const JobRecord& j : jobs) {
    users.insert(j.user);
    projects.insert(j.project);
  }
  for (const std::string& u : users) {
    auto rows = conn_->Query("SELECT 1 FROM users WHERE name = ?", {u});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return NotFound("field 'user': user '" + u + "' does not exist");
  }
  for (const std::string& p : projects) {
    auto rows = conn_->Query("SELECT 1 FROM projects WHERE name = ?", {p});
    if (!rows.ok()) return rows.status();
    if (rows->empty()) return NotFound("field 'project': project '" + p + "' does not exist");
  }
  return NotFound("a user or project of the job does not exist");
}

// ---- Users and tokens ----

Result<int64_t> SqlStore::InsertUser(const std::string& name, bool admin, Seconds now) {
  if (name.empty()) return InvalidArgument("field 'name': must not be empty");
  auto rows =
      conn_->Query("INSERT INTO users (name, admin, created_at) VALUES (?, ?, ?) RETURNING id",
                   {name, int64_t{admin ? 1 : 0}, now.value()});
  if (!rows.ok()) {
    if (rows.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExists("user '" + name + "' already exists");
    }
    return rows.status();
  }
  return (*rows)[0].Int(0);
}

Result<UserRecord> SqlStore::CreateUser(const std::string& name, bool admin, Seconds now) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id = 0;
  Status s = InTransaction([&]() -> Status {
    auto user = InsertUser(name, admin, now);
    if (!user.ok()) return user.status();
    id = *user;
    return Status::Ok();
  });
  if (!s.ok()) return Annotate("create user '" + name + "'", s);
  return UserRecord{id, name, admin, now, {}};
}

Result<UserRecord> SqlStore::CreateUserWithToken(const std::string& name, bool admin,
                                                 const std::vector<std::string>& projects,
                                                 const std::string& token_name,
                                                 const std::string& token_hash, Seconds now,
                                                 std::optional<Seconds> token_expires_at) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id = 0;
  Status s = InTransaction([&]() -> Status {
    auto user = InsertUser(name, admin, now);
    if (!user.ok()) return user.status();
    id = *user;
    for (const std::string& project : projects) {
      CORRAL_RETURN_IF_ERROR(InsertMember(project, id));
    }
    return InsertToken(id, token_name, token_hash, now, token_expires_at).status();
  });
  if (!s.ok()) return Annotate("create user '" + name + "' with a token", s);
  return UserRecord{id, name, admin, now, {}};
}

Result<UserRecord> SqlStore::FindUser(const std::string& name) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(Select(kUserColumns, "users WHERE name = ?"), {name});
  if (!rows.ok()) return Annotate("find user '" + name + "'", rows.status());
  if (rows->empty()) return NotFound("user '" + name + "' not found");
  return UserFrom((*rows)[0]);
}

Result<std::vector<UserRecord>> SqlStore::ListUsers() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(Select(kUserColumns, "users ORDER BY id"), {});
  if (!rows.ok()) return Annotate("list users", rows.status());
  std::vector<UserRecord> users;
  for (const SqlRow& row : *rows) users.push_back(UserFrom(row));
  return users;
}

Result<int64_t> SqlStore::InsertToken(int64_t user_id, const std::string& name,
                                      const std::string& hash, Seconds now,
                                      std::optional<Seconds> expires_at) {
  if (!IsHexSha256(hash)) {
    // Deliberately not echoing `hash`: a caller passing the secret by mistake must not log it.
    return InvalidArgument(
        "field 'hash': must be a lowercase hex SHA-256 (64 characters of 0-9a-f); the secret is "
        "never stored");
  }
  auto rows = conn_->Query(
      "INSERT INTO tokens (user_id, name, hash, created_at, expires_at) VALUES (?, ?, ?, ?, ?) "
      "RETURNING id",
      {user_id, name, hash, now.value(), OptValue(expires_at)});
  if (!rows.ok()) {
    switch (rows.status().code()) {
      case StatusCode::kNotFound:
        return NotFound("user " + std::to_string(user_id) + " does not exist");
      case StatusCode::kAlreadyExists:
        return AlreadyExists("a token with this hash already exists");
      default:
        return rows.status();
    }
  }
  return (*rows)[0].Int(0);
}

Result<TokenRecord> SqlStore::CreateToken(int64_t user_id, const std::string& name,
                                          const std::string& hash, Seconds now,
                                          std::optional<Seconds> expires_at) {
  std::lock_guard<std::mutex> lock(mu_);
  int64_t id = 0;
  Status s = InTransaction([&]() -> Status {
    auto token = InsertToken(user_id, name, hash, now, expires_at);
    if (!token.ok()) return token.status();
    id = *token;
    return Status::Ok();
  });
  if (!s.ok())
    return Annotate("create token '" + name + "' for user " + std::to_string(user_id), s);
  return TokenRecord{id, user_id, name, hash, now, std::nullopt, expires_at};
}

Result<TokenOwner> SqlStore::FindTokenOwner(const std::string& hash) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT u.id, u.name, u.admin, u.created_at, u.max_pending_jobs, "
      "u.max_submits_per_minute, t.expires_at FROM tokens t JOIN users u ON u.id = t.user_id "
      "WHERE t.hash = ? AND t.revoked_at IS NULL",
      {hash});
  if (!rows.ok()) return Annotate("look up token", rows.status());
  if (rows->empty()) return NotFound("unknown or revoked token");
  return TokenOwner{UserFrom((*rows)[0]), OptSeconds((*rows)[0], 6)};
}

Result<std::vector<TokenRecord>> SqlStore::ListTokens(int64_t user_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows =
      conn_->Query(Select(kTokenColumns, "tokens WHERE user_id = ? ORDER BY id"), {user_id});
  if (!rows.ok()) {
    return Annotate("list tokens of user " + std::to_string(user_id), rows.status());
  }
  std::vector<TokenRecord> tokens;
  for (const SqlRow& row : *rows) tokens.push_back(TokenFrom(row));
  return tokens;
}

Status SqlStore::RevokeToken(int64_t user_id, int64_t token_id, Seconds now) {
  const std::string op =
      "revoke token " + std::to_string(token_id) + " of user " + std::to_string(user_id);
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(op, InTransaction([&]() -> Status {
                    auto changed = conn_->Execute(
                        "UPDATE tokens SET revoked_at = ? WHERE id = ? AND user_id = ? AND "
                        "revoked_at IS NULL",
                        {now.value(), token_id, user_id});
                    if (!changed.ok()) return changed.status();
                    if (*changed == 1) return {};
                    auto rows = conn_->Query("SELECT 1 FROM tokens WHERE id = ? AND user_id = ?",
                                             {token_id, user_id});
                    if (!rows.ok()) return rows.status();
                    if (rows->empty()) return NotFound("the user has no such token");
                    return {};  // already revoked
                  }));
}

Status SqlStore::SetSubmitLimits(const char* table, const char* what, const std::string& name,
                                 const model::SubmitLimits& limits) {
  const std::string op = std::string("set the submit limits of ") + what + " '" + name + "'";
  for (const auto& [field, value] : {std::pair{"max_pending_jobs", limits.max_pending_jobs},
                                     {"max_submits_per_minute", limits.max_submits_per_minute}}) {
    if (value && (*value < 0 || *value > model::kMaxSubmitLimit)) {
      return Annotate(op, InvalidArgument(std::string("field '") + field + "': must be in 0.." +
                                          std::to_string(model::kMaxSubmitLimit)));
    }
  }
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      op, InTransaction([&]() -> Status {
        auto changed = conn_->Execute(
            std::string("UPDATE ") + table +
                " SET max_pending_jobs = ?, max_submits_per_minute = ? WHERE name = ?",
            {OptValue(limits.max_pending_jobs), OptValue(limits.max_submits_per_minute), name});
        if (!changed.ok()) return changed.status();
        if (*changed != 1) {
          return NotFound(std::string(what) + " '" + name + "' does not exist");
        }
        return Status::Ok();
      }));
}

Status SqlStore::SetUserSubmitLimits(const std::string& name, const model::SubmitLimits& limits) {
  return SetSubmitLimits("users", "user", name, limits);
}

// ---- Projects ----

Result<ProjectRecord> SqlStore::CreateProject(const std::string& name,
                                              const std::string& description, Seconds now) {
  const std::string op = "create project '" + name + "'";
  if (name.empty()) return Annotate(op, InvalidArgument("field 'name': must not be empty"));
  std::lock_guard<std::mutex> lock(mu_);
  Status s = InTransaction([&]() -> Status {
    auto changed =
        conn_->Execute("INSERT INTO projects (name, description, created_at) VALUES (?, ?, ?)",
                       {name, description, now.value()});
    if (changed.ok()) return Status::Ok();
    if (changed.status().code() == StatusCode::kAlreadyExists) {
      return AlreadyExists("project '" + name + "' already exists");
    }
    return changed.status();
  });
  if (!s.ok()) return Annotate(op, s);
  return ProjectRecord{name, description, now, "{}", {}};
}

Result<std::vector<ProjectRecord>> SqlStore::ListProjects() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT name, description, created_at, sharing_json, max_pending_jobs, "
      "max_submits_per_minute FROM projects ORDER BY name",
      {});
  if (!rows.ok()) return Annotate("list projects", rows.status());
  std::vector<ProjectRecord> projects;
  for (const SqlRow& row : *rows) {
    projects.push_back(
        {row.Text(0), row.Text(1), Seconds(row.Int(2)), row.Text(3), SubmitLimitsFrom(row, 4)});
  }
  return projects;
}

Status SqlStore::SetProjectSubmitLimits(const std::string& name,
                                        const model::SubmitLimits& limits) {
  return SetSubmitLimits("projects", "project", name, limits);
}

Status SqlStore::SetProjectSharing(const std::string& name, const std::string& sharing_json) {
  const std::string op = "set the sharing of project '" + name + "'";
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(op, InTransaction([&]() -> Status {
                    auto changed =
                        conn_->Execute("UPDATE projects SET sharing_json = ? WHERE name = ?",
                                       {sharing_json, name});
                    if (!changed.ok()) return changed.status();
                    if (*changed != 1) return NotFound("project '" + name + "' does not exist");
                    return Status::Ok();
                  }));
}

Status SqlStore::InsertMember(const std::string& project, int64_t user_id) {
  auto p = conn_->Query("SELECT 1 FROM projects WHERE name = ?", {project});
  if (!p.ok()) return p.status();
  if (p->empty()) return NotFound("project '" + project + "' does not exist");
  auto u = conn_->Query("SELECT 1 FROM users WHERE id = ?", {user_id});
  if (!u.ok()) return u.status();
  if (u->empty()) return NotFound("user " + std::to_string(user_id) + " does not exist");
  return conn_
      ->Execute(
          "INSERT INTO project_members (project, user_id) VALUES (?, ?) "
          "ON CONFLICT (project, user_id) DO NOTHING",
          {project, user_id})
      .status();
}

Status SqlStore::AddMember(const std::string& project, int64_t user_id) {
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate("add user " + std::to_string(user_id) + " to project '" + project + "'",
                  InTransaction([&] { return InsertMember(project, user_id); }));
}

Result<std::vector<std::string>> SqlStore::ProjectsOf(int64_t user_id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query("SELECT project FROM project_members WHERE user_id = ? ORDER BY project",
                           {user_id});
  if (!rows.ok()) {
    return Annotate("list projects of user " + std::to_string(user_id), rows.status());
  }
  std::vector<std::string> projects;
  for (const SqlRow& row : *rows) projects.push_back(row.Text(0));
  return projects;
}

Result<std::vector<UserRecord>> SqlStore::MembersOf(const std::string& project) {
  const std::string op = "list members of project '" + project + "'";
  std::lock_guard<std::mutex> lock(mu_);
  auto p = conn_->Query("SELECT 1 FROM projects WHERE name = ?", {project});
  if (!p.ok()) return Annotate(op, p.status());
  if (p->empty()) return Annotate(op, NotFound("project '" + project + "' does not exist"));
  auto rows = conn_->Query(
      "SELECT u.id, u.name, u.admin, u.created_at, u.max_pending_jobs, u.max_submits_per_minute "
      "FROM project_members m JOIN users u ON u.id = m.user_id WHERE m.project = ? "
      "ORDER BY u.name",
      {project});
  if (!rows.ok()) return Annotate(op, rows.status());
  std::vector<UserRecord> users;
  for (const SqlRow& row : *rows) users.push_back(UserFrom(row));
  return users;
}

// ---- Jobs ----

Result<JobId> SqlStore::InsertJob(const JobRecord& job) {
  auto ids = InsertJobs({job});
  if (!ids.ok()) return ids.status();
  return ids->front();
}

Result<std::vector<JobId>> SqlStore::InsertJobs(const std::vector<JobRecord>& jobs) {
  const std::string op = jobs.size() == 1 ? "insert job '" + jobs[0].name + "'"
                                          : "insert " + std::to_string(jobs.size()) + " jobs";
  if (jobs.empty()) return std::vector<JobId>{};
  for (size_t i = 0; i < jobs.size(); ++i) {
    Status valid = ValidateNewJob(jobs[i]);
    if (valid.ok() && (jobs[i].array_index || jobs[i].array_max_running)) {
      valid = InvalidArgument("field 'array_index': array elements are inserted by InsertArray");
    }
    if (!valid.ok()) return Annotate(op, InBatch(valid, i, jobs.size()));
  }
  return InsertNewJobs(op, jobs, /*array=*/false);
}

Result<std::vector<JobId>> SqlStore::InsertArray(const std::vector<JobRecord>& elements) {
  const std::string op = "insert an array of " + std::to_string(elements.size()) + " jobs";
  if (elements.empty()) return Annotate(op, InvalidArgument("an array needs at least one job"));
  std::set<int> indices;
  for (size_t i = 0; i < elements.size(); ++i) {
    const JobRecord& e = elements[i];
    Status valid = ValidateNewJob(e);
    if (valid.ok() && (!e.array_index || *e.array_index < 0)) {
      valid = InvalidArgument("field 'array_index': must be set and >= 0");
    } else if (valid.ok() && !indices.insert(*e.array_index).second) {
      valid = InvalidArgument("field 'array_index': " + std::to_string(*e.array_index) +
                              " is repeated");
    } else if (valid.ok() && e.array_max_running != elements[0].array_max_running) {
      valid = InvalidArgument("field 'array_max_running': differs from the first job's");
    }
    if (!valid.ok()) return Annotate(op, InBatch(valid, i, elements.size()));
  }
  return InsertNewJobs(op, elements, /*array=*/true);
}

namespace {

// A new job and its submission event in one statement (PostgreSQL's data-modifying WITH):
// NewJobParams, then SubmitEventParams. Answers the job's id.
const std::string& InsertJobWithEvent() {
  static const std::string sql =
      std::string("WITH job AS (") + kInsertJob +
      ") INSERT INTO job_events (job_id, time, from_state, to_state, reason) "
      "SELECT id, CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT) FROM job "
      "RETURNING job_id";
  return sql;
}

// The submission event's time, from-state, to-state and reason, as InsertJobWithEvent takes them.
SqlParams SubmitEventParams(const JobRecord& job) {
  return {job.submit_time.value(), std::string(), StateValue(model::JobState::kPending),
          SubmitReason(job)};
}

}  // namespace

Result<std::vector<JobId>> SqlStore::InsertJobsInOneTrip(const std::string& op,
                                                         const std::vector<JobRecord>& jobs) {
  std::vector<SqlRun> runs;
  runs.reserve(jobs.size());
  for (const JobRecord& job : jobs) {
    SqlParams params = NewJobParams(job, std::monostate{});
    SqlParams event = SubmitEventParams(job);
    params.insert(params.end(), event.begin(), event.end());
    runs.push_back({InsertJobWithEvent(), std::move(params)});
  }
  std::lock_guard<std::mutex> lock(mu_);
  CommitOutcome inserted = WriteInOneTrip(std::move(runs));
  if (!inserted.rows.ok()) {
    Status s = inserted.rows.status();
    if (s.code() == StatusCode::kNotFound) s = ExplainMissingJobOwner(jobs);
    return Annotate(op, s);
  }
  std::vector<JobId> ids;
  ids.reserve(jobs.size());
  for (const SqlRows& rows : *inserted.rows) {
    if (rows.size() != 1)
      return Annotate(op, {StatusCode::kInternal, "INSERT ... RETURNING gave no id"});
    ids.emplace_back(rows[0].Int(0));
  }
  return ids;
}

Result<std::vector<JobId>> SqlStore::InsertNewJobs(const std::string& op,
                                                   const std::vector<JobRecord>& jobs, bool array) {
  if (!array && conn_->dialect() == Dialect::kPostgres) return InsertJobsInOneTrip(op, jobs);
  std::vector<JobId> ids;
  ids.reserve(jobs.size());
  // Inserts jobs[from, to) as elements of `array_id` (or none), appending their ids.
  auto insert = [&](size_t from, size_t to, const SqlValue& array_id) -> Status {
    std::vector<SqlParams> params;
    params.reserve(to - from);
    for (size_t i = from; i < to; ++i) params.push_back(NewJobParams(jobs[i], array_id));
    auto inserted = conn_->QueryEach(kInsertJob, params);
    if (!inserted.ok()) return inserted.status();
    for (const SqlRows& rows : *inserted) {
      if (rows.size() != 1) return {StatusCode::kInternal, "INSERT ... RETURNING gave no id"};
      ids.emplace_back(rows[0].Int(0));
    }
    return {};
  };
  std::lock_guard<std::mutex> lock(mu_);
  Status s = InTransaction([&]() -> Status {
    ids.clear();
    if (!array) {
      CORRAL_RETURN_IF_ERROR(insert(0, jobs.size(), std::monostate{}));
    } else {
      // The array's id is its first element's, known once that one is in.
      CORRAL_RETURN_IF_ERROR(insert(0, 1, std::monostate{}));
      const int64_t array_id = ids[0].value();
      auto set = conn_->Execute("UPDATE jobs SET array_id = ? WHERE id = ?", {array_id, array_id});
      if (!set.ok()) return set.status();
      CORRAL_RETURN_IF_ERROR(insert(1, jobs.size(), array_id));
    }
    std::vector<SqlParams> event_params;
    event_params.reserve(jobs.size());
    for (size_t i = 0; i < jobs.size(); ++i) {
      event_params.push_back({ids[i].value(), jobs[i].submit_time.value(), std::string(),
                              StateValue(model::JobState::kPending), SubmitReason(jobs[i])});
    }
    return conn_->QueryEach(kInsertEvent, event_params).status();
  });
  if (!s.ok()) {
    if (s.code() == StatusCode::kNotFound) s = ExplainMissingJobOwner(jobs);
    return Annotate(op, s);
  }
  return ids;
}

Result<JobRecord> SqlStore::GetJob(JobId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(Select(kJobColumns, "jobs WHERE id = ?"), {id.value()});
  if (!rows.ok()) return Annotate("get " + JobName(id), rows.status());
  if (rows->empty()) return NotFound(JobName(id) + " not found");
  return JobFrom((*rows)[0]);
}

namespace {

// The column a listing sorts on (each has an index ending in id: migration 13).
const char* SortColumn(JobSortKey sort) {
  switch (sort) {
    case JobSortKey::kId:
      return "id";
    case JobSortKey::kSubmitTime:
      return "submit_time";
    case JobSortKey::kStartTime:
      return "start_time";
    case JobSortKey::kEndTime:
      return "end_time";
    case JobSortKey::kGpus:
      return "total_gpu_milli";
  }
  return "id";
}

// Whether jobs may lack the key (not started, not ended): they sort after the others.
bool MayBeUnset(JobSortKey sort) {
  return sort == JobSortKey::kStartTime || sort == JobSortKey::kEndTime;
}

// The smallest string greater than every string that starts with `prefix` (byte-wise), or none
// when there is none (the prefix is only 0xff bytes): the range [prefix, bound) is the prefix's.
std::optional<std::string> PrefixBound(std::string prefix) {
  while (!prefix.empty() && static_cast<unsigned char>(prefix.back()) == 0xff) prefix.pop_back();
  if (prefix.empty()) return std::nullopt;
  prefix.back() = static_cast<char>(static_cast<unsigned char>(prefix.back()) + 1);
  return prefix;
}

// The WHERE conditions of a listing's filters (all but its position), with their parameters.
struct JobConditions {
  std::vector<std::string> conditions;
  SqlParams params;
};

JobConditions FilterConditions(const JobFilter& filter, Dialect dialect) {
  JobConditions out;
  auto& params = out.params;
  if (!filter.projects.empty()) {
    out.conditions.push_back("project IN (" + InList(filter.projects, params) + ")");
  }
  if (!filter.states.empty()) {
    std::vector<std::string> names;
    for (model::JobState state : filter.states) names.emplace_back(model::ToString(state));
    out.conditions.push_back("state IN (" + InList(names, params) + ")");
  }
  if (!filter.users.empty()) {
    out.conditions.push_back("user_name IN (" + InList(filter.users, params) + ")");
  }
  if (filter.array) {
    out.conditions.push_back("array_id = ?");
    params.emplace_back(filter.array->value());
  }
  if (!filter.name_prefix.empty()) {
    // A range of names, which the index jobs_by_name serves (LIKE would not, on SQLite, and
    // needs its wildcards escaped); byte-wise on PostgreSQL too, as that index is.
    const std::string name = dialect == Dialect::kPostgres ? "name COLLATE \"C\"" : "name";
    out.conditions.push_back(name + " >= ?");
    params.emplace_back(filter.name_prefix);
    if (auto bound = PrefixBound(filter.name_prefix)) {
      out.conditions.push_back(name + " < ?");
      params.emplace_back(*std::move(bound));
    }
  }
  if (filter.submitted_since) {
    out.conditions.push_back("submit_time >= ?");
    params.emplace_back(filter.submitted_since->value());
  }
  if (filter.live_since) {
    out.conditions.push_back("(end_time IS NULL OR end_time >= ?)");
    params.emplace_back(filter.live_since->value());
  }
  return out;
}

Status CheckPosition(const JobFilter& filter) {
  if (!filter.after) return {};
  const bool keyed = filter.after->key.has_value();
  if (filter.sort == JobSortKey::kId && keyed) {
    return InvalidArgument("field 'after': a listing by id has no key");
  }
  if (filter.sort != JobSortKey::kId && !MayBeUnset(filter.sort) && !keyed) {
    return InvalidArgument(std::string("field 'after': a listing by ") + SortColumn(filter.sort) +
                           " needs its key");
  }
  return {};
}

// One ordered run of a listing, as SQL: the rows with the sort key set (or, `unset_run`, those
// without it, ordered by id alone), after the filter's position.
std::string RunSql(const char* columns, const JobFilter& filter, const JobConditions& base,
                   bool unset_run, int64_t limit, SqlParams& params) {
  params = base.params;
  std::vector<std::string> conditions = base.conditions;
  const bool asc = filter.direction == SortDirection::kAscending;
  const std::string dir = asc ? " ASC" : " DESC";
  const std::string cmp = asc ? " > ?" : " < ?";
  const std::string column = SortColumn(filter.sort);
  const bool by_id_alone = filter.sort == JobSortKey::kId || unset_run;
  if (MayBeUnset(filter.sort)) {
    conditions.push_back(column + (unset_run ? " IS NULL" : " IS NOT NULL"));
  }
  // Every job without the key comes after every job with one: a position among the latter
  // bounds nothing of the run of the former.
  const bool position_in_run = filter.after && (!unset_run || !filter.after->key.has_value());
  if (const auto& after = filter.after; position_in_run) {
    if (by_id_alone) {
      conditions.push_back("id" + cmp);
      params.emplace_back(after->id.value());
    } else {
      // (key, id) after (k, i), as a row value: both databases read it as a range of the
      // (key, id) index, so a page deep in a long run of equal keys (most jobs ask 1 GPU)
      // starts where the last one ended instead of reading the ties before it again.
      conditions.push_back("(" + column + ", id)" + cmp.substr(0, 2) + " (?, ?)");
      params.emplace_back(*after->key);
      params.emplace_back(after->id.value());
    }
  }
  std::string sql = Select(columns, "jobs");
  for (size_t i = 0; i < conditions.size(); ++i) {
    sql += (i == 0 ? " WHERE " : " AND ") + conditions[i];
  }
  sql += " ORDER BY " + (by_id_alone ? std::string() : column + dir + ", ") + "id" + dir;
  if (limit > 0) {
    sql += " LIMIT ?";
    params.emplace_back(limit);
  }
  return sql;
}

}  // namespace

JobListPosition PositionOf(const JobSummary& job, JobSortKey sort) {
  switch (sort) {
    case JobSortKey::kId:
      return {std::nullopt, job.id};
    case JobSortKey::kSubmitTime:
      return {job.submit_time.value(), job.id};
    case JobSortKey::kStartTime:
      return {job.start_time ? std::optional(job.start_time->value()) : std::nullopt, job.id};
    case JobSortKey::kEndTime:
      return {job.end_time ? std::optional(job.end_time->value()) : std::nullopt, job.id};
    case JobSortKey::kGpus:
      return {job.total_gpu_milli.value(), job.id};
  }
  return {std::nullopt, job.id};
}

JobSummary SummaryOf(const JobRecord& job) {
  return {.id = job.id,
          .name = job.name,
          .user = job.user,
          .project = job.project,
          .state = job.state,
          .priority = job.priority,
          .total_gpu_milli = job.total_gpu_milli,
          .submit_time = job.submit_time,
          .start_time = job.start_time,
          .end_time = job.end_time,
          .reason = job.reason,
          .array_id = job.array_id,
          .array_index = job.array_index,
          .array_max_running = job.array_max_running};
}

// A listing in at most two ordered runs: the jobs with the sort key set, then (for a key that
// may be unset) those without it, each read through an index in order; the second run only when
// the first did not fill the page. `columns` are those `from` reads.
template <typename R>
Result<std::vector<R>> SqlStore::ListJobRows(const JobFilter& filter, const char* columns,
                                             Result<R> (*from)(const SqlRow&)) {
  CORRAL_RETURN_IF_ERROR(CheckPosition(filter));
  const JobConditions base = FilterConditions(filter, conn_->dialect());
  const int64_t limit = filter.limit > 0 ? filter.limit : 0;
  // After a job without the key, only such jobs follow.
  const bool in_unset_run =
      MayBeUnset(filter.sort) && filter.after && !filter.after->key.has_value();
  std::lock_guard<std::mutex> lock(mu_);
  SqlRows rows;
  if (!in_unset_run) {
    SqlParams params;
    const std::string sql = RunSql(columns, filter, base, false, limit, params);
    auto run = conn_->Query(sql, params);
    if (!run.ok()) return Annotate("list jobs", run.status());
    rows = std::move(run).value();
  }
  const bool page_full = limit > 0 && static_cast<int64_t>(rows.size()) >= limit;
  if (MayBeUnset(filter.sort) && !page_full) {
    SqlParams params;
    const int64_t rest = limit > 0 ? limit - static_cast<int64_t>(rows.size()) : 0;
    const std::string sql = RunSql(columns, filter, base, true, rest, params);
    auto run = conn_->Query(sql, params);
    if (!run.ok()) return Annotate("list jobs", run.status());
    for (SqlRow& row : *run) rows.push_back(std::move(row));
  }
  auto out = RowsFrom(rows, from);
  if (!out.ok()) return Annotate("list jobs", out.status());
  return out;
}

Result<std::vector<JobRecord>> SqlStore::ListJobs(const JobFilter& filter) {
  return ListJobRows(filter, kJobColumns, &JobFrom);
}

Result<std::vector<JobSummary>> SqlStore::ListJobSummaries(const JobFilter& filter) {
  return ListJobRows(filter, kJobSummaryColumns, &JobSummaryFrom);
}

Status SqlStore::TransitionJob(JobId id, model::JobState from, model::JobState to,
                               const std::string& reason, Seconds now) {
  return TransitionJobs({id}, from, to, reason, now);
}

namespace {

std::string TransitionName(const std::vector<JobId>& ids, model::JobState from,
                           model::JobState to) {
  return "move " + (ids.size() == 1 ? JobName(ids[0]) : std::to_string(ids.size()) + " jobs") +
         " from " + std::string(model::ToString(from)) + " to " + std::string(model::ToString(to));
}

std::string CancelName(JobId id) { return "request cancellation of " + JobName(id); }

Status CheckTransition(model::JobState from, model::JobState to) {
  if (from == to) return InvalidArgument("fields 'from' and 'to': must differ");
  return {};
}

// A transition's UPDATE, a compare-and-set: the WHERE clause carries the expected state, so of
// two racing transitions from the same state exactly one changes a row. What else it sets
// depends on `to` only, so transitions to states alike share the statement (and a pipeline).
std::string TransitionSql(model::JobState to) {
  std::string sql = "UPDATE jobs SET state = ?, reason = ?";
  if (to == model::JobState::kRunning) {
    sql += ", start_time = ?";
  } else if (model::IsFinal(to)) {
    sql += ", end_time = ?";
  } else if (to == model::JobState::kPending) {
    sql += ", restarts = restarts + 1, start_time = NULL, end_time = NULL";
  }
  return sql + " WHERE id = ? AND state = ? RETURNING id";
}

SqlParams TransitionParams(JobId id, model::JobState from, model::JobState to,
                           const std::string& reason, Seconds now) {
  SqlParams params = {StateValue(to), reason};
  if (to == model::JobState::kRunning || model::IsFinal(to)) params.emplace_back(now.value());
  params.emplace_back(id.value());
  params.emplace_back(StateValue(from));
  return params;
}

// A cancel request's UPDATE: a compare-and-set on the job being started; returns its state.
constexpr char kRequestCancel[] =
    "UPDATE jobs SET cancel_reason = ? WHERE id = ? AND state IN (?, ?) RETURNING state";

SqlParams CancelParams(const CancelRequest& cancel) {
  return {cancel.reason, cancel.id.value(), StateValue(model::JobState::kStarting),
          StateValue(model::JobState::kRunning)};
}

}  // namespace

Status SqlStore::TransitionJobs(const std::vector<JobId>& ids, model::JobState from,
                                model::JobState to, const std::string& reason, Seconds now) {
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(TransitionName(ids, from, to),
                  InTransaction([&] { return TransitionRows(ids, from, to, reason, now); }));
}

Status SqlStore::TransitionRows(const std::vector<JobId>& ids, model::JobState from,
                                model::JobState to, const std::string& reason, Seconds now) {
  CORRAL_RETURN_IF_ERROR(CheckTransition(from, to));
  if (ids.empty()) return {};
  std::vector<SqlParams> updates, events;
  updates.reserve(ids.size());
  events.reserve(ids.size());
  for (JobId id : ids) {
    updates.push_back(TransitionParams(id, from, to, reason, now));
    events.push_back({id.value(), now.value(), StateValue(from), StateValue(to), reason});
  }
  auto changed = conn_->QueryEach(TransitionSql(to), updates);
  if (!changed.ok()) return changed.status();
  for (size_t i = 0; i < ids.size(); ++i) {
    if ((*changed)[i].size() != 1) return ExplainWrongState(ids[i], from);
  }
  return conn_->QueryEach(kInsertEvent, events).status();
}

Status SqlStore::RequestCancel(JobId id, const std::string& reason, Seconds now) {
  WriteBatch batch;
  batch.cancel_requests.push_back({id, reason});
  return ApplyBatches({{&batch, now}}, CancelName(id));
}

Status SqlStore::AddJobEvent(JobId id, const std::string& reason, Seconds now) {
  const std::string op = "record an event of " + JobName(id);
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(op, InTransaction([&]() -> Status {
                    auto state = JobStateLocked(id);
                    if (!state.ok()) return state.status();
                    return conn_
                        ->Execute(kInsertEvent, {id.value(), now.value(), StateValue(*state),
                                                 StateValue(*state), reason})
                        .status();
                  }));
}

Result<std::vector<JobEvent>> SqlStore::JobEvents(JobId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT job_id, time, from_state, to_state, reason FROM job_events WHERE job_id = ? "
      "ORDER BY id",
      {id.value()});
  if (!rows.ok()) return Annotate("list events of " + JobName(id), rows.status());
  // Every job has its submission event, so no events means no job.
  if (rows->empty()) return NotFound(JobName(id) + " not found");
  std::vector<JobEvent> events;
  for (const SqlRow& row : *rows) {
    JobEvent event{JobId(row.Int(0)), Seconds(row.Int(1)), std::nullopt, model::JobState::kPending,
                   row.Text(4)};
    if (!row.Text(2).empty()) {  // "" is the submission's
      auto from = StateColumn(row, 2, JobName(id) + " event", &model::ParseJobState);
      if (!from.ok()) return Annotate("list events of " + JobName(id), from.status());
      event.from_state = *from;
    }
    auto to = StateColumn(row, 3, JobName(id) + " event", &model::ParseJobState);
    if (!to.ok()) return Annotate("list events of " + JobName(id), to.status());
    event.to_state = *to;
    events.push_back(std::move(event));
  }
  return events;
}

// ---- Tasks ----

namespace {

// A gang checked, with what its rows need (AssignGangs).
// InvalidArgument (annotated with the job) names the gang's first bad field.
Result<CheckedGang> CheckGang(const GangAssignment& gang) {
  CheckedGang out;
  out.op = "assign " + JobName(gang.job);
  auto bad = [&](const std::string& field, const std::string& what) {
    return InvalidArgument(out.op + ": field '" + field + "': " + what);
  };
  if (gang.tasks.empty()) return bad("tasks", "must not be empty");
  std::set<int> indices;
  for (size_t i = 0; i < gang.tasks.size(); ++i) {
    const TaskAssignment& t = gang.tasks[i];
    const std::string field = "tasks[" + std::to_string(i) + "]";
    // "field 'tasks[1].node': must not be empty"
    if (t.task_index < 0 || !indices.insert(t.task_index).second) {
      return bad(field + ".task_index", "negative or repeated");
    }
    if (t.node.empty()) return bad(field + ".node", "must not be empty");
    if (Status valid = model::Validate(t.allocation, field + ".allocation."); !valid.ok()) {
      return valid.WithPrefix(out.op + ": ");  // "...gpus[0].milli': ..."
    }
    if (std::find(out.nodes.begin(), out.nodes.end(), t.node) == out.nodes.end()) {
      out.nodes.push_back(t.node);
    }
    out.allocations.push_back(AllocationText(t.allocation));
  }
  out.reason = "assigned to ";
  for (size_t i = 0; i < out.nodes.size(); ++i) out.reason += (i ? ", " : "") + out.nodes[i];
  return out;
}

}  // namespace

Result<std::vector<TaskRecord>> SqlStore::AssignGang(JobId id,
                                                     const std::vector<TaskAssignment>& tasks,
                                                     Seconds now) {
  auto gangs = AssignGangs({GangAssignment{id, tasks}}, now);
  if (!gangs.ok()) return gangs.status();
  return std::move(gangs->front());
}

namespace {

// The task records of `gang` as assigned: allocation ids from `first` in task order.
std::vector<TaskRecord> GangTasks(const GangAssignment& gang, int64_t first, int64_t generation) {
  std::vector<TaskRecord> tasks;
  tasks.reserve(gang.tasks.size());
  for (size_t i = 0; i < gang.tasks.size(); ++i) {
    TaskRecord t;
    t.job = gang.job;
    t.task_index = gang.tasks[i].task_index;
    t.allocation_id = first + static_cast<int64_t>(i);
    t.generation = generation;
    t.node = gang.tasks[i].node;
    t.allocation = gang.tasks[i].allocation;
    t.state = model::TaskState::kAssigned;
    tasks.push_back(std::move(t));
  }
  return tasks;
}

// A PostgreSQL array literal of `items` as text: {"a","b \" c"}.
std::string TextArray(const std::vector<std::string>& items) {
  std::string out = "{";
  for (size_t i = 0; i < items.size(); ++i) {
    out += i ? ",\"" : "\"";
    for (char c : items[i]) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out + "}";
}

// A gang's assignment in one statement (PostgreSQL's data-modifying WITH; migration 15): the
// job moved from pending to starting, the gang's allocation ids taken from the counter, its
// task rows (generation: the job's restarts + 1), and the event. Raises (corral_expect_one)
// unless the job was pending and the counter there, so that nothing of the gang is written
// then. Parameters: GangParams.
// Answers the generation and the last allocation id taken.
constexpr char kAssignGang[] =
    "WITH job AS (UPDATE jobs SET state = ?, reason = ? WHERE id = ? AND state = ? "
    "RETURNING restarts), "
    "ids AS (UPDATE counters SET value = value + CAST(? AS BIGINT) WHERE name = 'allocation_id' "
    "AND EXISTS (SELECT 1 FROM job) RETURNING value), "
    "task AS (INSERT INTO tasks (job_id, task_index, allocation_id, generation, node, "
    "allocation, state) SELECT CAST(? AS BIGINT), t.task_index, ids.value - CAST(? AS BIGINT) + "
    "t.ord, job.restarts + 1, t.node, t.allocation, CAST(? AS TEXT) FROM job, ids, "
    "unnest(CAST(? AS INTEGER[]), CAST(? AS TEXT[]), CAST(? AS TEXT[])) WITH ORDINALITY "
    "AS t(task_index, node, allocation, ord)), "
    "event AS (INSERT INTO job_events (job_id, time, from_state, to_state, reason) "
    "SELECT CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), "
    "CAST(? AS TEXT) FROM job) "
    "SELECT corral_expect_one((SELECT count(*) FROM job) * (SELECT count(*) FROM ids)), "
    "(SELECT restarts + 1 FROM job), (SELECT value FROM ids)";

SqlParams GangParams(const GangAssignment& gang, const CheckedGang& c, Seconds now) {
  const auto n = static_cast<int64_t>(gang.tasks.size());
  std::string indices = "{";
  std::vector<std::string> nodes;
  for (size_t i = 0; i < gang.tasks.size(); ++i) {
    indices += (i ? "," : "") + std::to_string(gang.tasks[i].task_index);
    nodes.push_back(gang.tasks[i].node);
  }
  const SqlValue pending = StateValue(model::JobState::kPending);
  const SqlValue starting = StateValue(model::JobState::kStarting);
  return {starting,
          c.reason,
          gang.job.value(),
          pending,
          n,
          gang.job.value(),
          n,
          StateValue(model::TaskState::kAssigned),
          indices + "}",
          TextArray(nodes),
          TextArray(c.allocations),
          gang.job.value(),
          now.value(),
          pending,
          starting,
          c.reason};
}

}  // namespace

Status SqlStore::ExplainUnknownNode(Status s, const CheckedGang& gang) {
  // A foreign-key failure on a task row of a pending job: one of its nodes is unknown.
  for (const std::string& node : gang.nodes) {
    auto rows = conn_->Query("SELECT 1 FROM nodes WHERE name = ?", {node});
    if (rows.ok() && rows->empty()) return NotFound("node '" + node + "' is not registered");
  }
  return s;
}

Result<std::vector<std::vector<TaskRecord>>> SqlStore::AssignGangs(
    const std::vector<GangAssignment>& gangs, Seconds now) {
  std::vector<CheckedGang> checked;
  checked.reserve(gangs.size());
  for (const GangAssignment& gang : gangs) {
    auto c = CheckGang(gang);
    if (!c.ok()) return c.status();
    checked.push_back(std::move(c).value());
  }
  if (conn_->dialect() == Dialect::kPostgres) return AssignGangsInOneTrip(gangs, checked, now);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<std::vector<TaskRecord>> written;
  size_t failing = 0;            // the gang being written when the transaction failed
  bool job_was_pending = false;  // ... and whether its job's move to starting was done
  Status s = InTransaction([&]() -> Status {
    written.clear();
    for (failing = 0; failing < gangs.size(); ++failing) {
      const GangAssignment& gang = gangs[failing];
      const CheckedGang& c = checked[failing];
      job_was_pending = false;
      auto job = conn_->Query(
          "UPDATE jobs SET state = ?, reason = ? WHERE id = ? AND state = ? RETURNING restarts",
          {StateValue(model::JobState::kStarting), c.reason, gang.job.value(),
           StateValue(model::JobState::kPending)});
      if (!job.ok()) return job.status();
      if (job->size() != 1) return ExplainWrongState(gang.job, model::JobState::kPending);
      job_was_pending = true;
      auto tasks = InsertGangRowsLocked(gang, c, (*job)[0].Int(0) + 1);
      if (!tasks.ok()) return tasks.status();
      CORRAL_RETURN_IF_ERROR(
          conn_
              ->Execute(kInsertEvent,
                        {gang.job.value(), now.value(), StateValue(model::JobState::kPending),
                         StateValue(model::JobState::kStarting), c.reason})
              .status());
      written.push_back(std::move(tasks).value());
    }
    return Status::Ok();
  });
  if (s.ok()) return written;
  const std::string op = failing < checked.size() ? checked[failing].op : "assign gangs";
  if (s.code() == StatusCode::kNotFound && job_was_pending && failing < checked.size()) {
    s = ExplainUnknownNode(s, checked[failing]);
  }
  return Annotate(op, s);
}

Result<std::vector<TaskRecord>> SqlStore::InsertGangRowsLocked(const GangAssignment& gang,
                                                               const CheckedGang& c,
                                                               int64_t generation) {
  // The gang's ids in one step: the counter's row stays locked until the commit, so servers
  // sharing the store never hand out one id twice, and a rollback returns them unused.
  const auto n = static_cast<int64_t>(gang.tasks.size());
  auto last = conn_->Query("UPDATE counters SET value = value + ? WHERE name = ? RETURNING value",
                           {n, std::string("allocation_id")});
  if (!last.ok()) return last.status();
  if (last->size() != 1) {
    return Status(StatusCode::kInternal, "the allocation_id counter is missing");
  }
  std::vector<TaskRecord> tasks = GangTasks(gang, (*last)[0].Int(0) - n + 1, generation);
  std::vector<SqlParams> rows;
  for (size_t i = 0; i < tasks.size(); ++i) {
    const TaskRecord& t = tasks[i];
    rows.push_back({gang.job.value(), int64_t{t.task_index}, t.allocation_id, t.generation, t.node,
                    c.allocations[i], StateValue(t.state)});
  }
  auto inserted = conn_->QueryEach(kInsertTask, rows);
  if (!inserted.ok()) return inserted.status();
  return tasks;
}

Result<std::vector<TaskRecord>> SqlStore::ResizeGang(JobId id,
                                                     const std::vector<TaskAssignment>& tasks,
                                                     const std::string& reason, Seconds now) {
  const GangAssignment gang{id, tasks};
  auto c = CheckGang(gang);
  if (!c.ok()) return c.status();
  const std::string op = "resize " + JobName(id);
  std::lock_guard<std::mutex> lock(mu_);
  std::vector<TaskRecord> written;
  Status s = InTransaction([&]() -> Status {
    // The state stays: only a started job's run is renumbered.
    auto job = conn_->Query(
        "UPDATE jobs SET restarts = restarts + 1 WHERE id = ? AND state IN (?, ?) "
        "RETURNING restarts, state",
        {id.value(), StateValue(model::JobState::kStarting),
         StateValue(model::JobState::kRunning)});
    if (!job.ok()) return job.status();
    if (job->size() != 1) return ExplainWrongState(id, model::JobState::kRunning);
    auto rows = InsertGangRowsLocked(gang, *c, (*job)[0].Int(0) + 1);
    if (!rows.ok()) return rows.status();
    const SqlValue state = (*job)[0].Text(1);
    CORRAL_RETURN_IF_ERROR(
        conn_->Execute(kInsertEvent, {id.value(), now.value(), state, state, reason}).status());
    written = std::move(rows).value();
    return Status::Ok();
  });
  if (s.ok()) return written;
  if (s.code() == StatusCode::kNotFound) s = ExplainUnknownNode(s, *c);
  return Annotate(op, s);
}

Result<std::vector<std::vector<TaskRecord>>> SqlStore::AssignGangsInOneTrip(
    const std::vector<GangAssignment>& gangs, const std::vector<CheckedGang>& checked,
    Seconds now) {
  std::vector<SqlRun> runs;
  runs.reserve(gangs.size());
  for (size_t i = 0; i < gangs.size(); ++i) {
    runs.push_back({kAssignGang, GangParams(gangs[i], checked[i], now)});
  }
  std::lock_guard<std::mutex> lock(mu_);
  const CommitOutcome done = WriteInOneTrip(std::move(runs));
  if (!done.rows.ok()) {
    const size_t failing = done.failed_run;
    if (failing >= gangs.size()) return Annotate("assign gangs", done.rows.status());
    Status s = done.rows.status();
    if (s.code() == StatusCode::kFailedPrecondition) {  // corral_expect_one
      // The job was not pending, or (a store damaged by hand) the counter row is missing.
      auto state = JobStateLocked(gangs[failing].job);
      s = state.ok() && *state == model::JobState::kPending
              ? Status(StatusCode::kInternal, "the allocation_id counter is missing")
              : ExplainWrongState(gangs[failing].job, model::JobState::kPending);
    } else if (s.code() == StatusCode::kNotFound) {  // a task row's foreign key
      s = ExplainUnknownNode(s, checked[failing]);
    }
    return Annotate(checked[failing].op, s);
  }
  std::vector<std::vector<TaskRecord>> written;
  written.reserve(gangs.size());
  for (size_t i = 0; i < gangs.size(); ++i) {
    const SqlRows& rows = (*done.rows)[i];
    if (rows.size() != 1) {
      return Annotate(checked[i].op,
                      Status(StatusCode::kInternal, "the gang's insert gave no row"));
    }
    const auto n = static_cast<int64_t>(gangs[i].tasks.size());
    written.push_back(GangTasks(gangs[i], rows[0].Int(2) - n + 1, rows[0].Int(1)));
  }
  return written;
}

namespace {

std::string UpdateTaskName(const TaskRecord& task) {
  return "update task allocation " + std::to_string(task.allocation_id) + " generation " +
         std::to_string(task.generation);
}

}  // namespace

Status SqlStore::UpdateTask(const TaskRecord& task) {
  std::lock_guard<std::mutex> lock(mu_);
  return InTransaction([&] { return UpdateTaskRows({&task}); });
}

namespace {

// A task's update (UpdateTaskRows), with TaskUpdateParams.
constexpr char kUpdateTask[] =
    "UPDATE tasks SET state = ?, exit_code = ?, signal = ?, start_time = ?, end_time = ?, "
    "end_cause = ? WHERE allocation_id = ? AND generation = ? RETURNING allocation_id";

SqlParams TaskUpdateParams(const TaskRecord& task) {
  SqlValue end_cause;
  if (task.end_cause) end_cause = StateValue(*task.end_cause);
  return {StateValue(task.state),    OptValue(task.exit_code), OptValue(task.signal),
          OptValue(task.start_time), OptValue(task.end_time),  std::move(end_cause),
          task.allocation_id,        task.generation};
}

}  // namespace

Status SqlStore::UpdateTaskRows(const std::vector<const TaskRecord*>& tasks) {
  if (tasks.empty()) return {};
  std::vector<SqlParams> params;
  params.reserve(tasks.size());
  for (const TaskRecord* task : tasks) params.push_back(TaskUpdateParams(*task));
  // One statement run per task, pipelined (PostgreSQL: one round trip per chunk, not per task).
  auto changed = conn_->QueryEach(kUpdateTask, params);
  if (!changed.ok()) {
    return Annotate(tasks.size() == 1 ? UpdateTaskName(*tasks[0])
                                      : "update " + std::to_string(tasks.size()) + " tasks",
                    changed.status());
  }
  for (size_t i = 0; i < tasks.size(); ++i) {
    if ((*changed)[i].size() != 1)
      return Annotate(UpdateTaskName(*tasks[i]), NotFound("no such task"));
  }
  return {};
}

Status SqlStore::Apply(const WriteBatch& batch, Seconds now) {
  return ApplyBatches({{&batch, now}}, "apply a write batch");
}

Status SqlStore::ApplyGroup(const std::vector<TimedBatch>& group) {
  std::vector<BatchRef> refs;
  refs.reserve(group.size());
  for (const TimedBatch& b : group) refs.push_back({&b.batch, b.now});
  return ApplyBatches(refs, "apply a group of " + std::to_string(group.size()) + " write batches");
}

Status SqlStore::ApplyBatches(const std::vector<BatchRef>& group, const std::string& op) {
  if (std::all_of(group.begin(), group.end(), [](const BatchRef& b) { return b.batch->empty(); }))
    return {};
  auto collected = CollectGroupWrites(group);
  if (!collected.ok()) return collected.status();
  const GroupWrites& writes = *collected;
  if (conn_->dialect() == Dialect::kPostgres) return ApplyGroupInOneTrip(writes, op);
  std::lock_guard<std::mutex> lock(mu_);
  Status refused;  // a write's error, named by the write
  Status s = InTransaction([&] {
    refused = UpdateTaskRows(writes.tasks);
    if (refused.ok()) refused = JobWriteRows(writes.jobs);
    return refused;
  });
  // Otherwise the transaction itself failed (begin, fencing, commit): name the operation.
  return refused.ok() ? Annotate(op, s) : s;
}

Result<SqlStore::GroupWrites> SqlStore::CollectGroupWrites(const std::vector<BatchRef>& group) {
  GroupWrites writes;
  for (const BatchRef& b : group) {
    for (const CancelRequest& c : b.batch->cancel_requests) writes.jobs.push_back({&c, {}, b.now});
    for (const TaskRecord& t : b.batch->tasks) writes.tasks.push_back(&t);
    for (const JobTransition& t : b.batch->transitions) {
      CORRAL_RETURN_IF_ERROR(
          Annotate(TransitionName({t.id}, t.from, t.to), CheckTransition(t.from, t.to)));
      writes.jobs.push_back({{}, &t, b.now});
    }
  }
  return writes;
}

namespace {

// PostgreSQL's one-round-trip form of a compare-and-set (migration 15): `update` (an UPDATE
// ... RETURNING) raises through corral_expect_one unless it changed exactly one row, and with
// `event_values` (a SELECT list over the changed row) records the job's event in the same
// statement.
std::string CheckedUpdate(const std::string& update, const std::string& event_values) {
  std::string sql = "WITH changed AS (" + update + ")";
  if (!event_values.empty()) {
    sql +=
        ", event AS (INSERT INTO job_events (job_id, time, from_state, to_state, reason) SELECT " +
        event_values + " FROM changed)";
  }
  return sql + " SELECT corral_expect_one(count(*)) FROM changed";
}

// A transition's event: its job, time, from-state, to-state and reason as parameters.
constexpr char kTransitionEventValues[] =
    "CAST(? AS BIGINT), CAST(? AS BIGINT), CAST(? AS TEXT), CAST(? AS TEXT), CAST(? AS TEXT)";
// A cancel request's event, in the job's state (the changed row's): its job, time and reason.
constexpr char kCancelEventValues[] =
    "CAST(? AS BIGINT), CAST(? AS BIGINT), state, state, CAST(? AS TEXT)";

std::string CancelEventReason(const CancelRequest& cancel) {
  return "cancelling: " + cancel.reason;
}

}  // namespace

Status SqlStore::ApplyGroupInOneTrip(const GroupWrites& writes, const std::string& op) {
  // In GroupWrites' order: the tasks, then the job writes, each seeing those before it.
  std::vector<SqlRun> runs;
  runs.reserve(writes.tasks.size() + writes.jobs.size());
  static const std::string task_sql = CheckedUpdate(kUpdateTask, "");
  for (const TaskRecord* task : writes.tasks) runs.push_back({task_sql, TaskUpdateParams(*task)});
  static const std::string cancel_sql = CheckedUpdate(kRequestCancel, kCancelEventValues);
  for (const JobWrite& w : writes.jobs) {
    if (w.cancel) {
      SqlParams params = CancelParams(*w.cancel);
      params.insert(params.end(),
                    {w.cancel->id.value(), w.now.value(), CancelEventReason(*w.cancel)});
      runs.push_back({cancel_sql, std::move(params)});
      continue;
    }
    const JobTransition& t = *w.transition;
    SqlParams params = TransitionParams(t.id, t.from, t.to, t.reason, w.now);
    params.insert(params.end(),
                  {t.id.value(), w.now.value(), StateValue(t.from), StateValue(t.to), t.reason});
    runs.push_back({CheckedUpdate(TransitionSql(t.to), kTransitionEventValues), std::move(params)});
  }
  std::lock_guard<std::mutex> lock(mu_);
  const CommitOutcome done = WriteInOneTrip(std::move(runs));
  if (done.rows.ok()) return {};
  // A compare-and-set that changed no row (corral_expect_one) is explained as the SQLite path
  // does, from the state the group found (the transaction is rolled back: a write refused after
  // an earlier write of the same group to the same job is explained by the state before the
  // group; the group committer then applies each batch alone, which explains it exactly); any
  // other error of a write is the database's, named by the write.
  const Status& s = done.rows.status();
  const size_t failed = done.failed_run;
  const bool unchanged = s.code() == StatusCode::kFailedPrecondition;
  if (failed < writes.tasks.size()) {
    return Annotate(UpdateTaskName(*writes.tasks[failed]),
                    unchanged ? NotFound("no such task") : s);
  }
  if (failed < writes.tasks.size() + writes.jobs.size()) {
    const JobWrite& w = writes.jobs[failed - writes.tasks.size()];
    return Annotate(w.name(), unchanged ? ExplainRefused(w) : s);
  }
  return Annotate(op, s);  // the transaction's own: begin, fencing, commit
}

std::string SqlStore::JobWrite::name() const {
  return cancel ? CancelName(cancel->id)
                : TransitionName({transition->id}, transition->from, transition->to);
}

Status SqlStore::JobWriteRows(const std::vector<JobWrite>& writes) {
  auto sql_of = [](const JobWrite& w) {
    return w.cancel ? std::string(kRequestCancel) : TransitionSql(w.transition->to);
  };
  // Every job write in one pipeline (PostgreSQL: one round trip per chunk, whatever the mix of
  // statements); each sees the writes before it.
  std::vector<SqlRun> runs;
  runs.reserve(writes.size());
  for (const JobWrite& w : writes) {
    runs.push_back(
        {sql_of(w), w.cancel ? CancelParams(*w.cancel)
                             : TransitionParams(w.transition->id, w.transition->from,
                                                w.transition->to, w.transition->reason, w.now)});
  }
  auto changed = conn_->QueryMany(runs);
  if (!changed.ok()) {
    return Annotate(writes.size() == 1 ? writes[0].name()
                                       : "write " + std::to_string(writes.size()) + " job changes",
                    changed.status());
  }
  std::vector<SqlParams> events;
  events.reserve(writes.size());
  for (size_t i = 0; i < writes.size(); ++i) {
    const JobWrite& w = writes[i];
    const SqlRows& rows = (*changed)[i];
    if (rows.size() != 1) return Annotate(w.name(), ExplainRefused(w));
    if (w.cancel) {  // an event that changes no state, in the job's state
      SqlValue state = rows[0].Text(0);
      events.push_back(
          {w.cancel->id.value(), w.now.value(), state, state, CancelEventReason(*w.cancel)});
    } else {
      events.push_back({w.transition->id.value(), w.now.value(), StateValue(w.transition->from),
                        StateValue(w.transition->to), w.transition->reason});
    }
  }
  if (events.empty()) return {};
  return Annotate(writes.size() == 1
                      ? writes[0].name()
                      : "record the events of " + std::to_string(writes.size()) + " job changes",
                  conn_->QueryEach(kInsertEvent, events).status());
}

Status SqlStore::ExplainRefused(const JobWrite& write) {
  if (write.transition) return ExplainWrongState(write.transition->id, write.transition->from);
  auto state = JobStateLocked(write.cancel->id);
  if (!state.ok()) return state.status();
  return FailedPrecondition(JobName(write.cancel->id) + " is " +
                            std::string(model::ToString(*state)) + ", not started");
}

int64_t SqlStore::Commits() {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->Commits();
}

int64_t SqlStore::RoundTrips() {
  std::lock_guard<std::mutex> lock(mu_);
  return conn_->RoundTrips();
}

Result<std::vector<TaskRecord>> SqlStore::TasksOfJob(JobId id) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      Select(kTaskColumns, "tasks WHERE job_id = ? ORDER BY task_index, generation"), {id.value()});
  if (!rows.ok()) return Annotate("list tasks of " + JobName(id), rows.status());
  auto tasks = RowsFrom(*rows, &TaskFrom);
  if (!tasks.ok()) return Annotate("list tasks of " + JobName(id), tasks.status());
  return tasks;
}

Result<std::vector<TaskRecord>> SqlStore::ActiveTasks() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      Select(kTaskColumns, "tasks WHERE state IN (?, ?) ORDER BY allocation_id, generation"),
      {StateValue(model::TaskState::kAssigned), StateValue(model::TaskState::kRunning)});
  if (!rows.ok()) return Annotate("list active tasks", rows.status());
  auto tasks = RowsFrom(*rows, &TaskFrom);
  if (!tasks.ok()) return Annotate("list active tasks", tasks.status());
  return tasks;
}

// ---- Environments ----

Result<std::vector<std::string>> SqlStore::EnvironmentProjects(const std::string& name) {
  auto rows = conn_->Query("SELECT project FROM environment_shares WHERE name = ? ORDER BY project",
                           {name});
  if (!rows.ok()) return rows.status();
  std::vector<std::string> projects;
  for (const SqlRow& row : *rows) projects.push_back(row.Text(0));
  return projects;
}

Result<EnvironmentRecord> SqlStore::AddEnvironmentVersion(const std::string& name,
                                                          const std::string& owner,
                                                          const std::string& spec_json,
                                                          Seconds now) {
  const std::string op = "add a version of environment '" + name + "'";
  if (name.empty()) return Annotate(op, InvalidArgument("field 'name': must not be empty"));
  std::lock_guard<std::mutex> lock(mu_);
  EnvironmentRecord record{name, 0, owner, spec_json, now, {}};
  Status s = InTransaction([&]() -> Status {
    auto latest = conn_->Query(
        "SELECT version, owner FROM environments WHERE name = ? ORDER BY version DESC LIMIT 1",
        {name});
    if (!latest.ok()) return latest.status();
    if (!latest->empty() && (*latest)[0].Text(1) != owner) {
      const std::string holder = (*latest)[0].Text(1);
      // Who holds a name is not the caller's business: say only whose kind it is.
      return AlreadyExists("environment name '" + name + "' is taken by " +
                           (holder.empty() ? "a built-in" : "another user") +
                           ": choose another name");
    }
    record.version = latest->empty() ? 1 : (*latest)[0].Int(0) + 1;
    auto inserted = conn_->Execute(
        "INSERT INTO environments (name, version, owner, spec_json, created_at) "
        "VALUES (?, ?, ?, ?, ?)",
        {name, record.version, owner, spec_json, now.value()});
    if (!inserted.ok()) return inserted.status();
    auto projects = EnvironmentProjects(name);
    if (!projects.ok()) return projects.status();
    record.projects = std::move(projects).value();
    return Status::Ok();
  });
  if (!s.ok()) return Annotate(op, s);
  return record;
}

Result<EnvironmentRecord> SqlStore::GetEnvironment(const std::string& name,
                                                   std::optional<int64_t> version) {
  const std::string what =
      "environment '" + name + "'" + (version ? " version " + std::to_string(*version) : "");
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = version ? conn_->Query(
                            "SELECT version, owner, spec_json, created_at FROM environments "
                            "WHERE name = ? AND version = ?",
                            {name, *version})
                      : conn_->Query(
                            "SELECT version, owner, spec_json, created_at FROM environments "
                            "WHERE name = ? ORDER BY version DESC LIMIT 1",
                            {name});
  if (!rows.ok()) return Annotate("get " + what, rows.status());
  if (rows->empty()) return NotFound(what + " not found");
  const SqlRow& row = (*rows)[0];
  auto projects = EnvironmentProjects(name);
  if (!projects.ok()) return Annotate("get " + what, projects.status());
  return EnvironmentRecord{name,        row.Int(0),          row.Text(1),
                           row.Text(2), Seconds(row.Int(3)), *projects};
}

Result<std::vector<EnvironmentRecord>> SqlStore::ListEnvironments() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT e.name, e.version, e.owner, e.spec_json, e.created_at FROM environments e "
      "WHERE e.version = (SELECT MAX(version) FROM environments l WHERE l.name = e.name) "
      "ORDER BY e.name",
      {});
  if (!rows.ok()) return Annotate("list environments", rows.status());
  auto shares = conn_->Query("SELECT name, project FROM environment_shares ORDER BY project", {});
  if (!shares.ok()) return Annotate("list environments", shares.status());
  std::map<std::string, std::vector<std::string>> projects;
  for (const SqlRow& row : *shares) projects[row.Text(0)].push_back(row.Text(1));
  std::vector<EnvironmentRecord> envs;
  for (const SqlRow& row : *rows) {
    envs.push_back({row.Text(0), row.Int(1), row.Text(2), row.Text(3), Seconds(row.Int(4)),
                    projects[row.Text(0)]});
  }
  return envs;
}

Status SqlStore::ShareEnvironment(const std::string& name, const std::string& project) {
  const std::string op = "share environment '" + name + "' with project '" + project + "'";
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(op, InTransaction([&]() -> Status {
                    auto env =
                        conn_->Query("SELECT 1 FROM environments WHERE name = ? LIMIT 1", {name});
                    if (!env.ok()) return env.status();
                    if (env->empty()) return NotFound("environment '" + name + "' not found");
                    auto inserted = conn_->Execute(
                        "INSERT INTO environment_shares (name, project) VALUES (?, ?) "
                        "ON CONFLICT (name, project) DO NOTHING",
                        {name, project});
                    if (inserted.ok()) return Status::Ok();
                    if (inserted.status().code() == StatusCode::kNotFound) {
                      return NotFound("project '" + project + "' does not exist");
                    }
                    return inserted.status();
                  }));
}

// ---- Nodes ----

Status SqlStore::UpsertNode(const NodeRecord& node) {
  const std::string op = "upsert node '" + node.name + "'";
  if (node.name.empty()) return Annotate(op, InvalidArgument("field 'name': must not be empty"));
  if (!node.node_token_hash.empty() && !IsHexSha256(node.node_token_hash)) {
    // Not echoing it: a caller passing the token by mistake must not log it.
    return Annotate(op, InvalidArgument("field 'node_token_hash': must be a lowercase hex "
                                        "SHA-256; the token itself is never stored"));
  }
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(op, InTransaction([&] {
                    return conn_
                        ->Execute(
                            "INSERT INTO nodes (name, inventory_json, state, last_heartbeat, "
                            "node_id_hash, node_token_hash) VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT "
                            "(name) DO UPDATE SET inventory_json = excluded.inventory_json, "
                            "state = excluded.state, last_heartbeat = excluded.last_heartbeat, "
                            "node_id_hash = excluded.node_id_hash, "
                            "node_token_hash = excluded.node_token_hash",
                            {node.name, node.inventory_json, StateValue(node.state),
                             node.last_heartbeat.value(), node.node_id_hash, node.node_token_hash})
                        .status();
                  }));
}

Result<std::vector<NodeRecord>> SqlStore::ListNodes() {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(Select(kNodeColumns, "nodes ORDER BY name"), {});
  if (!rows.ok()) return Annotate("list nodes", rows.status());
  auto nodes = RowsFrom(*rows, &NodeFrom);
  if (!nodes.ok()) return Annotate("list nodes", nodes.status());
  return nodes;
}

Status SqlStore::AddGpuMetrics(const std::vector<GpuMetricRow>& rows) {
  if (rows.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      "add GPU metrics", InTransaction([&]() -> Status {
        for (const GpuMetricRow& r : rows) {
          const SqlValue job = r.job ? SqlValue(r.job->value()) : SqlValue();
          CORRAL_RETURN_IF_ERROR(
              conn_
                  ->Execute(
                      "INSERT INTO gpu_metrics (resolution_s, start_s, node, gpu, "
                      "utilization_permille, memory_used_mib, power_mw, temperature_c, samples, "
                      "job_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (resolution_s, "
                      "node, gpu, start_s) DO UPDATE SET utilization_permille = "
                      "excluded.utilization_permille, memory_used_mib = excluded.memory_used_mib, "
                      "power_mw = excluded.power_mw, temperature_c = excluded.temperature_c, "
                      "samples = excluded.samples, job_id = excluded.job_id",
                      {int64_t{r.resolution_s}, r.start_s, r.node, int64_t{r.gpu},
                       int64_t{r.utilization_permille}, r.memory_used_mib, r.power_mw,
                       int64_t{r.temperature_c}, int64_t{r.samples}, job})
                  .status());
        }
        return Status::Ok();
      }));
}

Result<PruneResult> SqlStore::PruneGpuMetrics(int resolution_s, int64_t before_s,
                                              int64_t batch_rows) {
  if (batch_rows < 1) return InvalidArgument("prune GPU metrics: batch_rows must be >= 1");
  const int64_t resolution = resolution_s;
  PruneResult result;
  while (true) {
    // One batch per hold of the lock: a day of 10 s intervals of a large cluster is millions of
    // rows, and submissions wait for the lock meanwhile. A batch ends before the start time of
    // the (batch_rows + 1)-th oldest row; both statements walk gpu_metrics_by_time, so a batch
    // costs its own rows, not the table's.
    std::lock_guard<std::mutex> lock(mu_);
    bool last = false;
    int64_t deleted = 0;
    Status s = InTransaction([&]() -> Status {
      auto next = conn_->Query(
          "SELECT start_s FROM gpu_metrics WHERE resolution_s = ? AND start_s < ? ORDER BY "
          "start_s LIMIT 1 OFFSET ?",
          {resolution, before_s, batch_rows});
      if (!next.ok()) return next.status();
      last = next->empty();
      const int64_t cutoff = last ? before_s : (*next)[0].Int(0);
      auto removed = conn_->Execute(
          "DELETE FROM gpu_metrics WHERE resolution_s = ? AND start_s < ?", {resolution, cutoff});
      if (removed.ok() && *removed == 0 && !last) {
        // More than batch_rows rows share the oldest start time: that time's rows are the batch.
        removed = conn_->Execute("DELETE FROM gpu_metrics WHERE resolution_s = ? AND start_s = ?",
                                 {resolution, cutoff});
      }
      if (!removed.ok()) return removed.status();
      deleted = *removed;
      return Status::Ok();
    });
    if (!s.ok()) return Annotate("prune GPU metrics", s);
    if (deleted > 0) {
      result.rows += deleted;
      ++result.batches;
    }
    if (last) return result;
  }
}

Result<std::vector<GpuMetricRow>> SqlStore::GpuMetrics(int resolution_s, int64_t from_s,
                                                       int64_t to_s, const std::string& node,
                                                       std::optional<JobId> job) {
  std::string sql =
      "SELECT resolution_s, start_s, node, gpu, utilization_permille, memory_used_mib, power_mw, "
      "temperature_c, samples, job_id FROM gpu_metrics WHERE resolution_s = ? AND start_s >= ? "
      "AND start_s < ?";
  std::vector<SqlValue> params = {int64_t{resolution_s}, from_s, to_s};
  if (!node.empty()) {
    sql += " AND node = ?";
    params.push_back(node);
  }
  if (job) {
    sql += " AND job_id = ?";
    params.push_back(job->value());
  }
  sql += " ORDER BY node, gpu, start_s";
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(sql, params);
  if (!rows.ok()) return Annotate("read GPU metrics", rows.status());
  std::vector<GpuMetricRow> out;
  for (const SqlRow& row : *rows) {
    GpuMetricRow r;
    r.resolution_s = static_cast<int>(row.Int(0));
    r.start_s = row.Int(1);
    r.node = row.Text(2);
    r.gpu = static_cast<int>(row.Int(3));
    r.utilization_permille = static_cast<int>(row.Int(4));
    r.memory_used_mib = row.Int(5);
    r.power_mw = row.Int(6);
    r.temperature_c = static_cast<int>(row.Int(7));
    r.samples = static_cast<int>(row.Int(8));
    if (!row.IsNull(9)) r.job = JobId(row.Int(9));
    out.push_back(std::move(r));
  }
  return out;
}

Status SqlStore::AddGpuUsage(const std::vector<GpuUsageRow>& rows) {
  if (rows.empty()) return Status::Ok();
  std::lock_guard<std::mutex> lock(mu_);
  return Annotate(
      "add GPU usage", InTransaction([&]() -> Status {
        for (const GpuUsageRow& r : rows) {
          CORRAL_RETURN_IF_ERROR(
              conn_
                  ->Execute("INSERT INTO gpu_usage (day, user_name, project, allocated_gpu_ms, "
                            "used_gpu_ms) VALUES (?, ?, ?, ?, ?) ON CONFLICT (day, user_name, "
                            "project) DO UPDATE SET allocated_gpu_ms = gpu_usage.allocated_gpu_ms "
                            "+ excluded.allocated_gpu_ms, used_gpu_ms = gpu_usage.used_gpu_ms + "
                            "excluded.used_gpu_ms",
                            {r.day, r.user, r.project, r.allocated_gpu_ms, r.used_gpu_ms})
                  .status());
        }
        return Status::Ok();
      }));
}

Result<std::vector<GpuUsageRow>> SqlStore::GpuUsage(const std::string& from_day,
                                                    const std::string& to_day) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT day, user_name, project, allocated_gpu_ms, used_gpu_ms, lost_gpu_ms FROM gpu_usage "
      "WHERE day >= ? AND day <= ? ORDER BY day, user_name, project",
      {from_day, to_day});
  if (!rows.ok()) return Annotate("read GPU usage", rows.status());
  std::vector<GpuUsageRow> out;
  for (const SqlRow& row : *rows) {
    out.push_back({row.Text(0), row.Text(1), row.Text(2), row.Int(3), row.Int(4), row.Int(5)});
  }
  return out;
}

}  // namespace corral::store
