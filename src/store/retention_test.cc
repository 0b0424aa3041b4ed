// Retention of finished jobs (Store::PurgeableJobs, PurgeJobs, PurgedDemand): what a purge
// deletes (the job, its tasks and events) and what stays (jobs not ended, or ended after the
// cutoff, arrays with an element still in the retention), the GPU demand kept per hour, and ids
// that are never reused after a purge. Runs on SQLite and PostgreSQL.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>

#include "store/store_test_fixture.h"

namespace corral::store {
namespace {

using model::JobState;
using model::NodeState;
using ::testing::ElementsAre;
using ::testing::IsEmpty;

constexpr int64_t kHour = 3600;

class RetentionTest : public StoreTest {
 protected:
  // A job of `total_gpu_milli` submitted at `submit`, run on node n1 from `submit` + 10 and
  // ended in `state` at `end`; an element of nothing.
  JobId FinishedJob(const std::string& name, int64_t submit, int64_t end,
                    JobState state = JobState::kSucceeded, int64_t total_gpu_milli = 1000) {
    JobRecord record = MakeJob(name, "vision", "alice", submit);
    record.total_gpu_milli = MilliGpu(total_gpu_milli);
    auto id = store_->InsertJob(record);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return JobId(0);
    Finish(*id, submit + 10, end, state);
    return *id;
  }

  // Runs pending job `id` on n1 from `start` and ends it in `state` at `end`.
  void Finish(JobId id, int64_t start, int64_t end, JobState state = JobState::kSucceeded) {
    TaskAssignment task;
    task.node = "n1";
    task.allocation.gpus = {{0, MilliGpu(1000)}};
    auto tasks = store_->AssignGang(id, {task}, Seconds(start));
    ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
    ASSERT_TRUE(
        store_->TransitionJob(id, JobState::kStarting, JobState::kRunning, "", Seconds(start))
            .ok());
    TaskRecord ended = (*tasks)[0];
    ended.state = model::TaskState::kExited;
    ended.exit_code = 0;
    ended.end_time = Seconds(end);
    ASSERT_TRUE(store_->UpdateTask(ended).ok());
    ASSERT_TRUE(store_->TransitionJob(id, JobState::kRunning, state, "", Seconds(end)).ok());
  }

  // Purges every purgeable job ended before `before`, `batch` at a time, as JobRetention does;
  // returns the ids purged in order.
  std::vector<JobId> PurgeAll(int64_t before, int64_t batch = 1000) {
    std::vector<JobId> all;
    while (true) {
      auto ids = store_->PurgeableJobs(Seconds(before), batch);
      EXPECT_TRUE(ids.ok()) << ids.status().ToString();
      if (!ids.ok() || ids->empty()) return all;
      auto purged = store_->PurgeJobs(*ids, Seconds(before));
      EXPECT_TRUE(purged.ok()) << purged.status().ToString();
      if (!purged.ok() || purged->empty()) return all;
      all.insert(all.end(), purged->begin(), purged->end());
    }
  }

  bool Exists(JobId id) { return store_->GetJob(id).ok(); }

  // Rows of `table` (job_events, tasks) of job `id`, read on a raw connection.
  int64_t RowsOf(const std::string& table, JobId id) {
    auto conn = Connect();
    auto rows = conn->Query("SELECT COUNT(*) FROM " + table + " WHERE job_id = ?", {id.value()});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    return rows.ok() ? (*rows)[0].Int(0) : -1;
  }

  void SetUp() override {
    StoreTest::SetUp();
    if (IsSkipped() || HasFatalFailure()) return;
    Seed();
    ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  }
};

INSTANTIATE_TEST_SUITE_P(Sqlite, RetentionTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, RetentionTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

TEST_P(RetentionTest, PurgeDeletesJobsEndedBeforeTheCutoffWithTheirTasksAndEvents) {
  const JobId old_ok = FinishedJob("old-ok", 1000, 2000);
  const JobId old_failed = FinishedJob("old-failed", 1100, 2500, JobState::kFailed);
  const JobId recent = FinishedJob("recent", 1200, 5000);
  auto running = store_->InsertJob(MakeJob("running", "vision", "alice", 1300));
  ASSERT_TRUE(running.ok());
  TaskAssignment task;
  task.node = "n1";
  task.allocation.gpus = {{1, MilliGpu(1000)}};
  ASSERT_TRUE(store_->AssignGang(*running, {task}, Seconds(1400)).ok());
  auto pending = store_->InsertJob(MakeJob("pending", "nlp", "bob", 1500));
  ASSERT_TRUE(pending.ok());
  ASSERT_EQ(RowsOf("tasks", old_ok), 1);
  ASSERT_EQ(RowsOf("job_events", old_ok), 4);  // submitted, starting, running, succeeded

  // The earliest end first; a job ended exactly at the cutoff stays.
  auto purgeable = store_->PurgeableJobs(Seconds(2500), 10);
  ASSERT_TRUE(purgeable.ok()) << purgeable.status().ToString();
  EXPECT_THAT(*purgeable, ElementsAre(old_ok));
  purgeable = store_->PurgeableJobs(Seconds(3000), 10);
  EXPECT_THAT(*purgeable, ElementsAre(old_ok, old_failed));
  EXPECT_THAT(*store_->PurgeableJobs(Seconds(3000), 1), ElementsAre(old_ok));

  // Ids that may not go are skipped: the recent job, the live ones, an unknown id.
  auto purged = store_->PurgeJobs({recent, *running, old_failed, *pending, JobId(999), old_ok},
                                  Seconds(3000));
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_THAT(*purged, ElementsAre(old_ok, old_failed));
  for (JobId gone : {old_ok, old_failed}) {
    EXPECT_EQ(store_->GetJob(gone).status().code(), StatusCode::kNotFound);
    EXPECT_EQ(RowsOf("tasks", gone), 0);
    EXPECT_EQ(RowsOf("job_events", gone), 0);
    EXPECT_THAT(*store_->TasksOfJob(gone), IsEmpty());
  }
  for (JobId kept : {recent, *running, *pending}) {
    EXPECT_TRUE(Exists(kept)) << kept.value();
    EXPECT_GE(RowsOf("job_events", kept), 1);
  }
  EXPECT_EQ(RowsOf("tasks", recent), 1);
  EXPECT_EQ(store_->ActiveTasks()->size(), 1u);  // the running job's
  EXPECT_THAT(*store_->PurgeableJobs(Seconds(3000), 10), IsEmpty());
  // Purging again finds nothing to do.
  EXPECT_THAT(*store_->PurgeJobs({old_ok}, Seconds(3000)), IsEmpty());
}

TEST_P(RetentionTest, BadArgumentsAreRefused) {
  EXPECT_EQ(store_->PurgeableJobs(Seconds(10), 0).status().code(), StatusCode::kInvalidArgument);
  std::vector<JobId> too_many(Store::kMaxPurgeBatch + 1, JobId(1));
  EXPECT_EQ(store_->PurgeJobs(too_many, Seconds(10)).status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(*store_->PurgeJobs({}, Seconds(10)), IsEmpty());
}

// An array goes only when all of its elements ended before the cutoff, and its first element
// (whose id the others reference) only once it is the last one left, also in small batches.
TEST_P(RetentionTest, AnArrayIsPurgedWholeAndItsFirstElementLast) {
  std::vector<JobRecord> elements;
  for (int i = 0; i < 5; ++i) {
    JobRecord e = MakeJob("sweep", "vision", "alice", 1000);
    e.array_index = i;
    elements.push_back(e);
  }
  auto ids = store_->InsertArray(elements);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  const JobId head = (*ids)[0];
  for (int i = 0; i < 5; ++i) Finish((*ids)[i], 1100 + i, 2000 + i * 1000);  // ends 2000..6000
  const JobId single = FinishedJob("single", 1000, 1500);

  // The last element ended at 6000: before that, no element may go.
  EXPECT_THAT(*store_->PurgeableJobs(Seconds(6000), 100), ElementsAre(single));
  EXPECT_THAT(*store_->PurgeJobs(*ids, Seconds(6000)), IsEmpty());
  // An element not ended keeps the whole array too.
  std::vector<JobRecord> live_elements = {elements[0], elements[1]};
  auto live = store_->InsertArray(live_elements);
  ASSERT_TRUE(live.ok());
  Finish((*live)[1], 1100, 1200);
  EXPECT_THAT(*store_->PurgeableJobs(Seconds(100000), 100),
              ElementsAre(single, (*ids)[1], (*ids)[2], (*ids)[3], (*ids)[4]));

  // Batches of two (each returned by id): the first element comes last, alone.
  const std::vector<JobId> purged = PurgeAll(6001, 2);
  EXPECT_THAT(purged, ElementsAre((*ids)[1], single, (*ids)[2], (*ids)[3], (*ids)[4], head));
  for (JobId id : *ids) EXPECT_FALSE(Exists(id)) << id.value();
  EXPECT_TRUE(Exists((*live)[0]));
  EXPECT_TRUE(Exists((*live)[1]));
}

// Ids keep growing after the newest jobs were purged, also once the store is opened again.
TEST_P(RetentionTest, JobIdsAreNeverReusedAfterAPurge) {
  JobId last(0);
  for (int i = 0; i < 3; ++i) last = FinishedJob("j" + std::to_string(i), 1000, 2000);
  ASSERT_EQ(PurgeAll(3000).size(), 3u);
  auto next = store_->InsertJob(MakeJob("after"));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->value(), last.value());
  const JobId after = *next;
  Finish(after, 3000, 4000);
  ASSERT_EQ(PurgeAll(5000).size(), 1u);
  Reopen();
  next = store_->InsertJob(MakeJob("after-restart"));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(next->value(), after.value());
  // Allocation ids too.
  auto tasks = store_->AssignGang(*next, {TaskAssignment{0, "n1", {}}}, Seconds(6000));
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  EXPECT_EQ((*tasks)[0].allocation_id, 5);
}

// The purged jobs' GPU demand stays, per hour: a job's total GPUs from its submission to its
// end, split at hour boundaries, summed over jobs.
TEST_P(RetentionTest, PurgedJobsLeaveTheirGpuDemandPerHour) {
  // 2 GPUs from 10:30 to 12:10, 0.5 GPU from 11:00 to 11:20 (in hours since the epoch), and a
  // CPU job (no GPU: no demand).
  FinishedJob("two", 10 * kHour + 1800, 12 * kHour + 600, JobState::kSucceeded, 2000);
  FinishedJob("half", 11 * kHour, 11 * kHour + 1200, JobState::kCancelled, 500);
  FinishedJob("cpu", 9 * kHour, 13 * kHour, JobState::kFailed, 0);
  ASSERT_EQ(PurgeAll(20 * kHour).size(), 3u);
  auto hours = store_->PurgedDemand(Seconds(0), Seconds(100 * kHour));
  ASSERT_TRUE(hours.ok()) << hours.status().ToString();
  EXPECT_THAT(*hours, ElementsAre(DemandHour{10 * kHour, 2000 * 1800},
                                  DemandHour{11 * kHour, 2000 * 3600 + 500 * 1200},
                                  DemandHour{12 * kHour, 2000 * 600}));
  // A later purge adds to the hours already there; the range is [from, to).
  FinishedJob("later", 12 * kHour, 12 * kHour + 100, JobState::kSucceeded, 1000);
  ASSERT_EQ(PurgeAll(20 * kHour).size(), 1u);
  EXPECT_THAT(*store_->PurgedDemand(Seconds(11 * kHour), Seconds(13 * kHour)),
              ElementsAre(DemandHour{11 * kHour, 2000 * 3600 + 500 * 1200},
                          DemandHour{12 * kHour, 2000 * 600 + 1000 * 100}));
  EXPECT_THAT(*store_->PurgedDemand(Seconds(13 * kHour), Seconds(100 * kHour)), IsEmpty());
}

// A job-sized batch: many jobs purged in a few transactions, the demand summed exactly.
TEST_P(RetentionTest, LargeBatchesAddUpExactly) {
  int64_t expected = 0;
  for (int i = 0; i < 1200; ++i) {
    JobRecord record = MakeJob("j", "vision", "alice", 100 + i);
    record.total_gpu_milli = MilliGpu(1000 + i);
    auto id = store_->InsertJob(record);
    ASSERT_TRUE(id.ok());
    ASSERT_TRUE(
        store_
            ->TransitionJob(*id, JobState::kPending, JobState::kCancelled, "", Seconds(200 + 2 * i))
            .ok());
    expected += (1000 + i) * (100 + i);  // from 100 + i to 200 + 2i
  }
  const int64_t commits = store_->Commits();
  ASSERT_EQ(PurgeAll(100000, 500).size(), 1200u);
  EXPECT_EQ(store_->Commits() - commits, 3);  // 500 + 500 + 200
  auto hours = store_->PurgedDemand(Seconds(0), Seconds(100000));
  ASSERT_TRUE(hours.ok()) << hours.status().ToString();
  int64_t total = 0;
  for (const DemandHour& h : *hours) total += h.milli_gpu_s;
  EXPECT_EQ(total, expected);
  EXPECT_THAT(*store_->ListJobs({}), IsEmpty());
}

}  // namespace
}  // namespace corral::store
