// Store::ApplyGroup and WriteBatcher under the store suite's fixture (both backends): one
// commit for a group, all or nothing, cancel requests as RequestCancel, 8 threads through the
// batcher (each batch once, answers in order), isolation of a refused batch, a store-wide
// failure, Close(), and a crash test.
#include "store/write_batcher.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <cstdio>
#include <future>
#include <map>
#include <mutex>
#include <thread>

#include "store/store_test_fixture.h"

namespace corral::store {
namespace {

using model::JobState;
using model::NodeState;
using model::TaskState;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

TaskAssignment OneGpuTask(int index) {
  TaskAssignment t;
  t.task_index = index;
  t.node = "n1";
  t.allocation.gpus = {{index, MilliGpu(1000)}};
  t.allocation.cpu = CpuMilli(1000);
  t.allocation.memory = MemoryMib(1024);
  return t;
}

// What a heartbeat writes when `job`'s one task `task` started at `now`: the task running,
// and the job moved to running.
WriteBatch Runs(JobId job, TaskRecord task, Seconds now, std::string reason = "running") {
  task.state = TaskState::kRunning;
  task.start_time = now;
  WriteBatch b;
  b.tasks = {std::move(task)};
  b.transitions = {{job, JobState::kStarting, JobState::kRunning, std::move(reason)}};
  return b;
}

// ... and when it exited with 0 at `now`: the task exited, and the job `from` -> succeeded.
WriteBatch Ends(JobId job, TaskRecord task, Seconds now, std::string reason = "done",
                JobState from = JobState::kRunning) {
  task.state = TaskState::kExited;
  task.exit_code = 0;
  task.end_time = now;
  WriteBatch b;
  b.tasks = {std::move(task)};
  b.transitions = {{job, from, JobState::kSucceeded, std::move(reason)}};
  return b;
}

bool Ready(const std::shared_future<Status>& f) {
  return f.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

class WriteBatcherTest : public StoreTest {
 protected:
  // `count` jobs of one task each, assigned (starting) on node n1; their tasks by job.
  std::vector<std::pair<JobId, TaskRecord>> StartedJobs(int count) {
    EXPECT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
    std::vector<JobRecord> jobs(count, MakeJob("w"));
    auto ids = store_->InsertJobs(jobs);
    EXPECT_TRUE(ids.ok()) << ids.status().ToString();
    if (!ids.ok()) return {};
    std::vector<GangAssignment> gangs;
    for (JobId id : *ids) gangs.push_back({id, {OneGpuTask(0)}});
    auto tasks = store_->AssignGangs(gangs, Seconds(5));
    EXPECT_TRUE(tasks.ok()) << tasks.status().ToString();
    if (!tasks.ok()) return {};
    std::vector<std::pair<JobId, TaskRecord>> out;
    for (size_t i = 0; i < ids->size(); ++i) out.push_back({(*ids)[i], (*tasks)[i][0]});
    return out;
  }

  // The job's events as "from>to@time:reason" ("" for the submission's from).
  std::vector<std::string> Events(JobId id) {
    std::vector<std::string> out;
    auto events = store_->JobEvents(id);
    EXPECT_TRUE(events.ok()) << events.status().ToString();
    if (!events.ok()) return out;
    for (const JobEvent& e : *events) {
      out.push_back(std::string(e.from_state ? model::ToString(*e.from_state) : "") + ">" +
                    std::string(model::ToString(e.to_state)) + "@" +
                    std::to_string(e.time.value()) + ":" + e.reason);
    }
    return out;
  }

  // Holds the database's write lock (SQLite) or `job`'s row (PostgreSQL) from another
  // connection until Release(): a write of the store to it waits meanwhile, so that batches
  // queued behind it gather into one group.
  void Block(JobId job) {
    blocker_ = Connect();
    ASSERT_NE(blocker_, nullptr);
    ASSERT_TRUE(blocker_->Begin().ok());
    if (GetParam() == Backend::kPostgres) {
      ASSERT_TRUE(
          blocker_->Query("SELECT id FROM jobs WHERE id = ? FOR UPDATE", {job.value()}).ok());
    }
  }
  void Release() { ASSERT_TRUE(blocker_->Rollback().ok()); }

  // Makes every insert of an event whose reason is "boom" fail as a broken database would
  // (IoError, "disk on fire").
  void FailEventsNamedBoom() {
    auto conn = Connect();
    ASSERT_NE(conn, nullptr);
    if (GetParam() == Backend::kSqlite) {
      ASSERT_TRUE(
          conn->ExecuteScript("CREATE TRIGGER boom BEFORE INSERT ON job_events WHEN NEW.reason = "
                              "'boom' BEGIN SELECT RAISE(ABORT, 'disk on fire'); END")
              .ok());
    } else {
      ASSERT_TRUE(conn->ExecuteScript(
                          "CREATE FUNCTION boom() RETURNS trigger AS $$ BEGIN RAISE EXCEPTION "
                          "'disk on fire'; END $$ LANGUAGE plpgsql; CREATE TRIGGER boom BEFORE "
                          "INSERT ON job_events FOR EACH ROW WHEN (NEW.reason = 'boom') EXECUTE "
                          "FUNCTION boom()")
                      .ok());
    }
  }

  std::unique_ptr<SqlConnection> blocker_;
};

INSTANTIATE_TEST_SUITE_P(Sqlite, WriteBatcherTest, ::testing::Values(Backend::kSqlite),
                         BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, WriteBatcherTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

TEST_P(WriteBatcherTest, ApplyGroupCommitsSeveralBatchesOnceEachWithItsTime) {
  Seed();
  auto started = StartedJobs(2);
  ASSERT_EQ(started.size(), 2u);
  auto [a, a_task] = started[0];
  auto [b, b_task] = started[1];

  std::vector<TimedBatch> group = {
      {Runs(a, a_task, Seconds(6), "a runs"), Seconds(6)},
      {Runs(b, b_task, Seconds(7), "b runs"), Seconds(7)},
      {Ends(a, a_task, Seconds(8), "a done"), Seconds(8)},     // needs group[0]'s transition
      {{.cancel_requests = {{b, "user asked"}}}, Seconds(9)},  // needs group[1]'s
  };

  const int64_t before = store_->Commits();
  Status s = store_->ApplyGroup(group);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store_->Commits(), before + 1);

  EXPECT_THAT(Events(a), ElementsAre(">pending@1000:submitted", "pending>starting@5:assigned to n1",
                                     "starting>running@6:a runs", "running>succeeded@8:a done"));
  EXPECT_THAT(Events(b),
              ElementsAre(">pending@1000:submitted", "pending>starting@5:assigned to n1",
                          "starting>running@7:b runs", "running>running@9:cancelling: user asked"));
  auto a_job = store_->GetJob(a);
  EXPECT_EQ(a_job->state, JobState::kSucceeded);
  EXPECT_EQ(a_job->start_time, Seconds(6));
  EXPECT_EQ(a_job->end_time, Seconds(8));
  EXPECT_EQ(store_->GetJob(b)->cancel_reason, "user asked");
  EXPECT_EQ((*store_->TasksOfJob(a))[0].state, TaskState::kExited);  // the later update wins
  EXPECT_EQ((*store_->TasksOfJob(a))[0].end_time, Seconds(8));
  EXPECT_EQ((*store_->TasksOfJob(b))[0].state, TaskState::kRunning);

  // Nothing to write: no commit.
  const int64_t idle = store_->Commits();
  EXPECT_TRUE(store_->ApplyGroup({}).ok());
  EXPECT_TRUE(store_->ApplyGroup({{{}, Seconds(10)}, {{}, Seconds(11)}}).ok());
  EXPECT_EQ(store_->Commits(), idle);
}

// Issue 17, point 1: on PostgreSQL a group's transaction (BEGIN, the fencing check of a store
// that holds the leader's epoch, every write with its compare-and-set and event, COMMIT) and a
// batch of submissions (each job with its event) are one round trip each, whatever their size
// up to a batcher's group. SQLite runs in-process: no round trip to count.
TEST_P(WriteBatcherTest, AGroupAndASubmissionBatchAreOneRoundTripEachOnPostgres) {
  Seed();
  ASSERT_TRUE(store_->AcquireLease("server-a", "http://10.0.0.1:8080", 60000).ok());
  const bool postgres = GetParam() == Backend::kPostgres;
  // A batcher's largest group (256), each statement prepared already (preparing one is a round
  // trip of its own, once per connection).
  ASSERT_TRUE(store_->InsertJobs({MakeJob("warm-up")}).ok());
  const int64_t first = store_->RoundTrips();
  auto submitted = store_->InsertJobs(std::vector<JobRecord>(256, MakeJob("s")));
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  EXPECT_EQ(store_->RoundTrips() - first, postgres ? 1 : 0);
  EXPECT_THAT(Events(submitted->back()), ElementsAre(">pending@1000:submitted"));

  // 256 batches of a task update and a transition each, and a cancel request.
  auto started = StartedJobs(257);
  ASSERT_EQ(started.size(), 257u);
  const auto [warm, warm_task] = started.back();  // the warm-up's job
  started.pop_back();
  ASSERT_TRUE(store_
                  ->ApplyGroup({{Runs(warm, warm_task, Seconds(6), "runs"), Seconds(6)},
                                {{.cancel_requests = {{warm, "warm-up"}}}, Seconds(6)}})
                  .ok());
  std::vector<TimedBatch> group;
  for (const auto& [job, task] : started) {
    group.push_back({Runs(job, task, Seconds(6), "runs"), Seconds(6)});
  }
  group.push_back({{.cancel_requests = {{started[0].first, "user asked"}}}, Seconds(7)});
  const int64_t before = store_->RoundTrips();
  Status s = store_->ApplyGroup(group);
  ASSERT_TRUE(s.ok()) << s.ToString();
  EXPECT_EQ(store_->RoundTrips() - before, postgres ? 1 : 0);
  for (const auto& [job, task] : started) {
    EXPECT_EQ(store_->GetJob(job)->state, JobState::kRunning);
    EXPECT_EQ((*store_->TasksOfJob(job))[0].state, TaskState::kRunning);
  }
  EXPECT_THAT(Events(started[0].first),
              ElementsAre(">pending@1000:submitted", "pending>starting@5:assigned to n1",
                          "starting>running@6:runs", "running>running@7:cancelling: user asked"));
  if (!postgres) EXPECT_EQ(store_->RoundTrips(), 0);
}

TEST_P(WriteBatcherTest, ARefusedWriteLeavesNothingOfTheGroup) {
  Seed();
  auto started = StartedJobs(2);
  ASSERT_EQ(started.size(), 2u);
  auto [a, a_task] = started[0];
  auto [b, b_task] = started[1];
  std::vector<TimedBatch> group = {
      {Runs(a, a_task, Seconds(6), "a runs"), Seconds(6)},
      {{.cancel_requests = {{a, "stop"}}}, Seconds(7)},
      // b is starting, not running: refused
      {Ends(b, b_task, Seconds(8), "b done"), Seconds(8)},
  };
  const int64_t before = store_->Commits();
  const auto a_events = Events(a), b_events = Events(b);
  Status s = store_->ApplyGroup(group);
  EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
  // Named as Apply names it.
  EXPECT_EQ(s.message(), store_->Apply(group[2].batch, Seconds(8)).message());
  EXPECT_THAT(s.message(), HasSubstr("move job " + std::to_string(b.value()) +
                                     " from running to succeeded: job " +
                                     std::to_string(b.value()) + " is starting, not running"));
  EXPECT_EQ(store_->Commits(), before);
  EXPECT_EQ(Events(a), a_events);
  EXPECT_EQ(Events(b), b_events);
  EXPECT_EQ(store_->GetJob(a)->state, JobState::kStarting);
  EXPECT_EQ(store_->GetJob(a)->cancel_reason, std::nullopt);
  EXPECT_EQ((*store_->TasksOfJob(a))[0].state, TaskState::kAssigned);
  EXPECT_EQ((*store_->TasksOfJob(b))[0].state, TaskState::kAssigned);

  // Each of the others alone goes through.
  EXPECT_TRUE(store_->ApplyGroup({group[0], group[1]}).ok());
  EXPECT_EQ(store_->GetJob(a)->cancel_reason, "stop");
}

// A task update that matches no task (checked by the database on PostgreSQL) refuses the group
// whole, named by the task, on both stores.
TEST_P(WriteBatcherTest, AnUpdateOfAnUnknownTaskIsNamedAndLeavesNothing) {
  Seed();
  auto started = StartedJobs(1);
  ASSERT_EQ(started.size(), 1u);
  auto [a, a_task] = started[0];
  TaskRecord ghost = a_task;
  ghost.allocation_id = 987654;
  ghost.state = TaskState::kRunning;
  std::vector<TimedBatch> group = {
      {Runs(a, a_task, Seconds(6), "a runs"), Seconds(6)},
      {{.tasks = {ghost}}, Seconds(7)},
  };
  const auto a_events = Events(a);
  Status s = store_->ApplyGroup(group);
  EXPECT_EQ(s.code(), StatusCode::kNotFound) << s.ToString();
  EXPECT_THAT(s.message(), HasSubstr("update task allocation 987654 generation 1: no such task"));
  EXPECT_EQ(Events(a), a_events);
  EXPECT_EQ(store_->GetJob(a)->state, JobState::kStarting);
  EXPECT_EQ((*store_->TasksOfJob(a))[0].state, TaskState::kAssigned);
}

TEST_P(WriteBatcherTest, CancelRequestsInABatchAreRequestCancel) {
  Seed();
  auto started = StartedJobs(2);
  ASSERT_EQ(started.size(), 2u);
  JobId a = started[0].first, b = started[1].first;
  auto pending = store_->InsertJob(MakeJob("p"));
  ASSERT_TRUE(pending.ok());

  // The same event and cancel reason as RequestCancel writes; cancel requests come first.
  ASSERT_TRUE(store_->RequestCancel(a, "by hand", Seconds(6)).ok());
  WriteBatch batch;
  batch.transitions = {{b, JobState::kStarting, JobState::kCancelled, "tasks stopped"}};
  batch.cancel_requests = {{b, "by hand"}};
  ASSERT_TRUE(store_->Apply(batch, Seconds(6)).ok());
  EXPECT_EQ(Events(a).back(), "starting>starting@6:cancelling: by hand");
  EXPECT_THAT(Events(b), ElementsAre(">pending@1000:submitted", "pending>starting@5:assigned to n1",
                                     "starting>starting@6:cancelling: by hand",
                                     "starting>cancelled@6:tasks stopped"));
  EXPECT_EQ(store_->GetJob(a)->cancel_reason, store_->GetJob(b)->cancel_reason);

  // A pending job: FailedPrecondition, worded as RequestCancel words it; nothing written.
  Status alone = store_->RequestCancel(*pending, "x", Seconds(7));
  WriteBatch on_pending;
  on_pending.cancel_requests = {{*pending, "x"}};
  Status in_batch = store_->Apply(on_pending, Seconds(7));
  EXPECT_EQ(in_batch.code(), StatusCode::kFailedPrecondition);
  EXPECT_EQ(in_batch.message(), alone.message());
  EXPECT_EQ(in_batch.message(), "request cancellation of job " + std::to_string(pending->value()) +
                                    ": job " + std::to_string(pending->value()) +
                                    " is pending, not started");
  EXPECT_EQ(store_->GetJob(*pending)->cancel_reason, std::nullopt);
  EXPECT_EQ(Events(*pending).size(), 1u);

  WriteBatch unknown;
  unknown.cancel_requests = {{JobId(999), "x"}};
  Status missing = store_->Apply(unknown, Seconds(7));
  EXPECT_EQ(missing.code(), StatusCode::kNotFound);
  EXPECT_EQ(missing.message(), store_->RequestCancel(JobId(999), "x", Seconds(7)).message());
}

// 8 threads each run their jobs through the batcher: a batch that starts a job and one that
// ends it (which needs the first), queued back to back, and now and then an empty batch.
TEST_P(WriteBatcherTest, WriteBatcherAppliesEveryBatchOnceAndAnswersInOrder) {
  Seed();
  constexpr int kThreads = 8, kJobsPerThread = 40;
  auto started = StartedJobs(kThreads * kJobsPerThread);
  ASSERT_EQ(started.size(), static_cast<size_t>(kThreads * kJobsPerThread));
  WriteBatcher batcher(store_.get());

  std::mutex order_mu;
  std::vector<std::shared_future<Status>> in_order;  // guarded by order_mu: enqueue order
  std::atomic<int> out_of_order{0}, failed{0}, empty_batches{0};
  auto enqueue = [&](WriteBatch batch, Seconds now) {
    std::lock_guard<std::mutex> lock(order_mu);
    in_order.push_back(batcher.Enqueue(std::move(batch), now));
    return std::make_pair(in_order.back(), in_order.size() - 1);
  };
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      for (int i = 0; i < kJobsPerThread; ++i) {
        auto [job, task] = started[t * kJobsPerThread + i];
        enqueue(Runs(job, task, Seconds(6)), Seconds(6));
        if (i % 7 == 3) {
          enqueue({}, Seconds(6));
          ++empty_batches;
        }
        auto [answer, index] = enqueue(Ends(job, task, Seconds(7)), Seconds(7));
        if (!answer.get().ok()) ++failed;
        // Every batch queued before it is answered too.
        std::lock_guard<std::mutex> lock(order_mu);
        for (size_t j = 0; j < index; ++j) out_of_order += !Ready(in_order[j]);
      }
    });
  }
  for (auto& w : workers) w.join();
  EXPECT_EQ(failed, 0);
  EXPECT_EQ(out_of_order, 0);
  for (const auto& f : in_order) EXPECT_TRUE(f.get().ok()) << f.get().ToString();
  for (const auto& [job, task] : started) {
    EXPECT_THAT(Events(job),
                ElementsAre(">pending@1000:submitted", "pending>starting@5:assigned to n1",
                            "starting>running@6:running", "running>succeeded@7:done"));
    EXPECT_EQ((*store_->TasksOfJob(job))[0].state, TaskState::kExited);
  }
  auto stats = batcher.stats();
  EXPECT_EQ(stats.batches, 2 * kThreads * kJobsPerThread);  // the empty ones are not committed
  EXPECT_LE(stats.commits, stats.batches);
  std::printf("[ writes   ] %s: %lld batches (+%d empty) in %lld commits, largest group %zu\n",
              GetParam() == Backend::kSqlite ? "sqlite" : "postgres",
              static_cast<long long>(stats.batches), empty_batches.load(),
              static_cast<long long>(stats.commits), stats.largest_group);
}

TEST_P(WriteBatcherTest, ARefusedBatchFailsOnlyItselfInItsGroup) {
  Seed();
  auto started = StartedJobs(5);
  ASSERT_EQ(started.size(), 5u);
  WriteBatcher batcher(store_.get());
  auto end = [&](int i, JobState from) {
    return batcher.Enqueue(Ends(started[i].first, started[i].second, Seconds(6), "done", from),
                           Seconds(6));
  };
  Block(started[0].first);
  auto first = end(0, JobState::kStarting);  // waits for the lock; the others gather behind it
  std::vector<std::shared_future<Status>> group;
  for (int i = 1; i < 5; ++i)
    group.push_back(end(i, i == 2 ? JobState::kPending : JobState::kStarting));
  Release();
  EXPECT_TRUE(first.get().ok()) << first.get().ToString();
  for (int i = 1; i < 5; ++i) {
    Status s = group[i - 1].get();
    if (i == 2) {
      EXPECT_EQ(s.code(), StatusCode::kFailedPrecondition);
      EXPECT_THAT(s.message(), HasSubstr("job " + std::to_string(started[2].first.value()) +
                                         " is starting, not pending"));
      EXPECT_EQ(store_->GetJob(started[2].first)->state, JobState::kStarting);
      EXPECT_EQ((*store_->TasksOfJob(started[2].first))[0].state, TaskState::kAssigned);
    } else {
      EXPECT_TRUE(s.ok()) << i << ": " << s.ToString();
      EXPECT_EQ(store_->GetJob(started[i].first)->state, JobState::kSucceeded);
    }
  }
  EXPECT_EQ(batcher.stats().batches, 4);
}

TEST_P(WriteBatcherTest, AStoreWideFailureAnswersTheWholeGroupWithIt) {
  Seed();
  auto started = StartedJobs(5);
  ASSERT_EQ(started.size(), 5u);
  FailEventsNamedBoom();
  WriteBatcher batcher(store_.get());
  auto start = [&](int i, const std::string& reason) {
    return batcher.Enqueue(Runs(started[i].first, started[i].second, Seconds(6), reason),
                           Seconds(6));
  };
  Block(started[0].first);
  auto first = start(0, "running");
  std::vector<std::shared_future<Status>> group;
  for (int i = 1; i < 5; ++i) group.push_back(start(i, i == 3 ? "boom" : "running"));
  Release();
  // The batcher's first group is 0 and whichever of the others it found queued when it took it
  // (none, some or all: a slow thread takes more); everything left forms the second group once
  // the lock is released. So the answers are a run of successes (the first group, when it does
  // not hold batch 3), then failures: the whole group holding batch 3.
  std::vector<Status> answers = {first.get()};
  for (const auto& g : group) answers.push_back(g.get());
  size_t committed = 0;
  while (committed < answers.size() && answers[committed].ok()) ++committed;
  EXPECT_LE(committed, 3u);  // batch 3 never commits
  for (size_t i = 0; i < answers.size(); ++i) {
    const JobState state = store_->GetJob(started[i].first)->state;
    if (i < committed) {
      EXPECT_EQ(state, JobState::kRunning) << i;
      continue;
    }
    // Not retried one by one: the others of batch 3's group, alone, would have gone through.
    EXPECT_EQ(answers[i].code(), StatusCode::kIoError) << i << ": " << answers[i].ToString();
    EXPECT_THAT(answers[i].message(), HasSubstr("disk on fire"));
    EXPECT_EQ(state, JobState::kStarting) << i;
  }
  EXPECT_EQ(batcher.stats().batches, static_cast<int64_t>(committed));
}

TEST_P(WriteBatcherTest, WriteBatcherCommitsWhatItTookAndRefusesAfterClose) {
  Seed();
  auto started = StartedJobs(3);
  ASSERT_EQ(started.size(), 3u);
  std::vector<std::shared_future<Status>> answers;
  {
    WriteBatcher batcher(store_.get());
    for (const auto& [job, task] : started) {
      answers.push_back(batcher.Enqueue(Runs(job, task, Seconds(6)), Seconds(6)));
    }
    batcher.Close();
    batcher.Close();  // idempotent
    auto after = batcher.Enqueue({}, Seconds(7));
    ASSERT_TRUE(Ready(after));
    EXPECT_EQ(after.get().code(), StatusCode::kUnavailable);
    EXPECT_THAT(after.get().message(), HasSubstr("closed"));
  }  // the destructor waits for the batches taken
  for (size_t i = 0; i < answers.size(); ++i) {
    ASSERT_TRUE(Ready(answers[i]));
    EXPECT_TRUE(answers[i].get().ok()) << answers[i].get().ToString();
    EXPECT_EQ(store_->GetJob(started[i].first)->state, JobState::kRunning);
  }
}

// A child process cancels pairs of pending jobs (one batch per pair) through the batcher from 4
// threads and writes each acknowledged pair to a pipe; it is SIGKILLed in the middle. Reopened,
// the store has every acknowledged pair cancelled, and no pair half cancelled.
TEST_P(WriteBatcherTest, AcknowledgedBatchesSurviveSigkillWhole) {
  Seed();
  constexpr int kPairs = 4000;
  std::vector<JobId> ids;
  for (int chunk = 0; chunk < 8; ++chunk) {
    auto some = store_->InsertJobs(std::vector<JobRecord>(kPairs * 2 / 8, MakeJob("pair")));
    ASSERT_TRUE(some.ok()) << some.status().ToString();
    ids.insert(ids.end(), some->begin(), some->end());
  }
  store_.reset();  // the child opens its own; no database handle crosses the fork
  std::vector<int64_t> acknowledged = AcknowledgedBeforeSigkill(500, [&](int fd) {
    auto store = OpenStore(url_);
    if (!store.ok()) _exit(2);
    WriteBatcher batcher(store->get());
    std::vector<std::thread> threads;
    for (int t = 0; t < 4; ++t) {
      threads.emplace_back([&, t] {
        for (int64_t p = t; p < kPairs; p += 4) {
          WriteBatch b;
          for (JobId id : {ids[2 * p], ids[2 * p + 1]}) {
            b.transitions.push_back({id, JobState::kPending, JobState::kCancelled, "pair"});
          }
          if (!batcher.Enqueue(std::move(b), Seconds(2000)).get().ok()) _exit(3);
          if (write(fd, &p, sizeof(p)) != sizeof(p)) _exit(4);
        }
        pause();  // out of pairs: wait for the kill
      });
    }
    for (auto& t : threads) t.join();
  });
  ASSERT_GE(acknowledged.size(), 500u);

  Reopen();
  auto jobs = store_->ListJobs({.limit = 0});
  ASSERT_TRUE(jobs.ok());
  std::map<JobId, JobState> state;
  for (const JobRecord& j : *jobs) state[j.id] = j.state;
  for (int64_t p : acknowledged) {
    EXPECT_EQ(state[ids[2 * p]], JobState::kCancelled) << "acknowledged pair " << p;
  }
  int cancelled = 0;
  for (int p = 0; p < kPairs; ++p) {
    ASSERT_EQ(state[ids[2 * p]], state[ids[2 * p + 1]]) << "pair " << p << " half applied";
    cancelled += state[ids[2 * p]] == JobState::kCancelled;
  }
  // Pairs committed but not yet acknowledged when the kill came may be cancelled too; never
  // fewer.
  EXPECT_GE(cancelled, static_cast<int>(acknowledged.size()));
  std::printf("[ crash    ] %zu acknowledged batches all present after SIGKILL (%d committed)\n",
              acknowledged.size(), cancelled);
}

}  // namespace
}  // namespace corral::store
