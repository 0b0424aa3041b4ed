// The GPU metrics history and accounting in the store (docs/monitoring.md). A thread moves the
// monitor's closed intervals (10 s and 5 min) and the GPU time it accrued into the store every
// flush period, and deletes intervals past their retention (10 s ones after a day, 5 min ones
// after 90 days, by default) every prune period; GPU time per day, user and project is kept.
// Reads: usage reports (`corral usage`) and a job's history.
// Thread safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <condition_variable>
#include <cstdint>
#include <mutex>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "common/clock.h"
#include "common/status.h"
#include "server/monitoring/gpu_monitor.h"
#include "store/store.h"

namespace corral::server {

// How a usage report groups GPU time: any of "user", "project", "day", in that order.
struct UsageGrouping {
  bool user = false;
  bool project = false;
  bool day = false;
};
// "project", "user,day", ...: InvalidArgument naming the unknown word ("field 'by': ...").
Result<UsageGrouping> ParseUsageGrouping(const std::string& by);
// A day range from `since` ("30d": the last 30 days, today included; or "YYYY-MM-DD") and
// `until` ("" : today; or "YYYY-MM-DD"), today being the UTC day of `now`. InvalidArgument
// naming the field for anything else, or an empty range.
Result<std::pair<std::string, std::string>> ParseDayRange(const std::string& since,
                                                          const std::string& until, Seconds now);

// The rows summed per group, sorted by the group's fields: [{"user"?, "project"?, "day"?,
// "allocated_gpu_hours", "used_gpu_hours", "utilization_percent"}] (hours rounded to 0.001).
nlohmann::json UsageReport(const std::vector<store::GpuUsageRow>& rows, UsageGrouping by);
// The same as CSV: a header line, then one line per group; fields quoted when they hold a comma,
// quote or line break.
std::string UsageCsv(const nlohmann::json& report, UsageGrouping by);

class GpuHistory {
 public:
  struct Options {
    Seconds fine_retention{24 * 3600};         // 10 s intervals
    Seconds coarse_retention{90 * 24 * 3600};  // 5 min intervals
    std::chrono::milliseconds flush_period{10'000};
    Seconds prune_period{3600};
  };
  // Borrows the monitor, store and clock (they must outlive it).
  GpuHistory(GpuMonitor& monitor, store::Store& store, Clock& clock, Options options);
  ~GpuHistory();
  GpuHistory(const GpuHistory&) = delete;
  GpuHistory& operator=(const GpuHistory&) = delete;

  // Starts / stops the thread; Stop closes the monitor's open intervals and flushes a last
  // time.
  void Start();
  void Stop();

  // Moves what the monitor has into the store. What the store refuses is kept for the next
  // flush (at most kMaxPendingRows intervals; the oldest go first beyond that).
  Status Flush();
  // Deletes intervals past their retention.
  Status Prune();

  // A job's GPU intervals in [from, to): 10 s ones while `from` is within their retention,
  // else 5 min ones.
  Result<std::vector<store::GpuMetricRow>> JobHistory(JobId job, Seconds from, Seconds to);

  static constexpr size_t kMaxPendingRows = 200'000;
  // Rows deleted per batch by Prune (store::Store::PruneGpuMetrics): the store is held for that
  // many, not for a whole day's.
  static constexpr int64_t kPruneBatchRows = 10'000;

 private:
  void Loop();

  GpuMonitor& monitor_;
  store::Store& store_;
  Clock& clock_;
  const Options options_;
  std::mutex mu_;  // guards the pending rows and the thread's state
  std::vector<store::GpuMetricRow> pending_intervals_;
  std::vector<store::GpuUsageRow> pending_usage_;
  std::condition_variable wake_;
  bool stopping_ = false;
  std::thread thread_;
};

}  // namespace corral::server
