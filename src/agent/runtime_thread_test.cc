// The runtime thread against a scripted Runtime: launches that take as long as the test wants,
// ends the test announces through an exit notice pipe, and a poll interval of an hour, so that
// anything seen before it came from a notice. Waits on conditions with deadlines, never sleeps.
#include "agent/runtime_thread.h"

#include <fcntl.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>
#include <optional>
#include <thread>

namespace corral::agent {
namespace {

constexpr auto kThreadDeadline = std::chrono::seconds(20);

TaskKey Key(int64_t allocation) { return TaskKey{AllocationId(allocation), 1}; }

TaskLaunch Launch(int64_t allocation) {
  TaskLaunch l;
  l.job_id = JobId(allocation);
  l.key = Key(allocation);
  l.argv = {"true"};
  return l;
}

// A Runtime whose Start() waits while the gate is closed, and whose tasks end when the test
// says so (with a byte on the exit notice pipe, drained by Poll(), like ProcessRuntime's FIFO).
class ScriptedRuntime final : public Runtime {
 public:
  ScriptedRuntime() { EXPECT_EQ(pipe2(notices_, O_NONBLOCK | O_CLOEXEC), 0); }
  ~ScriptedRuntime() override {
    close(notices_[0]);
    close(notices_[1]);
  }

  TaskStatus Start(const TaskLaunch& launch) override {
    std::unique_lock lock(mu_);
    ++starts_[launch.key];
    in_start_ = true;
    changed_.notify_all();
    changed_.wait(lock, [&] { return gate_open_; });
    in_start_ = false;
    TaskStatus s;
    s.job_id = launch.job_id;
    s.key = launch.key;
    s.state = ProcessState::kRunning;
    tasks_[launch.key] = s;
    launches_[launch.key] = launch;
    return s;
  }
  std::vector<TaskStatus> Poll() override {
    char buffer[64];
    while (read(notices_[0], buffer, sizeof(buffer)) > 0) {
    }
    std::lock_guard lock(mu_);
    std::vector<TaskStatus> out;
    for (const auto& [key, s] : tasks_) out.push_back(s);
    return out;
  }
  using Runtime::Kill;
  Status Kill(const TaskKey& key, Seconds grace, const std::string&,
              model::TaskEndCause cause) override {
    std::lock_guard lock(mu_);
    ++kills_[key];
    causes_[key] = cause;
    graces_[key] = grace;
    return tasks_.count(key) ? Status::Ok() : NotFound("unknown");
  }
  Status Forget(const TaskKey& key) override {
    std::lock_guard lock(mu_);
    tasks_.erase(key);
    return Status::Ok();
  }
  Result<std::string> ReadLog(const TaskKey&, LogStream, int64_t, int64_t) override {
    return std::string();
  }
  std::vector<RunningTask> Running() const override {
    std::lock_guard lock(mu_);
    std::vector<RunningTask> out;
    for (const auto& [key, s] : tasks_) {
      if (s.state == ProcessState::kRunning) out.push_back({launches_.at(key), 1, false});
    }
    return out;
  }
  int ExitNoticeFd() const override { return notices_[0]; }

  void SetGate(bool open) {
    std::lock_guard lock(mu_);
    gate_open_ = open;
    changed_.notify_all();
  }
  // Blocks until a Start() waits at the closed gate.
  bool WaitInStart() {
    std::unique_lock lock(mu_);
    return changed_.wait_for(lock, kThreadDeadline, [&] { return in_start_; });
  }
  // The task ends with `code`, announced like a supervisor would.
  void End(const TaskKey& key, int code) {
    {
      std::lock_guard lock(mu_);
      tasks_[key].state = ProcessState::kExited;
      tasks_[key].exit_code = code;
    }
    ASSERT_EQ(write(notices_[1], "x", 1), 1);
  }
  int Starts(const TaskKey& key) {
    std::lock_guard lock(mu_);
    return starts_[key];
  }
  int Kills(const TaskKey& key) {
    std::lock_guard lock(mu_);
    return kills_[key];
  }
  std::optional<model::TaskEndCause> CauseOf(const TaskKey& key) {
    std::lock_guard lock(mu_);
    auto it = causes_.find(key);
    return it == causes_.end() ? std::nullopt : std::optional(it->second);
  }
  Seconds GraceOf(const TaskKey& key) {
    std::lock_guard lock(mu_);
    return graces_[key];
  }

 private:
  mutable std::mutex mu_;
  std::condition_variable changed_;
  bool gate_open_ = true;
  bool in_start_ = false;
  std::map<TaskKey, TaskStatus> tasks_;
  std::map<TaskKey, int> starts_;
  std::map<TaskKey, int> kills_;
  std::map<TaskKey, model::TaskEndCause> causes_;
  std::map<TaskKey, Seconds> graces_;
  std::map<TaskKey, TaskLaunch> launches_;
  int notices_[2] = {-1, -1};
};

class RuntimeThreadTest : public ::testing::Test {
 protected:
  RuntimeThreadTest()
      : thread_(runtime_, Options(), [this] {
          std::lock_guard lock(mu_);
          ++changes_;
          changed_.notify_all();
        }) {}

  static RuntimeThread::Options Options() {
    RuntimeThread::Options o;
    o.poll_interval = std::chrono::hours(1);  // every end seen comes from its notice
    return o;
  }

  // Waits until `done` holds, looking again at every change and every 10 ms.
  bool WaitUntil(const std::function<bool()>& done) {
    const auto deadline = std::chrono::steady_clock::now() + kThreadDeadline;
    std::unique_lock lock(mu_);
    while (!done()) {
      if (std::chrono::steady_clock::now() > deadline) return false;
      changed_.wait_for(lock, std::chrono::milliseconds(10));
    }
    return true;
  }
  // Waits until the published snapshot satisfies `done`.
  bool WaitForSnapshot(const std::function<bool(const RuntimeSnapshot&)>& done) {
    return WaitUntil([&] { return done(thread_.Snapshot()); });
  }

  static const SnapshotTask* Find(const RuntimeSnapshot& s, const TaskKey& key) {
    for (const SnapshotTask& t : *s.tasks) {
      if (t.status.key == key) return &t;
    }
    return nullptr;
  }
  static bool Starting(const RuntimeSnapshot& s, const TaskKey& key) {
    return std::find(s.starting.begin(), s.starting.end(), key) != s.starting.end();
  }

  ScriptedRuntime runtime_;
  std::mutex mu_;
  std::condition_variable changed_;
  int changes_ = 0;
  RuntimeThread thread_;  // declared last: stopped before the runtime goes
};

TEST_F(RuntimeThreadTest, ASlowLaunchNeverBlocksTheReportersAndListsItsTasksAsStarting) {
  thread_.Start();
  runtime_.SetGate(false);
  thread_.Launch(Launch(1));
  thread_.Launch(Launch(2));
  ASSERT_TRUE(runtime_.WaitInStart());
  // Task 1 is being started, task 2 queued: a snapshot is there at once and lists both.
  RuntimeSnapshot s = thread_.Snapshot();
  EXPECT_TRUE(Starting(s, Key(1)));
  EXPECT_TRUE(Starting(s, Key(2)));
  EXPECT_EQ(Find(s, Key(1)), nullptr);
  thread_.Launch(Launch(1));  // the server repeats launches: started once
  runtime_.SetGate(true);
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) {
    return Find(s, Key(1)) && Find(s, Key(2)) && s.starting.empty();
  }));
  thread_.Launch(Launch(2));
  thread_.Stop();
  EXPECT_EQ(runtime_.Starts(Key(1)), 1);
  EXPECT_EQ(runtime_.Starts(Key(2)), 1);
}

TEST_F(RuntimeThreadTest, AKillOfAQueuedLaunchMeansItNeverStarts) {
  thread_.Start();
  runtime_.SetGate(false);
  thread_.Launch(Launch(1));
  ASSERT_TRUE(runtime_.WaitInStart());
  thread_.Launch(Launch(2));
  thread_.Kill({Key(2), Seconds(0), "cancelled"});  // still queued: dropped
  thread_.Kill({Key(1), Seconds(0), "cancelled"});  // being started: killed after its start
  EXPECT_FALSE(Starting(thread_.Snapshot(), Key(2)));
  runtime_.SetGate(true);
  ASSERT_TRUE(WaitUntil([&] { return runtime_.Kills(Key(1)) == 1; }));
  thread_.Stop();
  EXPECT_EQ(runtime_.Starts(Key(2)), 0);
  EXPECT_EQ(runtime_.Kills(Key(2)), 0);
}

TEST_F(RuntimeThreadTest, AnEndIsPublishedOnItsNoticeWithANewerVersion) {
  thread_.Start();
  thread_.Launch(Launch(1));
  thread_.Launch(Launch(2));
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return s.tasks->size() == 2; }));
  const RuntimeSnapshot before = thread_.Snapshot();
  runtime_.End(Key(2), 3);
  // The poll interval is an hour: only the notice can have brought the end.
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) {
    const SnapshotTask* t = Find(s, Key(2));
    return t && t->status.state == ProcessState::kExited;
  }));
  const RuntimeSnapshot after = thread_.Snapshot();
  EXPECT_GT(after.version, before.version);
  EXPECT_GT(Find(after, Key(2))->changed_at, before.version);  // in a partial report
  EXPECT_LE(Find(after, Key(1))->changed_at, before.version);  // not: unchanged
  EXPECT_EQ(Find(after, Key(2))->status.exit_code, 3);
}

TEST_F(RuntimeThreadTest, EveryStartAndEndIsAChangeForThePusherAndForgottenTasksGo) {
  thread_.Start();
  auto changes = [&] {
    std::lock_guard lock(mu_);
    return changes_;
  };
  const int at_start = changes();
  thread_.Launch(Launch(1));
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return s.tasks->size() == 1; }));
  EXPECT_GT(changes(), at_start);
  const int started = changes();
  runtime_.End(Key(1), 0);
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) {
    return Find(s, Key(1)) && IsTerminal(Find(s, Key(1))->status.state);
  }));
  EXPECT_GT(changes(), started);
  thread_.Forget({Key(1)});
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return s.tasks->empty(); }));
}

// --- Fencing (docs/control-plane.md, "Fencing") ----------------------------------------------

TaskLaunch Requeueable(int64_t allocation) {
  TaskLaunch l = Launch(allocation);
  l.requeueable = true;
  return l;
}

TEST_F(RuntimeThreadTest, CutOffForFenceAfterItStopsOnlyTheRequeueableTasksOnce) {
  // The poll interval is an hour: the fence is kept on time by its own deadline.
  thread_.SetFence(RuntimeThread::Fence{std::chrono::milliseconds(200), Seconds(7)});
  thread_.Start();
  thread_.Launch(Requeueable(1));
  thread_.Launch(Launch(2));
  ASSERT_TRUE(
      WaitForSnapshot([](const RuntimeSnapshot& s) { return Find(s, Key(1)) && Find(s, Key(2)); }));
  const auto cut = std::chrono::steady_clock::now();  // no Reached() from here on
  ASSERT_TRUE(WaitUntil([&] { return runtime_.Kills(Key(1)) == 1; }));
  EXPECT_GE(std::chrono::steady_clock::now() - cut, std::chrono::milliseconds(150));
  EXPECT_EQ(runtime_.CauseOf(Key(1)), model::TaskEndCause::kFenced);
  EXPECT_EQ(runtime_.GraceOf(Key(1)), Seconds(7));  // the server's kill grace
  EXPECT_EQ(runtime_.Kills(Key(2)), 0);             // its job would not be requeued: it runs on
  // Fenced once per time cut off, however long it lasts.
  thread_.Launch(Requeueable(3));
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return Find(s, Key(3)); }));
  thread_.Stop();
  EXPECT_EQ(runtime_.Kills(Key(1)), 1);
  EXPECT_EQ(runtime_.Kills(Key(3)), 0);
}

TEST_F(RuntimeThreadTest, AFenceDropsRequeueableLaunchesNotStartedYetEvenInALongBatch) {
  thread_.SetFence(RuntimeThread::Fence{std::chrono::milliseconds(200), Seconds(1)});
  thread_.Start();
  runtime_.SetGate(false);
  thread_.Launch(Launch(1));  // a slow start holds the batch up
  ASSERT_TRUE(runtime_.WaitInStart());
  thread_.Launch(Requeueable(2));
  thread_.Launch(Launch(3));
  // The fence falls due while the batch is held up (the time passing is the subject here).
  const auto due = std::chrono::steady_clock::now() + std::chrono::milliseconds(300);
  while (std::chrono::steady_clock::now() < due) {
    std::unique_lock lock(mu_);
    changed_.wait_until(lock, due);
  }
  runtime_.SetGate(true);
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) {
    return Find(s, Key(1)) && Find(s, Key(3)) && s.starting.empty();
  }));
  thread_.Stop();
  EXPECT_EQ(runtime_.Starts(Key(2)), 0);  // dropped: its job is requeued elsewhere
  EXPECT_EQ(runtime_.Starts(Key(3)), 1);  // not requeue-able: started
  EXPECT_EQ(runtime_.Kills(Key(1)), 0);
}

TEST_F(RuntimeThreadTest, ReachingAServerKeepsTheFenceAwayAndArmsItAgain) {
  thread_.SetFence(RuntimeThread::Fence{std::chrono::milliseconds(300), Seconds(1)});
  thread_.Start();
  thread_.Launch(Requeueable(1));
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return Find(s, Key(1)); }));
  // Reached every 50 ms for 1 s: never fenced.
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(1);
  while (std::chrono::steady_clock::now() < until) {
    thread_.Reached();
    std::unique_lock lock(mu_);
    changed_.wait_for(lock, std::chrono::milliseconds(50));  // pacing the agent's requests
  }
  EXPECT_EQ(runtime_.Kills(Key(1)), 0);
  ASSERT_TRUE(WaitUntil([&] { return runtime_.Kills(Key(1)) == 1; }));  // then cut off
  // Reached again, then cut off again: the tasks started since are fenced too.
  thread_.Reached();
  thread_.Launch(Requeueable(2));
  ASSERT_TRUE(WaitUntil([&] { return runtime_.Kills(Key(2)) == 1; }));
  EXPECT_EQ(runtime_.CauseOf(Key(2)), model::TaskEndCause::kFenced);
}

TEST_F(RuntimeThreadTest, WithoutAFenceNothingIsEverStoppedForWantOfServers) {
  thread_.SetFence(std::nullopt);  // a server older than fencing
  thread_.Start();
  thread_.Launch(Requeueable(1));
  ASSERT_TRUE(WaitForSnapshot([](const RuntimeSnapshot& s) { return Find(s, Key(1)); }));
  // Orders still go through at once, and none of them is a fence.
  thread_.Kill({Key(1), Seconds(0), "cancelled"});
  ASSERT_TRUE(WaitUntil([&] { return runtime_.Kills(Key(1)) == 1; }));
  EXPECT_EQ(runtime_.CauseOf(Key(1)), model::TaskEndCause::kStopped);
}

}  // namespace
}  // namespace corral::agent
