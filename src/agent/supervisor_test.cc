// Which binary supervises a task: the agent's choice (TaskSupervisor) and StartShim's fallback
// when the chosen supervisor cannot be started or is of another build (ShimPlan::build).
#include <fcntl.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "agent/agent_process.h"
#include "agent/shim.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;

class SupervisorTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-supervisor-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  void WriteFile(const std::string& path, const std::string& text, mode_t mode) {
    std::ofstream(path) << text;
    ASSERT_EQ(chmod(path.c_str(), mode), 0);
  }

  // A task that leaves a marker file: proof that it ran.
  ShimPlan MarkerPlan(const std::string& supervisor) {
    ShimPlan plan;
    plan.supervisor = supervisor;
    plan.executable = "/bin/sh";
    plan.argv = {"sh", "-c", "echo ran >> " + Marker()};
    plan.env = {"PATH=/usr/bin:/bin"};
    plan.workdir = root_;
    plan.stdout_path = root_ + "/stdout.log";
    plan.stderr_path = root_ + "/stderr.log";
    plan.exit_path = root_ + "/exit.json";
    return plan;
  }
  std::string Marker() const { return root_ + "/ran"; }

  // Starts `plan`, recording every supervisor pid StartShim hands to before_task, and waits for
  // the supervisor that ran the task to end.
  Result<ShimStart> Start(const ShimPlan& plan) {
    Result<ShimStart> start = StartShim(plan, [this](pid_t shim) {
      shims_.push_back(shim);
      return Status::Ok();
    });
    if (start.ok()) {
      while (waitpid(start->shim_pid, nullptr, 0) < 0 && errno == EINTR) {
      }
    }
    return start;
  }
  int Runs() const {
    std::ifstream in(Marker());
    int lines = 0;
    for (std::string line; std::getline(in, line);) ++lines;
    return lines;
  }

  // A file `contents` (mode `mode`) as the plan's supervisor, which cannot run: the task runs
  // once, under the fallback.
  void ExpectTheFallbackRunsTheTaskInsteadOf(const std::string& contents, mode_t mode) {
    const std::string supervisor = root_ + "/corral-supervise";
    WriteFile(supervisor, contents, mode);
    ShimPlan plan = MarkerPlan(supervisor);
    plan.fallback_supervisor = CORRAL_SUPERVISOR;
    Result<ShimStart> start = Start(plan);
    ASSERT_TRUE(start.ok()) << start.status().ToString();
    EXPECT_EQ(start->supervisor, CORRAL_SUPERVISOR);
    EXPECT_EQ(Runs(), 1);
  }

  std::string root_;
  std::vector<pid_t> shims_;
};

TEST_F(SupervisorTest, ThePlansSupervisorRunsTheTaskWhenItIsOfThisBuild) {
  ShimPlan plan = MarkerPlan(CORRAL_SUPERVISOR);
  plan.fallback_supervisor = root_ + "/never-started";
  Result<ShimStart> start = Start(plan);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->supervisor, CORRAL_SUPERVISOR);
  EXPECT_EQ(start->failed_step, ShimStep::kNone);
  EXPECT_EQ(shims_.size(), 1u);
  EXPECT_EQ(Runs(), 1);
}

TEST_F(SupervisorTest, AMissingSupervisorIsReplacedByTheFallback) {
  ShimPlan plan = MarkerPlan(root_ + "/corral-supervise");  // ENOENT
  plan.fallback_supervisor = CORRAL_SUPERVISOR;
  Result<ShimStart> start = Start(plan);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->supervisor, CORRAL_SUPERVISOR);
  EXPECT_EQ(shims_.size(), 1u);  // nothing was started under the missing one
  EXPECT_EQ(Runs(), 1);
}

TEST_F(SupervisorTest, ANonExecutableSupervisorIsReplacedByTheFallback) {
  ExpectTheFallbackRunsTheTaskInsteadOf("not a program\n", 0644);  // EACCES
}

// A supervisor of another build (here one that exits as soon as it reads anything, as an older
// supervisor would on a plan it cannot parse) never accepts the plan: the task runs once, under
// the fallback, and before_task heard of both supervisors.
TEST_F(SupervisorTest, ASupervisorThatRefusesThePlanIsReplacedByTheFallbackAndTheTaskRunsOnce) {
  const std::string foreign = root_ + "/corral-supervise";
  // Reads the whole plan (its size, then the body) before exiting, as a supervisor would.
  WriteFile(foreign,
            "#!/bin/sh\nn=$(head -c 4 <&4 | od -An -tu4)\nhead -c $n <&4 >/dev/null\nexit 3\n",
            0755);
  ShimPlan plan = MarkerPlan(foreign);
  plan.fallback_supervisor = CORRAL_SUPERVISOR;
  Result<ShimStart> start = Start(plan);
  ASSERT_TRUE(start.ok()) << start.status().ToString();
  EXPECT_EQ(start->supervisor, CORRAL_SUPERVISOR);
  ASSERT_EQ(shims_.size(), 2u);
  EXPECT_NE(shims_[0], shims_[1]);
  EXPECT_EQ(start->shim_pid, shims_[1]);
  EXPECT_EQ(Runs(), 1);
  // The refused supervisor was reaped.
  EXPECT_EQ(waitpid(shims_[0], nullptr, WNOHANG), -1);
  EXPECT_EQ(errno, ECHILD);
}

TEST_F(SupervisorTest, AFileThatIsNotAProgramIsReplacedByTheFallback) {
  ExpectTheFallbackRunsTheTaskInsteadOf(std::string("\x7f"
                                                    "ELF truncated",
                                                    12),
                                        0755);  // ENOEXEC
}

// The real supervisor refuses a plan written by another build, before starting anything.
TEST_F(SupervisorTest, ThisBuildsSupervisorRefusesAPlanOfAnotherBuild) {
  ShimPlan plan = MarkerPlan(CORRAL_SUPERVISOR);
  plan.build = "0.0.0 0123456789ab";
  Result<ShimStart> refused = Start(plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(), HasSubstr("did not accept the plan"));
  // Its exit code, in the wait status StartShim names.
  EXPECT_THAT(refused.status().message(),
              HasSubstr("wait status " + std::to_string(kShimRefusedPlan << 8)));
  EXPECT_EQ(Runs(), 0);
}

TEST_F(SupervisorTest, WhenTheFallbackFailsTooTheErrorNamesBoth) {
  ShimPlan plan = MarkerPlan(root_ + "/first-missing");
  plan.fallback_supervisor = root_ + "/second-missing";
  Result<ShimStart> refused = Start(plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(root_ + "/first-missing"));
  EXPECT_THAT(refused.status().message(), HasSubstr(root_ + "/second-missing"));
  EXPECT_EQ(Runs(), 0);
}

TEST_F(SupervisorTest, WithoutAFallbackAnUnusableSupervisorFailsTheStartNamingIt) {
  ShimPlan plan = MarkerPlan(root_ + "/missing-supervisor");
  Result<ShimStart> refused = Start(plan);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr(root_ + "/missing-supervisor"));
  EXPECT_TRUE(shims_.empty());
  EXPECT_EQ(Runs(), 0);
}

TEST_F(SupervisorTest, TheAgentPicksCorralSuperviseBesideItsBinaryOnlyWhenItCanRunIt) {
  const std::filesystem::path self = root_ + "/corral-daemon";
  const std::string beside = root_ + "/corral-supervise";
  EXPECT_EQ(TaskSupervisor(self), kAgentBinary) << "missing";
  WriteFile(beside, "#!/bin/sh\n", 0644);
  EXPECT_EQ(TaskSupervisor(self), kAgentBinary) << "not executable";
  ASSERT_EQ(chmod(beside.c_str(), 0755), 0);
  EXPECT_EQ(TaskSupervisor(self), beside) << "present";
  EXPECT_EQ(TaskSupervisor(std::filesystem::path()), kAgentBinary) << "own binary unknown";
  std::filesystem::remove(beside);
  std::filesystem::create_directory(beside);
  EXPECT_EQ(TaskSupervisor(self), kAgentBinary) << "a folder of that name";
}

}  // namespace
}  // namespace corral::agent
