// The SQLite driver of SqlConnection (SQLite 3.40): one database file in WAL mode with
// synchronous=FULL, so that a commit is on disk when Commit() (or an autocommit statement)
// returns; foreign keys on; a busy timeout for other processes holding the write lock.
//
// Thread safety: none; one thread at a time (the handle is opened without SQLite's own mutex).
#pragma once

#include <memory>
#include <string>
#include <unordered_map>

#include "store/sql_connection.h"

struct sqlite3;
struct sqlite3_stmt;

namespace corral::store {

class SqliteConnection final : public SqlConnection {
 public:
  // Opens the database file at `path`, creating it when missing (its folder must exist).
  static Result<std::unique_ptr<SqliteConnection>> Open(const std::string& path);
  ~SqliteConnection() override;
  SqliteConnection(const SqliteConnection&) = delete;
  SqliteConnection& operator=(const SqliteConnection&) = delete;

  Dialect dialect() const override { return Dialect::kSqlite; }
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
  int64_t RoundTrips() const override { return 0; }  // in-process

 private:
  explicit SqliteConnection(sqlite3* db) : db_(db) {}

  // The cached prepared statement for `sql` (prepared on first use).
  Result<sqlite3_stmt*> Prepare(const std::string& sql);
  // Binds params, steps to the end appending rows to `rows` (when not null), resets.
  Status Run(sqlite3_stmt* stmt, const SqlParams& params, SqlRows* rows);
  Status Error(int code) const;

  sqlite3* db_;                                                // owned
  std::unordered_map<std::string, sqlite3_stmt*> statements_;  // owned; keyed by SQL text
  int64_t commits_ = 0;  // counted by SQLite's commit hook (explicit and automatic commits)
};

}  // namespace corral::store
