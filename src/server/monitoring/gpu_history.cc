#include "server/monitoring/gpu_history.h"

#include <cmath>
#include <map>
#include <sstream>
#include <tuple>

#include "common/strings.h"

namespace corral::server {

namespace {

constexpr int64_t kMaxReportDays = 3660;

bool IsDay(const std::string& s) {
  if (s.size() != 10 || s[4] != '-' || s[7] != '-') return false;
  for (size_t i : {0, 1, 2, 3, 5, 6, 8, 9}) {
    if (s[i] < '0' || s[i] > '9') return false;
  }
  const int month = std::stoi(s.substr(5, 2)), day = std::stoi(s.substr(8, 2));
  return month >= 1 && month <= 12 && day >= 1 && day <= 31;
}

double Hours(int64_t ms) { return std::round(static_cast<double>(ms) / 3600.0) / 1000.0; }

std::string CsvField(const std::string& s) {
  if (s.find_first_of(",\"\r\n") == std::string::npos) return s;
  std::string out = "\"";
  for (char c : s) out += c == '"' ? std::string("\"\"") : std::string(1, c);
  return out + "\"";
}

}  // namespace

Result<UsageGrouping> ParseUsageGrouping(const std::string& by) {
  UsageGrouping g;
  for (const std::string& word : Split(by, ',')) {
    const std::string w = Trim(word);
    if (w == "user") {
      g.user = true;
    } else if (w == "project") {
      g.project = true;
    } else if (w == "day") {
      g.day = true;
    } else {
      return InvalidArgument("field 'by': '" + w + "' is none of user, project, day");
    }
  }
  if (!g.user && !g.project && !g.day) {
    return InvalidArgument("field 'by': give user, project or day (or several, comma-separated)");
  }
  return g;
}

Result<std::pair<std::string, std::string>> ParseDayRange(const std::string& since,
                                                          const std::string& until, Seconds now) {
  const std::string today = UtcDay(now.value());
  std::string from;
  if (!since.empty() && since.back() == 'd' && since.size() <= 6 &&
      since.find_first_not_of("0123456789") == since.size() - 1 && since.size() > 1) {
    const int64_t days = std::stoll(since.substr(0, since.size() - 1));
    if (days < 1 || days > kMaxReportDays) {
      return InvalidArgument("field 'since': from 1d to " + std::to_string(kMaxReportDays) + "d");
    }
    from = UtcDay(now.value() - (days - 1) * 86400);
  } else if (IsDay(since)) {
    from = since;
  } else {
    return InvalidArgument("field 'since': '" + since +
                           "' is neither Nd (e.g. 30d) nor YYYY-MM-DD");
  }
  std::string to = today;
  if (!until.empty()) {
    if (!IsDay(until)) return InvalidArgument("field 'until': '" + until + "' is not YYYY-MM-DD");
    to = until;
  }
  if (to < from) return InvalidArgument("field 'until': before 'since' (" + from + ")");
  return std::pair(from, to);
}

nlohmann::json UsageReport(const std::vector<store::GpuUsageRow>& rows, UsageGrouping by) {
  struct Sums {
    int64_t allocated = 0, used = 0, lost = 0;
  };
  std::map<std::tuple<std::string, std::string, std::string>, Sums> sums;
  for (const store::GpuUsageRow& r : rows) {
    Sums& s = sums[{by.user ? r.user : "", by.project ? r.project : "", by.day ? r.day : ""}];
    s.allocated += r.allocated_gpu_ms;
    s.used += r.used_gpu_ms;
    s.lost += r.lost_gpu_ms;
  }
  nlohmann::json out = nlohmann::json::array();
  for (const auto& [key, value] : sums) {
    const auto& [user, project, day] = key;
    nlohmann::json row = nlohmann::json::object();
    if (by.user) row["user"] = user;
    if (by.project) row["project"] = project;
    if (by.day) row["day"] = day;
    row["allocated_gpu_hours"] = Hours(value.allocated);
    row["used_gpu_hours"] = Hours(value.used);
    row["utilization_percent"] =
        value.allocated > 0
            ? std::round(1000.0 * static_cast<double>(value.used) / value.allocated) / 10.0
            : 0.0;
    row["lost_gpu_hours"] = Hours(value.lost);
    out.push_back(std::move(row));
  }
  return out;
}

std::string UsageCsv(const nlohmann::json& report, UsageGrouping by) {
  std::vector<std::string> columns;
  if (by.user) columns.push_back("user");
  if (by.project) columns.push_back("project");
  if (by.day) columns.push_back("day");
  for (const char* c :
       {"allocated_gpu_hours", "used_gpu_hours", "utilization_percent", "lost_gpu_hours"}) {
    columns.push_back(c);
  }
  std::ostringstream out;
  out << Join(columns, ",") << "\n";
  for (const auto& row : report) {
    std::vector<std::string> fields;
    for (const std::string& c : columns) {
      fields.push_back(row[c].is_string() ? CsvField(row[c].get<std::string>()) : row[c].dump());
    }
    out << Join(fields, ",") << "\n";
  }
  return out.str();
}

GpuHistory::GpuHistory(GpuMonitor& monitor, store::Store& store, Clock& clock, Options options)
    : monitor_(monitor), store_(store), clock_(clock), options_(options) {}

GpuHistory::~GpuHistory() { Stop(); }

void GpuHistory::Start() {
  std::lock_guard lock(mu_);
  if (thread_.joinable()) return;
  stopping_ = false;
  thread_ = std::thread([this] { Loop(); });
}

void GpuHistory::Stop() {
  {
    std::lock_guard lock(mu_);
    if (!thread_.joinable()) return;
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
  monitor_.CloseOpenIntervals();  // what the last minutes said is not lost with the process
  (void)Flush();
}

void GpuHistory::Loop() {
  Seconds next_prune = clock_.Now();
  std::unique_lock lock(mu_);
  while (!stopping_) {
    wake_.wait_for(lock, options_.flush_period, [&] { return stopping_; });
    if (stopping_) break;
    lock.unlock();
    (void)Flush();  // a failure is kept and retried at the next flush
    if (clock_.Now() >= next_prune) {
      (void)Prune();
      next_prune = clock_.Now() + options_.prune_period;
    }
    lock.lock();
  }
}

Status GpuHistory::Flush() {
  std::vector<store::GpuMetricRow> intervals = monitor_.TakeClosedIntervals();
  std::vector<store::GpuUsageRow> usage = monitor_.TakeUsage();
  std::lock_guard lock(mu_);
  pending_intervals_.insert(pending_intervals_.end(), intervals.begin(), intervals.end());
  if (pending_intervals_.size() > kMaxPendingRows) {
    pending_intervals_.erase(pending_intervals_.begin(),
                             pending_intervals_.end() - kMaxPendingRows);
  }
  pending_usage_.insert(pending_usage_.end(), usage.begin(), usage.end());
  Status s = store_.AddGpuMetrics(pending_intervals_);
  if (s.ok()) pending_intervals_.clear();
  // GPU time adds up: rows the store took are never sent again.
  Status u = store_.AddGpuUsage(pending_usage_);
  if (u.ok()) pending_usage_.clear();
  return s.ok() ? u : s;
}

Status GpuHistory::Prune() {
  const int64_t now = clock_.Now().value();
  auto fine = store_.PruneGpuMetrics(kFineResolutionS, now - options_.fine_retention.value(),
                                     kPruneBatchRows);
  if (!fine.ok()) return fine.status();
  return store_
      .PruneGpuMetrics(kCoarseResolutionS, now - options_.coarse_retention.value(), kPruneBatchRows)
      .status();
}

Result<std::vector<store::GpuMetricRow>> GpuHistory::JobHistory(JobId job, Seconds from,
                                                                Seconds to) {
  const bool fine = from.value() >= clock_.Now().value() - options_.fine_retention.value();
  return store_.GpuMetrics(fine ? kFineResolutionS : kCoarseResolutionS, from.value(), to.value(),
                           "", job);
}

}  // namespace corral::server
