// A minimal SQL connection: the only code that knows a database's C API. SqlStore writes its SQL
// once, with `?` placeholders, and runs it through this interface on SQLite or PostgreSQL.
//
// Thread safety: none. A connection is used by one thread at a time (SqlStore holds a mutex).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <utility>
#include <variant>
#include <vector>

#include "common/status.h"

namespace corral::store {

enum class Dialect { kSqlite, kPostgres };

// A parameter or a result cell: NULL, a 64-bit integer or text.
using SqlValue = std::variant<std::monostate, int64_t, std::string>;
using SqlParams = std::vector<SqlValue>;

// One result row, read by column index (the order of the SELECT or RETURNING list). Text cells
// holding a number read as integers: PostgreSQL returns every cell as text.
class SqlRow {
 public:
  explicit SqlRow(std::vector<SqlValue> cells) : cells_(std::move(cells)) {}

  size_t size() const { return cells_.size(); }
  bool IsNull(size_t i) const { return std::holds_alternative<std::monostate>(cells_.at(i)); }
  int64_t Int(size_t i) const;                    // NULL reads as 0
  std::optional<int64_t> OptInt(size_t i) const;  // NULL reads as nullopt
  std::string Text(size_t i) const;               // NULL reads as ""

 private:
  std::vector<SqlValue> cells_;
};
using SqlRows = std::vector<SqlRow>;

// Status codes the drivers return, whatever the database: a unique or primary-key violation is
// AlreadyExists, a foreign-key violation NotFound, a CHECK or NOT NULL violation
// InvalidArgument, anything else IoError; on PostgreSQL also the checks of migration 15:
// corral_fence's Unavailable and corral_expect_one's FailedPrecondition. Messages are the
// database's own text (without the statement); callers prefix the operation.

// One run of a statement with its parameters (QueryMany).
struct SqlRun {
  std::string sql;
  SqlParams params;
};

// What QueryManyAndCommit did.
struct CommitOutcome {
  Result<std::vector<SqlRows>> rows;  // each run's rows, or the error (nothing committed)
  // On an error: the index of the run that failed, or the number of runs for the transaction's
  // own error (the commit, the connection, or a failure that names no run).
  size_t failed_run = 0;
};

class SqlConnection {
 public:
  virtual ~SqlConnection() = default;

  virtual Dialect dialect() const = 0;

  // Runs one statement; `?` placeholders take params in order. Returns the rows it changed.
  virtual Result<int64_t> Execute(const std::string& sql, const SqlParams& params = {}) = 0;
  // Runs one statement (SELECT, or a write with RETURNING) and returns its rows.
  virtual Result<SqlRows> Query(const std::string& sql, const SqlParams& params = {}) = 0;
  // Runs the same statement once per parameter set, in order, and returns each run's rows.
  // Stops at the first error. PostgreSQL pipelines the runs (one round trip per chunk); SQLite
  // reuses one prepared statement. Meant for batches inside a transaction.
  virtual Result<std::vector<SqlRows>> QueryEach(const std::string& sql,
                                                 const std::vector<SqlParams>& param_sets) = 0;
  // QueryEach for runs of different statements, in order: PostgreSQL pipelines them all (one
  // round trip per chunk, whatever the mix); SQLite prepares each statement once.
  virtual Result<std::vector<SqlRows>> QueryMany(const std::vector<SqlRun>& runs) = 0;
  // Runs several ';'-separated statements without parameters (migration DDL).
  virtual Status ExecuteScript(const std::string& sql) = 0;

  // QueryMany as the end of the open write transaction (Begin), which it commits: PostgreSQL
  // sends the deferred BEGIN, the runs and COMMIT in one pipeline (one round trip, statements
  // prepared before), so a caller that needs no answer before deciding the next write pays one
  // round trip for the whole transaction. On an error nothing is committed and the caller rolls
  // back; the outcome says which run failed.
  virtual CommitOutcome QueryManyAndCommit(const std::vector<SqlRun>& runs) = 0;

  // A write transaction (SQLite: BEGIN IMMEDIATE, which takes the write lock up front).
  virtual Status Begin() = 0;
  virtual Status Commit() = 0;
  // Rolls back the open transaction; a no-op when none is open.
  virtual Status Rollback() = 0;

  // Write transactions this connection committed: each COMMIT, and each write statement run
  // outside a transaction (which commits on its own). What /metrics counts as store commits.
  virtual int64_t Commits() const = 0;
  // Exchanges with the database server that waited for its answer (PostgreSQL: each pipeline
  // sync, single query, and statement prepared); 0 for SQLite, which runs in-process. What /metrics
  // counts as store round trips.
  virtual int64_t RoundTrips() const = 0;
};

}  // namespace corral::store
