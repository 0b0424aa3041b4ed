// The in-job channel's records (store.h, RecordJobReport and after), on SQLite and PostgreSQL.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "store/store.h"
#include "store/store_test_fixture.h"

namespace corral::store {
namespace {

using model::JobState;
using ::testing::HasSubstr;

class JobReportsTest : public StoreTest {
 protected:
  JobId RunningJob() {
    Seed();
    auto id = store_->InsertJob(MakeJob("train"));
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    EXPECT_TRUE(
        store_->TransitionJob(*id, JobState::kPending, JobState::kRunning, "", Seconds(1001)).ok());
    return *id;
  }
};

INSTANTIATE_TEST_SUITE_P(Sqlite, JobReportsTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, JobReportsTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

TEST_P(JobReportsTest, ReportsKeepTheLatestValuesAndTheNumericHistory) {
  const JobId id = RunningJob();
  auto empty = store_->JobProgress(id);
  ASSERT_TRUE(empty.ok()) << empty.status().ToString();
  EXPECT_TRUE(empty->metrics.empty());
  EXPECT_FALSE(empty->metrics_at);
  EXPECT_FALSE(empty->checkpoint);
  ASSERT_TRUE(
      store_
          ->RecordJobReport(
              id, {{{"loss", 0.5}, {"step", 3.0}, {"phase", std::string("ü")}}, Seconds(2000)})
          .ok());
  ASSERT_TRUE(store_->RecordJobReport(id, {{{"loss", 0.125}}, Seconds(2010)}).ok());
  auto progress = store_->JobProgress(id);
  ASSERT_TRUE(progress.ok()) << progress.status().ToString();
  EXPECT_EQ(progress->metrics, (std::map<std::string, model::MetricValue>{
                                   {"loss", 0.125}, {"step", 3.0}, {"phase", std::string("ü")}}));
  EXPECT_EQ(progress->metrics_at, Seconds(2010));
  auto series = store_->JobMetricSeries(id);
  ASSERT_TRUE(series.ok()) << series.status().ToString();
  EXPECT_EQ(*series, (model::MetricSeries{{"loss", {{Seconds(2000), 0.5}, {Seconds(2010), 0.125}}},
                                          {"step", {{Seconds(2000), 3.0}}}}));
  EXPECT_EQ(store_->JobProgress(JobId(999)).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->RecordJobReport(JobId(999), {{{"x", 1.0}}, Seconds(1)}).code(),
            StatusCode::kNotFound);
}

TEST_P(JobReportsTest, AJobKeepsAtMost64KeysAnd1000Points) {
  const JobId id = RunningJob();
  // 32 reports of 32 numeric keys: 1,024 points, of which the newest 1,000 stay.
  for (int r = 0; r < 32; ++r) {
    model::JobReport report{{}, Seconds(3000 + r)};
    for (int k = 0; k < 32; ++k) report.metrics.emplace_back("k" + std::to_string(k), 1.0 * r);
    ASSERT_TRUE(store_->RecordJobReport(id, report).ok()) << r;
  }
  auto series = store_->JobMetricSeries(id);
  ASSERT_TRUE(series.ok());
  size_t points = 0;
  for (const auto& [key, values] : *series) points += values.size();
  EXPECT_EQ(points, model::kMaxMetricPoints);
  EXPECT_EQ(series->at("k0").front().first, Seconds(3000 + 1));  // the oldest went
  EXPECT_EQ(series->at("k31").back(), std::make_pair(Seconds(3031), 31.0));
  // 32 keys more make 64; one more is refused whole.
  model::JobReport more{{}, Seconds(4000)};
  for (int k = 32; k < 64; ++k) more.metrics.emplace_back("k" + std::to_string(k), 0.0);
  ASSERT_TRUE(store_->RecordJobReport(id, more).ok());
  Status refused =
      store_->RecordJobReport(id, {{{"k0", 7.0}, {"one-too-many", 1.0}}, Seconds(4001)});
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), HasSubstr("metrics"));
  EXPECT_EQ(std::get<double>(store_->JobProgress(id)->metrics.at("k0")), 31.0);
}

TEST_P(JobReportsTest, TheLatestCheckpointIsKeptWithAnEventAndEndedJobsTakeNothing) {
  const JobId id = RunningJob();
  ASSERT_TRUE(store_->RecordJobCheckpoint(id, {"/ckpt/7/c1", 100, Seconds(5000)}).ok());
  ASSERT_TRUE(store_->RecordJobCheckpoint(id, {"/ckpt/7/c2", std::nullopt, Seconds(5100)}).ok());
  auto progress = store_->JobProgress(id);
  ASSERT_TRUE(progress.ok());
  EXPECT_EQ(progress->checkpoint,
            (model::JobCheckpoint{"/ckpt/7/c2", std::nullopt, Seconds(5100)}));
  auto events = store_->JobEvents(id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().reason, "checkpoint /ckpt/7/c2");
  EXPECT_EQ(events->back().to_state, JobState::kRunning);
  EXPECT_EQ((*events)[events->size() - 2].reason, "checkpoint /ckpt/7/c1 (step 100)");
  ASSERT_TRUE(
      store_->TransitionJob(id, JobState::kRunning, JobState::kSucceeded, "done", Seconds(6000))
          .ok());
  EXPECT_EQ(store_->RecordJobCheckpoint(id, {"/ckpt/7/c3", 1, Seconds(6001)}).code(),
            StatusCode::kFailedPrecondition);
  EXPECT_EQ(store_->RecordJobReport(id, {{{"x", 1.0}}, Seconds(6001)}).code(),
            StatusCode::kFailedPrecondition);
  // What it reported stays readable after its end, and goes with it when it is purged.
  EXPECT_EQ(store_->JobProgress(id)->checkpoint->path, "/ckpt/7/c2");
  auto purged = store_->PurgeJobs({id}, Seconds(7000));
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(store_->JobProgress(id).status().code(), StatusCode::kNotFound);
}

// A job checkpointing often does not flood its history: the same path again adds no event, and
// at most model::kMaxCheckpointEvents are kept; the latest checkpoint is recorded all the same.
TEST_P(JobReportsTest, CheckpointEventsAreAddedForNewPathsOnlyAndCapped) {
  const JobId id = RunningJob();
  auto checkpoint_events = [&] {
    auto events = store_->JobEvents(id);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    int64_t n = 0;
    for (const JobEvent& e : *events) n += e.reason.rfind("checkpoint ", 0) == 0;
    return n;
  };
  ASSERT_TRUE(store_->RecordJobCheckpoint(id, {"/ckpt/7/last", 1, Seconds(5000)}).ok());
  ASSERT_TRUE(store_->RecordJobCheckpoint(id, {"/ckpt/7/last", 2, Seconds(5001)}).ok());
  EXPECT_EQ(checkpoint_events(), 1);
  EXPECT_EQ(store_->JobProgress(id)->checkpoint->step, 2);
  for (int64_t i = 0; i < model::kMaxCheckpointEvents + 5; ++i) {
    const std::string path = "/ckpt/7/c" + std::to_string(i);
    ASSERT_TRUE(store_->RecordJobCheckpoint(id, {path, i, Seconds(5100 + i)}).ok());
  }
  EXPECT_EQ(checkpoint_events(), model::kMaxCheckpointEvents);
  EXPECT_EQ(store_->JobProgress(id)->checkpoint->path,
            "/ckpt/7/c" + std::to_string(model::kMaxCheckpointEvents + 4));
}

TEST_P(JobReportsTest, LostWorkAddsUpPerJobAndPerDayUserAndProject) {
  const JobId id = RunningJob();
  EXPECT_EQ(store_->GetJob(id)->lost_gpu_ms, 0);
  ASSERT_TRUE(store_->AddGpuUsage({{"2026-12-06", "alice", "vision", 7'200'000, 3'600'000}}).ok());
  ASSERT_TRUE(store_->AddLostWork(id, 601'000, "2026-12-06").ok());
  ASSERT_TRUE(store_->AddLostWork(id, 1'000, "2026-12-07").ok());
  EXPECT_EQ(store_->GetJob(id)->lost_gpu_ms, 602'000);
  auto usage = store_->GpuUsage("2026-12-06", "2026-12-07");
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  ASSERT_EQ(usage->size(), 2u);
  const GpuUsageRow& first = (*usage)[0];
  EXPECT_EQ(first.user, store_->GetJob(id)->user);
  EXPECT_EQ(first.allocated_gpu_ms, 7'200'000);  // the day's GPU time is kept
  EXPECT_EQ(first.lost_gpu_ms, 601'000);
  EXPECT_EQ((*usage)[1].allocated_gpu_ms, 0);
  EXPECT_EQ((*usage)[1].lost_gpu_ms, 1'000);
  EXPECT_EQ(store_->AddLostWork(JobId(999), 1, "2026-12-06").code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->AddLostWork(id, 0, "2026-12-06").code(), StatusCode::kInvalidArgument);
  // A restart keeps it (the store's row).
  Reopen();
  EXPECT_EQ(store_->GetJob(id)->lost_gpu_ms, 602'000);
}

}  // namespace
}  // namespace corral::store
