// SqlStore's retention of finished jobs (store.h, "Retention of finished jobs"): which jobs may
// go, and their deletion with their GPU demand kept per hour.

#include <algorithm>
#include <limits>
#include <map>

#include "store/sql_store.h"

namespace corral::store {
namespace {

constexpr int64_t kHourS = 3600;
// Ids per IN list, well under both databases' limits on parameters (SQLite 32,766; PostgreSQL
// 65,535).
constexpr size_t kIdsPerStatement = 500;
// A job's GPUs are capped here before they are multiplied by seconds, so that an hour's demand
// cannot overflow (10^12 milli-GPU is 10^9 GPUs: no real job asks that).
constexpr int64_t kMaxDemandMilli = 1'000'000'000'000;

// The condition on jobs `j` that makes a job purgeable (PurgeableJobs' contract), with its two
// parameters: the cutoff, twice. The array tests probe jobs_by_array_and_end_time and
// jobs_by_array, so a candidate costs a few index lookups, not its array's size.
constexpr char kPurgeable[] =
    "j.end_time < ? AND j.state NOT IN ('pending', 'starting', 'running')"
    " AND (j.array_id IS NULL OR ("
    "NOT EXISTS (SELECT 1 FROM jobs e WHERE e.array_id = j.array_id AND e.end_time IS NULL)"
    " AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.array_id = j.array_id AND e.end_time >= ?)))"
    " AND NOT EXISTS (SELECT 1 FROM jobs e WHERE e.array_id = j.id AND e.id > j.id)";

int64_t HourOf(int64_t t) { return (t >= 0 ? t : t - (kHourS - 1)) / kHourS * kHourS; }

// Adds a job's demand, `milli` GPU from `from` to `to` (Unix seconds), to `hours`.
void AddDemand(int64_t from, int64_t to, int64_t milli, std::map<int64_t, int64_t>& hours) {
  milli = std::clamp<int64_t>(milli, 0, kMaxDemandMilli);
  // An end before its start (a clock stepped back, servers whose clocks differ) is no demand.
  if (milli == 0 || to <= from) return;
  for (int64_t h = HourOf(from); h < to; h += kHourS) {
    const int64_t seconds = std::min(to, h + kHourS) - std::max(from, h);
    int64_t& sum = hours[h];
    sum = std::min(sum, std::numeric_limits<int64_t>::max() - milli * seconds) + milli * seconds;
  }
}

// "?, ?, ?" for ids[begin, end), appending them to params.
std::string IdList(const std::vector<JobId>& ids, size_t begin, size_t end, SqlParams& params) {
  std::string out;
  for (size_t i = begin; i < end; ++i) {
    out += out.empty() ? "?" : ", ?";
    params.emplace_back(ids[i].value());
  }
  return out;
}

}  // namespace

Result<std::vector<JobId>> SqlStore::PurgeableJobs(Seconds before, int64_t limit) {
  if (limit < 1) return InvalidArgument("list purgeable jobs: field 'limit': must be >= 1");
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(std::string("SELECT j.id FROM jobs j WHERE ") + kPurgeable +
                               " ORDER BY j.end_time, j.id LIMIT ?",
                           {before.value(), before.value(), limit});
  if (!rows.ok()) return Annotate("list purgeable jobs", rows.status());
  std::vector<JobId> out;
  out.reserve(rows->size());
  for (const SqlRow& row : *rows) out.emplace_back(row.Int(0));
  return out;
}

Result<std::vector<JobId>> SqlStore::PurgeJobs(const std::vector<JobId>& ids, Seconds before) {
  if (ids.size() > kMaxPurgeBatch) {
    return InvalidArgument("purge jobs: field 'ids': at most " + std::to_string(kMaxPurgeBatch));
  }
  std::vector<JobId> purged;
  if (ids.empty()) return purged;
  std::lock_guard<std::mutex> lock(mu_);
  Status s = InTransaction([&]() -> Status {
    // Which of `ids` may go, checked again inside the transaction, with what their demand needs.
    std::map<int64_t, int64_t> hours;
    for (size_t begin = 0; begin < ids.size(); begin += kIdsPerStatement) {
      const size_t end = std::min(ids.size(), begin + kIdsPerStatement);
      SqlParams params;
      const std::string list = IdList(ids, begin, end, params);
      params.emplace_back(before.value());
      params.emplace_back(before.value());
      auto rows = conn_->Query(
          "SELECT j.id, j.submit_time, j.end_time, j.total_gpu_milli FROM jobs j WHERE j.id IN (" +
              list + ") AND " + kPurgeable,
          params);
      if (!rows.ok()) return rows.status();
      for (const SqlRow& row : *rows) {
        purged.emplace_back(row.Int(0));
        AddDemand(row.Int(1), row.Int(2), row.Int(3), hours);
      }
    }
    std::vector<SqlParams> demand;
    demand.reserve(hours.size());
    for (const auto& [hour, milli_gpu_s] : hours) demand.push_back({hour, milli_gpu_s});
    CORRAL_RETURN_IF_ERROR(
        conn_
            ->QueryEach("INSERT INTO job_demand_hours (hour_s, milli_gpu_s) VALUES (?, ?) ON "
                        "CONFLICT (hour_s) DO UPDATE SET milli_gpu_s = "
                        "job_demand_hours.milli_gpu_s + excluded.milli_gpu_s",
                        demand)
            .status());
    // Tasks, events and reports reference their job: they go first.
    std::sort(purged.begin(), purged.end());
    for (const char* table :
         {"job_events WHERE job_id", "tasks WHERE job_id", "job_metrics WHERE job_id",
          "job_metric_points WHERE job_id", "job_checkpoints WHERE job_id", "jobs WHERE id"}) {
      for (size_t begin = 0; begin < purged.size(); begin += kIdsPerStatement) {
        const size_t end = std::min(purged.size(), begin + kIdsPerStatement);
        SqlParams params;
        const std::string list = IdList(purged, begin, end, params);
        CORRAL_RETURN_IF_ERROR(
            conn_->Execute(std::string("DELETE FROM ") + table + " IN (" + list + ")", params)
                .status());
      }
    }
    return Status::Ok();
  });
  if (!s.ok()) return Annotate("purge jobs", s);
  return purged;
}

Result<std::vector<DemandHour>> SqlStore::PurgedDemand(Seconds from, Seconds to) {
  std::lock_guard<std::mutex> lock(mu_);
  auto rows = conn_->Query(
      "SELECT hour_s, milli_gpu_s FROM job_demand_hours WHERE hour_s >= ? AND hour_s < ? ORDER "
      "BY hour_s",
      {from.value(), to.value()});
  if (!rows.ok()) return Annotate("read purged jobs' demand", rows.status());
  std::vector<DemandHour> out;
  out.reserve(rows->size());
  for (const SqlRow& row : *rows) out.push_back({row.Int(0), row.Int(1)});
  return out;
}

}  // namespace corral::store
