// The PostgreSQL driver of SqlConnection, on the libpq C API (loaded at run time by the first
// Open: store/libpq.h). Statements are prepared once per
// connection (by SQL text) and run with text parameters in pipeline mode: QueryEach sends all
// its runs in one round trip, and the BEGIN of a transaction travels with its first statement. A
// connection that broke is re-established at the start of the next statement outside a
// transaction (inside one, the statement fails: the transaction is lost).
//
// Thread safety: none; one thread at a time.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>

#include "store/sql_connection.h"

struct pg_conn;
struct pg_result;

namespace corral::store {

struct LibPq;  // store/libpq.h

// "SELECT ? WHERE a = '?'" -> "SELECT $1 WHERE a = '?'": every `?` outside a quoted literal or
// identifier becomes $1, $2, ... in order. (The store's SQL has no comments and no `?`
// operators, which this does not recognise.)
std::string ToPostgresPlaceholders(std::string_view sql);

// How long PostgreSQL lets one of corral's transactions sit idle (no statement running) before
// it ends the session: longer than any pause of a live server between two statements of one
// transaction, short enough that a takeover waiting on a frozen leader's lock waits seconds.
inline constexpr int kIdleInTransactionTimeoutMs = 5000;

class PostgresConnection final : public SqlConnection {
 public:
  // Connects with a libpq URI ("postgres://user@host:port/db?..."). Messages show the URL with
  // its password redacted. Every session (the first, and each after a reconnect) ends a
  // transaction left idle for kIdleInTransactionTimeoutMs: a frozen server (SIGSTOP, a paused
  // VM) cannot hold its locks, the leader's epoch row among them, for ever.
  static Result<std::unique_ptr<PostgresConnection>> Open(const std::string& url);
  ~PostgresConnection() override;
  PostgresConnection(const PostgresConnection&) = delete;
  PostgresConnection& operator=(const PostgresConnection&) = delete;

  Dialect dialect() const override { return Dialect::kPostgres; }
  Result<int64_t> Execute(const std::string& sql, const SqlParams& params) override;
  Result<SqlRows> Query(const std::string& sql, const SqlParams& params) override;
  Result<std::vector<SqlRows>> QueryMany(const std::vector<SqlRun>& runs) override;
  CommitOutcome QueryManyAndCommit(const std::vector<SqlRun>& runs) override;
  Result<std::vector<SqlRows>> QueryEach(const std::string& sql,
                                         const std::vector<SqlParams>& param_sets) override;
  Status ExecuteScript(const std::string& sql) override;
  Status Begin() override;
  Status Commit() override;
  Status Rollback() override;
  int64_t Commits() const override { return commits_; }
  int64_t RoundTrips() const override { return round_trips_; }

 private:
  PostgresConnection(const LibPq& pq, pg_conn* conn, std::string password)
      : pq_(pq), conn_(conn), password_(std::move(password)) {}

  // Re-establishes a broken connection when no transaction is open.
  Status EnsureConnected();
  // Applies corral's session settings (the idle-in-transaction timeout) to a new session.
  Status SetUpSession();
  // Starts a new session after a pipeline broke off midway; an open transaction is lost (and
  // Commit will say so). Returns `why`.
  Status AbandonSession(Status why);
  // The name of the prepared statement for `sql`, preparing it on first use; "" when the cache
  // is full (the statement then runs unprepared).
  Result<std::string> Prepare(const std::string& sql);
  // Sends one run of `sql` (prepared as `name`, or unprepared when name is "").
  bool Send(const std::string& name, const std::string& sql, const SqlParams& params);
  struct RunResult {
    SqlRows rows;
    int64_t changed = 0;  // rows the statement changed
  };
  // What follows a pipeline's runs.
  enum class PipelineEnd {
    kNone,
    kCommit,  // COMMIT of the open transaction, with the last chunk
  };
  // Runs `count` statements in pipeline mode (one round trip per chunk of runs), run i being
  // sql_of(i) with params_of(i), the deferred BEGIN first when one is pending. Stops at the
  // first error, setting `failed_run` (when not null) as QueryManyAndCommit says.
  Result<std::vector<RunResult>> Pipeline(size_t count,
                                          const std::function<const std::string&(size_t)>& sql_of,
                                          const std::function<const SqlParams&(size_t)>& params_of,
                                          PipelineEnd end_with, size_t* failed_run = nullptr);
  // The rows of each run.
  static std::vector<SqlRows> RowsOfRuns(std::vector<RunResult> results);
  // Pipeline of one statement run once per parameter set.
  Result<std::vector<RunResult>> Pipeline(const std::string& sql,
                                          const std::vector<SqlParams>& param_sets);
  Status ResultError(const pg_result* result) const;
  Status ConnectionError(std::string_view what) const;

  const LibPq& pq_;                                          // libpq, loaded by Open
  pg_conn* conn_;                                            // owned
  std::string password_;                                     // scrubbed from every message
  std::unordered_map<std::string, std::string> statements_;  // SQL text -> prepared name
  int next_statement_ = 0;
  bool in_transaction_ = false;    // between Begin() and Commit()/Rollback()
  bool transaction_lost_ = false;  // the session was reset inside the open transaction
  bool begin_pending_ = false;     // Begin() was called; BEGIN goes out with the next statement
  int64_t commits_ = 0;            // Commits()
  int64_t round_trips_ = 0;        // RoundTrips()
};

}  // namespace corral::store
