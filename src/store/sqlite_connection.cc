#include "store/sqlite_connection.h"

#include <fcntl.h>
#include <sqlite3.h>
#include <unistd.h>

namespace corral::store {
namespace {

// How long a statement waits for another process's write lock before failing.
constexpr int kBusyTimeoutMs = 5000;
// Prepared statements kept. The store's SQL is a fixed set plus a few variants (IN lists of
// several lengths); the cap only bounds the worst case.
constexpr size_t kMaxCachedStatements = 256;

StatusCode CodeOf(int extended_code) {
  switch (extended_code) {
    case SQLITE_CONSTRAINT_UNIQUE:
    case SQLITE_CONSTRAINT_PRIMARYKEY:
      return StatusCode::kAlreadyExists;
    case SQLITE_CONSTRAINT_FOREIGNKEY:
      return StatusCode::kNotFound;
    case SQLITE_CONSTRAINT_CHECK:
    case SQLITE_CONSTRAINT_NOTNULL:
      return StatusCode::kInvalidArgument;
    default:
      return StatusCode::kIoError;
  }
}

}  // namespace

Result<std::unique_ptr<SqliteConnection>> SqliteConnection::Open(const std::string& path) {
  // The store holds token hashes and job specs (environment variables): create it readable by
  // its owner only. SQLite gives its -wal and -shm files the database file's permissions.
  if (path != ":memory:") {
    int fd = ::open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
    if (fd >= 0) ::close(fd);  // otherwise it exists already, or SQLite reports the error below
  }
  sqlite3* db = nullptr;
  int rc = sqlite3_open_v2(
      path.c_str(), &db, SQLITE_OPEN_READWRITE | SQLITE_OPEN_CREATE | SQLITE_OPEN_NOMUTEX, nullptr);
  if (rc != SQLITE_OK) {
    std::string message = db ? sqlite3_errmsg(db) : sqlite3_errstr(rc);
    sqlite3_close_v2(db);
    return IoError("open SQLite database '" + path + "': " + message);
  }
  sqlite3_extended_result_codes(db, 1);
  sqlite3_busy_timeout(db, kBusyTimeoutMs);
  std::unique_ptr<SqliteConnection> conn(new SqliteConnection(db));
  sqlite3_commit_hook(
      db,
      [](void* commits) {
        ++*static_cast<int64_t*>(commits);
        return 0;  // 0: let the commit go on
      },
      &conn->commits_);

  // WAL: readers never block the writer, and a commit appends to one file. synchronous=FULL
  // fsyncs the WAL on every commit, so a committed transaction survives power loss, not only a
  // crash of this process (NORMAL would not).
  auto mode = conn->Query("PRAGMA journal_mode=WAL", {});
  if (!mode.ok()) {
    return IoError("open SQLite database '" + path + "': set WAL mode: " + mode.status().message());
  }
  std::string got = mode->empty() ? "" : (*mode)[0].Text(0);
  if (got != "wal" && !(path == ":memory:" && got == "memory")) {
    return IoError("open SQLite database '" + path + "': cannot use WAL mode (journal_mode is '" +
                   got + "'); is the file on a filesystem without shared memory support?");
  }
  // temp_store=MEMORY: the scratch files of a statement (its journal, RETURNING's and sorts'
  // temporary tables) stay in memory. In files they cost a write() per page, more than the
  // committed data itself: about 6 per submitted job, measured with strace (docs/benchmarks.md).
  for (const char* pragma :
       {"PRAGMA synchronous=FULL", "PRAGMA foreign_keys=ON", "PRAGMA temp_store=MEMORY"}) {
    Status s = conn->ExecuteScript(pragma);
    if (!s.ok()) return IoError("open SQLite database '" + path + "': " + s.message());
  }
  return conn;
}

SqliteConnection::~SqliteConnection() {
  for (auto& [sql, stmt] : statements_) sqlite3_finalize(stmt);
  sqlite3_close_v2(db_);
}

Status SqliteConnection::Error(int code) const { return {CodeOf(code), sqlite3_errmsg(db_)}; }

Result<sqlite3_stmt*> SqliteConnection::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return it->second;
  if (statements_.size() >= kMaxCachedStatements) {
    for (auto& [text, old] : statements_) sqlite3_finalize(old);
    statements_.clear();
  }
  sqlite3_stmt* stmt = nullptr;
  int rc = sqlite3_prepare_v3(db_, sql.c_str(), static_cast<int>(sql.size()),
                              SQLITE_PREPARE_PERSISTENT, &stmt, nullptr);
  if (rc != SQLITE_OK) {
    Status error = Error(rc);
    sqlite3_finalize(stmt);
    return Status(StatusCode::kInternal, "prepare: " + error.message());
  }
  statements_.emplace(sql, stmt);
  return stmt;
}

Status SqliteConnection::Run(sqlite3_stmt* stmt, const SqlParams& params, SqlRows* rows) {
  if (static_cast<int>(params.size()) != sqlite3_bind_parameter_count(stmt)) {
    return {StatusCode::kInternal, "statement takes " +
                                       std::to_string(sqlite3_bind_parameter_count(stmt)) +
                                       " parameters, got " + std::to_string(params.size())};
  }
  for (size_t i = 0; i < params.size(); ++i) {
    int index = static_cast<int>(i) + 1;
    const SqlValue& p = params[i];
    // SQLITE_STATIC: params outlive the statement's run (bindings are cleared below).
    if (const auto* v = std::get_if<int64_t>(&p)) {
      sqlite3_bind_int64(stmt, index, *v);
    } else if (const auto* s = std::get_if<std::string>(&p)) {
      sqlite3_bind_text(stmt, index, s->data(), static_cast<int>(s->size()), SQLITE_STATIC);
    } else {
      sqlite3_bind_null(stmt, index);
    }
  }
  Status result;
  for (;;) {
    int rc = sqlite3_step(stmt);
    if (rc == SQLITE_DONE) break;
    if (rc != SQLITE_ROW) {
      result = Error(rc);
      break;
    }
    if (rows == nullptr) continue;
    int columns = sqlite3_column_count(stmt);
    std::vector<SqlValue> cells;
    cells.reserve(columns);
    for (int c = 0; c < columns; ++c) {
      switch (sqlite3_column_type(stmt, c)) {
        case SQLITE_NULL:
          cells.emplace_back(std::monostate{});
          break;
        case SQLITE_INTEGER:
          cells.emplace_back(static_cast<int64_t>(sqlite3_column_int64(stmt, c)));
          break;
        default: {
          const auto* text = reinterpret_cast<const char*>(sqlite3_column_text(stmt, c));
          cells.emplace_back(std::string(text ? text : "", sqlite3_column_bytes(stmt, c)));
        }
      }
    }
    rows->emplace_back(std::move(cells));
  }
  sqlite3_reset(stmt);
  sqlite3_clear_bindings(stmt);
  return result;
}

Result<int64_t> SqliteConnection::Execute(const std::string& sql, const SqlParams& params) {
  auto stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  Status s = Run(*stmt, params, nullptr);
  if (!s.ok()) return s;
  return static_cast<int64_t>(sqlite3_changes64(db_));
}

Result<SqlRows> SqliteConnection::Query(const std::string& sql, const SqlParams& params) {
  auto stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  SqlRows rows;
  Status s = Run(*stmt, params, &rows);
  if (!s.ok()) return s;
  return rows;
}

Result<std::vector<SqlRows>> SqliteConnection::QueryEach(const std::string& sql,
                                                         const std::vector<SqlParams>& param_sets) {
  auto stmt = Prepare(sql);
  if (!stmt.ok()) return stmt.status();
  std::vector<SqlRows> results(param_sets.size());
  for (size_t i = 0; i < param_sets.size(); ++i) {
    Status s = Run(*stmt, param_sets[i], &results[i]);
    if (!s.ok()) return s;
  }
  return results;
}

Result<std::vector<SqlRows>> SqliteConnection::QueryMany(const std::vector<SqlRun>& runs) {
  std::vector<SqlRows> results(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    auto stmt = Prepare(runs[i].sql);  // cached: each statement is prepared once
    if (!stmt.ok()) return stmt.status();
    Status s = Run(*stmt, runs[i].params, &results[i]);
    if (!s.ok()) return s;
  }
  return results;
}

CommitOutcome SqliteConnection::QueryManyAndCommit(const std::vector<SqlRun>& runs) {
  std::vector<SqlRows> results(runs.size());
  for (size_t i = 0; i < runs.size(); ++i) {
    auto stmt = Prepare(runs[i].sql);  // cached: each statement is prepared once
    Status s = stmt.ok() ? Run(*stmt, runs[i].params, &results[i]) : stmt.status();
    if (!s.ok()) return {s, i};
  }
  if (Status s = Commit(); !s.ok()) return {s, runs.size()};
  return {std::move(results), runs.size()};
}

Status SqliteConnection::ExecuteScript(const std::string& sql) {
  char* error = nullptr;
  int rc = sqlite3_exec(db_, sql.c_str(), nullptr, nullptr, &error);
  if (rc == SQLITE_OK) return {};
  Status s(CodeOf(sqlite3_extended_errcode(db_)), error ? error : sqlite3_errstr(rc));
  sqlite3_free(error);
  return s;
}

Status SqliteConnection::Begin() { return Execute("BEGIN IMMEDIATE", {}).status(); }

Status SqliteConnection::Commit() { return Execute("COMMIT", {}).status(); }

Status SqliteConnection::Rollback() {
  if (sqlite3_get_autocommit(db_)) return {};  // no transaction open (or already rolled back)
  return Execute("ROLLBACK", {}).status();
}

}  // namespace corral::store
