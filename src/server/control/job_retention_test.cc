#include "server/control/job_retention.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <thread>

#include "protocol/job_spec.h"
#include "server/monitoring/capacity.h"
#include "server/monitoring/gpu_history.h"
#include "server/test_store.h"

namespace corral::server {
namespace {

using model::JobState;
using ::testing::HasSubstr;

constexpr int64_t kDay = 86400;
constexpr int64_t kNow = 1'800'000'000;  // on the hour

class JobRetentionTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_NE(store_, nullptr);
    ASSERT_TRUE(store_->CreateUser("ann", false, Seconds(1)).ok());
    ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
    ASSERT_TRUE(store_->UpsertNode({"n1", "{}", model::NodeState::kReady, Seconds(1)}).ok());
  }

  // A job of `gpus` GPUs × `tasks` submitted at `submit`, run on n1 from `submit` + 60 and
  // ended at `end` (none: still running), with a line of output in the logs folder.
  JobId Job(int gpus, int tasks, int64_t submit, std::optional<int64_t> end) {
    auto spec = protocol::ParseJobSpec(nlohmann::json{{"name", "train"},
                                                      {"command", {"true"}},
                                                      {"resources", {{"gpus", gpus}}},
                                                      {"tasks", tasks},
                                                      {"project", "vision"}});
    EXPECT_TRUE(spec.ok()) << spec.status().ToString();
    store::JobRecord r;
    r.name = "train";
    r.user = "ann";
    r.project = "vision";
    r.spec_json = protocol::ToJson(*spec).dump();
    r.submit_time = Seconds(submit);
    r.total_gpu_milli = MilliGpu(int64_t{gpus} * 1000 * tasks);
    auto id = store_->InsertJob(r);
    EXPECT_TRUE(id.ok()) << id.status().ToString();
    if (!id.ok()) return JobId(0);
    std::vector<store::TaskAssignment> gang;
    for (int t = 0; t < tasks; ++t) gang.push_back({t, "n1", {}});
    EXPECT_TRUE(store_->AssignGang(*id, gang, Seconds(submit + 60)).ok());
    EXPECT_TRUE(
        store_
            ->TransitionJob(*id, JobState::kStarting, JobState::kRunning, "", Seconds(submit + 60))
            .ok());
    if (end) {
      EXPECT_TRUE(
          store_->TransitionJob(*id, JobState::kRunning, JobState::kSucceeded, "", Seconds(*end))
              .ok());
    }
    const std::string log = LogSink::PathOf(logs_dir_, *id, 0, 1, "stdout");
    std::filesystem::create_directories(std::filesystem::path(log).parent_path());
    std::ofstream(log) << "hello\n";
    return *id;
  }

  bool HasLogs(JobId id) {
    return std::filesystem::exists(logs_dir_ + "/" + std::to_string(id.value()));
  }

  // The capacity forecast's history over `days`, as GET /api/v1/capacity/forecast computes it
  // (monitoring_views.cc: the jobs live in the window plus the purged jobs' demand).
  nlohmann::json History(int days) {
    store::JobFilter live;
    live.live_since = Seconds(kNow - days * kDay);
    live.limit = 0;
    auto jobs = store_->ListJobs(live);
    EXPECT_TRUE(jobs.ok());
    auto purged = store_->PurgedDemand(Seconds(0), Seconds(kNow));
    EXPECT_TRUE(purged.ok());
    return ForecastView(*jobs, 16, Seconds(kNow), days, 1, *purged)["history"];
  }

  TestStore test_store_{"job-retention"};
  store::Store* store_ = test_store_.store();
  FakeClock clock_{Seconds(kNow)};
  std::string logs_dir_ = (test_store_.dir() / "logs").string();
  LogSink logs_{logs_dir_, LogSink::kMinMaxBytes};
};

// Jobs ended more than the retention ago go with their output; the others stay; the usage
// report and the capacity forecast read the same numbers before and after.
TEST_F(JobRetentionTest, APurgeDeletesOldJobsAndTheirLogsAndChangesNoReport) {
  const JobId old_a = Job(2, 1, kNow - 40 * kDay, kNow - 40 * kDay + 7200);
  const JobId old_b = Job(1, 4, kNow - 20 * kDay - 1800, kNow - 20 * kDay + 5400);
  const JobId recent = Job(4, 1, kNow - 3 * kDay, kNow - 2 * kDay);
  const JobId running = Job(8, 1, kNow - 30 * kDay, std::nullopt);
  ASSERT_TRUE(store_->AddGpuUsage({{"2026-12-01", "ann", "vision", 7'200'000, 3'600'000}}).ok());
  const auto usage_before = store_->GpuUsage("2000-01-01", "2100-01-01");
  const nlohmann::json history_before = History(60);
  // The old jobs are in the history: 2 GPUs for the hour after old_a's submission.
  double total_before = 0;
  for (const auto& h : history_before) total_before += h["demand_gpus"].get<double>();
  ASSERT_GT(total_before, 0);

  JobRetention retention(*store_, logs_, clock_, {Seconds(7 * kDay), Seconds(3600), 1});
  auto purged = retention.PurgeOnce();
  ASSERT_TRUE(purged.ok()) << purged.status().ToString();
  EXPECT_EQ(purged->jobs, 2);
  EXPECT_EQ(purged->batches, 2);  // one job per batch
  EXPECT_EQ(store_->GetJob(old_a).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->GetJob(old_b).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(HasLogs(old_a));
  EXPECT_FALSE(HasLogs(old_b));
  for (JobId kept : {recent, running}) {
    EXPECT_TRUE(store_->GetJob(kept).ok());
    EXPECT_TRUE(HasLogs(kept));
  }

  const nlohmann::json history_after = History(60);
  ASSERT_EQ(history_after.size(), history_before.size());
  for (size_t i = 0; i < history_before.size(); ++i) {
    EXPECT_NEAR(history_after[i]["demand_gpus"].get<double>(),
                history_before[i]["demand_gpus"].get<double>(), 1e-9)
        << "hour " << history_before[i]["t"];
  }
  const auto usage_after = store_->GpuUsage("2000-01-01", "2100-01-01");
  ASSERT_EQ(usage_after->size(), usage_before->size());
  EXPECT_EQ((*usage_after)[0].allocated_gpu_ms, (*usage_before)[0].allocated_gpu_ms);
  EXPECT_EQ(UsageReport(*usage_after, {.user = true}), UsageReport(*usage_before, {.user = true}));

  // Nothing more to do until the recent job is past the retention too.
  EXPECT_EQ(retention.PurgeOnce()->jobs, 0);
  clock_.Advance(Seconds(6 * kDay));
  EXPECT_EQ(retention.PurgeOnce()->jobs, 1);
  EXPECT_FALSE(HasLogs(recent));
  EXPECT_TRUE(store_->GetJob(running).ok());
}

TEST_F(JobRetentionTest, WithoutARetentionNothingIsPurged) {
  const JobId old = Job(1, 1, 1000, 2000);
  JobRetention retention(*store_, logs_, clock_, {std::nullopt, Seconds(3600), 1000});
  EXPECT_EQ(retention.PurgeOnce()->jobs, 0);
  retention.Start();  // runs no thread
  retention.Stop();
  EXPECT_TRUE(store_->GetJob(old).ok());
  EXPECT_TRUE(HasLogs(old));
}

// The thread purges once at its start, without waiting a period.
TEST_F(JobRetentionTest, TheLeadersThreadPurgesAtOnce) {
  const JobId old = Job(1, 1, 1000, 2000);
  JobRetention retention(*store_, logs_, clock_, {Seconds(kDay), Seconds(3600), 1000});
  retention.Start();
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (store_->GetJob(old).ok() && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  retention.Stop();
  EXPECT_EQ(store_->GetJob(old).status().code(), StatusCode::kNotFound);
  EXPECT_FALSE(HasLogs(old));
}

TEST_F(JobRetentionTest, KeepFinishedTakesDurationsZeroAndForever) {
  EXPECT_EQ(*ParseKeepFinished("90d", "--keep-finished"), Seconds(90 * kDay));
  EXPECT_EQ(*ParseKeepFinished("12h", "--keep-finished"), Seconds(12 * 3600));
  EXPECT_EQ(*ParseKeepFinished("0", "--keep-finished"), std::nullopt);
  EXPECT_EQ(*ParseKeepFinished("forever", "--keep-finished"), std::nullopt);
  auto bad = ParseKeepFinished("soon", "--keep-finished");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("--keep-finished"));
  EXPECT_THAT(bad.status().message(), HasSubstr("forever"));
  // A bare number is seconds: "90" meant as days would purge nearly everything. Under an hour
  // is refused, naming the minimum.
  for (const char* slip : {"90", "59m"}) {
    auto short_one = ParseKeepFinished(slip, "--keep-finished");
    ASSERT_FALSE(short_one.ok()) << slip;
    EXPECT_THAT(short_one.status().message(), HasSubstr("under the minimum of 1h"));
  }
  EXPECT_THAT(
      ParseKeepFinished("90", "--keep-finished").status().message(),
      HasSubstr("--keep-finished: 90 seconds is under the minimum of 1h (write a unit: 90d"));
  EXPECT_EQ(*ParseKeepFinished("1h", "--keep-finished"), Seconds(3600));
}

// A purged job's closed runs are forgotten by the log sink: late output for them is dropped,
// not written into a new folder.
TEST_F(JobRetentionTest, LateOutputOfAPurgedJobIsDropped) {
  const JobId old = Job(1, 1, 1000, 2000);
  logs_.Open(7, {old, 0, 1, "n1"});
  logs_.Close(7);
  ASSERT_TRUE(logs_.RemoveJobs({old}).ok());
  protocol::LogChunk chunk;
  chunk.key = {protocol::AllocationId(7), 1};
  chunk.data = "late\n";
  logs_.Write("n1", {chunk});
  EXPECT_FALSE(HasLogs(old));
}

// Checkpoint folders (checkpoint_folders.h): those of jobs ended more than the retention ago
// go, without following a link out of them; those of recent, running or unknown jobs, and
// entries not named by a job id, stay.
TEST_F(JobRetentionTest, CheckpointFoldersOfLongEndedJobsGoWithoutFollowingLinks) {
  namespace fs = std::filesystem;
  const fs::path root = test_store_.dir() / "checkpoints";
  const fs::path outside = test_store_.dir() / "outside";
  fs::create_directories(outside / "keep");
  std::ofstream(outside / "keep" / "weights.pt") << "precious\n";
  const JobId old = Job(1, 1, kNow - 10 * kDay, kNow - 8 * kDay);
  const JobId recent = Job(1, 1, kNow - 3 * kDay, kNow - 2 * kDay);
  const JobId running = Job(1, 1, kNow - 10 * kDay, std::nullopt);
  for (JobId id : {old, recent, running}) {
    const fs::path dir = root / std::to_string(id.value());
    fs::create_directories(dir / "step-100");
    std::ofstream(dir / "step-100" / "model.pt") << "weights\n";
  }
  const fs::path old_dir = root / std::to_string(old.value());
  fs::create_directory_symlink(outside, old_dir / "link-to-outside");
  fs::create_symlink(outside / "keep" / "weights.pt", old_dir / "step-100" / "link.pt");
  fs::create_directories(root / "999999");  // no such job
  fs::create_directories(root / "notes");
  fs::create_directory_symlink(outside, root / "0123");  // not a job id's name

  JobRetention::Options options;
  options.keep_finished.reset();
  options.checkpoint_root = root.string();
  options.keep_checkpoints = Seconds(7 * kDay);
  JobRetention retention(*store_, logs_, clock_, options);
  auto removed = retention.RemoveCheckpointsOnce();
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1);
  EXPECT_FALSE(fs::exists(fs::symlink_status(old_dir)));
  EXPECT_TRUE(fs::exists(outside / "keep" / "weights.pt"));
  for (JobId id : {recent, running}) EXPECT_TRUE(fs::exists(root / std::to_string(id.value())));
  for (const char* other : {"999999", "notes", "0123"}) EXPECT_TRUE(fs::exists(root / other));
  // A week later the recent one goes too; without a retention nothing does.
  clock_.Advance(Seconds(6 * kDay));
  EXPECT_EQ(*retention.RemoveCheckpointsOnce(), 1);
  EXPECT_FALSE(fs::exists(root / std::to_string(recent.value())));
  options.keep_checkpoints.reset();
  ASSERT_TRUE(store_
                  ->TransitionJob(running, JobState::kRunning, JobState::kSucceeded, "",
                                  Seconds(kNow - 9 * kDay))
                  .ok());
  EXPECT_EQ(*JobRetention(*store_, logs_, clock_, options).RemoveCheckpointsOnce(), 0);
  EXPECT_TRUE(fs::exists(root / std::to_string(running.value())));
}

// Folders the store does not know (kept) and those of running jobs fill no window for ever: each
// pass looks at the next folders after the last pass's, so an old job's folder past them goes.
// The root may be a symbolic link.
TEST_F(JobRetentionTest, CheckpointRemovalMovesPastKeptFoldersUnderALinkedRoot) {
  namespace fs = std::filesystem;
  const fs::path real = test_store_.dir() / "real-checkpoints";
  const fs::path root = test_store_.dir() / "checkpoints";
  fs::create_directories(real);
  fs::create_directory_symlink(real, root);
  const JobId running = Job(1, 1, kNow - 10 * kDay, std::nullopt);
  const JobId old = Job(1, 1, kNow - 10 * kDay, kNow - 8 * kDay);
  fs::create_directories(root / std::to_string(running.value()));
  fs::create_directories(root / std::to_string(old.value()) / "step-1");
  // A folder larger than one read of names.
  for (int i = 0; i < 5000; ++i) {
    std::ofstream(root / std::to_string(old.value()) / "step-1" / std::to_string(i)) << "w";
  }
  for (int i = 1; i <= 3; ++i) fs::create_directories(root / std::to_string(900000 + i));

  JobRetention::Options options;
  options.keep_finished.reset();
  options.checkpoint_root = root.string();
  options.checkpoint_folders_per_pass = 1;
  JobRetention retention(*store_, logs_, clock_, options);
  EXPECT_EQ(*retention.RemoveCheckpointsOnce(), 0);  // the running job's
  auto removed = retention.RemoveCheckpointsOnce();
  ASSERT_TRUE(removed.ok()) << removed.status().ToString();
  EXPECT_EQ(*removed, 1);  // the next folder: the old job's
  EXPECT_FALSE(fs::exists(root / std::to_string(old.value())));
  EXPECT_TRUE(fs::exists(root / std::to_string(running.value())));
  EXPECT_TRUE(fs::is_symlink(root));
  // Past the unknown ones it starts over and never stops looking.
  for (int i = 0; i < 4; ++i) EXPECT_TRUE(retention.RemoveCheckpointsOnce().ok());
  EXPECT_TRUE(fs::exists(root / std::to_string(running.value())));
}

// A purged job's checkpoint folder goes with its row (nothing would tell whose it was after).
TEST_F(JobRetentionTest, APurgeRemovesThePurgedJobsCheckpointFolders) {
  namespace fs = std::filesystem;
  const fs::path root = test_store_.dir() / "checkpoints";
  const JobId old = Job(1, 1, kNow - 40 * kDay, kNow - 39 * kDay);
  const JobId recent = Job(1, 1, kNow - 3 * kDay, kNow - 2 * kDay);
  for (JobId id : {old, recent}) fs::create_directories(root / std::to_string(id.value()) / "s");

  JobRetention::Options options;
  options.keep_finished = Seconds(7 * kDay);
  options.checkpoint_root = root.string();
  options.keep_checkpoints = Seconds(90 * kDay);  // longer than the jobs are kept
  JobRetention retention(*store_, logs_, clock_, options);
  ASSERT_EQ(retention.PurgeOnce()->jobs, 1);
  EXPECT_FALSE(fs::exists(root / std::to_string(old.value())));
  EXPECT_TRUE(fs::exists(root / std::to_string(recent.value())));
}

}  // namespace
}  // namespace corral::server
