#include "sim/csv.h"

#include <charconv>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>
#include <system_error>
#include <utility>

namespace corral::sim {

namespace {

// Larger times are certainly a corrupt field; the bound also keeps sums of times from overflowing.
constexpr double kMaxTimeS = 1e12;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

bool IsBlank(std::string_view s) { return Trim(s).empty(); }

std::string Quoted(std::string_view s) {
  // Appended piecewise: `"'" + std::string(s)` trips GCC 12's false -Wrestrict warning.
  std::string out(1, '\'');
  out.append(s).push_back('\'');
  return out;
}

// Parses a whole string as a number of type T; nullopt when any character is left over.
template <typename T>
std::optional<T> ParseNumber(std::string_view text) {
  T value{};
  const char* end = text.data() + text.size();
  auto [ptr, ec] = std::from_chars(text.data(), end, value);
  if (ec != std::errc() || ptr != end || text.empty()) return std::nullopt;
  return value;
}

}  // namespace

std::optional<int64_t> ParseInt64(std::string_view text) { return ParseNumber<int64_t>(text); }

std::optional<double> ParseFiniteDouble(std::string_view text) {
  std::optional<double> value = ParseNumber<double>(text);
  if (value && !std::isfinite(*value)) return std::nullopt;
  return value;
}

std::string Location(const std::string& path, int64_t line) {
  return path + ":" + std::to_string(line);
}

Status FieldError(const std::string& path, int64_t line, std::string_view field,
                  std::string_view what) {
  return InvalidArgument(Location(path, line) + ": field '" + std::string(field) +
                         "': " + std::string(what));
}

Status AtLine(const std::string& path, int64_t line, const Status& status) {
  return {status.code(), Location(path, line) + ": " + status.message()};
}

// ---------------------------------------------------------------------------------------------
// LineReader

LineReader::LineReader(std::string path, std::unique_ptr<std::ifstream> in)
    : path_(std::move(path)), in_(std::move(in)) {}

Result<LineReader> LineReader::Open(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return IoError("cannot read '" + path + "': it is a directory");
  }
  auto in = std::make_unique<std::ifstream>(path, std::ios::binary);
  if (!in->is_open()) return IoError("cannot open '" + path + "' for reading");
  return LineReader(path, std::move(in));
}

bool LineReader::Next() {
  if (too_long_ || read_error_) return false;  // the reading ended there
  // std::getline, but never holding more than kMaxLineBytes of a line. The stream buffer
  // reports a read error by throwing (libstdc++'s filebuf), not through the stream's state.
  text_.clear();
  bool read_any = false;  // a line, possibly empty, was there (not the end of the file)
  try {
    while (true) {
      if (next_ == end_ && !Refill()) break;
      read_any = true;
      const char* start = buffer_.data() + next_;
      const auto* newline = static_cast<const char*>(std::memchr(start, '\n', end_ - next_));
      const size_t n = newline != nullptr ? static_cast<size_t>(newline - start) : end_ - next_;
      if (text_.size() + n > kMaxLineBytes) {
        too_long_ = true;
        return false;
      }
      text_.append(start, n);
      next_ += n;
      if (newline != nullptr) {
        ++next_;
        break;
      }
    }
  } catch (const std::ios_base::failure&) {
    read_error_ = true;
    return false;
  }
  if (!read_any) return false;
  ++line_;
  if (!text_.empty() && text_.back() == '\r') text_.pop_back();
  if (line_ == 1 && text_.starts_with("\xEF\xBB\xBF")) text_.erase(0, 3);
  return true;
}

bool LineReader::Refill() {
  constexpr size_t kBlockBytes = size_t{1} << 16;
  buffer_.resize(kBlockBytes);
  next_ = 0;
  end_ = static_cast<size_t>(in_->rdbuf()->sgetn(buffer_.data(), kBlockBytes));
  return end_ > 0;
}

Status LineReader::status() const {
  if (too_long_) {
    return InvalidArgument(Location(path_, line_ + 1) + ": a line over the limit of " +
                           std::to_string(kMaxLineBytes) + " bytes");
  }
  if (read_error_ || in_->bad()) return IoError(Location(path_, line_ + 1) + ": read error");
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// SplitCsvLine

Result<std::vector<std::string>> SplitCsvLine(std::string_view line) {
  std::string quoted;
  std::vector<std::string_view> fields;
  CORRAL_RETURN_IF_ERROR(SplitCsvLineInto(line, quoted, fields));
  return std::vector<std::string>(fields.begin(), fields.end());
}

Status SplitCsvLineInto(std::string_view line, std::string& quoted,
                        std::vector<std::string_view>& fields) {
  fields.clear();
  quoted.clear();
  quoted.reserve(line.size());  // unescaping only shrinks: the views into it stay valid
  size_t i = 0;
  while (true) {
    // Skip leading spaces to find out whether the field is quoted.
    size_t start = i;
    while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
    if (i < line.size() && line[i] == '"') {
      const size_t from = quoted.size();
      const size_t number = fields.size() + 1;
      ++i;
      while (true) {
        if (i >= line.size()) {
          return InvalidArgument("field " + std::to_string(number) + ": unterminated quoted field");
        }
        if (line[i] == '"') {
          if (i + 1 < line.size() && line[i + 1] == '"') {
            quoted.push_back('"');
            i += 2;
            continue;
          }
          ++i;
          break;
        }
        quoted.push_back(line[i++]);
      }
      while (i < line.size() && (line[i] == ' ' || line[i] == '\t')) ++i;
      if (i < line.size() && line[i] != ',') {
        return InvalidArgument("field " + std::to_string(number) +
                               ": unexpected text after a closing quote");
      }
      fields.emplace_back(quoted.data() + from, quoted.size() - from);
    } else {
      size_t comma = line.find(',', start);
      if (comma == std::string_view::npos) comma = line.size();
      fields.push_back(Trim(line.substr(start, comma - start)));
      i = comma;
    }
    if (i >= line.size()) break;
    ++i;  // the comma
  }
  return Status::Ok();
}

// ---------------------------------------------------------------------------------------------
// CsvReader

CsvReader::CsvReader(LineReader lines, std::vector<std::string> columns)
    : lines_(std::move(lines)), columns_(std::move(columns)) {
  for (size_t i = 0; i < columns_.size(); ++i) index_.emplace(columns_[i], i);
}

Result<CsvReader> CsvReader::Open(const std::string& path) {
  CORRAL_SIM_ASSIGN_OR_RETURN(LineReader lines, LineReader::Open(path));
  bool found = false;
  while ((found = lines.Next()) && IsBlank(lines.text())) {
  }
  CORRAL_RETURN_IF_ERROR(lines.status());
  if (!found) return InvalidArgument(path + ": empty file (expected a CSV header line)");
  auto header = SplitCsvLine(lines.text());
  if (!header.ok()) return AtLine(path, lines.line(), header.status());
  std::vector<std::string> columns = std::move(header).value();
  for (size_t i = 0; i < columns.size(); ++i) {
    if (columns[i].empty()) {
      return InvalidArgument(Location(path, lines.line()) + ": header column " +
                             std::to_string(i + 1) + " has no name");
    }
    for (size_t j = 0; j < i; ++j) {
      if (columns[j] == columns[i]) {
        return InvalidArgument(Location(path, lines.line()) + ": column " + Quoted(columns[i]) +
                               " appears twice in the header");
      }
    }
  }
  return CsvReader(std::move(lines), std::move(columns));
}

bool CsvReader::HasColumn(std::string_view name) const { return index_.find(name) != index_.end(); }

bool CsvReader::HasColumns(std::span<const std::string_view> names) const {
  for (std::string_view name : names) {
    if (!HasColumn(name)) return false;
  }
  return true;
}

Status CsvReader::RequireColumns(std::span<const std::string_view> names) const {
  for (std::string_view name : names) {
    if (HasColumn(name)) continue;
    std::string header;
    for (const auto& c : columns_) header += (header.empty() ? "" : ",") + c;
    return InvalidArgument(Location(path(), 1) + ": missing column " + Quoted(name) +
                           " (header: " + header + ")");
  }
  return Status::Ok();
}

bool CsvReader::NextRow() {
  if (!status_.ok()) return false;
  while (lines_.Next()) {
    if (IsBlank(lines_.text())) continue;
    Status split = SplitCsvLineInto(lines_.text(), quoted_, fields_);
    if (!split.ok()) {
      Fail(LineError(split));
      return false;
    }
    if (fields_.size() != columns_.size()) {
      Fail(InvalidArgument(Location(path(), line()) + ": expected " +
                           std::to_string(columns_.size()) + " fields as in the header, got " +
                           std::to_string(fields_.size())));
      return false;
    }
    return true;
  }
  return false;
}

Status CsvReader::status() const {
  if (!status_.ok()) return status_;
  return lines_.status();
}

CsvReader::Column CsvReader::ColumnOf(std::string_view name) const {
  auto it = index_.find(name);
  return Column{it == index_.end() ? Column::kAbsent : it->second, name};
}

std::string_view CsvReader::Text(const Column& column) const {
  if (column.index >= fields_.size()) return {};
  return fields_[column.index];
}

int64_t CsvReader::Int(const Column& column, int64_t min, int64_t max) {
  if (!ok()) return min;
  std::string_view text = Text(column);
  std::optional<int64_t> value = ParseInt64(text);
  if (!value) {
    Fail(FieldError(column.name, "expected an integer, got " + Quoted(text)));
    return min;
  }
  if (*value < min || *value > max) {
    Fail(FieldError(column.name, "must be between " + std::to_string(min) + " and " +
                                     std::to_string(max) + ", got " + std::to_string(*value)));
    return min;
  }
  return *value;
}

double CsvReader::Double(const Column& column, double min, double max) {
  if (!ok()) return min;
  std::string_view text = Text(column);
  std::optional<double> value = ParseFiniteDouble(text);
  if (!value) {
    Fail(FieldError(column.name, "expected a number, got " + Quoted(text)));
    return min;
  }
  if (*value < min || *value > max) {
    Fail(FieldError(column.name, "must be between " + std::to_string(min) + " and " +
                                     std::to_string(max) + ", got " + std::string(text)));
    return min;
  }
  return *value;
}

corral::Seconds CsvReader::Time(const Column& column) {
  if (!ok()) return corral::Seconds(0);
  std::string_view text = Text(column);
  if (std::optional<int64_t> whole = ParseInt64(text)) {
    if (*whole >= 0 && *whole <= static_cast<int64_t>(kMaxTimeS)) return corral::Seconds(*whole);
  }
  std::optional<double> value = ParseFiniteDouble(text);
  if (!value || *value < 0 || *value > kMaxTimeS) {
    Fail(FieldError(column.name, "expected a time in seconds (a number between 0 and 1e12), got " +
                                     Quoted(text)));
    return corral::Seconds(0);
  }
  return corral::Seconds(std::llround(*value));
}

Status CsvReader::FieldError(std::string_view column, std::string_view what) const {
  return sim::FieldError(path(), line(), column, what);
}

Status CsvReader::LineError(const Status& status) const { return AtLine(path(), line(), status); }

void CsvReader::Fail(Status status) {
  if (status_.ok()) status_ = std::move(status);
}

}  // namespace corral::sim
