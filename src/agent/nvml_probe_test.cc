#include "agent/nvml_probe.h"

#include <dlfcn.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>

namespace corral::agent {
namespace {

using ::testing::HasSubstr;

// Loads the stand-in library (fake_nvml_library.cc) pretending to be `machine`.
Result<std::unique_ptr<NvmlProbe>> FakeNvml(const char* machine) {
  setenv("FAKE_NVML_MACHINE", machine, 1);
  return NvmlProbe::Create(CORRAL_FAKE_NVML_LIBRARY);
}

TEST(NvmlProbeTest, WithoutTheDriverLibraryTheErrorSaysWhatToDo) {
  if (void* real = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL); real != nullptr) {
    dlclose(real);
    GTEST_SKIP() << "this machine has an NVIDIA driver";
  }
  auto probe = NvmlProbe::Create();
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(probe.status().message(),
              HasSubstr("libnvidia-ml.so.1 not found: no NVIDIA driver; use --fake-gpus"));
}

TEST(NvmlProbeTest, LibraryWithoutNvmlSymbolsIsRejected) {
  auto probe = NvmlProbe::Create("libm.so.6");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(probe.status().message(), HasSubstr("libm.so.6: missing symbol nvmlInit_v2"));
}

TEST(NvmlProbeTest, InitFailureIsReportedWithNvmlsText) {
  auto probe = FakeNvml("no_driver");
  ASSERT_FALSE(probe.ok());
  EXPECT_EQ(probe.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(probe.status().message(), HasSubstr("nvmlInit_v2: Driver Not Loaded"));
}

TEST(NvmlProbeTest, NvlinkBridgesMakeOneDomainPerPair) {
  auto probe = FakeNvml("pairs");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = (*probe)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->model, "A100-40GB");
  ASSERT_EQ(inv->gpus.size(), 4u);
  std::vector<int> domains;
  for (const model::Gpu& g : inv->gpus) domains.push_back(g.nvlink_domain);
  EXPECT_EQ(domains, (std::vector<int>{0, 0, 1, 1}));
  EXPECT_EQ(inv->gpus[2].index, 2);
  EXPECT_EQ(inv->gpus[2].uuid, "GPU-00000000-0000-0000-0000-000000000002");
  EXPECT_EQ(inv->gpus[2].memory, MemoryMib(40960));
}

TEST(NvmlProbeTest, GpusOnCommonNvswitchesShareADomain) {
  auto probe = FakeNvml("switch");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = (*probe)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->model, "H100");
  ASSERT_EQ(inv->gpus.size(), 8u);
  for (const model::Gpu& g : inv->gpus) EXPECT_EQ(g.nvlink_domain, 0);
}

TEST(NvmlProbeTest, WithoutNvlinkEachGpuIsItsOwnDomain) {
  auto probe = FakeNvml("pcie");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = (*probe)->Discover();
  ASSERT_TRUE(inv.ok()) << inv.status().ToString();
  EXPECT_EQ(inv->model, "T4");
  ASSERT_EQ(inv->gpus.size(), 2u);
  EXPECT_EQ(inv->gpus[0].nvlink_domain, 0);
  EXPECT_EQ(inv->gpus[1].nvlink_domain, 1);
}

TEST(NvmlProbeTest, MixedModelsAreRejected) {
  auto probe = FakeNvml("mixed");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = (*probe)->Discover();
  ASSERT_FALSE(inv.ok());
  EXPECT_EQ(inv.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(inv.status().message(),
              HasSubstr("GPU 0 is 'T4', GPU 1 is 'V100M32'; corral needs one model per node"));
}

TEST(NvmlProbeTest, SamplesReportWhatTheDeviceSupports) {
  auto pairs = FakeNvml("pairs");
  ASSERT_TRUE(pairs.ok()) << pairs.status().ToString();
  auto samples = (*pairs)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  ASSERT_EQ(samples->size(), 4u);
  const GpuSample& s = (*samples)[3];
  EXPECT_EQ(s.index, 3);
  EXPECT_EQ(s.gpu_utilization_percent, 30);
  EXPECT_EQ(s.memory_utilization_percent, 5);
  EXPECT_EQ(s.memory_used, MemoryMib(3072));
  EXPECT_EQ(s.power_milliwatts, 250000);
  EXPECT_EQ(s.temperature_celsius, 43);
  pairs->reset();

  auto pcie = FakeNvml("pcie");
  ASSERT_TRUE(pcie.ok());
  auto t4 = (*pcie)->Sample();
  ASSERT_TRUE(t4.ok());
  EXPECT_FALSE((*t4)[0].power_milliwatts.has_value());  // NOT_SUPPORTED on this device
  EXPECT_EQ((*t4)[0].temperature_celsius, 40);
}

TEST(NvmlProbeTest, SamplesListTheComputeProcessesOnEachGpu) {
  auto machine = FakeNvml("switch");  // GPU i runs i processes, pids 1000*i + k
  ASSERT_TRUE(machine.ok()) << machine.status().ToString();
  auto samples = (*machine)->Sample();
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_TRUE((*samples)[0].processes.empty());
  // 7 processes: more than the first buffer guess would hold if it were smaller, all listed.
  const std::vector<GpuProcess>& p = (*samples)[7].processes;
  ASSERT_EQ(p.size(), 7u);
  EXPECT_EQ(p[0].pid, 7001);
  EXPECT_EQ(p[0].memory_used, MemoryMib(1024));
  EXPECT_EQ(p[5].memory_used, MemoryMib(6 * 1024));
  EXPECT_FALSE(p[6].memory_used.has_value());  // NVML_VALUE_NOT_AVAILABLE
}

}  // namespace
}  // namespace corral::agent
