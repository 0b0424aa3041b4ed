#include "store/migrations.h"

#include <cstdint>

namespace corral::store {
namespace {

// pg_advisory_xact_lock key serialising migrations: "corral" in ASCII.
constexpr int64_t kMigrationLockKey = 0x636f7272616c;

constexpr char kCreateSchemaVersion[] =
    "CREATE TABLE IF NOT EXISTS schema_version ("
    " version INTEGER PRIMARY KEY,"
    " description TEXT NOT NULL)";

// Version 1. Times are Unix seconds (BIGINT); JSON documents are TEXT; booleans are INTEGER 0/1;
// every state column lists its states (model/states.h) in a CHECK.
constexpr char kInitialSchema[] = R"sql(
CREATE TABLE users (
  id {id},
  name TEXT NOT NULL UNIQUE,
  admin INTEGER NOT NULL DEFAULT 0 CHECK (admin IN (0, 1)),
  created_at BIGINT NOT NULL
);
CREATE TABLE tokens (
  id {id},
  user_id BIGINT NOT NULL REFERENCES users (id),
  name TEXT NOT NULL,
  hash TEXT NOT NULL UNIQUE,
  created_at BIGINT NOT NULL,
  revoked_at BIGINT
);
CREATE INDEX tokens_by_user ON tokens (user_id);
CREATE TABLE projects (
  name TEXT PRIMARY KEY,
  description TEXT NOT NULL,
  created_at BIGINT NOT NULL
);
CREATE TABLE project_members (
  project TEXT NOT NULL REFERENCES projects (name),
  user_id BIGINT NOT NULL REFERENCES users (id),
  PRIMARY KEY (project, user_id)
);
CREATE INDEX project_members_by_user ON project_members (user_id);
CREATE TABLE jobs (
  id {id},
  name TEXT NOT NULL,
  user_name TEXT NOT NULL REFERENCES users (name),
  project TEXT NOT NULL REFERENCES projects (name),
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost')),
  priority INTEGER NOT NULL,
  restarts INTEGER NOT NULL DEFAULT 0,
  submit_time BIGINT NOT NULL,
  start_time BIGINT,
  end_time BIGINT,
  reason TEXT NOT NULL DEFAULT ''
);
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_project ON jobs (project);
CREATE INDEX jobs_by_user ON jobs (user_name);
CREATE TABLE job_events (
  id {id},
  job_id BIGINT NOT NULL REFERENCES jobs (id),
  time BIGINT NOT NULL,
  from_state TEXT NOT NULL,
  to_state TEXT NOT NULL,
  reason TEXT NOT NULL
);
CREATE INDEX job_events_by_job ON job_events (job_id, id);
CREATE TABLE nodes (
  name TEXT PRIMARY KEY,
  inventory_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('ready', 'lost', 'drained', 'cordoned')),
  last_heartbeat BIGINT NOT NULL
);
CREATE TABLE tasks (
  allocation_id BIGINT NOT NULL,
  generation BIGINT NOT NULL,
  job_id BIGINT NOT NULL REFERENCES jobs (id),
  task_index INTEGER NOT NULL CHECK (task_index >= 0),
  node TEXT NOT NULL REFERENCES nodes (name),
  allocation_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN ('assigned', 'running', 'exited', 'killed', 'lost')),
  exit_code INTEGER,
  signal INTEGER,
  start_time BIGINT,
  end_time BIGINT,
  PRIMARY KEY (allocation_id, generation)
);
CREATE INDEX tasks_by_job ON tasks (job_id, task_index, generation);
CREATE INDEX tasks_by_state ON tasks (state);
CREATE TABLE counters (
  name TEXT PRIMARY KEY,
  value BIGINT NOT NULL
);
INSERT INTO counters (name, value) VALUES ('allocation_id', 0);
)sql";

// The one place where the dialects' DDL differs.
std::string ForDialect(const std::string& ddl, Dialect dialect) {
  const std::string id = dialect == Dialect::kSqlite
                             ? "INTEGER PRIMARY KEY AUTOINCREMENT"
                             : "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY";
  std::string out = ddl;
  for (size_t pos = out.find("{id}"); pos != std::string::npos; pos = out.find("{id}", pos)) {
    out.replace(pos, 4, id);
  }
  return out;
}

Status Annotated(const Status& s, const std::string& what) {
  return {s.code(), "migrate schema: " + what + ": " + s.message()};
}

}  // namespace

// Version 6: environment assets. A version is never updated; owner is a user's name or '' for
// the built-ins; a share covers every version of the name.
constexpr char kEnvironments[] = R"sql(
CREATE TABLE environments (
  name TEXT NOT NULL,
  version INTEGER NOT NULL CHECK (version >= 1),
  owner TEXT NOT NULL,
  spec_json TEXT NOT NULL,
  created_at BIGINT NOT NULL,
  PRIMARY KEY (name, version)
);
CREATE TABLE environment_shares (
  name TEXT NOT NULL,
  project TEXT NOT NULL REFERENCES projects (name),
  PRIMARY KEY (name, project)
);
)sql";

// Version 7: GPU metrics history (two resolutions, pruned by the server) and GPU time per day,
// user and project (kept). Integers only: utilisation in tenths of a percent, time in ms.
constexpr char kGpuMetrics[] = R"sql(
CREATE TABLE gpu_metrics (
  resolution_s INTEGER NOT NULL CHECK (resolution_s > 0),
  start_s BIGINT NOT NULL,
  node TEXT NOT NULL,
  gpu INTEGER NOT NULL CHECK (gpu >= 0),
  utilization_permille INTEGER NOT NULL CHECK (utilization_permille BETWEEN 0 AND 1000),
  memory_used_mib BIGINT NOT NULL,
  power_mw BIGINT NOT NULL,
  temperature_c INTEGER NOT NULL,
  samples INTEGER NOT NULL,
  job_id BIGINT,
  PRIMARY KEY (resolution_s, node, gpu, start_s)
);
CREATE INDEX gpu_metrics_by_time ON gpu_metrics (resolution_s, start_s);
CREATE INDEX gpu_metrics_by_job ON gpu_metrics (job_id, resolution_s, start_s);
CREATE TABLE gpu_usage (
  day TEXT NOT NULL,
  user_name TEXT NOT NULL,
  project TEXT NOT NULL,
  allocated_gpu_ms BIGINT NOT NULL,
  used_gpu_ms BIGINT NOT NULL,
  PRIMARY KEY (day, user_name, project)
);
)sql";

// Version 8: the cluster's id (store.h, Store::ClusterId). One row at most (the CHECK); the row
// itself is written by SqlStore when it opens a store without one, so that the id comes from the
// kernel's generator on either database.
constexpr char kCluster[] = R"sql(
CREATE TABLE cluster (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  id TEXT NOT NULL
);
)sql";

// Version 9: the job states timeout and oom (model/states.h), and why a task's process ended
// (its agent's end cause; NULL when not ended, unknown, or from an agent too old to say).
// PostgreSQL replaces the CHECK (named by its default, table_column_check); SQLite cannot alter a
// CHECK, so it rebuilds the jobs table as SQLite's documentation says (ALTER TABLE, "other kinds
// of table schema changes"): the same columns and indexes, its rows and its id sequence (ids are
// never reused). Foreign keys that point at jobs name it, not the old table, so they hold for
// the rebuilt one; ApplyMigrations turns their enforcement off around the rebuild and checks
// them all before the commit.
constexpr char kStatesPostgres[] = R"sql(
ALTER TABLE jobs DROP CONSTRAINT jobs_state_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_state_check CHECK (state IN
  ('pending', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost', 'timeout', 'oom'));
ALTER TABLE tasks ADD COLUMN end_cause TEXT CHECK (end_cause IN
  ('exited', 'signalled', 'stopped', 'time_limit', 'out_of_memory'));
)sql";
constexpr char kStatesSqlite[] = R"sql(
CREATE TABLE jobs_v9 (
  id INTEGER PRIMARY KEY AUTOINCREMENT,
  name TEXT NOT NULL,
  user_name TEXT NOT NULL REFERENCES users (name),
  project TEXT NOT NULL REFERENCES projects (name),
  spec_json TEXT NOT NULL,
  state TEXT NOT NULL CHECK (state IN
    ('pending', 'starting', 'running', 'succeeded', 'failed', 'cancelled', 'lost', 'timeout', 'oom')),
  priority INTEGER NOT NULL,
  restarts INTEGER NOT NULL DEFAULT 0,
  submit_time BIGINT NOT NULL,
  start_time BIGINT,
  end_time BIGINT,
  reason TEXT NOT NULL DEFAULT '',
  cancel_reason TEXT,
  array_id BIGINT REFERENCES jobs (id),
  array_index INTEGER CHECK (array_index >= 0),
  array_max_running INTEGER CHECK (array_max_running >= 1)
);
INSERT INTO jobs_v9 (id, name, user_name, project, spec_json, state, priority, restarts,
  submit_time, start_time, end_time, reason, cancel_reason, array_id, array_index,
  array_max_running)
SELECT id, name, user_name, project, spec_json, state, priority, restarts, submit_time,
  start_time, end_time, reason, cancel_reason, array_id, array_index, array_max_running
FROM jobs;
DELETE FROM sqlite_sequence WHERE name = 'jobs_v9';
INSERT INTO sqlite_sequence (name, seq) SELECT 'jobs_v9', seq FROM sqlite_sequence
  WHERE name = 'jobs';
DROP TABLE jobs;
ALTER TABLE jobs_v9 RENAME TO jobs;
CREATE INDEX jobs_by_state ON jobs (state);
CREATE INDEX jobs_by_project ON jobs (project);
CREATE INDEX jobs_by_user ON jobs (user_name);
CREATE INDEX jobs_by_array ON jobs (array_id, id);
ALTER TABLE tasks ADD COLUMN end_cause TEXT CHECK (end_cause IN
  ('exited', 'signalled', 'stopped', 'time_limit', 'out_of_memory'));
)sql";

// ---- Typed allocations (issue 14, point 4) ----
// Version 10: a task's allocation is model::Allocation, kept as its codec's JSON (model::ToJson)
// in a column named for the type (docs/decisions.md). Rows written before keep their text: it is
// the codec's form plus a "node" member repeating the task's node, which the codec ignores, so
// nothing but the name has to change. (SQLite 3.25+ and PostgreSQL both rename in place.)
constexpr char kTypedAllocations[] =
    "ALTER TABLE tasks RENAME COLUMN allocation_json TO allocation";
// ---- end of typed allocations ----

// Version 11 (docs/control-plane.md, "Submit limits"; "Users, projects, tokens"): the submit
// limits admins set on users and projects (NULL: none), and when a token expires (NULL: never).
constexpr char kSubmitLimitsAndTokenExpiry[] = R"sql(
ALTER TABLE users ADD COLUMN max_pending_jobs BIGINT CHECK (max_pending_jobs >= 0);
ALTER TABLE users ADD COLUMN max_submits_per_minute BIGINT CHECK (max_submits_per_minute >= 0);
ALTER TABLE projects ADD COLUMN max_pending_jobs BIGINT CHECK (max_pending_jobs >= 0);
ALTER TABLE projects ADD COLUMN max_submits_per_minute BIGINT
  CHECK (max_submits_per_minute >= 0);
ALTER TABLE tokens ADD COLUMN expires_at BIGINT
)sql";

// Version 12 (docs/control-plane.md, "Several servers on one PostgreSQL"): the leader's lease
// (who leads, at which URL, until when by the database's clock, in milliseconds since the Unix
// epoch) and the epoch, which grows by one at every takeover. The epoch has a row of its own that
// only a takeover updates: every write transaction of a leader locks it (FOR SHARE), so a
// takeover waits for the old leader's transaction in flight and every later one sees the new
// epoch, while renewals (which update only the lease row) never wait for writes. Nodes keep the
// hash of their current node token, so a new leader accepts the agents registered with the old
// one; the cluster keeps the hash of its join token and a check value of its session key, so
// that servers that would disagree refuse to start.
constexpr char kLeaderLease[] = R"sql(
CREATE TABLE leader_lease (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  holder TEXT NOT NULL,
  url TEXT NOT NULL,
  expires_at_ms BIGINT NOT NULL,
  epoch BIGINT NOT NULL
);
INSERT INTO leader_lease (singleton, holder, url, expires_at_ms, epoch) VALUES (1, '', '', 0, 0);
CREATE TABLE leader_epoch (
  singleton INTEGER PRIMARY KEY CHECK (singleton = 1),
  epoch BIGINT NOT NULL
);
INSERT INTO leader_epoch (singleton, epoch) VALUES (1, 0);
ALTER TABLE nodes ADD COLUMN node_token_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE cluster ADD COLUMN join_token_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE cluster ADD COLUMN session_key_check TEXT NOT NULL DEFAULT ''
)sql";

// Version 13 (docs/control-plane.md, "Listing jobs"): what the job listing sorts and filters
// on, each served by an index that ends in id (keyset pagination on (key, id)). Names are compared
// byte-wise (a prefix is a range of them), so PostgreSQL's index uses the "C" collation, which
// SQLite's BINARY default already is. SQLite's indexes end in the rowid (= id) already, so
// jobs_by_user serves (user_name, id) there.
//
// total_gpu_milli is a job's GPUs over all its tasks in milli-GPU (tasks × resources.gpus ×
// resources.gpu_milli), filled in from the stored specs of the jobs already there. A count that
// is absent or null takes its default (gpus 0, gpu_milli 1000, tasks 1). A job keeps 0 when its
// spec is not JSON or when one of the three counts is anything but a JSON integer from 0 to
// 999999 (a string, a fraction, an exponent, a negative or a larger number; so the product fits
// a BIGINT): no stored spec can fail the migration, and both databases give the same numbers.
// PostgreSQL 15 cannot test text for JSON without the cast, which throws, so two functions made
// and dropped within the migration compute it and catch that; PostgreSQL's JSON operators also
// refuse a spec holding \u0000 (which corral never writes): that job keeps 0 there. A server of
// the previous release still running during a rolling upgrade inserts jobs with 0: they sort as
// 0 GPUs.
constexpr char kJobListingPostgres[] = R"sql(
ALTER TABLE jobs ADD COLUMN total_gpu_milli BIGINT NOT NULL DEFAULT 0
  CHECK (total_gpu_milli >= 0);
CREATE FUNCTION corral_migration_13_count(value json, absent BIGINT) RETURNS BIGINT
  LANGUAGE sql IMMUTABLE AS $$
  SELECT CASE
    WHEN value IS NULL OR json_typeof(value) = 'null' THEN absent
    WHEN json_typeof(value) = 'number' AND value::text ~ '^[0-9]{1,6}$' THEN value::text::bigint
  END $$;
CREATE FUNCTION corral_migration_13_total(spec TEXT) RETURNS BIGINT
  LANGUAGE plpgsql IMMUTABLE AS $$
DECLARE
  doc json;
BEGIN
  doc := spec::json;
  RETURN COALESCE(corral_migration_13_count(doc -> 'resources' -> 'gpus', 0) *
                  corral_migration_13_count(doc -> 'resources' -> 'gpu_milli', 1000) *
                  corral_migration_13_count(doc -> 'tasks', 1), 0);
EXCEPTION WHEN data_exception THEN
  RETURN 0;
END $$;
UPDATE jobs SET total_gpu_milli = corral_migration_13_total(spec_json);
DROP FUNCTION corral_migration_13_total(TEXT);
DROP FUNCTION corral_migration_13_count(json, BIGINT);
CREATE INDEX jobs_by_submit_time ON jobs (submit_time, id);
CREATE INDEX jobs_by_start_time ON jobs (start_time, id);
CREATE INDEX jobs_by_end_time ON jobs (end_time, id);
CREATE INDEX jobs_by_gpus ON jobs (total_gpu_milli, id);
CREATE INDEX jobs_by_name ON jobs (name COLLATE "C", id);
CREATE INDEX jobs_by_user_and_id ON jobs (user_name, id);
)sql";
constexpr char kJobListingSqlite[] = R"sql(
ALTER TABLE jobs ADD COLUMN total_gpu_milli BIGINT NOT NULL DEFAULT 0
  CHECK (total_gpu_milli >= 0);
UPDATE jobs SET total_gpu_milli = COALESCE(
  CASE COALESCE(json_type(spec_json, '$.resources.gpus'), 'null')
    WHEN 'null' THEN 0
    WHEN 'integer' THEN
      CASE WHEN json_extract(spec_json, '$.resources.gpus') BETWEEN 0 AND 999999
        THEN json_extract(spec_json, '$.resources.gpus') END
  END *
  CASE COALESCE(json_type(spec_json, '$.resources.gpu_milli'), 'null')
    WHEN 'null' THEN 1000
    WHEN 'integer' THEN
      CASE WHEN json_extract(spec_json, '$.resources.gpu_milli') BETWEEN 0 AND 999999
        THEN json_extract(spec_json, '$.resources.gpu_milli') END
  END *
  CASE COALESCE(json_type(spec_json, '$.tasks'), 'null')
    WHEN 'null' THEN 1
    WHEN 'integer' THEN
      CASE WHEN json_extract(spec_json, '$.tasks') BETWEEN 0 AND 999999
        THEN json_extract(spec_json, '$.tasks') END
  END, 0)
  WHERE json_valid(spec_json);
CREATE INDEX jobs_by_submit_time ON jobs (submit_time, id);
CREATE INDEX jobs_by_start_time ON jobs (start_time, id);
CREATE INDEX jobs_by_end_time ON jobs (end_time, id);
CREATE INDEX jobs_by_gpus ON jobs (total_gpu_milli, id);
CREATE INDEX jobs_by_name ON jobs (name, id);
)sql";

// Version 14 (docs/monitoring.md, "Retention of finished jobs"): the GPU demand of the jobs the
// leader purged past the retention (`corral server --keep-finished`), per UTC hour, in milli-GPU
// seconds: capacity planning's forecast adds it to the demand of the jobs still kept. The
// purge writes it in the transaction that deletes the jobs. The index answers "has this array an
// element not ended, or ended after the cutoff" with two probes (an array goes only as a whole).
constexpr char kJobRetention[] = R"sql(
CREATE TABLE job_demand_hours (
  hour_s BIGINT PRIMARY KEY CHECK (hour_s % 3600 = 0),
  milli_gpu_s BIGINT NOT NULL CHECK (milli_gpu_s >= 0)
);
CREATE INDEX jobs_by_array_and_end_time ON jobs (array_id, end_time);
)sql";

// Version 15 (PostgreSQL only; docs/control-plane.md, "Group commit"): checks that let a write
// transaction travel in one round trip (BEGIN, its statements and COMMIT in one pipeline,
// SqlConnection::QueryManyAndCommit), raising an error that aborts the transaction where a
// client would otherwise read an answer and decide:
// - corral_fence(held): the leader's epoch is still `held` (SqlStore::CheckEpoch's question,
//   with the row locked FOR SHARE as there);
// - corral_expect_one(changed): a compare-and-set changed exactly one row.
constexpr char kOneTripChecks[] = R"sql(
CREATE OR REPLACE FUNCTION corral_fence(held BIGINT) RETURNS INTEGER LANGUAGE plpgsql AS $$
DECLARE
  current BIGINT;
BEGIN
  SELECT epoch INTO current FROM leader_epoch WHERE singleton = 1 FOR SHARE;
  IF current IS DISTINCT FROM held THEN
    RAISE EXCEPTION 'fenced: the epoch is % (held %)', COALESCE(current, 0), held
      USING ERRCODE = 'CRL01';
  END IF;
  RETURN 1;
END $$;
CREATE OR REPLACE FUNCTION corral_expect_one(changed BIGINT) RETURNS INTEGER LANGUAGE plpgsql AS $$
BEGIN
  IF changed <> 1 THEN
    RAISE EXCEPTION 'expected to change one row, changed %', changed USING ERRCODE = 'CRL02';
  END IF;
  RETURN 1;
END $$;
)sql";

// Version 16 (docs/in-job.md): what a job's tasks report through the in-job channel. The latest
// value of each key (at most 64 a job: the store checks), the numeric history (at most 1,000
// points a job, the oldest deleted as new ones come), the latest checkpoint. Values are JSON
// text (a number or a string). Purged with their job.
constexpr char kJobReports[] = R"sql(
CREATE TABLE job_metrics (
  job_id BIGINT NOT NULL REFERENCES jobs (id),
  name TEXT NOT NULL,
  value_json TEXT NOT NULL,
  time BIGINT NOT NULL,
  PRIMARY KEY (job_id, name)
);
CREATE TABLE job_metric_points (
  id {id},
  job_id BIGINT NOT NULL REFERENCES jobs (id),
  name TEXT NOT NULL,
  time BIGINT NOT NULL,
  value_json TEXT NOT NULL
);
CREATE INDEX job_metric_points_by_job ON job_metric_points (job_id, id);
CREATE TABLE job_checkpoints (
  job_id BIGINT PRIMARY KEY REFERENCES jobs (id),
  path TEXT NOT NULL,
  step BIGINT CHECK (step >= 0),
  time BIGINT NOT NULL
);
)sql";

// Version 17 (docs/in-job.md, "Preemption and checkpoints"): the work preemptions and resizes
// lost (GPU-ms since the run's last checkpoint), per job and per day, user and project.
constexpr char kLostWork[] = R"sql(
ALTER TABLE jobs ADD COLUMN lost_gpu_ms BIGINT NOT NULL DEFAULT 0;
ALTER TABLE gpu_usage ADD COLUMN lost_gpu_ms BIGINT NOT NULL DEFAULT 0;
)sql";

const std::vector<Migration>& StoreMigrations() {
  static const std::vector<Migration> kMigrations = {
      {1, "users, tokens, projects, jobs, job events, nodes, tasks", kInitialSchema},
      {2, "nodes remember their agent's node id (hashed)",
       "ALTER TABLE nodes ADD COLUMN node_id_hash TEXT NOT NULL DEFAULT ''"},
      {3, "a started job's cancellation survives a restart",
       "ALTER TABLE jobs ADD COLUMN cancel_reason TEXT"},
      {4, "projects' sharing: quota, weight, limit",
       "ALTER TABLE projects ADD COLUMN sharing_json TEXT NOT NULL DEFAULT '{}'"},
      {5, "job arrays: each element's array id, index and running limit",
       "ALTER TABLE jobs ADD COLUMN array_id BIGINT REFERENCES jobs (id);"
       "ALTER TABLE jobs ADD COLUMN array_index INTEGER CHECK (array_index >= 0);"
       "ALTER TABLE jobs ADD COLUMN array_max_running INTEGER CHECK (array_max_running >= 1);"
       "CREATE INDEX jobs_by_array ON jobs (array_id, id)"},
      {6, "environments: immutable versions, owner, shares with projects", kEnvironments},
      {7, "GPU metrics history and GPU time per day, user and project", kGpuMetrics},
      {8, "the cluster's id, which agents namespace their host's tasks with", kCluster},
      {9, "job states timeout and oom; a task's end cause", kStatesPostgres, kStatesSqlite},
      {10, "a task's allocation is typed: its codec's JSON in column 'allocation'",
       kTypedAllocations},
      {11, "submit limits of users and projects; tokens may expire", kSubmitLimitsAndTokenExpiry},
      {12, "the leader's lease and epoch; node tokens and the cluster's secrets, hashed",
       kLeaderLease},
      {13, "the job listing: a job's total GPUs; indexes for its sorts and filters",
       kJobListingPostgres, kJobListingSqlite},
      {14, "retention of finished jobs: the GPU demand of purged jobs per hour", kJobRetention},
      {15, "write transactions in one round trip: fencing and compare-and-set checks",
       kOneTripChecks, "", MigrationOn::kPostgresOnly},
      {16, "the in-job channel: reported metrics, their history, the latest checkpoint",
       kJobReports},
      {17, "lost work: GPU time preemptions and resizes lost, per job and per day", kLostWork},
  };
  return kMigrations;
}

Result<int> SchemaVersion(SqlConnection& conn) {
  Status s = conn.ExecuteScript(kCreateSchemaVersion);
  if (!s.ok()) return Annotated(s, "create schema_version");
  auto rows = conn.Query("SELECT COALESCE(MAX(version), 0) FROM schema_version", {});
  if (!rows.ok()) return Annotated(rows.status(), "read schema_version");
  return rows->empty() ? 0 : static_cast<int>((*rows)[0].Int(0));
}

Status ApplyMigrations(SqlConnection& conn, const std::vector<Migration>& migrations) {
  for (size_t i = 0; i < migrations.size(); ++i) {
    if (migrations[i].version != static_cast<int>(i) + 1) {
      return {StatusCode::kInternal, "migrate schema: migration #" + std::to_string(i) +
                                         " has version " + std::to_string(migrations[i].version) +
                                         ", expected " + std::to_string(i + 1)};
    }
  }
  const int latest = static_cast<int>(migrations.size());
  // SQLite: a migration that rebuilds a table (Migration::sqlite_ddl) must not have its foreign
  // keys enforced while the table is gone, and the setting cannot change inside a transaction.
  // They are checked as a whole before the commit instead, and enforced again after it.
  const bool sqlite = conn.dialect() == Dialect::kSqlite;
  bool foreign_keys_were_on = false;
  if (sqlite) {
    auto on = conn.Query("PRAGMA foreign_keys", {});
    if (!on.ok()) return Annotated(on.status(), "read foreign_keys");
    foreign_keys_were_on = !on->empty() && (*on)[0].Int(0) == 1;
    if (Status off = conn.ExecuteScript("PRAGMA foreign_keys = OFF"); !off.ok()) {
      return Annotated(off, "foreign_keys off");
    }
  }
  bool applied_any = false;
  Status s = conn.Begin();
  if (!s.ok()) {
    if (foreign_keys_were_on) (void)conn.ExecuteScript("PRAGMA foreign_keys = ON");
    return Annotated(s, "begin");
  }
  auto migrate = [&]() -> Status {
    if (conn.dialect() == Dialect::kPostgres) {
      auto locked = conn.Query("SELECT pg_advisory_xact_lock(?)", {kMigrationLockKey});
      if (!locked.ok()) return Annotated(locked.status(), "lock");
    }
    auto current = SchemaVersion(conn);
    if (!current.ok()) return current.status();
    if (*current > latest) {
      return FailedPrecondition("the store's schema version " + std::to_string(*current) +
                                " is newer than this corral knows (" + std::to_string(latest) +
                                "); run a newer corral");
    }
    for (const Migration& m : migrations) {
      if (m.version <= *current) continue;
      std::string what = "version " + std::to_string(m.version) + " (" + m.description + ")";
      const std::string& ddl = sqlite && !m.sqlite_ddl.empty() ? m.sqlite_ddl : m.ddl;
      if (!(sqlite && m.on == MigrationOn::kPostgresOnly)) {
        Status applied = conn.ExecuteScript(ForDialect(ddl, conn.dialect()));
        if (!applied.ok()) return Annotated(applied, what);
      }
      auto recorded =
          conn.Execute("INSERT INTO schema_version (version, description) VALUES (?, ?)",
                       {int64_t{m.version}, m.description});
      if (!recorded.ok()) return Annotated(recorded.status(), what);
      applied_any = true;
    }
    if (sqlite && foreign_keys_were_on && applied_any) {
      auto broken = conn.Query("PRAGMA foreign_key_check", {});
      if (!broken.ok()) return Annotated(broken.status(), "foreign_key_check");
      if (!broken->empty()) {
        return InvalidArgument("migrate schema: a foreign key of table '" + (*broken)[0].Text(0) +
                               "' points at a missing row of '" + (*broken)[0].Text(2) + "'");
      }
    }
    return {};
  };
  s = migrate();
  if (s.ok()) {
    s = conn.Commit();
    if (!s.ok()) s = Annotated(s, "commit");
  }
  if (!s.ok()) conn.Rollback();
  if (foreign_keys_were_on) {
    Status on = conn.ExecuteScript("PRAGMA foreign_keys = ON");
    if (s.ok() && !on.ok()) s = Annotated(on, "foreign_keys on");
  }
  return s;
}

}  // namespace corral::store
