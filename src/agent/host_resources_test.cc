#include "agent/host_resources.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

namespace corral::agent {
namespace {

TEST(HostResourcesTest, ParsesMemTotal) {
  auto mib = ParseMemTotal("MemFree: 1 kB\nMemTotal:       24683948 kB\nSwapTotal: 0 kB\n");
  ASSERT_TRUE(mib.ok());
  EXPECT_EQ(*mib, MemoryMib(24105));
  EXPECT_FALSE(ParseMemTotal("MemFree: 1 kB\n").ok());
  EXPECT_THAT(ParseMemTotal("MemTotal: 12 MB\n").status().message(),
              ::testing::HasSubstr("not in kB"));
}

TEST(HostResourcesTest, ParsesCpuMax) {
  EXPECT_EQ(ParseCpuMax("150000 100000\n"), CpuMilli(1500));
  EXPECT_EQ(ParseCpuMax("50000 100000"), CpuMilli(500));
  EXPECT_EQ(ParseCpuMax("max 100000\n"), std::nullopt);
  EXPECT_EQ(ParseCpuMax(""), std::nullopt);
}

TEST(HostResourcesTest, DeclaredCpusAndMemoryReplaceTheDetectedOnes) {
  const HostResources detected{"h", CpuMilli(16000), MemoryMib(64000)};
  // Nothing declared, real GPUs: what was detected.
  HostResources offered = Offered(detected, DeclareResources(0, 0, 0));
  EXPECT_EQ(offered.cpu, CpuMilli(16000));
  EXPECT_EQ(offered.memory, MemoryMib(64000));
  EXPECT_EQ(offered.hostname, "h");
  // Below what was detected (some kept for the system), and above it.
  offered = Offered(detected, DeclareResources(12, 1000, 0));
  EXPECT_EQ(offered.cpu, CpuMilli(12000));
  EXPECT_EQ(offered.memory, MemoryMib(1000));
  EXPECT_EQ(Offered(detected, DeclareResources(128, 0, 8)).cpu, CpuMilli(128000));
  EXPECT_EQ(Offered(detected, DeclareResources(2, 0, 8)).cpu, CpuMilli(2000));  // --cpus wins
}

TEST(HostResourcesTest, AFakeGpuNodeOffersAtLeastEightCpusPerGpu) {
  EXPECT_EQ(Offered({"h", CpuMilli(2000), MemoryMib(1)}, DeclareResources(0, 0, 8)).cpu,
            CpuMilli(64000));
  EXPECT_EQ(Offered({"h", CpuMilli(96000), MemoryMib(1)}, DeclareResources(0, 0, 8)).cpu,
            CpuMilli(96000));  // more when the machine has more
  EXPECT_EQ(Offered({"h", CpuMilli(2000), MemoryMib(1)}, DeclareResources(0, 0, 0)).cpu,
            CpuMilli(2000));
}

class FakeHostTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-host-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    paths_.proc = root_ + "/proc";
    paths_.cgroup = root_ + "/cgroup";
    Write("proc/meminfo", "MemTotal:       2097152 kB\n");  // 2048 MiB
  }
  void TearDown() override { std::filesystem::remove_all(root_); }

  void Write(const std::string& relative, const std::string& content) {
    std::filesystem::path p = root_ + "/" + relative;
    std::filesystem::create_directories(p.parent_path());
    std::ofstream(p) << content;
  }

  static CpuMilli OnlineCpus() { return CpuMilli(sysconf(_SC_NPROCESSORS_ONLN) * 1000); }

  std::string root_;
  HostPaths paths_;
};

TEST_F(FakeHostTest, NoCgroupLimitsMeansTheWholeMachine) {
  Write("proc/self/cgroup", "0::/\n");
  auto host = DetectHostResources(paths_);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->memory, MemoryMib(2048));
  EXPECT_EQ(host->cpu, OnlineCpus());
  EXPECT_FALSE(host->hostname.empty());
}

TEST_F(FakeHostTest, CgroupV1LimitsOnAnAncestorLowerTheResources) {
  Write("proc/self/cgroup", "4:memory:/job/agent\n1:cpu,cpuacct:/job/agent\n");
  Write("cgroup/memory/job/memory.limit_in_bytes", "1073741824\n");                 // 1024 MiB
  Write("cgroup/memory/job/agent/memory.limit_in_bytes", "9223372036854771712\n");  // none
  Write("cgroup/cpu,cpuacct/job/agent/cpu.cfs_quota_us", "50000\n");
  Write("cgroup/cpu,cpuacct/job/agent/cpu.cfs_period_us", "100000\n");
  Write("cgroup/cpu,cpuacct/cpu.cfs_quota_us", "-1\n");
  Write("cgroup/cpu,cpuacct/cpu.cfs_period_us", "100000\n");
  auto host = DetectHostResources(paths_);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->memory, MemoryMib(1024));
  EXPECT_EQ(host->cpu, CpuMilli(500));
}

TEST_F(FakeHostTest, CgroupV2Limits) {
  Write("proc/self/cgroup", "0::/system.slice/corral.service\n");
  Write("cgroup/system.slice/corral.service/cpu.max", "max 100000\n");
  Write("cgroup/system.slice/cpu.max", "150000 100000\n");
  Write("cgroup/system.slice/corral.service/memory.max", "536870912\n");
  auto host = DetectHostResources(paths_);
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_EQ(host->memory, MemoryMib(512));
  EXPECT_EQ(host->cpu, std::min(OnlineCpus(), CpuMilli(1500)));
}

TEST_F(FakeHostTest, MissingMeminfoIsAnError) {
  std::filesystem::remove(root_ + "/proc/meminfo");
  auto host = DetectHostResources(paths_);
  ASSERT_FALSE(host.ok());
  EXPECT_THAT(host.status().message(), ::testing::HasSubstr("meminfo"));
}

TEST(HostResourcesRealTest, ThisMachine) {
  auto host = DetectHostResources();
  ASSERT_TRUE(host.ok()) << host.status().ToString();
  EXPECT_GT(host->cpu, CpuMilli(0));
  EXPECT_LE(host->cpu, CpuMilli(sysconf(_SC_NPROCESSORS_ONLN) * 1000));
  EXPECT_GT(host->memory, MemoryMib(0));
  char name[256] = {};
  gethostname(name, sizeof(name) - 1);
  EXPECT_EQ(host->hostname, name);
}

}  // namespace
}  // namespace corral::agent
