// Real processes: every test starts tasks through the real supervisor and waits for what it
// expects with a deadline (polling every 10 ms), never a fixed sleep. Time limits and grace
// periods run on a FakeClock, so a 10 s grace costs no wall time.
#include "agent/process_runtime.h"

#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <set>
#include <sstream>
#include <thread>
#include <tuple>

#include "agent/distributed_test_support.h"
#include "agent/file_io.h"
#include "agent/proc_stat.h"
#include "agent/runtime_test_support.h"
#include "agent/shim.h"
#include "agent/task_user.h"
#include "common/strings.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kDeadline = std::chrono::seconds(20);

class ProcessRuntimeTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-agent-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    work_dir_ = root_ + "/work";
    home_ = TestHome(work_dir_);
    task_dir_ = root_ + "/wd";
    ASSERT_EQ(mkdir(task_dir_.c_str(), 0755), 0);
  }

  void TearDown() override {
    // Stop whatever a failed test left running, then remove the files.
    if (auto runtime =
            ProcessRuntime::Create(Options(CgroupManager::Disabled("teardown")), &clock_);
        runtime.ok()) {
      for (const TaskStatus& s : (*runtime)->Poll()) {
        if (s.state == ProcessState::kRunning)
          (void)(*runtime)->Kill(s.key, Seconds(0), "teardown");
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  ProcessRuntimeOptions Options(CgroupManager cgroups) {
    ProcessRuntimeOptions o;
    o.work_dir = work_dir_;
    o.cluster_id = kTestClusterId;
    o.node_name = kTestNodeName;
    o.time_limit_grace = Seconds(30);
    o.cgroups = std::move(cgroups);
    o.supervisor_exe = CORRAL_SUPERVISOR;
    return o;
  }

  std::unique_ptr<ProcessRuntime> MakeRuntime(
      CgroupManager cgroups = CgroupManager::Disabled("cgroups disabled in this test")) {
    auto runtime = ProcessRuntime::Create(Options(std::move(cgroups)), &clock_);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    return runtime.ok() ? std::move(runtime).value() : nullptr;
  }

  TaskLaunch Launch(int64_t allocation, std::vector<std::string> argv) {
    TaskLaunch l;
    l.job_id = JobId(7);
    l.task_index = 0;
    l.tasks = 1;
    l.key = TaskKey{AllocationId(allocation), 1};
    l.argv = std::move(argv);
    l.workdir = task_dir_;
    return l;
  }

  TaskStatus WaitFor(Runtime& runtime, const TaskKey& key,
                     const std::function<bool(const TaskStatus&)>& done, const std::string& what) {
    return WaitForStatus(runtime, key, done, what, kDeadline);
  }

  TaskStatus WaitForEnd(Runtime& runtime, const TaskKey& key) {
    return WaitFor(
        runtime, key, [](const TaskStatus& s) { return IsTerminal(s.state); }, "the task to end");
  }

  void WaitForOutput(Runtime& runtime, const TaskKey& key, const std::string& text) {
    WaitForStdout(runtime, key, text, kDeadline);
  }

  std::string Stdout(Runtime& runtime, const TaskKey& key) {
    auto out = runtime.ReadLog(key, LogStream::kStdout, 0, 1 << 20);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? *out : "";
  }

  nlohmann::json TaskRecord(const TaskKey& key) {
    auto text = ReadFile(home_ + "/tasks/" + ToString(key) + "/task.json");
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }

  // Starts `l` in a runtime that then goes away, and takes the task's pid out of its record, as
  // an agent killed between starting the task and recording it would leave it (the task's
  // task.pid stays).
  TaskStatus StartAndLoseItsPid(const TaskLaunch& l) {
    auto a = MakeRuntime();
    TaskStatus started = a->Start(l);
    if (started.state != ProcessState::kRunning) return started;
    WaitForOutput(*a, l.key, "ready");
    a.reset();
    nlohmann::json record = TaskRecord(l.key);
    record["task_pid"] = 0;
    record["task_start_ticks"] = 0;
    EXPECT_TRUE(
        WriteFileAtomic(home_ + "/tasks/" + ToString(l.key) + "/task.json", record.dump() + "\n")
            .ok());
    return started;
  }

  ShimPlan TouchPlan() const;

  // SIGKILLs the supervisor of `key` and reaps it (this test process is its parent).
  void KillSupervisor(const TaskKey& key) {
    const pid_t shim = TaskRecord(key)["shim_pid"].get<pid_t>();
    ASSERT_GT(shim, 0);
    ASSERT_EQ(kill(shim, SIGKILL), 0);
    ASSERT_EQ(waitpid(shim, nullptr, 0), shim);
  }

  static bool WaitUntilGone(pid_t pid) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (!ProcessGone(pid) && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return ProcessGone(pid);
  }

  static bool ProcessGone(pid_t pid) {
    auto stat = ReadProcStat(pid);
    return !stat.ok() || stat->state == 'Z' || stat->state == 'X';
  }

  FakeClock clock_{Seconds(1700000000)};
  std::string root_;
  std::string work_dir_;
  std::string home_;  // the runtime's namespace in work_dir_: TestHome()
  std::string task_dir_;
};

TEST_F(ProcessRuntimeTest, TaskSeesItsGpusAndCorralVariablesAndNotTheAgentsEnvironment) {
  setenv("CORRAL_TEST_AGENT_SECRET", "s3cret", 1);
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(12, {"env"});
  l.key.generation = 4;
  l.job_id = JobId(42);
  l.tasks = 2;
  l.task_index = 1;
  l.gpus = {1, 3};
  l.gpu_milli = MilliGpu(1000);
  l.env = {{"FOO", "bar baz"}};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  EXPECT_GT(started.pid, 0);
  EXPECT_EQ(started.started_at, Seconds(1700000000));
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_FALSE(end.signal.has_value());
  EXPECT_TRUE(end.ended_at.has_value());
  std::string out = "\n" + Stdout(*runtime, l.key);
  EXPECT_THAT(out, HasSubstr("\nCUDA_VISIBLE_DEVICES=1,3\n"));
  EXPECT_THAT(out, HasSubstr("\nNVIDIA_VISIBLE_DEVICES=1,3\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_JOB_ID=42\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_TASK_INDEX=1\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_NUM_TASKS=2\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_ALLOCATION_ID=12\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_GENERATION=4\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_NODE_NAME=node-a\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_GPU_MILLI=1000\n"));
  EXPECT_THAT(out, HasSubstr("\nFOO=bar baz\n"));
  EXPECT_THAT(out, HasSubstr("PATH="));
  EXPECT_THAT(out, Not(HasSubstr("CORRAL_TEST_AGENT_SECRET")));
}

// The folder of the agent's binary (this test's, by default) ends the task's PATH, so that a job
// finds the `corral` beside the agent for `corral job report` (docs/in-job.md).
TEST_F(ProcessRuntimeTest, TheAgentsOwnFolderEndsTheTasksPath) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"env"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  const std::string out = "\n" + Stdout(*runtime, l.key);
  const std::string folder = std::filesystem::read_symlink("/proc/self/exe").parent_path().string();
  const size_t start = out.find("\nPATH=");
  ASSERT_NE(start, std::string::npos);
  const std::string path = out.substr(start + 6, out.find('\n', start + 1) - start - 6);
  EXPECT_EQ(path.substr(path.size() - folder.size() - 1), ":" + folder) << path;
}

TEST_F(ProcessRuntimeTest, CpuOnlyTaskSeesNoGpus) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"env"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  std::string out = "\n" + Stdout(*runtime, l.key);
  EXPECT_THAT(out, HasSubstr("\nCUDA_VISIBLE_DEVICES=\n"));
  EXPECT_THAT(out, HasSubstr("\nNVIDIA_VISIBLE_DEVICES=void\n"));
}

TEST_F(ProcessRuntimeTest, ExitCodeIsReported) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "exit 3"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 3);
  EXPECT_FALSE(end.signal.has_value());
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kExited);
}

TEST_F(ProcessRuntimeTest, DeathBySignalIsReported) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "kill -USR1 $$"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);  // nobody in corral sent it
  EXPECT_EQ(end.signal, SIGUSR1);
  EXPECT_FALSE(end.exit_code.has_value());
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kSignalled);
}

TEST_F(ProcessRuntimeTest, StdoutAndStderrGoToTheirLogsAndReadLogPages) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "echo out-line; echo err-line >&2"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  EXPECT_EQ(Stdout(*runtime, l.key), "out-line\n");
  auto err = runtime->ReadLog(l.key, LogStream::kStderr, 0, 100);
  ASSERT_TRUE(err.ok());
  EXPECT_EQ(*err, "err-line\n");
  auto page = runtime->ReadLog(l.key, LogStream::kStdout, 4, 3);
  ASSERT_TRUE(page.ok());
  EXPECT_EQ(*page, "lin");
  auto end = runtime->ReadLog(l.key, LogStream::kStdout, 9, 100);
  ASSERT_TRUE(end.ok());
  EXPECT_EQ(*end, "");
  EXPECT_EQ(
      runtime->ReadLog(TaskKey{AllocationId(99), 1}, LogStream::kStdout, 0, 1).status().code(),
      StatusCode::kNotFound);
}

TEST_F(ProcessRuntimeTest, ArgvIsNeverInterpretedByAShell) {
  auto runtime = MakeRuntime();
  const std::string marker = root_ + "/injected";
  TaskLaunch l = Launch(1, {"echo", "$(touch " + marker + ")", "; touch " + marker, "`id`"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(Stdout(*runtime, l.key), "$(touch " + marker + ") ; touch " + marker + " `id`\n");
  EXPECT_FALSE(std::filesystem::exists(marker));
}

TEST_F(ProcessRuntimeTest, ShellTaskRunsUnderShWithArguments) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"echo $((1 + 2)) \"$0\" \"$1\"; pwd", "zero", "one"});
  l.shell = true;
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  EXPECT_EQ(Stdout(*runtime, l.key), "3 zero one\n" + task_dir_ + "\n");
}

TEST_F(ProcessRuntimeTest, LaunchesThatCannotStartAreReportedWithTheReason) {
  auto runtime = MakeRuntime();
  struct Case {
    TaskLaunch launch;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({Launch(1, {"no-such-command-corral"}), "command not found in PATH"});
  cases.push_back({Launch(2, {"/nonexistent/bin/prog"}), "is not an executable file"});
  std::ofstream(task_dir_ + "/data.txt") << "not a program\n";
  chmod((task_dir_ + "/data.txt").c_str(), 0644);
  cases.push_back({Launch(3, {"./data.txt"}), task_dir_ + "/./data.txt is not an executable file"});
  TaskLaunch missing = Launch(4, {"true"});
  missing.workdir = root_ + "/missing";
  cases.push_back({missing, "field 'workdir': '" + root_ + "/missing' does not exist"});
  TaskLaunch reserved = Launch(5, {"true"});
  reserved.env = {{"CUDA_VISIBLE_DEVICES", "0"}};
  cases.push_back({reserved, "'CUDA_VISIBLE_DEVICES' is set by corral"});
  cases.push_back({Launch(6, {}), "field 'argv': must not be empty"});
  for (const Case& c : cases) {
    TaskStatus s = runtime->Start(c.launch);
    EXPECT_EQ(s.state, ProcessState::kFailedToStart) << c.message;
    EXPECT_THAT(s.message, HasSubstr(c.message));
    EXPECT_EQ(s.pid, 0);
    EXPECT_FALSE(std::filesystem::exists(runtime->TaskDir(c.launch.key)));
  }
  // Reported by Poll until forgotten.
  std::vector<TaskStatus> all = runtime->Poll();
  ASSERT_EQ(all.size(), cases.size());
  for (const TaskStatus& s : all) EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_TRUE(runtime->Forget(cases[0].launch.key).ok());
  EXPECT_EQ(runtime->Poll().size(), cases.size() - 1);
}

// A fake venv (conda prefix): a directory with bin/python3 printing its own path.
std::string MakePrefix(const std::string& dir) {
  std::filesystem::create_directories(dir + "/bin");
  std::ofstream(dir + "/bin/python3") << "#!/bin/sh\necho \"python in $0\"\n";
  chmod((dir + "/bin/python3").c_str(), 0755);
  return dir;
}

TEST_F(ProcessRuntimeTest, VenvEnvironmentLeadsPathAndSetsVirtualEnv) {
  auto runtime = MakeRuntime();
  const std::string venv = MakePrefix(root_ + "/venv");
  TaskLaunch l = Launch(1, {"sh", "-c", "python3; env"});
  l.environment = LaunchEnvironment{"torch", 3, "process", "", venv, ""};
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  const std::string out = "\n" + Stdout(*runtime, l.key);
  EXPECT_THAT(out, HasSubstr("python in " + venv + "/bin/python3\n"));
  EXPECT_THAT(out, HasSubstr("\nPATH=" + venv + "/bin:"));
  EXPECT_THAT(out, HasSubstr("\nVIRTUAL_ENV=" + venv + "\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_ENVIRONMENT=torch@3\n"));
  EXPECT_THAT(out, Not(HasSubstr("CONDA_PREFIX")));
}

TEST_F(ProcessRuntimeTest, CondaEnvironmentLeadsPathAndSetsCondaPrefix) {
  auto runtime = MakeRuntime();
  const std::string conda = MakePrefix(root_ + "/conda");
  TaskLaunch l = Launch(1, {"env"});
  l.environment = LaunchEnvironment{"rapids", 1, "process", "", "", conda};
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  const std::string out = "\n" + Stdout(*runtime, l.key);
  EXPECT_THAT(out, HasSubstr("\nPATH=" + conda + "/bin:"));
  EXPECT_THAT(out, HasSubstr("\nCONDA_PREFIX=" + conda + "\n"));
  EXPECT_THAT(out, Not(HasSubstr("VIRTUAL_ENV")));
}

TEST_F(ProcessRuntimeTest, EnvironmentThatCannotRunHereFailsToStart) {
  auto runtime = MakeRuntime();
  TaskLaunch missing = Launch(1, {"true"});
  missing.environment = LaunchEnvironment{"torch", 2, "process", "", root_ + "/no-venv", ""};
  TaskStatus s = runtime->Start(missing);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_THAT(s.message, HasSubstr("field 'environment.venv': '" + root_ + "/no-venv'"));
  EXPECT_THAT(s.message, HasSubstr("torch@2"));
  TaskLaunch container = Launch(2, {"true"});
  container.environment = LaunchEnvironment{"cuda-base", 1, "container", "nvcr.io/x", "", ""};
  s = runtime->Start(container);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_EQ(s.message, "this node has no container engine (corral agent --container-engine)");
}

TEST_F(ProcessRuntimeTest, ExecFailureIsFailedToStart) {
  auto runtime = MakeRuntime();
  const std::string script = task_dir_ + "/bad-interpreter.sh";
  {
    std::ofstream f(script);
    f << "#!/nonexistent/interpreter\necho hi\n";
  }
  chmod(script.c_str(), 0755);
  TaskLaunch l = Launch(1, {script});
  TaskStatus s = runtime->Start(l);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_THAT(s.message, HasSubstr("exec " + script + ": No such file or directory"));
}

TEST_F(ProcessRuntimeTest, StartIsIdempotentPerKey) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sleep", "100"});
  TaskStatus first = runtime->Start(l);
  ASSERT_EQ(first.state, ProcessState::kRunning);
  TaskStatus second = runtime->Start(l);
  EXPECT_EQ(second.state, ProcessState::kRunning);
  EXPECT_EQ(second.pid, first.pid);
  EXPECT_EQ(runtime->Poll().size(), 1u);
  // Another generation of the same allocation is another task.
  TaskLaunch next = l;
  next.key.generation = 2;
  EXPECT_NE(runtime->Start(next).pid, first.pid);
  EXPECT_EQ(runtime->Poll().size(), 2u);
  EXPECT_TRUE(runtime->Kill(l.key, Seconds(0), "test").ok());
  EXPECT_TRUE(runtime->Kill(next.key, Seconds(0), "test").ok());
  WaitForEnd(*runtime, l.key);
  WaitForEnd(*runtime, next.key);
}

TEST_F(ProcessRuntimeTest, SigtermLetsATrapExitCleanlyWithinGrace) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c",
                            "trap 'echo got-TERM; exit 0' TERM; echo ready; "
                            "while :; do sleep 0.05; done"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(10), "cancelled").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);  // the clock never reaches the grace deadline
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(end.message, "cancelled");
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kStopped);
  EXPECT_THAT(Stdout(*runtime, l.key), HasSubstr("got-TERM"));
  // Killing an ended task is a no-op; unknown tasks are NotFound.
  EXPECT_TRUE(runtime->Kill(l.key, Seconds(0), "again").ok());
  EXPECT_EQ(runtime->Kill(TaskKey{AllocationId(9), 9}, Seconds(0), "x").code(),
            StatusCode::kNotFound);
}

TEST_F(ProcessRuntimeTest, TaskIgnoringSigtermIsKilledWhenGraceRunsOut) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(10), "preempted").ok());
  // Within the grace it keeps running (several polls over ~200 ms of wall time).
  for (int i = 0; i < 20; ++i) {
    for (const TaskStatus& s : runtime->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  clock_.Advance(Seconds(9));
  for (const TaskStatus& s : runtime->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);
  clock_.Advance(Seconds(1));  // grace over: the next Poll sends SIGKILL
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.message, "preempted");
}

TEST_F(ProcessRuntimeTest, TimeLimitIsEnforced) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sleep", "100"});
  l.time_limit = Seconds(60);
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  clock_.Advance(Seconds(59));
  for (const TaskStatus& s : runtime->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);
  clock_.Advance(Seconds(1));
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.signal, SIGTERM);
  EXPECT_THAT(end.message, HasSubstr("time limit of 60 s"));
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kTimeLimit);  // typed: no one parses the message
}

// A task stopped at its time limit says so even when an agent restart came between the SIGTERM
// and the end (the cause is in the kill record).
TEST_F(ProcessRuntimeTest, TheTimeLimitCauseSurvivesAnAgentRestart) {
  auto a = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  l.time_limit = Seconds(5);
  ASSERT_EQ(a->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*a, l.key, "ready");
  clock_.Advance(Seconds(5));
  for (const TaskStatus& s : a->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);  // SIGTERM sent
  a.reset();
  auto b = MakeRuntime();
  clock_.Advance(Seconds(30));  // the grace (Options: 30 s) runs out under the new agent
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kTimeLimit);
  EXPECT_THAT(end.message, HasSubstr("time limit of 5 s"));
}

TEST_F(ProcessRuntimeTest, AdoptsARunningTaskAndReportsItsExit) {
  auto a = MakeRuntime();
  TaskLaunch l =
      Launch(1, {"sh", "-c", "while [ ! -e go ]; do sleep 0.02; done; echo done; exit 4"});
  TaskStatus started = a->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);
  a.reset();  // the agent goes away without killing anything

  auto b = MakeRuntime();
  std::vector<TaskStatus> adopted = b->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].pid, started.pid);
  EXPECT_EQ(adopted[0].job_id, JobId(7));
  EXPECT_EQ(adopted[0].started_at, started.started_at);

  std::ofstream(task_dir_ + "/go") << "";
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 4);
  EXPECT_EQ(Stdout(*b, l.key), "done\n");
}

// Waits (poll(2), up to kDeadline) for the runtime's exit notice descriptor to be readable.
bool ExitNoticeArrives(const Runtime& runtime) {
  pollfd p{runtime.ExitNoticeFd(), POLLIN, 0};
  const int ms = static_cast<int>(std::chrono::milliseconds(kDeadline).count());
  return p.fd >= 0 && poll(&p, 1, ms) == 1 && (p.revents & POLLIN) != 0;
}

bool ExitNoticePending(const Runtime& runtime) {
  pollfd p{runtime.ExitNoticeFd(), POLLIN, 0};
  return poll(&p, 1, 0) == 1;
}

TEST_F(ProcessRuntimeTest, AnEndIsNoticedWithoutPollingAndPollDrainsTheNotice) {
  auto runtime = MakeRuntime();
  ASSERT_GE(runtime->ExitNoticeFd(), 0);
  EXPECT_FALSE(ExitNoticePending(*runtime));  // nothing ended yet
  TaskLaunch l = Launch(1, {"sh", "-c", "exit 3"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  ASSERT_TRUE(ExitNoticeArrives(*runtime));
  // The notice follows the exit record: the first Poll after it sees the end.
  std::vector<TaskStatus> seen = runtime->Poll();
  ASSERT_EQ(seen.size(), 1u);
  EXPECT_EQ(seen[0].state, ProcessState::kExited);
  EXPECT_EQ(seen[0].exit_code, 3);
  EXPECT_FALSE(ExitNoticePending(*runtime));
}

TEST_F(ProcessRuntimeTest, AnAdoptedTasksEndIsNoticedByTheNewRuntime) {
  auto a = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "while [ ! -e go ]; do sleep 0.02; done; exit 4"});
  ASSERT_EQ(a->Start(l).state, ProcessState::kRunning);
  a.reset();  // an agent restart: the supervisor stays, and reaches the next agent's FIFO
  auto b = MakeRuntime();
  ASSERT_EQ(b->Poll()[0].state, ProcessState::kRunning);
  EXPECT_FALSE(ExitNoticePending(*b));
  std::ofstream(task_dir_ + "/go") << "";
  ASSERT_TRUE(ExitNoticeArrives(*b));
  EXPECT_EQ(b->Poll()[0].state, ProcessState::kExited);
}

TEST_F(ProcessRuntimeTest, TaskThatEndedWhileNoAgentRanIsReportedOnAdoption) {
  auto a = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "while [ ! -e go ]; do sleep 0.02; done; exit 5"});
  ASSERT_EQ(a->Start(l).state, ProcessState::kRunning);
  a.reset();
  std::ofstream(task_dir_ + "/go") << "";
  const std::string exit_file = home_ + "/tasks/1-1/exit.json";
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!std::filesystem::exists(exit_file) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  auto b = MakeRuntime();
  std::vector<TaskStatus> adopted = b->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kExited);
  EXPECT_EQ(adopted[0].exit_code, 5);
}

TEST_F(ProcessRuntimeTest, TaskWhoseSupervisorWasKilledIsReportedLostAndStopped) {
  auto a = MakeRuntime();
  TaskLaunch l = Launch(1, {"sleep", "100"});
  TaskStatus started = a->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);
  a.reset();
  ASSERT_NO_FATAL_FAILURE(KillSupervisor(l.key));

  auto b = MakeRuntime();
  std::vector<TaskStatus> adopted = b->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kLost);
  EXPECT_EQ(adopted[0].message, "lost: supervisor gone");
  // The orphaned task was killed, not left holding its GPUs.
  EXPECT_TRUE(WaitUntilGone(started.pid));
  // The verdict is stable across another restart.
  Seconds ended = *adopted[0].ended_at;
  b.reset();
  clock_.Advance(Seconds(100));
  auto c = MakeRuntime();
  std::vector<TaskStatus> again = c->Poll();
  ASSERT_EQ(again.size(), 1u);
  EXPECT_EQ(again[0].state, ProcessState::kLost);
  EXPECT_EQ(again[0].ended_at, ended);
}

// The record names the supervisor before the task runs: an agent killed the moment after the
// start leaves a task the next agent supervises, never one it reports lost while it runs (the
// fault harness saw one run twice that way).
TEST_F(ProcessRuntimeTest, TheRecordNamesTheSupervisorBeforeTheTaskRuns) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"cat", home_ + "/tasks/1-1/task.json"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  nlohmann::json seen = nlohmann::json::parse(Stdout(*runtime, l.key), nullptr, false);
  ASSERT_TRUE(seen.is_object()) << Stdout(*runtime, l.key);
  EXPECT_GT(seen.value("shim_pid", 0), 0);
  EXPECT_GT(seen.value("shim_start_ticks", 0), 0);
}

// The agent died after the task started and before it recorded the task's pid: the next agent
// finds the pid in the supervisor's task.pid and can stop the task.
TEST_F(ProcessRuntimeTest, ATaskAdoptedWithoutItsPidIsFoundAndCanBeStopped) {
  TaskLaunch l = Launch(1, {"sh", "-c", "echo ready; exec sleep 100"});
  TaskStatus started = StartAndLoseItsPid(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);

  auto b = MakeRuntime();
  std::vector<TaskStatus> adopted = b->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].pid, started.pid);
  EXPECT_EQ(TaskRecord(l.key)["task_pid"].get<pid_t>(), started.pid);  // recorded again
  ASSERT_TRUE(b->Kill(l.key, Seconds(0), "cancelled").ok());
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_TRUE(ProcessGone(started.pid));
}

// The agent died before recording the task's pid, and then the supervisor died too: the next
// agent finds the task through task.pid and stops it before reporting it lost, so it cannot run
// beside its requeued run.
TEST_F(ProcessRuntimeTest, ATaskWhoseRecordLacksItsPidIsStoppedWhenItsSupervisorDies) {
  TaskLaunch l = Launch(1, {"sh", "-c", "echo ready; exec sleep 100"});
  TaskStatus started = StartAndLoseItsPid(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);
  ASSERT_NO_FATAL_FAILURE(KillSupervisor(l.key));

  auto b = MakeRuntime();
  std::vector<TaskStatus> adopted = b->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kLost);
  EXPECT_TRUE(WaitUntilGone(started.pid));
}

// The plan reaches the supervisor byte for byte: a command line need not be UTF-8.
TEST_F(ProcessRuntimeTest, ArgumentsThatAreNotUtf8ReachTheTaskUnchanged) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"printf", "%s", "\xff\xfe ok"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  EXPECT_EQ(Stdout(*runtime, l.key), "\xff\xfe ok");
}

TEST_F(ProcessRuntimeTest, DamagedRecordsAreReportedLostNotDropped) {
  std::filesystem::create_directories(home_ + "/tasks/5-1");
  std::ofstream(home_ + "/tasks/5-1/task.json") << "{not json";
  // A valid launch with fields of the wrong type.
  std::filesystem::create_directories(home_ + "/tasks/6-2");
  nlohmann::json record{
      {"launch", ToJson(Launch(6, {"true"}))}, {"shim_pid", "four"}, {"cgroup", {{"dirs", 3}}}};
  record["launch"]["generation"] = 2;
  std::ofstream(home_ + "/tasks/6-2/task.json") << record.dump();
  std::ofstream(home_ + "/tasks/6-2/kill.json") << R"({"deadline": "soon"})";
  std::filesystem::create_directories(home_ + "/tasks/not-ours");  // ignored
  auto runtime = MakeRuntime();
  std::vector<TaskStatus> all = runtime->Poll();
  ASSERT_EQ(all.size(), 2u);
  EXPECT_EQ(all[0].key, (TaskKey{AllocationId(5), 1}));
  EXPECT_EQ(all[0].state, ProcessState::kLost);
  EXPECT_THAT(all[0].message, HasSubstr("lost: task record unreadable"));
  EXPECT_EQ(all[1].key, (TaskKey{AllocationId(6), 2}));
  EXPECT_EQ(all[1].state, ProcessState::kLost);
  EXPECT_EQ(all[1].job_id, JobId(7));
  EXPECT_EQ(all[1].message, "lost: supervisor gone");
  EXPECT_TRUE(runtime->Forget(all[0].key).ok());
  EXPECT_TRUE(runtime->Forget(all[1].key).ok());
  EXPECT_TRUE(std::filesystem::exists(home_ + "/tasks/not-ours"));
}

// An agent killed between creating a task's folder and writing its record (which precedes the
// start of the task) started nothing: the next agent removes the folder and reports nothing, since
// a report without the task's job would be refused with the whole heartbeat.
TEST_F(ProcessRuntimeTest, AFolderWithoutARecordStartedNothingAndIsRemoved) {
  std::filesystem::create_directories(home_ + "/tasks/5-1");
  std::filesystem::create_directories(home_ + "/scratch/5-1");
  std::ofstream(home_ + "/scratch/5-1/x") << "";
  std::ofstream(home_ + "/hostfiles/5-1") << "";
  auto runtime = MakeRuntime();
  EXPECT_TRUE(runtime->Poll().empty());
  EXPECT_FALSE(std::filesystem::exists(home_ + "/tasks/5-1"));
  EXPECT_FALSE(std::filesystem::exists(home_ + "/scratch/5-1"));
  EXPECT_FALSE(std::filesystem::exists(home_ + "/hostfiles/5-1"));
}

// A task.pid that names another process (its start time differs: the pid was reused) or that
// is not whole is not believed: the supervisor's death kills nobody else.
TEST_F(ProcessRuntimeTest, ATaskPidThatNamesAnotherProcessIsNotBelieved) {
  for (const std::string& content : {std::to_string(getpid()) + " 1\n", std::to_string(getpid())}) {
    SCOPED_TRACE(content);
    TaskLaunch l = Launch(1, {"sh", "-c", "echo ready; exec sleep 100"});
    TaskStatus started = StartAndLoseItsPid(l);
    ASSERT_EQ(started.state, ProcessState::kRunning);
    std::ofstream(home_ + "/tasks/1-1/task.pid", std::ios::trunc) << content;
    ASSERT_NO_FATAL_FAILURE(KillSupervisor(l.key));
    auto b = MakeRuntime();
    std::vector<TaskStatus> adopted = b->Poll();  // this process was not signalled: still here
    ASSERT_EQ(adopted.size(), 1u);
    EXPECT_EQ(adopted[0].state, ProcessState::kLost);
    EXPECT_EQ(adopted[0].pid, 0);
    kill(started.pid, SIGKILL);  // orphaned: without cgroups nothing else stops it
    ASSERT_TRUE(b->Forget(l.key).ok());
  }
}

TEST_F(ProcessRuntimeTest, ARuntimeWithoutASupervisorBinaryIsRefused) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.supervisor_exe.clear();
  auto refused = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.status().message(), HasSubstr("supervisor"));
}

// A supervisor that cannot be started is replaced by the fallback, for that task and every one
// after (the first is not tried again).
TEST_F(ProcessRuntimeTest, TasksStartUnderTheFallbackSupervisorWhenTheFirstCannotBeStarted) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.supervisor_exe = root_ + "/corral-supervise";  // missing
  o.fallback_supervisor_exe = CORRAL_SUPERVISOR;
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  const std::string tried = root_ + "/tried";
  for (int id : {1, 2}) {
    if (id == 2) {
      // Now a supervisor is there that would refuse the plan: the runtime does not try it again.
      std::ofstream(o.supervisor_exe) << "#!/bin/sh\ntouch " << tried << "\nexit 3\n";
      ASSERT_EQ(chmod(o.supervisor_exe.c_str(), 0755), 0);
    }
    TaskLaunch l = Launch(id, {"sh", "-c", "exec sleep 100"});
    TaskStatus started = (*runtime)->Start(l);
    ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
    // The task's parent (field 4 of /proc/PID/stat, after the command's ")") is its supervisor.
    std::ifstream stat("/proc/" + std::to_string(started.pid) + "/stat");
    std::string text((std::istreambuf_iterator<char>(stat)), std::istreambuf_iterator<char>());
    std::istringstream after(text.substr(text.rfind(')') + 1));
    std::string state;
    pid_t parent = 0;
    after >> state >> parent;
    EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(parent) + "/exe"),
              std::filesystem::canonical(CORRAL_SUPERVISOR));
    ASSERT_TRUE((*runtime)->Kill(l.key, Seconds(0), "test").ok());
  }
  EXPECT_FALSE(std::filesystem::exists(tried));
}

// The supervisor starts clean: a session of its own, no signal blocked, and none of the
// agent's descriptors (only stdio, on /dev/null, once the task has started).
TEST_F(ProcessRuntimeTest, TheSupervisorStartsInItsOwnSessionWithNothingInherited) {
  const int leaked = open("/dev/null", O_RDONLY);  // not O_CLOEXEC
  ASSERT_GE(leaked, 0);
  sigset_t term, old;
  sigemptyset(&term);
  sigaddset(&term, SIGTERM);
  ASSERT_EQ(pthread_sigmask(SIG_BLOCK, &term, &old), 0);
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "echo ready; exec sleep 100"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  pthread_sigmask(SIG_SETMASK, &old, nullptr);
  close(leaked);
  WaitForOutput(*runtime, l.key, "ready");
  const pid_t shim = TaskRecord(l.key)["shim_pid"].get<pid_t>();
  EXPECT_EQ(getsid(shim), shim);
  std::set<std::string> fds;
  for (const auto& e :
       std::filesystem::directory_iterator("/proc/" + std::to_string(shim) + "/fd")) {
    fds.insert(e.path().filename().string());
  }
  EXPECT_EQ(fds, (std::set<std::string>{"0", "1", "2"}));
  EXPECT_EQ(std::filesystem::read_symlink("/proc/" + std::to_string(shim) + "/fd/0"), "/dev/null");
  std::ifstream status("/proc/" + std::to_string(shim) + "/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.rfind("SigBlk:", 0) == 0) EXPECT_EQ(line, "SigBlk:\t0000000000000000");
  }
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "done").ok());
  WaitForEnd(*runtime, l.key);
}

TEST_F(ProcessRuntimeTest, KillInProgressSurvivesAnAgentRestart) {
  auto a = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_EQ(a->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*a, l.key, "ready");
  ASSERT_TRUE(a->Kill(l.key, Seconds(10), "preempted").ok());
  a.reset();
  auto b = MakeRuntime();
  for (const TaskStatus& s : b->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);
  clock_.Advance(Seconds(10));
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.message, "preempted");
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kStopped);
}

// What an agent before cluster ids (its ProcessRuntime::Start) left on disk for a task it
// started: <work_dir>/tasks/<alloc>-<gen>/ with task.json written before and after the real
// supervisor was started, the logs and exit.json beside it, the cgroup (when given) as recorded.
TaskStatus StartAsBeforeClusterIds(const std::string& work_dir, const TaskLaunch& launch,
                                   const std::optional<TaskCgroup>& cgroup, Seconds now) {
  const std::string dir = work_dir + "/tasks/" + ToString(launch.key);
  std::filesystem::create_directories(dir);
  chmod((work_dir + "/tasks").c_str(), 0700);
  chmod(dir.c_str(), 0700);
  nlohmann::json record{
      {"launch", ToJson(launch)},
      {"started_at", now.value()},
      {"shim_pid", 0},
      {"shim_start_ticks", 0},
      {"task_pid", 0},
      {"task_start_ticks", 0},
      {"cgroup", cgroup ? nlohmann::json{{"dirs", cgroup->dirs}, {"memory_dir", cgroup->memory_dir}}
                        : nlohmann::json()},
      {"notes", ""}};
  EXPECT_TRUE(WriteFileAtomic(dir + "/task.json", record.dump() + "\n").ok());
  ShimPlan plan;
  plan.supervisor = CORRAL_SUPERVISOR;
  plan.executable = launch.argv[0];
  plan.argv = launch.argv;
  plan.env = {"PATH=/usr/bin:/bin"};
  plan.workdir = launch.workdir;
  plan.stdout_path = dir + "/stdout.log";
  plan.stderr_path = dir + "/stderr.log";
  plan.exit_path = dir + "/exit.json";
  if (cgroup) plan.cgroup_procs = CgroupManager::ProcsFiles(*cgroup);
  Result<ShimStart> start = StartShim(plan, [](pid_t) { return Status::Ok(); });
  EXPECT_TRUE(start.ok() && start->failed_step == ShimStep::kNone);
  if (!start.ok()) return {};
  record["shim_pid"] = start->shim_pid;
  record["shim_start_ticks"] = ReadProcStat(start->shim_pid)->start_ticks;
  record["task_pid"] = start->task_pid;
  if (auto stat = ReadProcStat(start->task_pid); stat.ok()) {
    record["task_start_ticks"] = stat->start_ticks;
  }
  EXPECT_TRUE(WriteFileAtomic(dir + "/task.json", record.dump() + "\n").ok());
  TaskStatus status;
  status.key = launch.key;
  status.pid = start->task_pid;
  return status;
}

// The upgrade: tasks that today's agent started keep running through the agent's upgrade, are
// adopted and reported by the new one from where they are, and their old-style cgroup is the
// one cleaned up; once none is left, the old directories go.
TEST_F(ProcessRuntimeTest, TasksOfTheLayoutBeforeClusterIdsAreAdoptedAndReported) {
  // A flat cgroup as the old agent made (corral/<alloc>-<gen>), when this machine has cgroups.
  CgroupManager old_cgroups =
      CgroupManager::Detect("/sys/fs/cgroup", "corral-test-old-" + std::to_string(getpid()));
  std::optional<TaskCgroup> old_group;
  if (old_cgroups.version() != CgroupVersion::kNone) {
    auto group = old_cgroups.Create("3-1", {});
    ASSERT_TRUE(group.ok()) << group.status().ToString();
    old_group = *group;
  }
  TaskLaunch running =
      Launch(3, {"/bin/sh", "-c", "echo old; while [ ! -e go ]; do sleep 0.02; done; exit 6"});
  TaskLaunch ended = Launch(4, {"/bin/sh", "-c", "exit 2"});
  const TaskStatus old = StartAsBeforeClusterIds(work_dir_, running, old_group, clock_.Now());
  StartAsBeforeClusterIds(work_dir_, ended, std::nullopt, clock_.Now());
  const std::string ended_exit = work_dir_ + "/tasks/4-1/exit.json";
  for (auto deadline = std::chrono::steady_clock::now() + kDeadline;
       !std::filesystem::exists(ended_exit) && std::chrono::steady_clock::now() < deadline;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }

  auto runtime = MakeRuntime();  // the upgraded agent, in its cluster's namespace
  std::vector<TaskStatus> adopted = runtime->Poll();
  ASSERT_EQ(adopted.size(), 2u);
  EXPECT_EQ(adopted[0].key, running.key);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].pid, old.pid);
  EXPECT_EQ(adopted[1].state, ProcessState::kExited);
  EXPECT_EQ(adopted[1].exit_code, 2);
  EXPECT_EQ(runtime->TaskDir(running.key), work_dir_ + "/tasks/3-1");
  WaitForOutput(*runtime, running.key, "old");
  // A new task goes to the namespace, beside the old ones.
  TaskLaunch fresh = Launch(5, {"true"});
  ASSERT_EQ(runtime->Start(fresh).state, ProcessState::kRunning);
  EXPECT_EQ(runtime->TaskDir(fresh.key), home_ + "/tasks/5-1");
  EXPECT_EQ(WaitForEnd(*runtime, fresh.key).exit_code, 0);

  std::ofstream(task_dir_ + "/go") << "";
  TaskStatus end = WaitForEnd(*runtime, running.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 6);
  if (old_group) {  // the old group was emptied and removed, by the path task.json names
    for (const std::string& dir : old_group->dirs) EXPECT_FALSE(std::filesystem::exists(dir));
    EXPECT_TRUE(old_cgroups.RemoveParent().ok());
  }
  for (const TaskKey& key : {running.key, ended.key, fresh.key}) {
    ASSERT_TRUE(runtime->Forget(key).ok());
  }
  EXPECT_FALSE(std::filesystem::exists(work_dir_ + "/tasks/3-1"));
  // The next start finds no old task: the old layout's (empty) directories are gone.
  runtime.reset();
  runtime = MakeRuntime();
  EXPECT_TRUE(runtime->Poll().empty());
  EXPECT_FALSE(std::filesystem::exists(work_dir_ + "/tasks"));
  EXPECT_TRUE(std::filesystem::is_directory(home_ + "/tasks"));
  while (waitpid(-1, nullptr, WNOHANG) > 0) {  // the old supervisors were this test's children
  }
}

// One agent per work dir, one namespace at a time: tasks left under another cluster (or node
// name) are neither adopted nor abandoned silently.
TEST_F(ProcessRuntimeTest, TasksOfAnotherClusterInTheWorkDirAreRefusedNotAdopted) {
  auto mine = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "while [ ! -e go ]; do sleep 0.02; done"});
  ASSERT_EQ(mine->Start(l).state, ProcessState::kRunning);
  mine.reset();

  ProcessRuntimeOptions other = Options(CgroupManager::Disabled("test"));
  other.cluster_id = "fedcba9876543210";
  auto refused = ProcessRuntime::Create(other, &clock_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr(home_ + " holds 1 task(s) of cluster 0123456789abcdef, node node-a"));
  other.cluster_id = kTestClusterId;
  other.node_name = "node-b";  // the same cluster, another name: the same
  EXPECT_EQ(ProcessRuntime::Create(other, &clock_).status().code(),
            StatusCode::kFailedPrecondition);

  // Once the task has ended and been reported (forgotten), the work dir may change hands.
  mine = MakeRuntime();
  std::ofstream(task_dir_ + "/go") << "";
  WaitForEnd(*mine, l.key);
  ASSERT_TRUE(mine->Forget(l.key).ok());
  mine.reset();
  other.cluster_id = "fedcba9876543210";
  auto joined = ProcessRuntime::Create(other, &clock_);
  ASSERT_TRUE(joined.ok()) << joined.status().ToString();
  EXPECT_EQ((*joined)->TaskDir(l.key), work_dir_ + "/clusters/fedcba9876543210/node-b/tasks/1-1");
}

TEST_F(ProcessRuntimeTest, ANamespaceMustBeSafeAsAPath) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.cluster_id = "../../../tmp";
  EXPECT_EQ(ProcessRuntime::Create(o, &clock_).status().code(), StatusCode::kInvalidArgument);
  o.cluster_id = kTestClusterId;
  o.node_name = "../x";
  EXPECT_EQ(ProcessRuntime::Create(o, &clock_).status().code(), StatusCode::kInvalidArgument);
  EXPECT_FALSE(std::filesystem::exists(work_dir_ + "/clusters"));
}

TEST_F(ProcessRuntimeTest, ForgetDropsEndedTasksOnly) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sleep", "100"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(runtime->Forget(l.key).code(), StatusCode::kFailedPrecondition);
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "cancelled").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.signal, SIGKILL);
  ASSERT_TRUE(runtime->Forget(l.key).ok());
  EXPECT_TRUE(runtime->Poll().empty());
  EXPECT_FALSE(std::filesystem::exists(runtime->TaskDir(l.key)));
  EXPECT_EQ(runtime->Forget(l.key).code(), StatusCode::kNotFound);
  // Nothing comes back after a restart.
  runtime.reset();
  EXPECT_TRUE(MakeRuntime()->Poll().empty());
}

TEST_F(ProcessRuntimeTest, TaskEndsAsAWholeWhenItsMainProcessExits) {
  auto runtime = MakeRuntime();
  // The background sleep stays in the task's process group after sh exits.
  TaskLaunch l = Launch(1, {"sh", "-c", "sleep 100 & echo $!"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  pid_t child = std::stoi(Stdout(*runtime, l.key));
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  while (!ProcessGone(child) && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_TRUE(ProcessGone(child));
}

TEST_F(ProcessRuntimeTest, WithoutCgroupsTasksRunUnlimitedAndSaySo) {
  auto runtime = MakeRuntime(CgroupManager::Disabled("no cgroup hierarchy here"));
  TaskLaunch l = Launch(1, {"true"});
  l.memory = MemoryMib(64);
  TaskStatus s = runtime->Start(l);
  ASSERT_EQ(s.state, ProcessState::kRunning);
  EXPECT_EQ(s.message, "running without limits: no cgroup hierarchy here");
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(end.message, "running without limits: no cgroup hierarchy here");
}

TEST_F(ProcessRuntimeTest, RejectsARelativeWorkDir) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.work_dir = "relative/dir";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(runtime.ok());
  EXPECT_THAT(runtime.status().message(), HasSubstr("must be an absolute path"));
}

TEST_F(ProcessRuntimeTest, TaskFilesArePrivateToTheAgent) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"true"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  struct stat st;
  ASSERT_EQ(stat((home_ + "/tasks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat(runtime->TaskDir(l.key).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  ASSERT_EQ(stat((home_ + "/scratch").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);  // task users reach their own scratch dir, list nothing
}

TEST_F(ProcessRuntimeTest, AnExistingTasksDirIsMadePrivate) {
  ASSERT_TRUE(std::filesystem::create_directories(home_ + "/tasks"));
  ASSERT_EQ(chmod((home_ + "/tasks").c_str(), 0755), 0);
  auto runtime = MakeRuntime();
  struct stat st;
  ASSERT_EQ(stat((home_ + "/tasks").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
}

TEST_F(ProcessRuntimeTest, TaskWithoutWorkdirRunsInItsOwnPrivateScratchDir) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(5, {"pwd"});
  l.workdir = "";
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  const std::string scratch = home_ + "/scratch/5-1";
  EXPECT_EQ(Stdout(*runtime, l.key), scratch + "\n");
  struct stat st;
  ASSERT_EQ(stat(scratch.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  // Forgetting the task removes its scratch directory, not what a link in it points to.
  const std::string outside = work_dir_ + "/kept";
  ASSERT_EQ(mkdir(outside.c_str(), 0700), 0);
  ASSERT_EQ(symlink(outside.c_str(), (scratch + "/link").c_str()), 0);
  ASSERT_TRUE(runtime->Forget(l.key).ok());
  EXPECT_NE(stat(scratch.c_str(), &st), 0);
  EXPECT_EQ(stat(outside.c_str(), &st), 0);
}

TEST_F(ProcessRuntimeTest, TaskWithoutWorkdirRunsInItsSubmitFolderWhereTheNodeHasIt) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(5, {"sh", "-c", "pwd; echo $CORRAL_SUBMIT_DIR"});
  l.workdir = "";
  l.submit_dir = task_dir_;
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);
  EXPECT_THAT(started.message, Not(HasSubstr("scratch")));
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  EXPECT_EQ(Stdout(*runtime, l.key), task_dir_ + "\n" + task_dir_ + "\n");
}

TEST_F(ProcessRuntimeTest, ASubmitFolderTheNodeLacksFallsBackToScratchAndSaysWhy) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(6, {"pwd"});
  l.workdir = "";
  l.submit_dir = root_ + "/not-on-this-node";
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning);
  EXPECT_THAT(started.message,
              HasSubstr("running in a scratch folder: the submit folder " + l.submit_dir +
                        " is not on this node (give --workdir to choose)"));
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_THAT(end.message, HasSubstr("running in a scratch folder"));  // kept to the end
  EXPECT_EQ(Stdout(*runtime, l.key), home_ + "/scratch/6-1\n");
}

TEST(WhyNotEnterableTest, TheKernelsOwnerGroupOtherRuleDecides) {
  char pattern[] = "/tmp/corral-enter-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string dir = pattern;
  // Owned by a user other than root (root may enter anything): this test's own, or one made up.
  const uid_t uid = geteuid() == 0 ? 54321 : geteuid();
  const gid_t gid = geteuid() == 0 ? 54321 : getegid();
  if (geteuid() == 0) ASSERT_EQ(chown(dir.c_str(), uid, gid), 0);
  TaskUser owner{"owner", uid, gid, {gid}, "/"};
  TaskUser other{"other", uid + 1000, gid + 1000, {gid + 1000}, "/"};
  TaskUser member = other;
  member.name = "member";
  member.groups.push_back(gid);
  TaskUser root{"root", 0, 0, {0}, "/"};
  ASSERT_EQ(chmod(dir.c_str(), 0710), 0);
  EXPECT_EQ(WhyNotEnterable(dir, &owner), "");
  EXPECT_EQ(WhyNotEnterable(dir, &member), "");
  EXPECT_EQ(WhyNotEnterable(dir, &other), "cannot be entered by user 'other'");
  EXPECT_EQ(WhyNotEnterable(dir, &root), "");
  // The owner's bits alone count for the owner, even where the group's would let it in.
  ASSERT_EQ(chmod(dir.c_str(), 0070), 0);
  EXPECT_EQ(WhyNotEnterable(dir, &owner), "cannot be entered by user 'owner'");
  EXPECT_EQ(WhyNotEnterable(dir, &member), "");
  ASSERT_EQ(chmod(dir.c_str(), 0701), 0);
  EXPECT_EQ(WhyNotEnterable(dir, &other), "");
  EXPECT_EQ(WhyNotEnterable(dir, nullptr), "");
  EXPECT_EQ(WhyNotEnterable(dir + "/missing", nullptr), "is not on this node");
  const std::string file = dir + "/file";
  ASSERT_TRUE(WriteFileAtomic(file, "x").ok());
  EXPECT_EQ(WhyNotEnterable(file, &owner), "is not a directory here");
  // Every folder on the way counts, and nothing behind one the user may not enter is told.
  const std::string inner = dir + "/inner";
  ASSERT_EQ(mkdir(inner.c_str(), 0755), 0);
  ASSERT_EQ(chmod(dir.c_str(), 0700), 0);
  EXPECT_EQ(WhyNotEnterable(inner, &owner), "");
  EXPECT_EQ(WhyNotEnterable(inner, &other), "cannot be entered by user 'other'");
  EXPECT_EQ(WhyNotEnterable(dir + "/missing", &other), "cannot be entered by user 'other'");
  EXPECT_EQ(WhyNotEnterable(dir + "/missing", &owner), "is not on this node");
  std::filesystem::remove_all(dir);
}

// --signal USR1@10: the task hears USR1 10 s before its limit, once, even across an agent
// restart, and is still stopped at the limit.
TEST_F(ProcessRuntimeTest, TheWarningSignalComesOnceBeforeTheTimeLimit) {
  auto a = MakeRuntime();
  TaskLaunch l =
      Launch(7, {"sh", "-c", "trap 'echo warned' USR1; echo ready; while :; do sleep 0.05; done"});
  l.time_limit = Seconds(60);
  l.warning_signal = model::WarningSignal{SIGUSR1, Seconds(10)};
  ASSERT_EQ(a->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*a, l.key, "ready");
  clock_.Advance(Seconds(49));
  (void)a->Poll();
  clock_.Advance(Seconds(1));
  (void)a->Poll();  // 50 s: the warning
  WaitForOutput(*a, l.key, "warned");
  a.reset();
  auto b = MakeRuntime();
  clock_.Advance(Seconds(5));
  for (const TaskStatus& s : b->Poll()) EXPECT_EQ(s.state, ProcessState::kRunning);
  clock_.Advance(Seconds(5));  // 60 s: the limit
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kTimeLimit);
  EXPECT_EQ(Stdout(*b, l.key), "ready\nwarned\n");  // once, not again after the restart
}

TEST_F(ProcessRuntimeTest, UnknownTaskUserIsAnError) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.task_user = "corral-no-such-user";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(runtime.status().message(),
              HasSubstr("task user 'corral-no-such-user': no such user"));
}

TEST_F(ProcessRuntimeTest, WithoutRootOnlyTheOwnUserIsATaskUser) {
  if (geteuid() == 0) GTEST_SKIP() << "needs a user other than root";
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.task_user = "root";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kPermissionDenied);
  EXPECT_THAT(runtime.status().message(), HasSubstr("only root can run tasks as another user"));
}

TEST_F(ProcessRuntimeTest, TaskRunsAsTheTaskUserInAScratchDirItOwns) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody' here";
  // The test's root is mkdtemp's 0700: let the task user through to its scratch directory.
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.task_user = "nobody";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskLaunch l = Launch(6, {"id -u; id -g; id -G; echo $HOME; pwd; cat ../../node.id"});
  l.shell = true;
  l.workdir = "";
  std::ofstream(work_dir_ + "/node.id") << "secret\n";
  ASSERT_EQ(chmod((work_dir_ + "/node.id").c_str(), 0600), 0);
  ASSERT_EQ((*runtime)->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(**runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_NE(end.exit_code, 0);  // the node id stays unreadable
  const std::string scratch = home_ + "/scratch/6-1";
  const std::string uid = std::to_string(nobody->uid);
  const std::string gid = std::to_string(nobody->gid);
  std::string groups;
  for (gid_t g : nobody->groups) groups += (groups.empty() ? "" : " ") + std::to_string(g);
  EXPECT_EQ(Stdout(**runtime, l.key),
            uid + "\n" + gid + "\n" + groups + "\n" + nobody->home + "\n" + scratch + "\n");
  struct stat st;
  ASSERT_EQ(stat(scratch.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0700u);
  EXPECT_EQ(st.st_uid, nobody->uid);
  EXPECT_EQ(st.st_gid, nobody->gid);
}

TEST_F(ProcessRuntimeTest, TaskUserMustBeAbleToEnterItsWorkdir) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!LookUpUser("nobody").ok()) GTEST_SKIP() << "no user 'nobody' here";
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.task_user = "nobody";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  ASSERT_EQ(chmod(task_dir_.c_str(), 0700), 0);  // root's, private
  TaskLaunch l = Launch(7, {"true"});
  TaskStatus s = (*runtime)->Start(l);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_THAT(s.message, HasSubstr("chdir to workdir " + task_dir_));
}

TEST_F(ProcessRuntimeTest, TasksRunAsTheirSubmittersWhenConfigured) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  auto daemon = LookUpUser("daemon");
  if (!nobody.ok() || !daemon.ok()) GTEST_SKIP() << "needs the users 'nobody' and 'daemon'";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
  ASSERT_EQ(chmod(task_dir_.c_str(), 0777), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.run_as_submitter = true;
  o.user_map = {{"alice", "nobody"}, {"bob", "daemon"}};
  o.max_task_uid = nobody->uid;  // nobody is over the default range; this test has no other user
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  auto launch_as = [&](int64_t allocation, const std::string& user) {
    TaskLaunch l = Launch(allocation, {"id -u; echo $HOME"});
    l.shell = true;
    l.user = user;
    return (*runtime)->Start(l);
  };
  // Mapped: the task gets its submitter's identity.
  ASSERT_EQ(launch_as(1, "alice").state, ProcessState::kRunning);
  const TaskKey alices{AllocationId(1), 1};
  EXPECT_EQ(WaitForEnd(**runtime, alices).exit_code, 0);
  EXPECT_EQ(Stdout(**runtime, alices), std::to_string(nobody->uid) + "\n" + nobody->home + "\n");
  // A Unix user the map gives alice is not anyone else's by name.
  TaskStatus named = launch_as(2, "nobody");
  EXPECT_EQ(named.state, ProcessState::kFailedToStart);
  EXPECT_THAT(named.message, HasSubstr("Unix user 'nobody' belongs to corral user 'alice' in "
                                       "--task-user-map"));
  // Root and system accounts stay out (uid under --min-task-uid), and so do unknown users.
  TaskStatus root = launch_as(3, "root");
  EXPECT_EQ(root.state, ProcessState::kFailedToStart);
  EXPECT_THAT(root.message, HasSubstr("cannot run as submitter 'root': uid 0 is under the "
                                      "agent's --min-task-uid 1000"));
  TaskStatus bob = launch_as(4, "bob");
  EXPECT_EQ(bob.state, ProcessState::kFailedToStart);
  EXPECT_THAT(bob.message, HasSubstr("submitter 'bob' (mapped to Unix user 'daemon'): uid " +
                                     std::to_string(daemon->uid) + " is under"));
  TaskStatus stranger = launch_as(5, "corral-no-such-user");
  EXPECT_EQ(stranger.state, ProcessState::kFailedToStart);
  EXPECT_THAT(stranger.message, HasSubstr("cannot run as submitter 'corral-no-such-user': task "
                                          "user 'corral-no-such-user': no such user on this node"));
  // A lower bound that admits daemon lets bob's task run as daemon; a submitter named like a
  // Unix user that no one is mapped to runs as that user.
  o.min_task_uid = daemon->uid;
  o.user_map = {{"bob", "daemon"}};
  o.work_dir = root_ + "/second";
  auto lower = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(lower.ok()) << lower.status().ToString();
  for (const auto& [allocation, user, uid] :
       {std::tuple{6, "bob", daemon->uid}, std::tuple{7, "nobody", nobody->uid}}) {
    TaskLaunch l = Launch(allocation, {"id -u"});
    l.shell = true;
    l.user = user;
    ASSERT_EQ((*lower)->Start(l).state, ProcessState::kRunning) << user;
    EXPECT_EQ(WaitForEnd(**lower, l.key).exit_code, 0);
    EXPECT_EQ(Stdout(**lower, l.key), std::to_string(uid) + "\n");
  }
  // The default upper bound keeps nobody (and other service ids) out.
  o.max_task_uid = ProcessRuntimeOptions{}.max_task_uid;
  o.work_dir = root_ + "/third";
  auto bounded = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(bounded.ok()) << bounded.status().ToString();
  TaskLaunch l = Launch(8, {"true"});
  l.user = "nobody";
  TaskStatus over = (*bounded)->Start(l);
  EXPECT_EQ(over.state, ProcessState::kFailedToStart);
  EXPECT_THAT(over.message, HasSubstr("uid " + std::to_string(nobody->uid) +
                                      " is over the agent's --max-task-uid 60000"));
}

TEST_F(ProcessRuntimeTest, SubmittersAreLookedUpOnceAMinuteAndOutlastABriefDirectoryOutage) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody' here";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
  ASSERT_EQ(chmod(task_dir_.c_str(), 0777), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.run_as_submitter = true;
  o.max_task_uid = nobody->uid;
  int lookups = 0;
  Status answer;  // what the directory says next: ok, or an error
  o.look_up_user = [&](const std::string& name) -> Result<TaskUser> {
    ++lookups;
    if (!answer.ok()) return answer;
    return LookUpUser(name);
  };
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  int64_t allocation = 0;
  auto start = [&] {
    TaskLaunch l = Launch(++allocation, {"true"});
    l.user = "nobody";
    return (*runtime)->Start(l);
  };
  EXPECT_EQ(start().state, ProcessState::kRunning);
  EXPECT_EQ(start().state, ProcessState::kRunning);
  EXPECT_EQ(lookups, 1);  // within the minute: the answer is reused
  // The directory is unreadable a minute later: its last answer stands in, for up to an hour.
  clock_.Advance(ProcessRuntime::kUserLookupTtl);
  answer = IoError("task user 'nobody': cannot read the user database: Connection refused");
  EXPECT_EQ(start().state, ProcessState::kRunning);
  EXPECT_EQ(lookups, 2);
  clock_.Advance(ProcessRuntime::kUserLookupGrace);
  TaskStatus late = start();
  EXPECT_EQ(late.state, ProcessState::kFailedToStart);
  EXPECT_THAT(late.message, HasSubstr("cannot read the user database"));
  // A user the directory no longer has is not run as, however recently it was seen.
  answer = Status::Ok();
  EXPECT_EQ(start().state, ProcessState::kRunning);
  clock_.Advance(ProcessRuntime::kUserLookupTtl);
  answer = NotFound("task user 'nobody': no such user");
  EXPECT_EQ(start().state, ProcessState::kFailedToStart);
  answer = IoError("task user 'nobody': cannot read the user database");
  EXPECT_EQ(start().state, ProcessState::kFailedToStart);  // nothing cached since
}

TEST_F(ProcessRuntimeTest, RunningAsTheSubmitterExcludesATaskUserAndUidZero) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.run_as_submitter = true;
  o.task_user = "nobody";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(runtime.ok());
  EXPECT_EQ(runtime.status().code(), StatusCode::kInvalidArgument);
  if (geteuid() != 0) return;  // the range is checked once root may run as submitters
  o.task_user = "";
  o.min_task_uid = 0;
  runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_FALSE(runtime.ok());
  EXPECT_THAT(runtime.status().message(), HasSubstr("must be non-empty and leave out uid 0"));
}

TEST(UserMapTest, ParsesPairsAndNamesTheBadLine) {
  auto map = ParseUserMap("# corral user, Unix user\nalice  a.smith\n\n  bob\tbjones  # Bob\n");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(*map, (std::map<std::string, std::string>{{"alice", "a.smith"}, {"bob", "bjones"}}));
  EXPECT_EQ(ParseUserMap("alice a\ncarol\n").status().message(),
            "line 2: expected 'CORRAL_USER UNIX_USER', got 'carol'");
  EXPECT_EQ(ParseUserMap("alice a b\n").status().message(),
            "line 1: expected 'CORRAL_USER UNIX_USER', got 'alice a b'");
  EXPECT_EQ(ParseUserMap("alice a\nalice b\n").status().message(),
            "line 2: 'alice' is mapped twice");
}

// A map names users exactly: a corral user name on the left, a Unix user name on the right
// (protocol/names.h), so that nothing in it reaches getpwnam cut short or loosely matched.
TEST(UserMapTest, BothNamesFollowTheirRules) {
  using namespace std::string_literals;  // "\0"s keeps the NUL
  EXPECT_EQ(ParseUserMap("mona nobody\nali\0ce daemon\n"s).status().message(),
            "line 2: a user name must be 1 to 32 lowercase letters, digits, '_', '.' or '-', "
            "starting with a letter or '_'; got 'ali\\x00ce'");
  EXPECT_THAT(ParseUserMap("alice dae\0mon\n"s).status().message(),
              HasSubstr("line 1: a Unix user name must be"));
  EXPECT_THAT(ParseUserMap("Alice alice\n").status().message(),
              HasSubstr("line 1: a user name must be"));
  EXPECT_THAT(ParseUserMap("alice ../root\n").status().message(),
              HasSubstr("line 1: a Unix user name must be"));
  EXPECT_THAT(ParseUserMap("alice -root\n").status().message(),
              HasSubstr("line 1: a Unix user name must be"));
  // Unix user names may have what directories give them: capitals, dots.
  auto map = ParseUserMap("a.smith John.Smith\n");
  ASSERT_TRUE(map.ok()) << map.status().ToString();
  EXPECT_EQ(map->at("a.smith"), "John.Smith");
}

TEST(LookUpUserTest, OnlyAnExactValidNameIsLookedUp) {
  using namespace std::string_literals;
  // getpwnam would read "root" from "root\0x" (a C string ends at the NUL).
  for (const std::string& name :
       {"root\0x"s, "root\0"s, ""s, "-root"s, "../root"s, "ro ot"s, std::string(100'000, 'r')}) {
    Result<TaskUser> user = LookUpUser(name);
    ASSERT_FALSE(user.ok()) << name.substr(0, 16);
    EXPECT_EQ(user.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(user.status().message(), HasSubstr("a Unix user name must be"));
  }
  Result<TaskUser> root = LookUpUser("root");
  ASSERT_TRUE(root.ok()) << root.status().ToString();
  EXPECT_EQ(root->name, "root");
  EXPECT_EQ(root->uid, 0u);
}

TEST_F(ProcessRuntimeTest, ASubmitterWhoseNameBreaksTheRuleRunsNothing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "needs the user 'nobody'";
  using namespace std::string_literals;
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
  ASSERT_EQ(chmod(task_dir_.c_str(), 0777), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.run_as_submitter = true;
  o.user_map = {{"mona", "nobody"}};  // nobody is mona's, reached only through the map
  o.max_task_uid = nobody->uid;
  std::vector<std::string> looked_up;
  o.look_up_user = [&](const std::string& name) -> Result<TaskUser> {
    looked_up.push_back(name);
    return LookUpUser(name);
  };
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  // "nobody\0x" is not "nobody" to the map, but was to getpwnam: a user made with that name
  // (before the API checked names) ran as mona's Unix user.
  int64_t allocation = 0;
  for (const std::string& user : {"nobody\0x"s, "mona\0"s, "root\0"s, "no\tbody"s, "Nobody"s,
                                  "../nobody"s, std::string(100'000, 'n')}) {
    TaskLaunch l = Launch(++allocation, {"true"});
    l.user = user;
    TaskStatus s = (*runtime)->Start(l);
    EXPECT_EQ(s.state, ProcessState::kFailedToStart) << user.substr(0, 16);
    EXPECT_THAT(s.message, HasSubstr("cannot run as the submitter: a user name must be"));
    EXPECT_EQ(s.message.find('\0'), std::string::npos);
  }
  EXPECT_TRUE(looked_up.empty());  // none of them reached the user database
  // mona herself runs as nobody.
  TaskLaunch l = Launch(++allocation, {"true"});
  l.user = "mona";
  EXPECT_EQ((*runtime)->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(**runtime, l.key).exit_code, 0);
  EXPECT_EQ(looked_up, std::vector<std::string>{"nobody"});
}

// A supervisor's plan for a task that creates root_/ran.
ShimPlan ProcessRuntimeTest::TouchPlan() const {
  ShimPlan plan;
  plan.supervisor = CORRAL_SUPERVISOR;
  plan.executable = "/bin/touch";
  plan.argv = {"touch", root_ + "/ran"};
  plan.workdir = task_dir_;
  plan.stdout_path = root_ + "/stdout.log";
  plan.stderr_path = root_ + "/stderr.log";
  plan.exit_path = root_ + "/exit.json";
  return plan;
}

TEST_F(ProcessRuntimeTest, FailingToSwitchToTheTaskUserIsReportedAndNothingRuns) {
  ShimPlan plan = TouchPlan();
  plan.identity = ShimIdentity{static_cast<uid_t>(-1), static_cast<gid_t>(-1), {}};  // invalid
  auto start = StartShim(plan, [](pid_t) { return Status::Ok(); });
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  while (waitpid(start->shim_pid, nullptr, 0) < 0 && errno == EINTR) {
  }
  EXPECT_EQ(start->failed_step, ShimStep::kSetUser);
  EXPECT_NE(start->error, 0);
  EXPECT_STREQ(ShimStepName(ShimStep::kSetUser), "switch to the task user");
  EXPECT_FALSE(std::filesystem::exists(root_ + "/ran"));
}

// The agent refuses to go on (it could not record the supervisor): the task never runs, and
// the shim is gone.
TEST_F(ProcessRuntimeTest, ASupervisorThatIsNotToldToGoOnStartsNothing) {
  ShimPlan plan = TouchPlan();
  pid_t shim = 0;
  auto start = StartShim(plan, [&](pid_t pid) {
    shim = pid;
    return IoError("disk full");
  });
  ASSERT_FALSE(start.ok());
  EXPECT_EQ(start.status().message(), "disk full");
  EXPECT_GT(shim, 0);
  EXPECT_TRUE(ProcessGone(shim));  // reaped by StartShim
  EXPECT_FALSE(std::filesystem::exists(root_ + "/ran"));
  EXPECT_FALSE(std::filesystem::exists(root_ + "/exit.json"));
}

// ---- container tasks through a stand-in engine (a script): what the runtime asks of the engine
// and when. container_runtime_test.cc runs real containers. ----

class StandInEngineTest : public ProcessRuntimeTest {
 protected:
  // A script standing in for podman, logging every call's arguments to engine.log: `run` of the
  // image localhost/stays:1 stays until killed (ignoring SIGTERM), any other `run` exits 0; `rm`
  // fails while <root>/rm-fails exists, as an engine that cannot lock its storage.
  ContainerEngine Engine() {
    const std::string path = root_ + "/podman";
    std::ofstream(path)
        << "#!/bin/sh\n"
           "echo \"$*\" >> "
        << EngineLog()
        << "\n"
           "case \"$1\" in\n"
           "  run) case \"$*\" in *' localhost/stays:1 '*) trap '' TERM; exec sleep "
           "600;; esac;;\n"
           "  rm) if [ -e "
        << root_
        << "/rm-fails ]; then echo 'Error: cannot lock storage' >&2; exit 125; fi;;\n"
           "esac\n";
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    ContainerEngine engine;
    engine.cli = EngineCli{EngineKind::kPodman, path, "4.3.1"};
    engine.env = {"PATH=/usr/bin:/bin"};
    return engine;
  }

  std::unique_ptr<ProcessRuntime> MakeEngineRuntime() {
    ProcessRuntimeOptions o = Options(CgroupManager::Disabled("cgroups disabled in this test"));
    o.container_engine = Engine();
    auto runtime = ProcessRuntime::Create(o, &clock_);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    return runtime.ok() ? std::move(runtime).value() : nullptr;
  }

  std::string EngineLog() const { return root_ + "/engine.log"; }

  // How many times the engine was asked to remove a container.
  int Removals() const {
    std::ifstream log(EngineLog());
    int removals = 0;
    for (std::string line; std::getline(log, line);) removals += line.rfind("rm ", 0) == 0;
    return removals;
  }

  void WaitForEngineCall(const std::string& text) {
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < deadline) {
      auto log = ReadFile(EngineLog());
      if (log.ok() && log->find(text) != std::string::npos) return;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "the engine was never called with '" << text << "'";
  }

  TaskLaunch ContainerLaunch(int64_t allocation) {
    TaskLaunch l = Launch(allocation, {"sleep", "600"});
    l.environment = LaunchEnvironment{"busybox", 1, "container", "localhost/stays:1", "", ""};
    return l;
  }
};

TEST_F(StandInEngineTest, AContainerRemovedAfterTheSigkillIsNotRemovedAgain) {
  auto runtime = MakeEngineRuntime();
  TaskLaunch l = ContainerLaunch(1);
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  WaitForEngineCall("run ");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "stopped").ok());
  EXPECT_EQ(Removals(), 1);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.message, "stopped");
  runtime->Poll();
  EXPECT_TRUE(runtime->Forget(l.key).ok());
  EXPECT_EQ(Removals(), 1);
  EXPECT_THAT(*ReadFile(EngineLog()),
              HasSubstr("rm -f --time 0 corral-0123456789abcdef-node-a-1-1\n"));
}

TEST_F(StandInEngineTest, TheEngineMountsTheWorkdirTheTaskUserOpenedNotAPathResolvedAsRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root (mount)";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody' here";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("cgroups disabled in this test"));
  o.container_engine = Engine();
  o.task_user = "nobody";
  auto created = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(created.ok()) << created.status().ToString();
  ProcessRuntime& runtime = **created;
  // Open to all, but under a directory only root may enter: the task user cannot reach it.
  const std::string locked = root_ + "/locked";
  ASSERT_EQ(mkdir(locked.c_str(), 0700), 0);
  ASSERT_EQ(mkdir((locked + "/open").c_str(), 0777), 0);
  TaskLaunch hidden = ContainerLaunch(4);
  hidden.workdir = locked + "/open";
  TaskStatus refused = runtime.Start(hidden);
  EXPECT_EQ(refused.state, ProcessState::kFailedToStart);
  EXPECT_THAT(refused.message, HasSubstr("workdir " + locked + "/open: Permission denied as uid " +
                                         std::to_string(nobody->uid)));
  // A workdir the user can open is bound at the agent's staging path, which the engine mounts.
  const std::string workdir = root_ + "/job-dir";
  ASSERT_EQ(mkdir(workdir.c_str(), 0777), 0);
  std::ofstream(workdir + "/data.txt") << "kept\n";
  TaskLaunch l = ContainerLaunch(5);
  l.workdir = workdir;
  ASSERT_EQ(runtime.Start(l).state, ProcessState::kRunning);
  const std::string staged = home_ + "/mounts/" + ToString(l.key);
  WaitForEngineCall("-w " + workdir + " -v " + staged + ":" + workdir + " ");
  EXPECT_EQ(*ReadFile(staged + "/data.txt"), "kept\n");
  ASSERT_TRUE(runtime.Kill(l.key, Seconds(0), "stopped").ok());
  WaitForEnd(runtime, l.key);
  ASSERT_TRUE(runtime.Forget(l.key).ok());
  // Unmounted and its directory removed; the user's files are where they were.
  EXPECT_FALSE(std::filesystem::exists(staged));
  EXPECT_EQ(*ReadFile(workdir + "/data.txt"), "kept\n");
}

TEST_F(StandInEngineTest, AFailedRemovalIsRetriedAtMostOnceEvery30Seconds) {
  std::ofstream(root_ + "/rm-fails") << "";
  auto runtime = MakeEngineRuntime();
  TaskLaunch l = ContainerLaunch(2);
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEngineCall("run ");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "stopped").ok());
  EXPECT_EQ(Removals(), 1);
  TaskStatus end = WaitForEnd(*runtime, l.key);  // polls many times
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_THAT(
      end.message,
      HasSubstr("stopped; `podman rm -f corral-0123456789abcdef-node-a-2-1` exited 125: Error: "
                "cannot lock storage"));
  for (int i = 0; i < 5; ++i) runtime->Poll();
  Status forget = runtime->Forget(l.key);
  EXPECT_THAT(forget.message(), HasSubstr("cannot lock storage"));
  EXPECT_EQ(Removals(), 1);  // the failure is reported again, without asking the engine

  clock_.Advance(Seconds(29));
  runtime->Poll();
  EXPECT_EQ(Removals(), 1);
  clock_.Advance(Seconds(1));
  runtime->Poll();
  EXPECT_EQ(Removals(), 2);  // tried again, failed again
  runtime->Poll();
  EXPECT_EQ(Removals(), 2);

  std::filesystem::remove(root_ + "/rm-fails");
  EXPECT_FALSE(runtime->Forget(l.key).ok());  // not yet tried again
  EXPECT_EQ(Removals(), 2);
  clock_.Advance(Seconds(30));
  Status forgotten = runtime->Forget(l.key);
  EXPECT_TRUE(forgotten.ok()) << forgotten.ToString();
  EXPECT_EQ(Removals(), 3);
  EXPECT_FALSE(std::filesystem::exists(home_ + "/tasks/" + ToString(l.key)));
}

TEST_F(StandInEngineTest, AProcessLaunchWhoseHostSetupIsMissingHereRunsItsImage) {
  auto runtime = MakeEngineRuntime();
  const std::string venv = root_ + "/no-venv";
  TaskLaunch l = Launch(3, {"python3", "train.py"});
  l.environment = LaunchEnvironment{"torch", 2, "process", "localhost/stays:1", venv, ""};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  const std::string note =
      "host prefix " + venv + " missing here: running image localhost/stays:1 in a container";
  EXPECT_EQ(started.message, note);
  WaitForEngineCall(" -- localhost/stays:1 python3 train.py\n");
  EXPECT_EQ(TaskRecord(l.key)["launch"]["environment"]["runtime"], "container");
  const std::string env = *ReadFile(home_ + "/tasks/" + ToString(l.key) + "/container.env");
  EXPECT_THAT(env, HasSubstr("CORRAL_ENVIRONMENT=torch@2\n"));
  EXPECT_THAT(env, Not(HasSubstr("VIRTUAL_ENV")));

  runtime.reset();  // the agent stops; the next one adopts the task as a container task
  auto next = MakeEngineRuntime();
  std::vector<TaskStatus> adopted = next->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].message, note);
  ASSERT_TRUE(next->Kill(l.key, Seconds(0), "stopped").ok());
  EXPECT_EQ(Removals(), 1);  // its container is removed
  TaskStatus end = WaitForEnd(*next, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.message, "stopped; " + note);
}

TEST_F(StandInEngineTest, AHostSetupPresentHereRunsAsAProcessDespiteTheImage) {
  auto runtime = MakeEngineRuntime();
  const std::string venv = MakePrefix(root_ + "/venv");
  TaskLaunch l = Launch(4, {"python3"});
  l.environment = LaunchEnvironment{"torch", 2, "process", "localhost/stays:1", venv, ""};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  EXPECT_EQ(Stdout(*runtime, l.key), "python in " + venv + "/bin/python3\n");
  EXPECT_FALSE(std::filesystem::exists(EngineLog()));
}

TEST_F(ProcessRuntimeTest, AMissingHostSetupFailsTheStartNamingItWhenTheImageCannotRunHere) {
  auto runtime = MakeRuntime();  // no container engine
  const std::string venv = root_ + "/no-venv";
  TaskLaunch l = Launch(5, {"python3"});
  l.environment = LaunchEnvironment{"torch", 2, "process", "localhost/x:1", venv, ""};
  TaskStatus s = runtime->Start(l);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_EQ(s.message, "task 5-1: field 'environment.venv': '" + venv +
                           "' (environment 'torch@2') does not exist on this node; its image "
                           "localhost/x:1 cannot run here instead: this node has no container "
                           "engine (corral agent --container-engine)");
}

// ---- distributed tasks, through the real `corral launch` (the built corral binary) ----

class DistributedRuntimeTest : public ProcessRuntimeTest {
 protected:
  std::unique_ptr<ProcessRuntime> MakeDistributedRuntime() {
    ProcessRuntimeOptions o = Options(CgroupManager::Disabled("cgroups disabled in this test"));
    o.self_exe = CORRAL_BINARY;
    auto runtime = ProcessRuntime::Create(o, &clock_);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    return runtime.ok() ? std::move(runtime).value() : nullptr;
  }

  // Part 1 of a job of 2 parts with `procs` processes each (ranks procs..2*procs-1).
  TaskLaunch DistributedLaunch(int64_t allocation, std::vector<std::string> argv,
                               model::Launcher launcher, int procs) {
    TaskLaunch l = Launch(allocation, std::move(argv));
    l.task_index = 1;
    l.tasks = 2;
    l.distributed = SecondOfTwoParts(launcher, procs);
    return l;
  }

  std::string Stderr(Runtime& runtime, const TaskKey& key) {
    auto err = runtime.ReadLog(key, LogStream::kStderr, 0, 1 << 20);
    EXPECT_TRUE(err.ok()) << err.status().ToString();
    return err.ok() ? *err : "";
  }

  // Waits until process `pid` blocks `signal` (`corral launch` is then ready to handle it).
  static void WaitUntilBlocked(pid_t pid, int signal) {
    auto deadline = std::chrono::steady_clock::now() + kDeadline;
    while (std::chrono::steady_clock::now() < deadline) {
      auto status = ReadFile("/proc/" + std::to_string(pid) + "/status");
      if (!status.ok()) break;
      size_t at = status->find("SigBlk:\t");
      if (at != std::string::npos &&
          (std::stoull(status->substr(at + 8, 16), nullptr, 16) >> (signal - 1) & 1) != 0) {
        return;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ADD_FAILURE() << "process " << pid << " never blocked signal " << signal;
  }
};

TEST_F(DistributedRuntimeTest, EachProcessOfAPartSeesItsRank) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(
      1, {"sh", "-c", "echo $RANK $LOCAL_RANK $WORLD_SIZE $NODE_RANK > rank.$RANK"},
      model::Launcher::kNone, 3);
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 0);
  for (int local = 0; local < 3; ++local) {
    const int rank = 3 + local;
    auto seen = ReadFile(task_dir_ + "/rank." + std::to_string(rank));
    ASSERT_TRUE(seen.ok()) << seen.status().ToString();
    EXPECT_EQ(*seen, std::to_string(rank) + " " + std::to_string(local) + " 6 1\n");
  }
  EXPECT_FALSE(std::filesystem::exists(task_dir_ + "/rank.6"));
  EXPECT_EQ(Stdout(*runtime, l.key), "");  // `corral launch` prints nothing on success
  EXPECT_EQ(Stderr(*runtime, l.key), "");
}

TEST_F(DistributedRuntimeTest, ABatchScriptRunsPerRankWithSlurmVariablesAndOutputFiles) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(9, {"first arg"}, model::Launcher::kNone, 2);
  l.script =
      "#!/bin/sh\n#SBATCH -n 4\necho \"$SLURM_PROCID $SLURM_LOCALID $SLURM_NTASKS $SLURM_NODEID "
      "$SLURM_JOB_NUM_NODES $1\"\necho \"err $SLURM_PROCID\" >&2\n";
  l.job_name = "ranks";
  l.output_file = "out.txt";
  l.error_file = "err.txt";
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.exit_code, 0) << end.message;
  auto out = ReadFile(task_dir_ + "/out.txt");
  auto err = ReadFile(task_dir_ + "/err.txt");
  ASSERT_TRUE(out.ok() && err.ok());
  // Ranks 2 and 3 (part 1 of 2), in either order; stdout and stderr apart; the log has both.
  std::vector<std::string> lines = Split(*out, '\n');
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"", "2 0 4 1 2 first arg", "3 1 4 1 2 first arg"}));
  EXPECT_EQ(err->size(), std::string("err 2\nerr 3\n").size());
  EXPECT_EQ(Stdout(*runtime, l.key).size(), out->size());
  EXPECT_EQ(Stderr(*runtime, l.key).size(), err->size());
  // The script file went with the task.
  ASSERT_TRUE(runtime->Forget(l.key).ok());
  EXPECT_FALSE(std::filesystem::exists(home_ + "/scripts/9-1"));
}

TEST_F(DistributedRuntimeTest, OutputFilesStartEmptyForAOnePartJobAndGetStderrWithoutAnErrorFile) {
  auto runtime = MakeDistributedRuntime();
  ASSERT_TRUE(WriteFileAtomic(task_dir_ + "/log.txt", "left from before\n").ok());
  TaskLaunch l = Launch(10, {"sh", "-c", "echo out; echo err >&2"});
  l.output_file = "log.txt";
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  auto text = ReadFile(task_dir_ + "/log.txt");
  ASSERT_TRUE(text.ok());
  EXPECT_TRUE(*text == "out\nerr\n" || *text == "err\nout\n") << *text;
  EXPECT_EQ(Stdout(*runtime, l.key), "out\n");
  EXPECT_EQ(Stderr(*runtime, l.key), "err\n");
}

TEST_F(DistributedRuntimeTest, AnErrorFileAloneGetsStderrAndStdoutStaysInTheLog) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = Launch(13, {"sh", "-c", "echo out; echo err >&2"});
  l.error_file = "err.txt";
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  auto err = ReadFile(task_dir_ + "/err.txt");
  ASSERT_TRUE(err.ok()) << err.status().ToString();
  EXPECT_EQ(*err, "err\n");
  EXPECT_EQ(Stdout(*runtime, l.key), "out\n");
  EXPECT_EQ(Stderr(*runtime, l.key), "err\n");
}

TEST_F(DistributedRuntimeTest, AnOutputFileThatCannotBeOpenedFailsTheTaskSayingWhy) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = Launch(11, {"true"});
  l.output_file = "no/such/folder/out.txt";
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 1);
  EXPECT_THAT(Stderr(*runtime, l.key),
              HasSubstr("cannot open output file no/such/folder/out.txt: No such file"));
}

TEST_F(DistributedRuntimeTest, AWarningSignalReachesTheProcessesNotCorralLaunch) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(
      12,
      {"sh", "-c",
       "trap 'echo warned $LOCAL_RANK; exit 0' USR1; echo ready; while :; do sleep 0.05; done"},
      model::Launcher::kNone, 2);
  l.time_limit = Seconds(60);
  l.warning_signal = model::WarningSignal{SIGUSR1, Seconds(10)};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  // Both processes have their trap before the warning is due.
  WaitForOutput(*runtime, l.key, "ready\nready\n");
  clock_.Advance(Seconds(50));
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 0) << Stderr(*runtime, l.key);
  std::vector<std::string> lines = Split(Stdout(*runtime, l.key), '\n');
  std::sort(lines.begin(), lines.end());
  EXPECT_EQ(lines, (std::vector<std::string>{"", "ready", "ready", "warned 0", "warned 1"}));
}

TEST_F(DistributedRuntimeTest, OneFailingProcessStopsItsSiblingsAndGivesItsStatus) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(
      1, {"sh", "-c", "if [ \"$LOCAL_RANK\" = 1 ]; then exit 3; fi; exec sleep 30"},
      model::Launcher::kNone, 3);
  const auto begin = std::chrono::steady_clock::now();
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  // Well before the siblings' `sleep 30`, and before the 10 s SIGKILL grace: SIGTERM did it.
  EXPECT_LT(std::chrono::steady_clock::now() - begin, std::chrono::seconds(8));
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 3);
  const std::string err = Stderr(*runtime, l.key);
  EXPECT_THAT(err, HasSubstr("process 1 exited with 3; stopping the others"));
  // The siblings' ends are kept too.
  EXPECT_THAT(err, HasSubstr("process 0 was killed by signal 15"));
  EXPECT_THAT(err, HasSubstr("process 2 was killed by signal 15"));
}

TEST_F(DistributedRuntimeTest, KillReachesEveryProcessAndTheLauncherExits143) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(1, {"sleep", "30"}, model::Launcher::kTf, 2);
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  WaitUntilBlocked(started.pid, SIGTERM);
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(30), "cancelled").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.exit_code, 143);
}

TEST_F(DistributedRuntimeTest, MpiPartsOtherThanZeroHoldTheirNodeUntilStopped) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(1, {"mpirun", "./a.out"}, model::Launcher::kMpi, 2);
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  WaitUntilBlocked(started.pid, SIGTERM);
  auto cmdline = ReadFile("/proc/" + std::to_string(started.pid) + "/cmdline");
  ASSERT_TRUE(cmdline.ok());
  EXPECT_EQ(*cmdline, std::string(CORRAL_BINARY) + std::string("\0launch\0--hold\0", 15));
  auto environ = ReadFile("/proc/" + std::to_string(started.pid) + "/environ");
  ASSERT_TRUE(environ.ok());
  const std::string hostfile = home_ + "/hostfiles/1-1";
  EXPECT_THAT(*environ, HasSubstr(std::string("\0OMPI_MCA_orte_default_hostfile=", 32) + hostfile +
                                  std::string("\0", 1)));
  EXPECT_EQ(runtime->Poll()[0].state, ProcessState::kRunning);
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(30), "job ended").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.exit_code, 0);
}

TEST_F(DistributedRuntimeTest, HostfileIsReadableByTheTaskAndGoesWithIt) {
  auto runtime = MakeDistributedRuntime();
  TaskLaunch l = DistributedLaunch(1, {"sh", "-c", "echo $CORRAL_HOSTFILE; cat $CORRAL_HOSTFILE"},
                                   model::Launcher::kDeepspeed, 1);
  l.distributed->hosts = {"10.77.0.2", "10.77.0.2"};  // two parts on one node
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  const std::string hostfile = home_ + "/hostfiles/1-1";
  EXPECT_EQ(Stdout(*runtime, l.key), hostfile + "\n10.77.0.2 slots=2\n");
  struct stat st;
  ASSERT_EQ(stat(hostfile.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0444u);
  ASSERT_EQ(stat((home_ + "/hostfiles").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0711u);
  ASSERT_TRUE(runtime->Forget(l.key).ok());
  EXPECT_FALSE(std::filesystem::exists(hostfile));
}

TEST_F(DistributedRuntimeTest, AnotherTaskUserCanReadTheHostfile) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  if (!LookUpUser("nobody").ok()) GTEST_SKIP() << "no user 'nobody' here";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);  // mkdtemp's 0700: let the task user through
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.task_user = "nobody";
  o.self_exe = CORRAL_BINARY;
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskLaunch l =
      DistributedLaunch(1, {"sh", "-c", "cat $CORRAL_HOSTFILE; echo x >> $CORRAL_HOSTFILE"},
                        model::Launcher::kDeepspeed, 1);
  l.workdir = "";
  ASSERT_EQ((*runtime)->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(**runtime, l.key);
  EXPECT_NE(end.exit_code, 0);  // readable, not writable
  EXPECT_EQ(Stdout(**runtime, l.key), "10.77.0.2 slots=1\n10.77.0.3 slots=1\n");
}

TEST_F(DistributedRuntimeTest, TorchrunIsFoundThroughPathAndGetsTheRendezvous) {
  const std::string bin = root_ + "/bin";
  ASSERT_EQ(mkdir(bin.c_str(), 0755), 0);
  std::ofstream(bin + "/torchrun") << "#!/bin/sh\necho \"$@\"\n";
  ASSERT_EQ(chmod((bin + "/torchrun").c_str(), 0755), 0);
  const std::string path = getenv("PATH") != nullptr ? getenv("PATH") : "/usr/bin:/bin";
  setenv("PATH", (bin + ":" + path).c_str(), 1);  // the runtime passes its PATH to tasks
  auto runtime = MakeDistributedRuntime();
  setenv("PATH", path.c_str(), 1);
  TaskLaunch l = DistributedLaunch(1, {"train.py", "--lr", "1"}, model::Launcher::kTorchrun, 2);
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  EXPECT_EQ(Stdout(*runtime, l.key),
            "--nnodes=2 --nproc_per_node=2 --node_rank=1 --master_addr=10.77.0.2 "
            "--master_port=29500 --redirects=2 --tee=2 train.py --lr 1\n");
}

TEST_F(DistributedRuntimeTest, AMissingLauncherProgramFailsTheStart) {
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("test"));
  o.self_exe = "/nonexistent/corral";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskStatus s = (*runtime)->Start(DistributedLaunch(1, {"true"}, model::Launcher::kNone, 2));
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_EQ(s.message, "'/nonexistent/corral': /nonexistent/corral is not an executable file");
  EXPECT_FALSE(std::filesystem::exists(home_ + "/hostfiles/1-1"));
}

TEST_F(DistributedRuntimeTest, LaunchCommandErrors) {
  auto runtime = MakeDistributedRuntime();
  struct Case {
    std::vector<std::string> args;
    int exit_code;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{}, 2, "--procs or --hold is required"},
      {{"--procs", "0", "--", "true"}, 2, "--procs"},
      {{"--procs", "x", "--", "true"}, 2, "--procs"},
      {{"--procs", "2"}, 2, "--procs: needs a command after --"},
      {{"--hold", "--procs", "2", "--", "true"}, 2, "--procs excludes --hold"},
      {{"--hold", "--", "true"}, 2, "--hold: takes no command"},
      {{"--bogus"}, 2, "--bogus"},
      {{"--procs", "2", "--", "no-such-command-corral"},
       127,
       "corral launch: cannot run 'no-such-command-corral': "},
  };
  int64_t allocation = 1;
  for (const Case& c : cases) {
    std::vector<std::string> argv = {CORRAL_BINARY, "launch"};
    argv.insert(argv.end(), c.args.begin(), c.args.end());
    TaskLaunch l = Launch(allocation++, argv);
    ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
    TaskStatus end = WaitForEnd(*runtime, l.key);
    EXPECT_EQ(end.exit_code, c.exit_code) << c.message;
    EXPECT_THAT(Stderr(*runtime, l.key), HasSubstr(c.message));
    EXPECT_EQ(Stdout(*runtime, l.key), "");
  }
}

// ---- cgroups on this machine (root; v1 on hybrid machines, v2 elsewhere) ----

class CgroupRuntimeTest : public ProcessRuntimeTest {
 protected:
  void SetUp() override {
    ProcessRuntimeTest::SetUp();
    parent_ = "corral-test-" + std::to_string(getpid());
    cgroups_ = CgroupManager::Detect("/sys/fs/cgroup", parent_);
    if (cgroups_->version() == CgroupVersion::kNone) {
      GTEST_SKIP() << "cgroups not usable here: " << cgroups_->unavailable_reason();
    }
  }
  void TearDown() override {
    ProcessRuntimeTest::TearDown();
    if (cgroups_) {
      EXPECT_TRUE(cgroups_->RemoveParent().ok());
    }
  }

  // Forgets `key` once its cgroup could be removed: the processes of a task killed by the
  // kernel (an OOM kill) may still be leaving the group when its end is seen, and the runtime
  // retries the removal at its next polls.
  static Status ForgetOnceEmpty(ProcessRuntime& runtime, const TaskKey& key) {
    const auto deadline = std::chrono::steady_clock::now() + kDeadline;
    Status forgot = runtime.Forget(key);
    while (forgot.code() == StatusCode::kFailedPrecondition &&
           std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      forgot = runtime.Forget(key);
    }
    return forgot;
  }

  std::string parent_;
  std::optional<CgroupManager> cgroups_;
};

// The defect two `corral dev` on one host had: both agents' task 1-1 lived in cgroup
// corral/1-1, so the end of one killed the other. Now each agent's groups are its own.
TEST_F(CgroupRuntimeTest, ATaskEndingInOneClusterKillsNothingOfAnother) {
  const std::string other_work = root_ + "/other-work";
  auto make = [&](const std::string& work_dir, const std::string& cluster) {
    ProcessRuntimeOptions o = Options(
        CgroupManager::Detect("/sys/fs/cgroup", parent_ + "/" + cluster + "/" + kTestNodeName));
    o.work_dir = work_dir;
    o.cluster_id = cluster;
    auto runtime = ProcessRuntime::Create(o, &clock_);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    return std::move(runtime).value();
  };
  auto a = make(work_dir_, "aaaaaaaaaaaaaaaa");
  auto b = make(other_work, "bbbbbbbbbbbbbbbb");
  // The same key in both, as allocation ids start at 1 in every cluster.
  TaskLaunch l = Launch(1, {"sh", "-c", "while [ ! -e go-$X ]; do sleep 0.02; done; echo $X"});
  TaskLaunch in_a = l, in_b = l;
  in_a.env = {{"X", "a"}};
  in_b.env = {{"X", "b"}};
  ASSERT_EQ(a->Start(in_a).state, ProcessState::kRunning);
  ASSERT_EQ(b->Start(in_b).state, ProcessState::kRunning);
  std::ofstream(task_dir_ + "/go-a") << "";
  EXPECT_EQ(WaitForEnd(*a, l.key).exit_code, 0);
  ASSERT_TRUE(a->Forget(l.key).ok());  // its group emptied and removed
  for (int i = 0; i < 20; ++i) {
    EXPECT_EQ(b->Poll()[0].state, ProcessState::kRunning) << "the other cluster's task was killed";
  }
  std::ofstream(task_dir_ + "/go-b") << "";
  TaskStatus end = WaitForEnd(*b, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(Stdout(*b, l.key), "b\n");
  ASSERT_TRUE(b->Forget(l.key).ok());
  for (auto* runtime : {a.get(), b.get()}) {
    EXPECT_TRUE(runtime->cgroups().RemoveParent().ok());
  }
  std::error_code ec;
  std::filesystem::remove_all(other_work, ec);
}

// A task that outgrows its memory limit is killed by the kernel's OOM killer, and its status
// says so in its type (out_of_memory), not only in words. A process that survives the OOM kill
// of a child it started and exits 0 did not fail: its cause is its own exit.
TEST_F(CgroupRuntimeTest, AnOomKillIsTheEndCause) {
  auto runtime = MakeRuntime(*cgroups_);
  // dd fills a 256 MiB buffer: far over the 32 MiB limit (no swap on these machines; with swap
  // the group could page out instead, so the test asserts only when the kernel said OOM).
  TaskLaunch l = Launch(31, {"dd", "if=/dev/zero", "of=/dev/null", "bs=256M", "count=1"});
  l.memory = MemoryMib(32);
  TaskStatus s = runtime->Start(l);
  ASSERT_EQ(s.state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  if (!s.message.empty()) GTEST_SKIP() << "memory limits not applied here: " << s.message;
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kOutOfMemory);
  EXPECT_THAT(end.message, HasSubstr("out of memory: killed at its memory limit of 32 MiB"));

  TaskLaunch survivor = Launch(32, {"dd if=/dev/zero of=/dev/null bs=256M count=1; exit 0"});
  survivor.shell = true;
  survivor.memory = MemoryMib(32);
  ASSERT_EQ(runtime->Start(survivor).state, ProcessState::kRunning);
  end = WaitForEnd(*runtime, survivor.key);
  EXPECT_EQ(end.exit_code, 0);
  EXPECT_EQ(end.end_cause, model::TaskEndCause::kExited);
  for (const TaskKey& key : {l.key, survivor.key}) {
    ASSERT_TRUE(ForgetOnceEmpty(*runtime, key).ok());
  }
}

TEST_F(CgroupRuntimeTest, LimitsAreVisibleFromInsideTheTask) {
  auto runtime = MakeRuntime(*cgroups_);
  const bool v1 = cgroups_->version() == CgroupVersion::kV1;
  std::string script =
      v1 ? "m=$(grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:' /proc/self/cgroup | cut -d: -f3); "
           "c=$(grep -E '^[0-9]+:([^:]*,)?cpu(,[^:]*)?:' /proc/self/cgroup | cut -d: -f3); "
           "echo memory-group=$m; echo cpu-group=$c; "
           "echo memory-limit=$(cat /sys/fs/cgroup/memory$m/memory.limit_in_bytes); "
           "echo cpu-quota=$(cat /sys/fs/cgroup/cpu$c/cpu.cfs_quota_us)"
         : "g=$(grep '^0::' /proc/self/cgroup | cut -d: -f3); "
           "echo memory-group=$g; echo cpu-group=$g; "
           "echo memory-limit=$(cat /sys/fs/cgroup$g/memory.max); "
           "echo cpu-quota=$(cut -d' ' -f1 /sys/fs/cgroup$g/cpu.max)";
  TaskLaunch l = Launch(21, {script});
  l.shell = true;
  l.memory = MemoryMib(64);
  l.cpu = CpuMilli(500);
  TaskStatus s = runtime->Start(l);
  ASSERT_EQ(s.state, ProcessState::kRunning);
  EXPECT_EQ(s.message, "");  // every limit applied
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.exit_code, 0);
  std::string out = Stdout(*runtime, l.key);
  const std::string group = "/" + parent_ + "/21-1";
  EXPECT_THAT(out, HasSubstr("memory-group=" + group + "\n"));
  EXPECT_THAT(out, HasSubstr("cpu-group=" + group + "\n"));
  EXPECT_THAT(out, HasSubstr("memory-limit=67108864\n"));
  EXPECT_THAT(out, HasSubstr("cpu-quota=50000\n"));
  // The groups are removed once the task has ended (retried by Poll while still busy).
  auto deadline = std::chrono::steady_clock::now() + kDeadline;
  auto groups_exist = [&] {
    return v1 ? std::filesystem::exists("/sys/fs/cgroup/memory" + group) ||
                    std::filesystem::exists("/sys/fs/cgroup/cpu" + group)
              : std::filesystem::exists("/sys/fs/cgroup" + group);
  };
  while (groups_exist() && std::chrono::steady_clock::now() < deadline) {
    runtime->Poll();
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_FALSE(groups_exist());
}

TEST_F(CgroupRuntimeTest, TaskOverItsMemoryLimitIsKilled) {
  auto runtime = MakeRuntime(*cgroups_);
  // The shell keeps the whole 256 MB command substitution in memory.
  TaskLaunch l = Launch(22, {"x=$(head -c 268435456 /dev/zero | tr '\\0' a); echo survived"});
  l.shell = true;
  l.memory = MemoryMib(32);
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.signal, SIGKILL);
  EXPECT_THAT(end.message, HasSubstr("out of memory"));
  EXPECT_THAT(Stdout(*runtime, l.key), Not(HasSubstr("survived")));
  EXPECT_TRUE(ForgetOnceEmpty(*runtime, l.key).ok());  // its group removed before the teardown's
}

TEST_F(CgroupRuntimeTest, TaskUserJoinsItsCgroupBeforeDroppingRoot) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody' here";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);  // let the task user through to its workdir
  ProcessRuntimeOptions o = Options(*cgroups_);
  o.task_user = "nobody";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskLaunch l = Launch(22, {"id -u; grep -E '^[0-9]+:([^:]*,)?memory(,[^:]*)?:|^0::' "
                             "/proc/self/cgroup | cut -d: -f3"});
  l.shell = true;
  l.memory = MemoryMib(64);
  TaskStatus s = (*runtime)->Start(l);
  ASSERT_EQ(s.state, ProcessState::kRunning);
  EXPECT_EQ(s.message, "");  // joined
  EXPECT_EQ(WaitForEnd(**runtime, l.key).exit_code, 0);
  const std::string out = Stdout(**runtime, l.key);
  EXPECT_EQ(out.substr(0, out.find('\n')), std::to_string(nobody->uid));
  EXPECT_THAT(out, HasSubstr("\n/" + parent_ + "/22-1\n"));
}

// The in-job channel (docs/in-job.md): the variables, the stop file written before the SIGTERM,
// the checkpoint folder made before the start.
TEST_F(ProcessRuntimeTest, AStoppedTaskReadsWhyAndItsGraceFromTheStopFileOnSigterm) {
  ProcessRuntimeOptions options = Options(CgroupManager::Disabled("cgroups disabled"));
  options.task_server = "http://127.0.0.1:1,http://127.0.0.1:2";
  auto made = ProcessRuntime::Create(std::move(options), &clock_);
  ASSERT_TRUE(made.ok()) << made.status().ToString();
  ProcessRuntime& runtime = **made;
  TaskLaunch l = Launch(1, {"sh", "-c",
                            "trap 'cat \"$CORRAL_STOP_FILE\"; exit 0' TERM; "
                            "test -e \"$CORRAL_STOP_FILE\" && echo early-stop-file; "
                            "echo \"server=$CORRAL_SERVER token=$CORRAL_JOB_TOKEN\"; echo ready; "
                            "while :; do sleep 0.05; done"});
  l.job_token = "crj_7_abc";
  ASSERT_EQ(runtime.Start(l).state, ProcessState::kRunning);
  WaitForOutput(runtime, l.key, "ready");
  const std::string stop_file = home_ + "/stops/" + ToString(l.key) + "/stop.json";
  EXPECT_FALSE(std::filesystem::exists(stop_file));
  ASSERT_TRUE(runtime.Kill(l.key, Seconds(25), "preempted by job 9").ok());
  TaskStatus end = WaitForEnd(runtime, l.key);
  EXPECT_EQ(end.exit_code, 0);
  const std::string out = Stdout(runtime, l.key);
  EXPECT_THAT(out, Not(HasSubstr("early-stop-file")));
  EXPECT_THAT(out, HasSubstr("server=http://127.0.0.1:1,http://127.0.0.1:2 token=crj_7_abc"));
  const std::string json_text = out.substr(out.find('{'));
  nlohmann::json stop = nlohmann::json::parse(json_text.substr(0, json_text.find('\n')));
  EXPECT_EQ(stop["reason"], "preempted by job 9");
  EXPECT_EQ(stop["grace_s"], 25);
  EXPECT_EQ(stop["deadline"], clock_.Now().value() + 25);
  struct stat st;
  ASSERT_EQ(stat(stop_file.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0440u);
  EXPECT_EQ(st.st_gid, getegid());
  ASSERT_EQ(stat((home_ + "/stops/" + ToString(l.key)).c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02750u);
  ASSERT_TRUE(runtime.Forget(l.key).ok());
  EXPECT_FALSE(std::filesystem::exists(home_ + "/stops/" + ToString(l.key)));
}

TEST_F(ProcessRuntimeTest, TheTimeLimitWritesTheStopFileWithItsGrace) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c",
                            "trap 'cat \"$CORRAL_STOP_FILE\"; exit 0' TERM; "
                            "echo ready; while :; do sleep 0.05; done"});
  l.time_limit = Seconds(60);
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  clock_.Advance(Seconds(60));
  WaitForEnd(*runtime, l.key);
  const std::string out = Stdout(*runtime, l.key);
  nlohmann::json stop = nlohmann::json::parse(out.substr(out.find('{')));
  EXPECT_THAT(stop["reason"].get<std::string>(), HasSubstr("time limit of 60 s"));
  EXPECT_EQ(stop["grace_s"], 30);  // Options(): time_limit_grace
}

TEST_F(ProcessRuntimeTest, TheCheckpointFolderIsMadeBeforeTheStartAndItsRootMustExist) {
  auto runtime = MakeRuntime();
  const std::string checkpoints = root_ + "/checkpoints";
  ASSERT_EQ(mkdir(checkpoints.c_str(), 0755), 0);
  TaskLaunch l = Launch(1, {"sh", "-c", "touch \"$CORRAL_CHECKPOINT_DIR/c1\" && echo done"});
  l.checkpoint_dir = checkpoints + "/7";
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);
  EXPECT_TRUE(std::filesystem::exists(checkpoints + "/7/c1"));
  struct stat st;
  ASSERT_EQ(stat(l.checkpoint_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0700u);
  EXPECT_EQ(st.st_uid, geteuid());
  // The next generation reuses it.
  l.key.generation = 2;
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(*runtime, l.key).exit_code, 0);

  TaskLaunch lost = Launch(2, {"true"});
  lost.checkpoint_dir = root_ + "/not-mounted/7";
  TaskStatus s = runtime->Start(lost);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_THAT(s.message, HasSubstr(root_ + "/not-mounted"));
  EXPECT_THAT(s.message, HasSubstr("shared file system"));

  // A link planted in the root is refused, not followed.
  ASSERT_EQ(symlink(task_dir_.c_str(), (checkpoints + "/8").c_str()), 0);
  TaskLaunch linked = Launch(3, {"true"});
  linked.job_id = JobId(8);
  linked.checkpoint_dir = checkpoints + "/8";
  EXPECT_EQ(runtime->Start(linked).state, ProcessState::kFailedToStart);

  // A folder someone else made in the root is not adopted (nor given to the task's user).
  const std::string foreign = checkpoints + "/9";
  ASSERT_EQ(mkdir(foreign.c_str(), 0777), 0);
  const uid_t other = geteuid() == 65534 ? 65533 : 65534;
  if (geteuid() == 0) {
    ASSERT_EQ(chown(foreign.c_str(), other, other), 0);
    ASSERT_EQ(chmod(foreign.c_str(), 0777), 0);
    TaskLaunch planted = Launch(4, {"true"});
    planted.job_id = JobId(9);
    planted.checkpoint_dir = foreign;
    TaskStatus refused = runtime->Start(planted);
    EXPECT_EQ(refused.state, ProcessState::kFailedToStart);
    EXPECT_THAT(refused.message, HasSubstr(foreign));
    EXPECT_THAT(refused.message, HasSubstr("owned by uid " + std::to_string(other)));
    ASSERT_EQ(stat(foreign.c_str(), &st), 0);
    EXPECT_EQ(st.st_uid, other);
    EXPECT_EQ(st.st_mode & 0777, 0777u);
  }
}

// A task running as another user reads its stop file through its group; other users cannot. Its
// checkpoint folder, made by the agent, is given to it, and reused by its next generation.
TEST_F(ProcessRuntimeTest, ATaskUserReadsItsStopFileAndOwnsItsCheckpointFolder) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root";
  auto nobody = LookUpUser("nobody");
  if (!nobody.ok()) GTEST_SKIP() << "no user 'nobody' here";
  ASSERT_EQ(chmod(root_.c_str(), 0711), 0);  // let the task user through to its workdir
  const std::string checkpoints = root_ + "/checkpoints";
  ASSERT_EQ(mkdir(checkpoints.c_str(), 0755), 0);
  ProcessRuntimeOptions o = Options(CgroupManager::Disabled("cgroups disabled"));
  o.task_user = "nobody";
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskLaunch l = Launch(1, {"sh", "-c",
                            "trap 'cat \"$CORRAL_STOP_FILE\"; exit 0' TERM; "
                            "touch \"$CORRAL_CHECKPOINT_DIR/c1\" && echo ready; "
                            "while :; do sleep 0.05; done"});
  l.checkpoint_dir = checkpoints + "/7";
  ASSERT_EQ((*runtime)->Start(l).state, ProcessState::kRunning);
  WaitForOutput(**runtime, l.key, "ready");
  ASSERT_TRUE((*runtime)->Kill(l.key, Seconds(25), "cancelled by alice").ok());
  EXPECT_EQ(WaitForEnd(**runtime, l.key).exit_code, 0);
  EXPECT_THAT(Stdout(**runtime, l.key), HasSubstr("\"reason\":\"cancelled by alice\""));
  struct stat st;
  const std::string stop_dir = home_ + "/stops/" + ToString(l.key);
  ASSERT_EQ(stat((stop_dir + "/stop.json").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0440u);
  EXPECT_EQ(st.st_gid, nobody->gid);
  ASSERT_EQ(stat(stop_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 02750u);  // nothing for others
  ASSERT_EQ(stat(l.checkpoint_dir.c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, nobody->uid);
  l.key.generation = 2;
  l.argv = {"true"};
  ASSERT_EQ((*runtime)->Start(l).state, ProcessState::kRunning);
  EXPECT_EQ(WaitForEnd(**runtime, l.key).exit_code, 0);
}

// A second kill with a shorter grace moves the SIGKILL earlier: the stop file says so.
TEST_F(ProcessRuntimeTest, AShorterSecondKillRewritesTheStopFile) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, {"sh", "-c", "trap '' TERM; echo ready; while :; do sleep 0.05; done"});
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  const std::string stop_file = home_ + "/stops/" + ToString(l.key) + "/stop.json";
  auto read_stop = [&] {
    std::ifstream in(stop_file);
    return nlohmann::json::parse(in);
  };
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(60), "drained").ok());
  EXPECT_EQ(read_stop()["deadline"], clock_.Now().value() + 60);
  clock_.Advance(Seconds(10));
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(20), "cancelled").ok());
  nlohmann::json stop = read_stop();
  EXPECT_EQ(stop["deadline"], clock_.Now().value() + 20);
  EXPECT_EQ(stop["grace_s"], 20);
  // A later deadline does not move it back.
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(50), "again").ok());
  EXPECT_EQ(read_stop()["deadline"], clock_.Now().value() + 20);
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "now").ok());
  WaitForEnd(*runtime, l.key);
}

}  // namespace
}  // namespace corral::agent
