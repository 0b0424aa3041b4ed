#include "store/postgres_connection.h"

#include "store/libpq.h"
#include "store/store_url.h"

namespace corral::store {
namespace {

// Prepared statements kept per connection. The store's SQL is a fixed set of texts plus a few
// variants (IN lists of several lengths), far below this; the cap only bounds the worst case.
constexpr size_t kMaxPreparedStatements = 256;
// Runs per pipeline sync: bounds what is sent before the first answer is read. libpq reads the
// server's answers while it waits to send (so the two sides cannot both block on full socket
// buffers); what it bounds is the answers held in memory, and the store pipelines only writes
// whose answers are a short row at most (an id, a state). Large enough for a batcher's whole
// group (group_commit.h's max_batch, 256 items of a few statements each) to be one round trip.
constexpr size_t kPipelineChunk = 2048;

void IgnoreNotice(void*, const char*) {}

std::string TrimNewlines(std::string s) {
  while (!s.empty() && (s.back() == '\n' || s.back() == ' ')) s.pop_back();
  return s;
}

StatusCode CodeOf(std::string_view sqlstate) {
  if (sqlstate == "23505") return StatusCode::kAlreadyExists;  // unique_violation
  if (sqlstate == "23503") return StatusCode::kNotFound;       // foreign_key_violation
  if (sqlstate == "23514" || sqlstate == "23502") {            // check / not_null_violation
    return StatusCode::kInvalidArgument;
  }
  // Raised by migration 15's checks: corral_fence, corral_expect_one.
  if (sqlstate == "CRL01") return StatusCode::kUnavailable;
  if (sqlstate == "CRL02") return StatusCode::kFailedPrecondition;
  return StatusCode::kIoError;
}

// The parameters as libpq wants them: NUL-terminated text, nullptr for NULL.
class TextParams {
 public:
  explicit TextParams(const SqlParams& params) {
    numbers_.reserve(params.size());  // no reallocation: values_ points into it
    values_.reserve(params.size());
    for (const SqlValue& p : params) {
      if (const auto* v = std::get_if<int64_t>(&p)) {
        numbers_.push_back(std::to_string(*v));
        values_.push_back(numbers_.back().c_str());
      } else if (const auto* s = std::get_if<std::string>(&p)) {
        values_.push_back(s->c_str());
      } else {
        values_.push_back(nullptr);
      }
    }
  }
  int count() const { return static_cast<int>(values_.size()); }
  const char* const* values() const { return values_.data(); }

 private:
  std::vector<std::string> numbers_;
  std::vector<const char*> values_;
};

SqlRows RowsOf(const LibPq& pq, const PGresult* result) {
  SqlRows rows;
  int n = pq.PQntuples(result);
  int columns = pq.PQnfields(result);
  rows.reserve(n);
  for (int r = 0; r < n; ++r) {
    std::vector<SqlValue> cells;
    cells.reserve(columns);
    for (int c = 0; c < columns; ++c) {
      if (pq.PQgetisnull(result, r, c)) {
        cells.emplace_back(std::monostate{});
      } else {
        cells.emplace_back(std::string(pq.PQgetvalue(result, r, c), pq.PQgetlength(result, r, c)));
      }
    }
    rows.emplace_back(std::move(cells));
  }
  return rows;
}

bool Succeeded(const LibPq& pq, const PGresult* result) {
  ExecStatusType status = pq.PQresultStatus(result);
  return status == PGRES_COMMAND_OK || status == PGRES_TUPLES_OK;
}

}  // namespace

std::string ToPostgresPlaceholders(std::string_view sql) {
  std::string out;
  out.reserve(sql.size() + 16);
  char quote = 0;  // the quote character we are inside, or 0
  int n = 0;
  for (char c : sql) {
    if (quote != 0) {
      if (c == quote) quote = 0;  // a doubled quote re-enters at once: same result
      out += c;
    } else if (c == '\'' || c == '"') {
      quote = c;
      out += c;
    } else if (c == '?') {
      out += '$' + std::to_string(++n);
    } else {
      out += c;
    }
  }
  return out;
}

Result<std::unique_ptr<PostgresConnection>> PostgresConnection::Open(const std::string& url) {
  // The URL comes last so that what it says overrides these defaults.
  const char* keys[] = {"connect_timeout", "application_name", "dbname", nullptr};
  const char* values[] = {"10", "corral", url.c_str(), nullptr};
  std::string where = "connect to PostgreSQL at " + RedactUrl(url) + ": ";
  auto library = LoadLibPq();
  if (!library.ok()) return Status(library.status().code(), where + library.status().message());
  const LibPq& pq = **library;
  PGconn* conn = pq.PQconnectdbParams(keys, values, /*expand_dbname=*/1);
  if (conn == nullptr) return IoError(where + "out of memory");
  std::string password = UrlPassword(url);
  if (pq.PQstatus(conn) != CONNECTION_OK) {
    std::string message = Scrub(TrimNewlines(pq.PQerrorMessage(conn)), password);
    pq.PQfinish(conn);
    return IoError(where + message);
  }
  pq.PQsetNoticeProcessor(conn, IgnoreNotice, nullptr);  // "already exists, skipping" and the like
  std::unique_ptr<PostgresConnection> pg(new PostgresConnection(pq, conn, std::move(password)));
  if (pq.PQsetClientEncoding(conn, "UTF8") != 0) {
    return IoError(where + "set client encoding UTF8: " + pg->ConnectionError("").message());
  }
  // Durable before visible: a server configured with synchronous_commit=off would acknowledge
  // commits it can still lose. Stronger settings (remote_write, remote_apply) are kept.
  auto sync = pg->Query("SHOW synchronous_commit", {});
  if (!sync.ok()) return IoError(where + sync.status().message());
  if (!sync->empty() && (*sync)[0].Text(0) == "off") {
    auto set = pg->Execute("SET synchronous_commit TO on", {});
    if (!set.ok()) return IoError(where + set.status().message());
  }
  if (Status s = pg->SetUpSession(); !s.ok()) return IoError(where + s.message());
  return pg;
}

Status PostgresConnection::SetUpSession() {
  const std::string sql =
      "SET idle_in_transaction_session_timeout = " + std::to_string(kIdleInTransactionTimeoutMs);
  std::shared_ptr<PGresult> result(pq_.PQexec(conn_, sql.c_str()), pq_.PQclear);
  if (result == nullptr || pq_.PQresultStatus(result.get()) != PGRES_COMMAND_OK) {
    return ConnectionError("set idle_in_transaction_session_timeout: ");
  }
  return {};
}

PostgresConnection::~PostgresConnection() { pq_.PQfinish(conn_); }

Status PostgresConnection::ConnectionError(std::string_view what) const {
  std::string message = TrimNewlines(pq_.PQerrorMessage(conn_));
  if (message.empty()) message = "connection failed";
  return IoError(std::string(what) + Scrub(message, password_));
}

Status PostgresConnection::ResultError(const PGresult* result) const {
  if (result == nullptr) return ConnectionError("");
  const char* sqlstate = pq_.PQresultErrorField(result, PG_DIAG_SQLSTATE);
  const char* primary = pq_.PQresultErrorField(result, PG_DIAG_MESSAGE_PRIMARY);
  const char* detail = pq_.PQresultErrorField(result, PG_DIAG_MESSAGE_DETAIL);
  if (primary == nullptr) {
    std::string message = TrimNewlines(pq_.PQresultErrorMessage(result));
    if (message.empty()) return ConnectionError("");
    return IoError(Scrub(message, password_));
  }
  std::string message = primary;
  if (detail != nullptr) message += std::string(" (") + detail + ")";
  return {CodeOf(sqlstate ? sqlstate : ""), Scrub(message, password_)};
}

Status PostgresConnection::EnsureConnected() {
  if (transaction_lost_) return IoError("the connection was reset; the transaction is lost");
  if (pq_.PQstatus(conn_) == CONNECTION_OK) return {};
  if (in_transaction_) return ConnectionError("connection lost inside a transaction: ");
  pq_.PQreset(conn_);
  statements_.clear();  // prepared statements die with the session
  if (pq_.PQstatus(conn_) != CONNECTION_OK) return ConnectionError("reconnect: ");
  pq_.PQsetNoticeProcessor(conn_, IgnoreNotice, nullptr);
  return SetUpSession();  // session settings die with the session too
}

Status PostgresConnection::AbandonSession(Status why) {
  pq_.PQreset(conn_);
  statements_.clear();
  if (pq_.PQstatus(conn_) == CONNECTION_OK) (void)SetUpSession();  // else at the reconnect
  if (in_transaction_) transaction_lost_ = true;
  return why;
}

Result<std::string> PostgresConnection::Prepare(const std::string& sql) {
  auto it = statements_.find(sql);
  if (it != statements_.end()) return it->second;
  if (statements_.size() >= kMaxPreparedStatements) return std::string();
  std::string name = "corral_" + std::to_string(next_statement_++);
  std::string text = ToPostgresPlaceholders(sql);
  std::shared_ptr<PGresult> result(pq_.PQprepare(conn_, name.c_str(), text.c_str(), 0, nullptr),
                                   pq_.PQclear);
  ++round_trips_;
  if (!result || !Succeeded(pq_, result.get())) return ResultError(result.get());
  statements_.emplace(sql, name);
  return name;
}

bool PostgresConnection::Send(const std::string& name, const std::string& sql,
                              const SqlParams& params) {
  TextParams text(params);  // libpq copies the values into its output buffer
  if (name.empty()) {
    return pq_.PQsendQueryParams(conn_, ToPostgresPlaceholders(sql).c_str(), text.count(), nullptr,
                                 text.values(), nullptr, nullptr, 0) == 1;
  }
  return pq_.PQsendQueryPrepared(conn_, name.c_str(), text.count(), text.values(), nullptr, nullptr,
                                 0) == 1;
}

Result<std::vector<PostgresConnection::RunResult>> PostgresConnection::Pipeline(
    const std::string& sql, const std::vector<SqlParams>& param_sets) {
  return Pipeline(
      param_sets.size(), [&](size_t) -> const std::string& { return sql; },
      [&](size_t i) -> const SqlParams& { return param_sets[i]; }, PipelineEnd::kNone);
}

Result<std::vector<PostgresConnection::RunResult>> PostgresConnection::Pipeline(
    size_t count, const std::function<const std::string&(size_t)>& sql_of,
    const std::function<const SqlParams&(size_t)>& params_of, PipelineEnd end_with,
    size_t* failed_run) {
  std::vector<RunResult> results;
  const bool commit = end_with == PipelineEnd::kCommit;
  if (count == 0 && !commit) return results;  // a pending BEGIN waits for the next statement
  CORRAL_RETURN_IF_ERROR(EnsureConnected());
  std::vector<std::string> names(count);  // each run's prepared statement
  bool writes = false;                    // a run that is not a SELECT
  for (size_t i = 0; i < count; ++i) {
    const std::string& sql = sql_of(i);
    auto name = i > 0 && sql_of(i - 1) == sql ? Result<std::string>(names[i - 1]) : Prepare(sql);
    if (!name.ok()) return name.status();
    names[i] = std::move(name).value();
    writes |= sql.rfind("SELECT", 0) != 0;
  }
  results.reserve(count);
  size_t begin = 0;
  do {
    const size_t end = std::min(count, begin + kPipelineChunk);
    const bool with_commit = commit && end == count;  // COMMIT goes with the last chunk
    // A pipeline that cannot be completed leaves libpq mid-protocol: start a new session
    // rather than guess what the server saw. A COMMIT in flight then has an unknown outcome.
    const std::string lost = with_commit ? "commit (outcome unknown): " : "";
    auto abandon = [&](std::string_view what) {
      if (failed_run != nullptr) *failed_run = count;
      return AbandonSession(ConnectionError(lost + std::string(what)));
    };
    if (pq_.PQenterPipelineMode(conn_) != 1) return ConnectionError("enter pipeline mode: ");
    const bool with_begin = begin_pending_;
    if (with_begin) {
      begin_pending_ = false;  // from here on the server has (or had) the transaction
      if (pq_.PQsendQueryParams(conn_, "BEGIN", 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) {
        return abandon("send: ");
      }
    }
    for (size_t i = begin; i < end; ++i) {
      if (!Send(names[i], sql_of(i), params_of(i))) return abandon("send: ");
    }
    if (with_commit &&
        pq_.PQsendQueryParams(conn_, "COMMIT", 0, nullptr, nullptr, nullptr, nullptr, 0) != 1) {
      return abandon("send: ");
    }
    if (pq_.PQpipelineSync(conn_) != 1) return abandon("pipeline sync: ");
    ++round_trips_;
    // Every statement answers with its results and then a null; after an error the server skips
    // the rest up to the sync (PGRES_PIPELINE_ABORTED). Read all of it to leave the pipeline
    // clean. Statement k: BEGIN (when sent), the runs begin..end, COMMIT (when sent).
    Status first_error;
    const size_t runs_from = with_begin ? 1 : 0;
    const size_t statements = runs_from + (end - begin) + (with_commit ? 1 : 0);
    bool committed = false;
    for (size_t k = 0; k < statements; ++k) {
      const bool is_commit = with_commit && k + 1 == statements;
      while (PGresult* raw = pq_.PQgetResult(conn_)) {
        std::shared_ptr<PGresult> result(raw, pq_.PQclear);
        if (pq_.PQresultStatus(raw) == PGRES_PIPELINE_ABORTED) continue;
        if (!Succeeded(pq_, raw)) {
          if (first_error.ok()) {
            first_error = ResultError(raw);
            if (failed_run != nullptr) *failed_run = k < runs_from ? count : begin + k - runs_from;
          }
          continue;
        }
        if (k < runs_from) continue;  // BEGIN's own result
        if (is_commit) {
          // A transaction the server had aborted answers COMMIT with ROLLBACK.
          committed = std::string_view(pq_.PQcmdStatus(raw)) == "COMMIT";
          continue;
        }
        std::string_view tuples = pq_.PQcmdTuples(raw);
        results.push_back({RowsOf(pq_, raw), tuples.empty() ? 0 : std::stoll(std::string(tuples))});
      }
      if (pq_.PQstatus(conn_) != CONNECTION_OK) return abandon("");
    }
    std::shared_ptr<PGresult> sync(pq_.PQgetResult(conn_), pq_.PQclear);
    if (!sync || pq_.PQresultStatus(sync.get()) != PGRES_PIPELINE_SYNC) {
      return abandon("pipeline: expected the sync point: ");
    }
    if (pq_.PQexitPipelineMode(conn_) != 1) return abandon("exit pipeline mode: ");
    if (!first_error.ok()) return first_error;
    if (with_commit) {
      in_transaction_ = false;
      if (!committed) {
        if (failed_run != nullptr) *failed_run = count;
        return IoError("commit: the server rolled the transaction back");
      }
      ++commits_;
    } else if (!in_transaction_ && writes) {
      ++commits_;  // outside a transaction the chunk ran as one, committed at the sync
    }
    begin = end;
  } while (begin < count);
  return results;
}

Result<int64_t> PostgresConnection::Execute(const std::string& sql, const SqlParams& params) {
  auto results = Pipeline(sql, {params});
  if (!results.ok()) return results.status();
  return results->front().changed;
}

Result<SqlRows> PostgresConnection::Query(const std::string& sql, const SqlParams& params) {
  auto results = Pipeline(sql, {params});
  if (!results.ok()) return results.status();
  return std::move(results->front().rows);
}

std::vector<SqlRows> PostgresConnection::RowsOfRuns(std::vector<RunResult> results) {
  std::vector<SqlRows> rows;
  rows.reserve(results.size());
  for (RunResult& r : results) rows.push_back(std::move(r.rows));
  return rows;
}

Result<std::vector<SqlRows>> PostgresConnection::QueryEach(
    const std::string& sql, const std::vector<SqlParams>& param_sets) {
  auto results = Pipeline(sql, param_sets);
  if (!results.ok()) return results.status();
  return RowsOfRuns(std::move(results).value());
}

Result<std::vector<SqlRows>> PostgresConnection::QueryMany(const std::vector<SqlRun>& runs) {
  auto results = Pipeline(
      runs.size(), [&](size_t i) -> const std::string& { return runs[i].sql; },
      [&](size_t i) -> const SqlParams& { return runs[i].params; }, PipelineEnd::kNone);
  if (!results.ok()) return results.status();
  return RowsOfRuns(std::move(results).value());
}

CommitOutcome PostgresConnection::QueryManyAndCommit(const std::vector<SqlRun>& runs) {
  if (!in_transaction_) {
    return {Status(StatusCode::kInternal, "commit: no transaction is open"), runs.size()};
  }
  if (transaction_lost_) {
    return {IoError("commit: the connection was lost; the transaction was rolled back"),
            runs.size()};
  }
  if (begin_pending_ && runs.empty()) {  // nothing ran: nothing to commit
    Rollback();
    return {std::vector<SqlRows>{}, 0};
  }
  size_t failed_run = runs.size();  // unless the pipeline names a run
  auto results = Pipeline(
      runs.size(), [&](size_t i) -> const std::string& { return runs[i].sql; },
      [&](size_t i) -> const SqlParams& { return runs[i].params; }, PipelineEnd::kCommit,
      &failed_run);
  if (!results.ok()) return {results.status(), failed_run};
  return {RowsOfRuns(std::move(results).value()), runs.size()};
}

Status PostgresConnection::ExecuteScript(const std::string& sql) {
  CORRAL_RETURN_IF_ERROR(EnsureConnected());
  // A BEGIN in a multi-statement query opens a transaction that outlives the query.
  std::string text = begin_pending_ ? "BEGIN; " + sql : sql;
  begin_pending_ = false;
  std::shared_ptr<PGresult> result(pq_.PQexec(conn_, text.c_str()), pq_.PQclear);
  ++round_trips_;
  if (!result || !Succeeded(pq_, result.get())) return ResultError(result.get());
  return {};
}

Status PostgresConnection::Begin() {
  if (in_transaction_) return {StatusCode::kInternal, "begin: a transaction is already open"};
  CORRAL_RETURN_IF_ERROR(EnsureConnected());
  // BEGIN travels with the transaction's first statement: one round trip less per transaction.
  begin_pending_ = true;
  in_transaction_ = true;
  return {};
}

Status PostgresConnection::Commit() {
  if (transaction_lost_ || pq_.PQstatus(conn_) != CONNECTION_OK) {
    Rollback();
    return IoError("commit: the connection was lost; the transaction was rolled back");
  }
  if (begin_pending_) {  // nothing ran: nothing to commit
    Rollback();
    return {};
  }
  if (pq_.PQtransactionStatus(conn_) == PQTRANS_INERROR) {
    Rollback();
    return IoError("commit: the transaction was aborted by an earlier error");
  }
  std::shared_ptr<PGresult> result(pq_.PQexec(conn_, "COMMIT"), pq_.PQclear);
  ++round_trips_;
  in_transaction_ = false;
  if (!result || !Succeeded(pq_, result.get())) {
    Status error = ResultError(result.get());
    // With the connection lost during COMMIT the server may or may not have committed.
    bool lost = pq_.PQstatus(conn_) != CONNECTION_OK;
    return {error.code(), (lost ? "commit (outcome unknown): " : "commit: ") + error.message()};
  }
  if (std::string_view(pq_.PQcmdStatus(result.get())) != "COMMIT") {
    return IoError("commit: the server rolled the transaction back");
  }
  ++commits_;
  return {};
}

Status PostgresConnection::Rollback() {
  in_transaction_ = false;
  transaction_lost_ = false;
  begin_pending_ = false;
  if (pq_.PQstatus(conn_) != CONNECTION_OK) return {};  // the server rolls back a lost session
  if (pq_.PQtransactionStatus(conn_) == PQTRANS_IDLE) return {};
  std::shared_ptr<PGresult> result(pq_.PQexec(conn_, "ROLLBACK"), pq_.PQclear);
  ++round_trips_;
  if (!result || !Succeeded(pq_, result.get())) return ResultError(result.get());
  return {};
}

}  // namespace corral::store
