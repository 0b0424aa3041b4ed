// Container tasks through ProcessRuntime and a real podman (runc, rootful): every test starts real
// containers from a busybox image that the suite imports, and waits for what it expects with a
// deadline (polling every 10 ms), never a fixed sleep. GPUs are stand-ins: a CDI spec of the
// suite's own kind maps device N to a file mounted at /dev/corral-gpuN. The suite skips, saying
// what is missing, without root, podman, runc or /bin/busybox.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <thread>

#include "agent/container_engine.h"
#include "agent/file_io.h"
#include "agent/process_runtime.h"
#include "agent/runtime_test_support.h"
#include "agent/task_user.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

constexpr auto kDeadline = std::chrono::seconds(60);
constexpr int kFakeGpus = 4;
// The runtime's container names: corral-<cluster>-<node>-<alloc>-<gen> (ContainerName()).
const std::string kScope = std::string(kTestClusterId) + "-" + kTestNodeName;

// What the whole suite shares: the engine, its configuration, the image and the CDI spec.
struct Suite {
  std::string skip_reason;  // not empty: every test skips with it
  std::string root;         // temp dir: containers.conf, rootfs, fake GPU files
  std::string image;        // localhost/corral-test/busybox:<pid>
  // localhost/corral-test/setuid:<pid>: busybox with a setuid-root copy at /suid/busybox whose
  // `tac` applet (/suid/tac) keeps root (/etc/busybox.conf); a separate image because that file
  // upsets other applets (`id` crashes).
  std::string setuid_image;
  std::string cdi_kind;  // corral.test/gpu-<pid>
  std::string cdi_spec;  // /var/run/cdi/corral-test-<pid>.yaml
  std::optional<ContainerEngine> engine;
};
Suite* suite = nullptr;

// Runs a test-setup command line through the shell (tests only: the agent never uses one).
int Shell(const std::string& command) { return std::system(command.c_str()); }

// The output of a test-setup command line.
std::string ShellOutput(const std::string& command) {
  std::string out;
  FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return out;
  char buffer[4096];
  size_t n;
  while ((n = fread(buffer, 1, sizeof(buffer), p)) > 0) out.append(buffer, n);
  pclose(p);
  return out;
}

std::string FindProgram(const std::string& name) {
  for (const char* dir :
       {"/usr/local/sbin", "/usr/local/bin", "/usr/sbin", "/usr/bin", "/sbin", "/bin"}) {
    const std::string path = std::string(dir) + "/" + name;
    if (access(path.c_str(), X_OK) == 0) return path;
  }
  return "";
}

std::string SetUpSuite(Suite& s) {
  if (geteuid() != 0) return "needs root (the engine runs rootful)";
  const std::string podman = FindProgram("podman");
  if (podman.empty()) return "podman is not installed";
  if (FindProgram("runc").empty()) return "runc is not installed";
  if (access("/bin/busybox", X_OK) != 0) return "/bin/busybox (busybox-static) is not installed";
  char tmpl[] = "/tmp/corral-container-test-XXXXXX";
  if (mkdtemp(tmpl) == nullptr) return "mkdtemp failed";
  s.root = tmpl;
  const std::string pid = std::to_string(getpid());
  // The machine's cgroups are hybrid: crun refuses them, runc works; see machine-notes.md.
  const std::string conf = s.root + "/containers.conf";
  std::ofstream(conf) << "[containers]\n"
                         "default_ulimits = [\"nofile=20000:20000\", \"nproc=32768:32768\"]\n"
                         "[engine]\n"
                         "runtime = \"runc\"\n"
                         "cgroup_manager = \"cgroupfs\"\n"
                         "events_logger = \"file\"\n";
  setenv("CONTAINERS_CONF", conf.c_str(), 1);  // reaches the engine as the agent's would

  const std::string rootfs = s.root + "/rootfs";
  std::filesystem::create_directories(rootfs + "/bin");
  std::filesystem::copy_file("/bin/busybox", rootfs + "/bin/busybox");
  std::istringstream applets(ShellOutput("/bin/busybox --list"));
  for (std::string applet; std::getline(applets, applet);) {
    if (!applet.empty() && applet != "busybox") {
      std::error_code ec;
      std::filesystem::create_symlink("busybox", rootfs + "/bin/" + applet, ec);
    }
  }
  s.image = "localhost/corral-test/busybox:" + pid;
  if (Shell("tar -C " + rootfs + " -c . | " + podman + " import - " + s.image +
            " >/dev/null 2>&1") != 0) {
    return "podman import of the busybox image failed";
  }
  std::filesystem::create_directories(rootfs + "/suid");
  std::filesystem::create_directories(rootfs + "/etc");
  std::filesystem::copy_file("/bin/busybox", rootfs + "/suid/busybox");
  std::filesystem::create_symlink("busybox", rootfs + "/suid/tac");
  if (chown((rootfs + "/suid/busybox").c_str(), 0, 0) != 0 ||
      chmod((rootfs + "/suid/busybox").c_str(), 04755) != 0) {
    return "cannot make " + rootfs + "/suid/busybox setuid root";
  }
  std::ofstream(rootfs + "/etc/busybox.conf") << "[SUID]\ntac = ssx 0.0\n";
  s.setuid_image = "localhost/corral-test/setuid:" + pid;
  if (Shell("tar -C " + rootfs + " -c . | " + podman + " import - " + s.setuid_image +
            " >/dev/null 2>&1") != 0) {
    return "podman import of the setuid image failed";
  }

  s.cdi_kind = "corral.test/gpu-" + pid;
  std::string spec = "cdiVersion: \"0.5.0\"\nkind: \"" + s.cdi_kind + "\"\ndevices:\n";
  for (int i = 0; i < kFakeGpus; ++i) {
    const std::string file = s.root + "/gpu" + std::to_string(i);
    std::ofstream(file) << "gpu " << i << "\n";
    spec += "- name: \"" + std::to_string(i) +
            "\"\n  containerEdits:\n    mounts:\n    - hostPath: " + file +
            "\n      containerPath: /dev/corral-gpu" + std::to_string(i) +
            "\n      options: [ro, bind]\n";
  }
  std::filesystem::create_directories("/var/run/cdi");
  s.cdi_spec = "/var/run/cdi/corral-test-" + pid + ".yaml";
  if (!WriteFileAtomic(s.cdi_spec, spec).ok()) return "cannot write " + s.cdi_spec;

  ContainerSettings settings;
  settings.choice = podman;
  settings.gpu_passing = GpuPassing::kCdi;
  settings.cdi_kind = s.cdi_kind;
  Result<EngineSearch> found = FindContainerEngine(settings);
  if (!found.ok()) return "podman does not answer: " + found.status().message();
  s.engine = found->engine;
  return "";
}

class ContainerRuntimeTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    suite = new Suite;
    suite->skip_reason = SetUpSuite(*suite);
  }

  static void TearDownTestSuite() {
    if (!suite->cdi_spec.empty()) std::filesystem::remove(suite->cdi_spec);
    for (const std::string& image : {suite->image, suite->setuid_image}) {
      if (suite->engine && !image.empty()) {
        (void)RunEngineCommand({suite->engine->cli.path, "rmi", "-f", image}, suite->engine->env,
                               Seconds(60));
      }
    }
    std::error_code ec;
    if (!suite->root.empty()) std::filesystem::remove_all(suite->root, ec);
    delete suite;
    suite = nullptr;
  }

  void SetUp() override {
    if (!suite->skip_reason.empty()) GTEST_SKIP() << suite->skip_reason;
    char tmpl[] = "/tmp/corral-container-task-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    // Enterable (mkdtemp's 0700 is not): the task user opens its workdir itself.
    ASSERT_EQ(chmod(root_.c_str(), 0711), 0);
    work_dir_ = root_ + "/work";
    home_ = TestHome(work_dir_);
    task_dir_ = root_ + "/wd";
    ASSERT_EQ(mkdir(task_dir_.c_str(), 0755), 0);
    // A non-root task user when there is one: the container must not run as root.
    if (auto nobody = LookUpUser("nobody"); nobody.ok()) {
      user_ = *nobody;
      ASSERT_EQ(chown(task_dir_.c_str(), user_->uid, user_->gid), 0);
    }
  }

  void TearDown() override {
    if (root_.empty()) return;
    // Stop and remove whatever a failed test left running, then the files.
    if (auto runtime = MakeRuntime(); runtime != nullptr) {
      for (const TaskStatus& s : runtime->Poll()) {
        if (s.state == ProcessState::kRunning) (void)runtime->Kill(s.key, Seconds(0), "teardown");
        (void)RemoveContainer(*suite->engine, ContainerName(kScope, s.key));
      }
    }
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  ProcessRuntimeOptions Options() {
    ProcessRuntimeOptions o;
    o.work_dir = work_dir_;
    o.cluster_id = kTestClusterId;
    o.node_name = kTestNodeName;
    o.task_user = user_ ? user_->name : "";
    o.time_limit_grace = Seconds(30);
    o.cgroups = CgroupManager::Disabled("not used by container tasks");
    o.container_engine = suite->engine;
    o.supervisor_exe = CORRAL_SUPERVISOR;
    return o;
  }

  std::unique_ptr<ProcessRuntime> MakeRuntime() {
    auto runtime = ProcessRuntime::Create(Options(), &clock_);
    EXPECT_TRUE(runtime.ok()) << runtime.status().ToString();
    return runtime.ok() ? std::move(runtime).value() : nullptr;
  }

  // Allocation ids apart from other test processes': container names are per machine.
  static int64_t Allocation(int n) { return static_cast<int64_t>(getpid()) * 100 + n; }

  TaskLaunch Launch(int n, std::string script) {
    TaskLaunch l;
    l.job_id = JobId(42);
    l.key = TaskKey{AllocationId(Allocation(n)), 1};
    l.argv = {std::move(script)};
    l.shell = true;
    l.workdir = task_dir_;
    l.environment = LaunchEnvironment{"busybox", 1, "container", suite->image, "", ""};
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

  static std::string Log(Runtime& runtime, const TaskKey& key, LogStream stream) {
    auto out = runtime.ReadLog(key, stream, 0, 1 << 20);
    EXPECT_TRUE(out.ok()) << out.status().ToString();
    return out.ok() ? *out : "";
  }

  // Whether the engine knows a container of that name, in any state.
  static bool ContainerExists(const TaskKey& key) {
    Result<EngineOutput> out =
        RunEngineCommand({suite->engine->cli.path, "ps", "-a", "--filter",
                          "name=^" + ContainerName(kScope, key) + "$", "--format", "{{.Names}}"},
                         suite->engine->env, Seconds(30));
    EXPECT_TRUE(out.ok() && out->exit_code == 0) << (out.ok() ? out->output : "");
    return out.ok() && out->output.find(ContainerName(kScope, key)) != std::string::npos;
  }

  nlohmann::json TaskRecord(const TaskKey& key) {
    auto text = ReadFile(home_ + "/tasks/" + ToString(key) + "/task.json");
    EXPECT_TRUE(text.ok()) << text.status().ToString();
    return text.ok() ? nlohmann::json::parse(*text) : nlohmann::json();
  }

  uid_t TaskUid() const { return user_ ? user_->uid : geteuid(); }

  FakeClock clock_{Seconds(1700000000)};
  std::string root_;
  std::string work_dir_;
  std::string home_;  // the runtime's namespace in work_dir_: TestHome()
  std::string task_dir_;
  std::optional<TaskUser> user_;
};

TEST_F(ContainerRuntimeTest, TaskSeesOnlyItsGpusAndItsVariablesAsTheTaskUserInItsWorkdir) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(1, "ls /dev | grep corral-gpu; id -u; pwd; echo written > out.txt; env");
  l.gpus = {1, 3};
  l.gpu_milli = MilliGpu(1000);
  l.env = {{"FOO", "bar baz"}, {"API_KEY", "s3cret=1"}};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  TaskStatus end = WaitForEnd(*runtime, l.key);
  const std::string err = Log(*runtime, l.key, LogStream::kStderr);
  EXPECT_EQ(end.state, ProcessState::kExited) << err;
  EXPECT_EQ(end.exit_code, 0) << err;
  const std::string out = Log(*runtime, l.key, LogStream::kStdout);
  std::istringstream lines(out);
  std::string line;
  std::vector<std::string> first;
  while (first.size() < 4 && std::getline(lines, line)) first.push_back(line);
  EXPECT_THAT(first, testing::ElementsAre("corral-gpu1", "corral-gpu3", std::to_string(TaskUid()),
                                          task_dir_));
  const std::string env = "\n" + out;
  EXPECT_THAT(env, HasSubstr("\nCUDA_VISIBLE_DEVICES=0,1\n"));
  EXPECT_THAT(env, HasSubstr("\nCORRAL_GPU_INDICES=1,3\n"));
  EXPECT_THAT(env, HasSubstr("\nNVIDIA_VISIBLE_DEVICES=1,3\n"));
  EXPECT_THAT(env, HasSubstr("\nFOO=bar baz\n"));
  EXPECT_THAT(env, HasSubstr("\nAPI_KEY=s3cret=1\n"));
  EXPECT_THAT(env, HasSubstr("\nCORRAL_JOB_ID=42\n"));
  EXPECT_THAT(env, HasSubstr("\nCORRAL_ENVIRONMENT=busybox@1\n"));
  EXPECT_THAT(env, Not(HasSubstr("CONTAINERS_CONF")));  // the engine's, not the task's
  struct stat st;
  ASSERT_EQ(stat((task_dir_ + "/out.txt").c_str(), &st), 0);
  EXPECT_EQ(st.st_uid, TaskUid());
  EXPECT_EQ(*ReadFile(task_dir_ + "/out.txt"), "written\n");
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, CpuOnlyTaskSeesNoGpus) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(2, "ls /dev | grep -c corral-gpu; env");
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForEnd(*runtime, l.key);
  const std::string out = Log(*runtime, l.key, LogStream::kStdout);
  EXPECT_EQ(out.substr(0, 2), "0\n");
  EXPECT_THAT(out, HasSubstr("\nCUDA_VISIBLE_DEVICES=\n"));
  EXPECT_THAT(out, HasSubstr("\nNVIDIA_VISIBLE_DEVICES=void\n"));
}

TEST_F(ContainerRuntimeTest, LimitsAreVisibleInTheContainersCgroup) {
  auto runtime = MakeRuntime();
  // v1 (this machine's hybrid hierarchy), else v2.
  TaskLaunch l = Launch(3,
                        "cat /sys/fs/cgroup/memory/memory.limit_in_bytes 2>/dev/null || "
                        "cat /sys/fs/cgroup/memory.max; "
                        "cat /sys/fs/cgroup/cpu/cpu.cfs_quota_us 2>/dev/null || "
                        "cut -d' ' -f1 /sys/fs/cgroup/cpu.max");
  l.memory = MemoryMib(64);
  l.cpu = CpuMilli(500);
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.exit_code, 0) << Log(*runtime, l.key, LogStream::kStderr);
  EXPECT_EQ(Log(*runtime, l.key, LogStream::kStdout), "67108864\n50000\n");
}

TEST_F(ContainerRuntimeTest, ExitCodeAndBothStreamsAreTheContainers) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(4, "echo to-out; echo to-err >&2; exit 7");
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 7);
  EXPECT_EQ(end.message, "");
  EXPECT_EQ(Log(*runtime, l.key, LogStream::kStdout), "to-out\n");
  EXPECT_EQ(Log(*runtime, l.key, LogStream::kStderr), "to-err\n");
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, AnImageTheEngineCannotGetEndsWithTheEnginesError) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(5, "true");
  // No registry answers on this machine: podman gives up after three tries (3 s).
  l.environment->image = "localhost/corral-test/no-such-image:1";
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 125);
  EXPECT_EQ(end.message,
            "exit code 125: the container engine failed, unless the task itself exited so (see "
            "its stderr)");
  EXPECT_THAT(Log(*runtime, l.key, LogStream::kStderr),
              HasSubstr("localhost/corral-test/no-such-image:1"));
}

TEST_F(ContainerRuntimeTest, ACommandMissingFromTheImageFails) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(13, "");
  l.shell = false;
  l.argv = {"no-such-program"};
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_NE(end.exit_code, 0);
  // The init process (--init) reports it: "failed to exec pid1: No such file or directory".
  EXPECT_THAT(Log(*runtime, l.key, LogStream::kStderr), HasSubstr("failed to exec"));
}

TEST_F(ContainerRuntimeTest, VariablesNeverAppearOnTheEnginesCommandLine) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(6, "echo ready; sleep 60");
  l.env = {{"API_KEY", "s3cret-value"}};
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  WaitForOutput(*runtime, l.key, "ready");
  const std::string cmdline = *ReadFile("/proc/" + std::to_string(started.pid) + "/cmdline");
  EXPECT_THAT(cmdline, HasSubstr(ContainerName(kScope, l.key)));  // the engine's command line
  EXPECT_THAT(cmdline, Not(HasSubstr("s3cret")));
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(0), "done").ok());
  WaitForEnd(*runtime, l.key);
}

TEST_F(ContainerRuntimeTest, KillReachesTheContainerWithSigtermAndRemovesIt) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(7,
                        "trap 'echo got TERM; exit 3' TERM; echo ready; "
                        "while true; do sleep 0.1; done");
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  EXPECT_TRUE(ContainerExists(l.key));
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(30), "preempted").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.exit_code, 3);  // the trap ran: SIGTERM reached the container's process
  EXPECT_EQ(end.message, "preempted");
  EXPECT_THAT(Log(*runtime, l.key, LogStream::kStdout), HasSubstr("got TERM"));
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, KillEndsAPlainSleepThroughTheInitProcess) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(14, "");
  l.shell = false;
  l.argv = {"sleep", "600"};  // as PID 1 without --init, it would ignore SIGTERM
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  WaitFor(
      *runtime, l.key, [&](const TaskStatus&) { return ContainerExists(l.key); },
      "the container to exist");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(30), "cancelled").ok());
  TaskStatus end = WaitForEnd(*runtime, l.key);  // the fake clock never reaches the grace
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.exit_code, 128 + SIGTERM);  // the engine's way of saying "ended by SIGTERM"
  EXPECT_EQ(end.message, "cancelled");
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, AContainerIgnoringSigtermIsKilledWhenTheGraceRunsOut) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(8, "trap '' TERM; echo ready; sleep 600");
  ASSERT_EQ(runtime->Start(l).state, ProcessState::kRunning);
  WaitForOutput(*runtime, l.key, "ready");
  ASSERT_TRUE(runtime->Kill(l.key, Seconds(10), "stopped").ok());
  runtime->Poll();
  clock_.Advance(Seconds(11));
  TaskStatus end = WaitForEnd(*runtime, l.key);
  EXPECT_EQ(end.state, ProcessState::kKilled);
  EXPECT_EQ(end.message, "stopped");
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, ARunningContainerTaskIsAdoptedByTheNextAgent) {
  TaskLaunch l = Launch(9, "echo ready; while [ ! -f go ]; do sleep 0.1; done; exit 4");
  pid_t pid = 0;
  {
    auto first = MakeRuntime();
    TaskStatus started = first->Start(l);
    ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
    pid = started.pid;
    WaitForOutput(*first, l.key, "ready");
  }  // the agent stops; the task does not
  auto second = MakeRuntime();
  std::vector<TaskStatus> adopted = second->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].pid, pid);
  EXPECT_TRUE(ContainerExists(l.key));
  std::ofstream(task_dir_ + "/go") << "";
  TaskStatus end = WaitForEnd(*second, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 4);
  EXPECT_FALSE(ContainerExists(l.key));
  EXPECT_TRUE(second->Forget(l.key).ok());
  EXPECT_FALSE(std::filesystem::exists(home_ + "/tasks/" + ToString(l.key)));
}

TEST_F(ContainerRuntimeTest, AContainerWhoseSupervisorDiedIsRemovedWhenFoundLost) {
  TaskLaunch l = Launch(10, "echo ready; sleep 600");
  {
    auto first = MakeRuntime();
    ASSERT_EQ(first->Start(l).state, ProcessState::kRunning);
    WaitForOutput(*first, l.key, "ready");
  }  // the agent stops; then the supervisor dies without a word
  const pid_t shim = TaskRecord(l.key)["shim_pid"].get<pid_t>();
  ASSERT_EQ(kill(shim, SIGKILL), 0);
  ASSERT_EQ(waitpid(shim, nullptr, 0), shim);  // this test process forked it
  EXPECT_TRUE(ContainerExists(l.key));
  auto second = MakeRuntime();
  std::vector<TaskStatus> adopted = second->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kLost);
  EXPECT_EQ(adopted[0].message, "lost: supervisor gone");
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, SetuidBinariesOfTheImageGiveTheTaskNoPrivileges) {
  if (TaskUid() == 0) GTEST_SKIP() << "needs a task user other than root (no user 'nobody')";
  const std::string uid = std::to_string(TaskUid());
  const std::string probe = "/suid/tac /proc/self/status | grep '^Uid:'";
  // The control: run without corral's options, the setuid binary does make the task user root
  // (effective uid 0), so the image can show what the options prevent.
  Result<EngineOutput> plain = RunEngineCommand(
      {suite->engine->cli.path, "run", "--rm", "--log-driver=none", "--network=host", "--user",
       uid + ":" + uid, "--", suite->setuid_image, "/bin/sh", "-c", probe},
      suite->engine->env, Seconds(60));
  ASSERT_TRUE(plain.ok()) << plain.status().ToString();
  ASSERT_THAT(plain->output, HasSubstr("Uid:\t" + uid + "\t0\t0\t0")) << plain->output;

  auto runtime = MakeRuntime();
  TaskLaunch l =
      Launch(15, probe + "; grep -E '^(Uid|CapEff|CapBnd|NoNewPrivs):' /proc/self/status");
  l.environment->image = suite->setuid_image;
  TaskStatus started = runtime->Start(l);
  ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
  TaskStatus end = WaitForEnd(*runtime, l.key);
  const std::string out = Log(*runtime, l.key, LogStream::kStdout);
  const std::string err = Log(*runtime, l.key, LogStream::kStderr);
  EXPECT_EQ(end.exit_code, 0) << err;
  // The setuid binary runs, but as the task user (busybox then refuses: "setresgid: Operation not
  // permitted"), and the task has no capabilities to gain.
  EXPECT_THAT(out, Not(HasSubstr("\t0\t0\t0"))) << out << err;
  EXPECT_THAT(out, HasSubstr("Uid:\t" + uid + "\t" + uid + "\t" + uid + "\t" + uid + "\n"));
  EXPECT_THAT(out, HasSubstr("CapEff:\t0000000000000000\n"));
  EXPECT_THAT(out, HasSubstr("CapBnd:\t0000000000000000\n"));
  EXPECT_THAT(out, HasSubstr("NoNewPrivs:\t1\n"));
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, AProcessLaunchWhoseHostSetupIsMissingRunsItsImageAndIsAdopted) {
  const std::string venv = "/nonexistent/corral-test-venv-" + std::to_string(getpid());
  TaskLaunch l = Launch(16,
                        "test -f /run/.containerenv && echo in-a-container; echo ready; "
                        "while [ ! -f go ]; do sleep 0.1; done; env; exit 5");
  l.environment = LaunchEnvironment{"torch", 2, "process", suite->image, venv, ""};
  const std::string note =
      "host prefix " + venv + " missing here: running image " + suite->image + " in a container";
  {
    auto first = MakeRuntime();
    TaskStatus started = first->Start(l);
    ASSERT_EQ(started.state, ProcessState::kRunning) << started.message;
    EXPECT_EQ(started.message, note);
    WaitForOutput(*first, l.key, "ready");
  }  // the agent stops; the task does not
  EXPECT_EQ(TaskRecord(l.key)["launch"]["environment"]["runtime"], "container");
  auto second = MakeRuntime();
  std::vector<TaskStatus> adopted = second->Poll();
  ASSERT_EQ(adopted.size(), 1u);
  EXPECT_EQ(adopted[0].state, ProcessState::kRunning);
  EXPECT_EQ(adopted[0].message, note);
  EXPECT_TRUE(ContainerExists(l.key));
  std::ofstream(task_dir_ + "/go") << "";
  TaskStatus end = WaitForEnd(*second, l.key);
  EXPECT_EQ(end.state, ProcessState::kExited);
  EXPECT_EQ(end.exit_code, 5);
  EXPECT_EQ(end.message, note);
  const std::string out = Log(*second, l.key, LogStream::kStdout);
  EXPECT_THAT(out, HasSubstr("in-a-container\nready\n"));
  EXPECT_THAT(out, HasSubstr("\nCORRAL_ENVIRONMENT=torch@2\n"));
  EXPECT_THAT(out, Not(HasSubstr("VIRTUAL_ENV")));
  EXPECT_FALSE(ContainerExists(l.key));
}

TEST_F(ContainerRuntimeTest, WithoutAnEngineAContainerLaunchFailsToStart) {
  ProcessRuntimeOptions o = Options();
  o.container_engine.reset();
  auto runtime = ProcessRuntime::Create(o, &clock_);
  ASSERT_TRUE(runtime.ok()) << runtime.status().ToString();
  TaskStatus s = (*runtime)->Start(Launch(11, "true"));
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_EQ(s.message, "this node has no container engine (corral agent --container-engine)");
}

TEST_F(ContainerRuntimeTest, ALaunchTheEngineCannotTakeFailsToStartNamingTheField) {
  auto runtime = MakeRuntime();
  TaskLaunch l = Launch(12, "true");
  l.environment->image = "--privileged";
  TaskStatus s = runtime->Start(l);
  EXPECT_EQ(s.state, ProcessState::kFailedToStart);
  EXPECT_THAT(s.message, HasSubstr("field 'environment.image': '--privileged' is not an image"));
}

}  // namespace
}  // namespace corral::agent
