// Line-oriented text input for the trace readers: a line reader that tracks line numbers and a
// small CSV reader with header-indexed columns. Every error names the file and the line, and a
// field error also names the column ("pods.csv:12: field 'num_gpu': expected an integer, got
// 'x'"), so that a user can fix a trace without reading code.
//
// CSV dialect: one record per line (a quoted field cannot span lines), ',' separates fields,
// a field may be enclosed in double quotes and then contain ',' and '""' (a literal quote).
// Spaces around unquoted fields are trimmed; CR line endings and a leading UTF-8 BOM are ignored;
// blank lines are skipped. The first non-blank line is the header.
#pragma once

#include <cstdint>
#include <fstream>
#include <functional>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral::sim {

// Returns "path:line" (the prefix of every error about a line of a file).
std::string Location(const std::string& path, int64_t line);
// InvalidArgument "path:line: field 'field': what".
Status FieldError(const std::string& path, int64_t line, std::string_view field,
                  std::string_view what);
// Returns `status` with its message prefixed by "path:line: " (same code).
Status AtLine(const std::string& path, int64_t line, const Status& status);

// Parse the whole of `text` as a decimal integer / a finite number; nullopt when it is empty,
// out of range or has anything left over.
std::optional<int64_t> ParseInt64(std::string_view text);
std::optional<double> ParseFiniteDouble(std::string_view text);

// Reads a text file one line at a time. Strips a trailing '\r' and, on line 1, a UTF-8 BOM.
// A line longer than kMaxLineBytes ends the reading with an error (a trace's records are a few
// hundred bytes; a file that is one huge line would otherwise be read whole into memory).
class LineReader {
 public:
  static constexpr size_t kMaxLineBytes = size_t{1} << 20;

  // IoError naming the path when the file cannot be opened or is a directory.
  static Result<LineReader> Open(const std::string& path);

  // Advances to the next line; false at end of file, on a read error or a line over
  // kMaxLineBytes (then status() says so).
  bool Next();
  // The current line, without its line terminator.
  const std::string& text() const { return text_; }
  // 1-based number of the current line (0 before the first Next()).
  int64_t line() const { return line_; }
  const std::string& path() const { return path_; }
  // IoError if reading failed before the end of the file, InvalidArgument naming the line if
  // it was over kMaxLineBytes; OK otherwise.
  Status status() const;

 private:
  LineReader(std::string path, std::unique_ptr<std::ifstream> in);

  // Reads the next block of the file into buffer_; false at end of file (throws on a read
  // error, as the stream buffer does).
  bool Refill();

  std::string path_;
  std::unique_ptr<std::ifstream> in_;  // owned; a pointer so that the reader stays movable
  std::vector<char> buffer_;           // a block of the file; [next_, end_) not yet read
  size_t next_ = 0;
  size_t end_ = 0;
  std::string text_;
  int64_t line_ = 0;
  bool too_long_ = false;    // line line_ + 1 is over kMaxLineBytes
  bool read_error_ = false;  // reading line line_ + 1 failed
};

// Splits one CSV line into fields (see the dialect above). InvalidArgument, without a location,
// for an unterminated quoted field or text after a closing quote.
Result<std::vector<std::string>> SplitCsvLine(std::string_view line);
// The same as views: an unquoted field views `line`, a quoted one views its unescaped text in
// `quoted` (cleared first, and reserved to line.size() before any view into it is taken, so the
// views stay valid until `line` or `quoted` changes). Both buffers are reused: a reader's rows
// then cost no allocation. On an error `fields` holds the fields before the bad one.
Status SplitCsvLineInto(std::string_view line, std::string& quoted,
                        std::vector<std::string_view>& fields);

// Reads a CSV file record by record and converts fields by column name.
//
// Field getters do not return errors: on a bad value they record the first error of the reader
// (with file, line and column) and return a fallback. After reading the fields of a row, check
// ok(); once an error is recorded, NextRow() returns false and status() holds it.
class CsvReader {
 public:
  // Opens `path` and reads its header. IoError if the file cannot be read; InvalidArgument if
  // it has no header or a column name appears twice.
  static Result<CsvReader> Open(const std::string& path);

  const std::string& path() const { return lines_.path(); }
  // Column names in header order.
  const std::vector<std::string>& columns() const { return columns_; }
  bool HasColumn(std::string_view name) const;
  bool HasColumns(std::span<const std::string_view> names) const;
  // InvalidArgument "path:1: missing column 'x' (header: a,b,c)" for the first absent name.
  Status RequireColumns(std::span<const std::string_view> names) const;

  // Advances to the next non-blank record. False at end of file or on an error: a record whose
  // field count differs from the header's, a malformed quoted field, a read error, or an error
  // recorded earlier by a getter.
  bool NextRow();
  // 1-based line number of the current record.
  int64_t line() const { return lines_.line(); }
  bool ok() const { return status_.ok(); }
  // The first error met (including a read error at the end), or OK.
  Status status() const;

  // A column's position in the header, looked up once so that reading its field in every row
  // costs no lookup by name. `name` is kept as a view: it must outlive the Column (a literal).
  struct Column {
    static constexpr size_t kAbsent = SIZE_MAX;
    size_t index = kAbsent;  // kAbsent when the header has no such column
    std::string_view name;
  };
  Column ColumnOf(std::string_view name) const;

  // The getters below take a column by name (looked up per call) or as a Column.
  // The raw (unquoted, trimmed) text of `column` in the current record; "" when the header has
  // no such column (optional columns are checked with HasColumn).
  std::string_view Text(std::string_view column) const { return Text(ColumnOf(column)); }
  std::string_view Text(const Column& column) const;
  // An integer in [min, max]. A fallback of `min` is returned after an error.
  int64_t Int(std::string_view column, int64_t min, int64_t max) {
    return Int(ColumnOf(column), min, max);
  }
  int64_t Int(const Column& column, int64_t min, int64_t max);
  // A finite number in [min, max].
  double Double(std::string_view column, double min, double max) {
    return Double(ColumnOf(column), min, max);
  }
  double Double(const Column& column, double min, double max);
  // A point in time or a duration in seconds: a non-negative integer, or a decimal number that
  // is rounded to the nearest second.
  corral::Seconds Time(std::string_view column) { return Time(ColumnOf(column)); }
  corral::Seconds Time(const Column& column);

  // InvalidArgument "path:line: field 'column': what" for the current record (not recorded).
  Status FieldError(std::string_view column, std::string_view what) const;
  // `status` prefixed with "path:line: " for the current record (not recorded).
  Status LineError(const Status& status) const;

 private:
  CsvReader(LineReader lines, std::vector<std::string> columns);
  void Fail(Status status);

  LineReader lines_;
  std::vector<std::string> columns_;
  // Hashes std::string and std::string_view alike, so that lookups by a column name in a
  // string_view build no string.
  struct NameHash {
    using is_transparent = void;
    size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
  };
  std::unordered_map<std::string, size_t, NameHash, std::equal_to<>> index_;  // name -> position
  std::string quoted_;                    // the current record's quoted fields, unescaped
  std::vector<std::string_view> fields_;  // the current record: views of the line or quoted_
  Status status_;
};

}  // namespace corral::sim

// Evaluates `expr` (a Result<T>); returns its Status on error, else moves its value into `lhs`.
// (Local to sim until common/status.h offers one.)
#define CORRAL_SIM_CONCAT_INNER(a, b) a##b
#define CORRAL_SIM_CONCAT(a, b) CORRAL_SIM_CONCAT_INNER(a, b)
#define CORRAL_SIM_ASSIGN_OR_RETURN(lhs, expr) \
  CORRAL_SIM_ASSIGN_OR_RETURN_IMPL(CORRAL_SIM_CONCAT(corral_result_, __LINE__), lhs, expr)
// NOLINTBEGIN(bugprone-macro-parentheses): `lhs` may be a declaration; `tmp` is a name.
#define CORRAL_SIM_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                     \
  if (!tmp.ok()) return tmp.status();                    \
  lhs = std::move(tmp).value()
// NOLINTEND(bugprone-macro-parentheses)
