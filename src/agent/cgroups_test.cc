// CgroupManager against prepared directories standing in for cgroupfs (the control files exist
// beforehand, as the kernel would make them), and against this machine's real hierarchies.
#include "agent/cgroups.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;

class FakeCgroupfsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-cgroup-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& content) {
    std::filesystem::path p = root_ + "/" + relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }
  std::string Read(const std::string& relative) {
    auto text = ReadFile(root_ + "/" + relative);
    return text.ok() ? *text : "<" + text.status().message() + ">";
  }

  std::string root_;
};

TEST_F(FakeCgroupfsTest, V2GroupGetsMemoryMaxAndCpuMax) {
  Write("cgroup.controllers", "cpuset cpu io memory hugetlb pids rdma\n");
  Write("cgroup.subtree_control", "");
  Write("corral/cgroup.subtree_control", "");
  for (const char* f : {"memory.max", "memory.swap.max", "cpu.max", "cgroup.procs"}) {
    Write(std::string("corral/12-1/") + f, "");
  }
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  ASSERT_EQ(m.version(), CgroupVersion::kV2) << m.unavailable_reason();
  EXPECT_EQ(Read("corral/cgroup.subtree_control"), "+memory +cpu");
  auto group = m.Create("12-1", {CpuMilli(2500), MemoryMib(64)});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->note, "");
  EXPECT_EQ(group->dirs, std::vector<std::string>{root_ + "/corral/12-1"});
  EXPECT_EQ(group->memory_dir, root_ + "/corral/12-1");
  EXPECT_EQ(Read("corral/12-1/memory.max"), "67108864");
  EXPECT_EQ(Read("corral/12-1/memory.swap.max"), "0");
  EXPECT_EQ(Read("corral/12-1/cpu.max"), "250000 100000");
  EXPECT_EQ(CgroupManager::ProcsFiles(*group),
            std::vector<std::string>{root_ + "/corral/12-1/cgroup.procs"});
}

TEST_F(FakeCgroupfsTest, V2WithoutMemoryOrCpuIsUnavailable) {
  Write("cgroup.controllers", "io pids\n");
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  EXPECT_EQ(m.version(), CgroupVersion::kNone);
  EXPECT_THAT(m.unavailable_reason(), HasSubstr("neither the memory nor the cpu controller"));
  EXPECT_EQ(m.Create("1-1", {}).status().code(), StatusCode::kFailedPrecondition);
}

TEST_F(FakeCgroupfsTest, V1GroupsInTheMemoryAndCpuHierarchies) {
  Write("memory/memory.limit_in_bytes", "9223372036854771712");
  Write("cpu/cpu.cfs_quota_us", "-1");
  for (const char* f : {"memory.limit_in_bytes", "memory.memsw.limit_in_bytes", "cgroup.procs"}) {
    Write(std::string("memory/corral/3-2/") + f, "");
  }
  for (const char* f : {"cpu.cfs_quota_us", "cpu.cfs_period_us", "cgroup.procs"}) {
    Write(std::string("cpu/corral/3-2/") + f, "");
  }
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  ASSERT_EQ(m.version(), CgroupVersion::kV1) << m.unavailable_reason();
  auto group = m.Create("3-2", {CpuMilli(5), MemoryMib(100)});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->note, "");
  EXPECT_EQ(group->dirs,
            (std::vector<std::string>{root_ + "/memory/corral/3-2", root_ + "/cpu/corral/3-2"}));
  EXPECT_EQ(Read("memory/corral/3-2/memory.limit_in_bytes"), "104857600");
  EXPECT_EQ(Read("memory/corral/3-2/memory.memsw.limit_in_bytes"), "104857600");
  EXPECT_EQ(Read("cpu/corral/3-2/cpu.cfs_period_us"), "100000");
  EXPECT_EQ(Read("cpu/corral/3-2/cpu.cfs_quota_us"), "1000");  // the kernel's minimum
}

TEST_F(FakeCgroupfsTest, UnlimitedWritesNoLimitFiles) {
  Write("memory/memory.limit_in_bytes", "9223372036854771712");
  Write("memory/corral/1-1/memory.limit_in_bytes", "untouched");
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  ASSERT_EQ(m.version(), CgroupVersion::kV1);
  auto group = m.Create("1-1", {});
  ASSERT_TRUE(group.ok());
  EXPECT_EQ(Read("memory/corral/1-1/memory.limit_in_bytes"), "untouched");
}

TEST_F(FakeCgroupfsTest, LimitsThatCannotBeAppliedAreNoted) {
  Write("memory/memory.limit_in_bytes", "9223372036854771712");  // no cpu hierarchy
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  ASSERT_EQ(m.version(), CgroupVersion::kV1);
  // The group dir is made, but memory.limit_in_bytes does not exist in it (a plain dir).
  auto group = m.Create("1-1", {CpuMilli(1000), MemoryMib(64)});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_THAT(group->note, HasSubstr("memory limit not applied: " + root_ +
                                     "/memory/corral/1-1/memory.limit_in_bytes"));
  EXPECT_THAT(group->note, HasSubstr("cpu limit not applied: no writable cpu hierarchy"));
}

TEST_F(FakeCgroupfsTest, NothingMountedIsUnavailable) {
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  EXPECT_EQ(m.version(), CgroupVersion::kNone);
  EXPECT_THAT(m.unavailable_reason(), HasSubstr("no cgroup v1 memory or cpu hierarchy"));
}

TEST_F(FakeCgroupfsTest, RejectsNamesThatAreNotOneComponent) {
  Write("memory/memory.limit_in_bytes", "9223372036854771712");
  CgroupManager m = CgroupManager::Detect(root_, "corral");
  for (const char* name : {"", "..", "a/b", "x y"}) {
    EXPECT_EQ(m.Create(name, {}).status().code(), StatusCode::kInvalidArgument) << name;
  }
}

TEST_F(FakeCgroupfsTest, ReadsOomKills) {
  Write("v1/memory.oom_control", "oom_kill_disable 0\nunder_oom 0\noom_kill 2\n");
  Write("v2/memory.events", "low 0\nhigh 0\nmax 7\noom 1\noom_kill 1\noom_group_kill 0\n");
  TaskCgroup v1{{root_ + "/v1"}, root_ + "/v1", ""};
  TaskCgroup v2{{root_ + "/v2"}, root_ + "/v2", ""};
  TaskCgroup none{{root_ + "/v1"}, "", ""};
  EXPECT_EQ(CgroupManager::OomKills(v1), 2);
  EXPECT_EQ(CgroupManager::OomKills(v2), 1);
  EXPECT_EQ(CgroupManager::OomKills(none), std::nullopt);
}

TEST_F(FakeCgroupfsTest, V2DelegatesTheControllersAtEveryLevelOfANestedParent) {
  Write("cgroup.controllers", "cpu memory\n");
  Write("cgroup.subtree_control", "");
  const std::string parent = AgentCgroupParent("0123456789abcdef", "node-a");
  EXPECT_EQ(parent, "corral/0123456789abcdef/node-a");
  for (const std::string& level :
       std::vector<std::string>{"corral", "corral/0123456789abcdef", parent}) {
    Write(level + "/cgroup.subtree_control", "");
  }
  Write(parent + "/3-1/memory.max", "");
  CgroupManager m = CgroupManager::Detect(root_, parent);
  ASSERT_EQ(m.version(), CgroupVersion::kV2) << m.unavailable_reason();
  for (const std::string& level :
       std::vector<std::string>{"corral", "corral/0123456789abcdef", parent}) {
    EXPECT_EQ(Read(level + "/cgroup.subtree_control"), "+memory +cpu") << level;
  }
  auto group = m.Create("3-1", {CpuMilli(0), MemoryMib(32)});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->dirs, std::vector<std::string>{root_ + "/" + parent + "/3-1"});
  EXPECT_EQ(Read(parent + "/3-1/memory.max"), "33554432");
}

TEST_F(FakeCgroupfsTest, AParentThatLeavesItsPlaceIsRefused) {
  Write("memory/memory.limit_in_bytes", "");
  for (const std::string parent : {"corral/../x", "corral//x", "/corral", "corral/."}) {
    CgroupManager m = CgroupManager::Detect(root_, parent);
    EXPECT_EQ(m.version(), CgroupVersion::kNone) << parent;
    EXPECT_THAT(m.unavailable_reason(), HasSubstr("cgroup parent")) << parent;
  }
  EXPECT_FALSE(std::filesystem::exists(root_ + "/x"));
}

// Two agents (two clusters, the same node name and task key, as two `corral dev` on one host
// have): killing one task's group leaves the other's process alone.
TEST(RealCgroupsTest, AgentsOfTwoClustersNeverShareATaskGroup) {
  const std::string top = "corral-test-" + std::to_string(getpid());
  CgroupManager a = CgroupManager::Detect("/sys/fs/cgroup", top + "/aaaaaaaaaaaaaaaa/dev");
  CgroupManager b = CgroupManager::Detect("/sys/fs/cgroup", top + "/bbbbbbbbbbbbbbbb/dev");
  if (a.version() == CgroupVersion::kNone) {
    GTEST_SKIP() << "cgroups not usable here: " << a.unavailable_reason();
  }
  ASSERT_NE(b.version(), CgroupVersion::kNone) << b.unavailable_reason();
  auto group_a = a.Create("1-1", {});
  auto group_b = b.Create("1-1", {});
  ASSERT_TRUE(group_a.ok() && group_b.ok());
  EXPECT_NE(group_a->dirs, group_b->dirs);
  // A process in each group.
  auto start_in = [](const TaskCgroup& group) {
    pid_t pid = fork();
    if (pid == 0) {
      for (const std::string& procs : CgroupManager::ProcsFiles(group)) {
        (void)WriteExisting(procs, std::to_string(getpid()));
      }
      execl("/bin/sleep", "sleep", "60", static_cast<char*>(nullptr));
      _exit(127);
    }
    return pid;
  };
  const pid_t in_a = start_in(*group_a), in_b = start_in(*group_b);
  ASSERT_GT(in_a, 0);
  ASSERT_GT(in_b, 0);
  // Both joined before the kill (the child writes its pid, then execs).
  auto joined = [](const TaskCgroup& group, pid_t pid) {
    for (int i = 0; i < 2000; ++i) {
      auto procs = ReadFile(CgroupManager::ProcsFiles(group)[0]);
      if (procs.ok() && procs->find(std::to_string(pid)) != std::string::npos) return true;
      usleep(1000);
    }
    return false;
  };
  ASSERT_TRUE(joined(*group_a, in_a));
  ASSERT_TRUE(joined(*group_b, in_b));
  CgroupManager::KillAll(*group_a);
  int status = 0;
  ASSERT_EQ(waitpid(in_a, &status, 0), in_a);
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL);
  EXPECT_EQ(waitpid(in_b, &status, WNOHANG), 0) << "the other cluster's task was killed";
  kill(in_b, SIGKILL);
  waitpid(in_b, &status, 0);
  EXPECT_TRUE(CgroupManager::Remove(*group_a).ok());
  EXPECT_TRUE(CgroupManager::Remove(*group_b).ok());
  // Removing one agent's parent keeps the other's (and their common ancestors).
  EXPECT_TRUE(a.RemoveParent().ok());
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/memory/" + top + "/aaaaaaaaaaaaaaaa"));
  EXPECT_TRUE(std::filesystem::exists("/sys/fs/cgroup/memory/" + top + "/bbbbbbbbbbbbbbbb/dev") ||
              b.version() == CgroupVersion::kV2);
  EXPECT_TRUE(b.RemoveParent().ok());
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/memory/" + top));
  EXPECT_FALSE(std::filesystem::exists("/sys/fs/cgroup/" + top));
}

TEST(RealCgroupsTest, CreateAndRemoveOnThisMachine) {
  const std::string parent = "corral-test-" + std::to_string(getpid());
  CgroupManager m = CgroupManager::Detect("/sys/fs/cgroup", parent);
  if (m.version() == CgroupVersion::kNone) {
    GTEST_SKIP() << "cgroups not usable here: " << m.unavailable_reason();
  }
  auto group = m.Create("5-1", {CpuMilli(1500), MemoryMib(256)});
  ASSERT_TRUE(group.ok()) << group.status().ToString();
  EXPECT_EQ(group->note, "");
  for (const std::string& dir : group->dirs) EXPECT_TRUE(std::filesystem::is_directory(dir));
  EXPECT_EQ(CgroupManager::OomKills(*group).value_or(0), 0);
  EXPECT_TRUE(CgroupManager::Remove(*group).ok());
  for (const std::string& dir : group->dirs) EXPECT_FALSE(std::filesystem::exists(dir));
  EXPECT_TRUE(CgroupManager::Remove(*group).ok());  // already gone
  EXPECT_TRUE(m.RemoveParent().ok());
}

}  // namespace
}  // namespace corral::agent
