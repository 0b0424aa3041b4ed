#include "agent/fake_probe.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::agent {
namespace {

using ::testing::HasSubstr;

TEST(FakeProbeTest, OneGroupIsOneNvlinkDomain) {
  auto probe = FakeProbe::Create("8xA100-80GB", "gpu-07");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = probe->Discover();
  ASSERT_TRUE(inv.ok());
  EXPECT_EQ(inv->model, "A100-80GB");
  ASSERT_EQ(inv->gpus.size(), 8u);
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(inv->gpus[i].index, i);
    EXPECT_EQ(inv->gpus[i].uuid, "GPU-fake-gpu-07-" + std::to_string(i));
    EXPECT_EQ(inv->gpus[i].memory, MemoryMib(81920));
    EXPECT_EQ(inv->gpus[i].nvlink_domain, 0);
  }
}

TEST(FakeProbeTest, GroupsAreSeparateDomainsWithRunningIndices) {
  auto probe = FakeProbe::Create("4xV100M32,4xV100M32", "n1");
  ASSERT_TRUE(probe.ok()) << probe.status().ToString();
  auto inv = *probe->Discover();
  ASSERT_EQ(inv.gpus.size(), 8u);
  EXPECT_EQ(inv.gpus[3].nvlink_domain, 0);
  EXPECT_EQ(inv.gpus[4].nvlink_domain, 1);
  EXPECT_EQ(inv.gpus[7].index, 7);
  EXPECT_EQ(inv.gpus[7].uuid, "GPU-fake-n1-7");
  EXPECT_EQ(inv.gpus[0].memory, MemoryMib(32768));
}

TEST(FakeProbeTest, MemoryComesFromTheKnownModelTable) {
  const std::pair<const char*, int64_t> cases[] = {
      {"A100-80GB", 81920}, {"A100-40GB", 40960}, {"H100", 81920}, {"H200", 143771},
      {"V100", 16384},      {"V100M32", 32768},   {"T4", 15360},   {"G2", 16384},
  };
  for (const auto& [model, mib] : cases) {
    auto probe = FakeProbe::Create(std::string("1x") + model, "h");
    ASSERT_TRUE(probe.ok()) << model;
    EXPECT_EQ(probe->Discover()->gpus[0].memory, MemoryMib(mib)) << model;
  }
}

TEST(FakeProbeTest, EmptySpecIsANodeWithoutGpus) {
  auto probe = FakeProbe::Create("", "h");
  ASSERT_TRUE(probe.ok());
  EXPECT_EQ(probe->Discover()->model, "");
  EXPECT_TRUE(probe->Discover()->gpus.empty());
  EXPECT_TRUE(probe->Sample()->empty());
}

TEST(FakeProbeTest, ErrorsNameTheBadGroup) {
  const std::pair<const char*, const char*> cases[] = {
      {"A100", "group 1 ('A100'): expected <count>x<model>"},
      {"8x", "group 1 ('8x'): model must not be empty"},
      {"xT4", "group 1 ('xT4'): count must not be empty"},
      {"0xT4", "count must be 1..64, got 0"},
      {"65xT4", "count must be 1..64, got 65"},
      {"99999999999999999999xT4", "count must be 1..64"},
      {"2.5xT4", "count '2.5' is not a number"},
      {"4xT4,", "group 2 (''): expected <count>x<model>"},
      {"4xT4,4xA100-80GB",
       "group 2 ('4xA100-80GB'): all GPUs of a node must have one model, got 'T4' and "
       "'A100-80GB'"},
      {"2xT4 ", "model 'T4 ' may hold only letters"},
      {"40xT4,40xT4", "group 2 ('40xT4'): more than 64 GPUs in all"},
  };
  for (const auto& [spec, message] : cases) {
    auto probe = FakeProbe::Create(spec, "h");
    ASSERT_FALSE(probe.ok()) << spec;
    EXPECT_EQ(probe.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(probe.status().message(), HasSubstr(std::string("fake GPU spec '") + spec + "'"));
    EXPECT_THAT(probe.status().message(), HasSubstr(message)) << spec;
  }
}

TEST(FakeProbeTest, SamplesAreIdleUntilSet) {
  auto probe = FakeProbe::Create("2xT4", "h");
  ASSERT_TRUE(probe.ok());
  auto samples = *probe->Sample();
  ASSERT_EQ(samples.size(), 2u);
  EXPECT_EQ(samples[1].index, 1);
  EXPECT_EQ(samples[1].gpu_utilization_percent, 0);
  EXPECT_EQ(samples[1].memory_used, MemoryMib(0));
  GpuSample busy;
  busy.index = 1;
  busy.gpu_utilization_percent = 97;
  busy.memory_used = MemoryMib(12000);
  ASSERT_TRUE(probe->SetSample(busy).ok());
  samples = *probe->Sample();
  EXPECT_EQ(samples[1].gpu_utilization_percent, 97);
  EXPECT_EQ(samples[1].memory_used, MemoryMib(12000));
  EXPECT_FALSE(samples[1].power_milliwatts.has_value());  // what SetSample gave, nothing more
  busy.index = 2;
  EXPECT_EQ(probe->SetSample(busy).code(), StatusCode::kInvalidArgument);
}

RunningTask FakeTask(int64_t alloc, std::vector<int> gpus, int pid,
                     std::map<std::string, std::string> env = {}, int64_t gpu_milli = 1000) {
  RunningTask t;
  t.launch.key = TaskKey{AllocationId(alloc), 1};
  t.launch.gpus = std::move(gpus);
  t.launch.gpu_milli = MilliGpu(gpu_milli);
  t.launch.env = std::move(env);
  t.pid = pid;
  return t;
}

TEST(FakeProbeTest, RunningTasksLoadTheirGpusAsTheyDeclare) {
  auto probe = FakeProbe::Create("4xA100-80GB", "n1");
  ASSERT_TRUE(probe.ok());
  std::vector<RunningTask> tasks = {
      FakeTask(1, {0, 1}, 100, {{"FAKE_GPU_UTILIZATION", "90"}, {"FAKE_GPU_MEMORY_MIB", "2000"}}),
      FakeTask(2, {2}, 200, {{"FAKE_GPU_UTILIZATION", "3"}}),
      // Two half-GPU tasks share GPU 3: one declares nothing (the default, 60 here).
      FakeTask(3, {3}, 300, {{"FAKE_GPU_UTILIZATION", "100"}}, 500),
      FakeTask(4, {3}, 400, {}, 500)};
  probe->SetDefaultUtilization(60);
  probe->SetTaskSource([&] { return tasks; });
  auto s = *probe->Sample();
  ASSERT_EQ(s.size(), 4u);
  EXPECT_EQ(s[0].gpu_utilization_percent, 90);
  EXPECT_EQ(s[1].gpu_utilization_percent, 90);
  EXPECT_EQ(s[0].memory_used, MemoryMib(2000));
  EXPECT_EQ(s[0].memory_utilization_percent, 45);
  EXPECT_EQ(s[0].power_milliwatts, 60000 + 3400 * 90);  // idle 15 % of 400 W, then linear
  EXPECT_EQ(s[0].temperature_celsius, 30 + 41);
  ASSERT_EQ(s[0].processes.size(), 1u);
  EXPECT_EQ(s[0].processes[0].pid, 100);
  EXPECT_EQ(s[2].gpu_utilization_percent, 3);
  EXPECT_EQ(s[2].memory_used, MemoryMib(81920 * 2 / 5));  // 40 % when not declared
  EXPECT_EQ(s[3].gpu_utilization_percent, 50 + 30);
  EXPECT_EQ(s[3].processes.size(), 2u);

  // An unusable declaration falls back to the default; an ended task leaves its GPU idle.
  tasks = {FakeTask(5, {0}, 500, {{"FAKE_GPU_UTILIZATION", "150"}})};
  s = *probe->Sample();
  EXPECT_EQ(s[0].gpu_utilization_percent, 60);
  EXPECT_EQ(s[1].gpu_utilization_percent, 0);
  EXPECT_EQ(s[1].power_milliwatts, 60000);
  EXPECT_TRUE(s[1].processes.empty());
}

TEST(NormalizeGpuModelTest, FollowsTheDocumentedRule) {
  const std::tuple<const char*, int64_t, const char*> cases[] = {
      {"NVIDIA A100-SXM4-80GB", 81920, "A100-80GB"},
      {"NVIDIA A100-SXM4-40GB", 40960, "A100-40GB"},
      {"NVIDIA A100-PCIE-40GB", 40960, "A100-40GB"},
      {"NVIDIA A100 80GB PCIe", 81920, "A100-80GB"},
      {"NVIDIA A100-SXM", 81920, "A100-80GB"},  // size from memory when the name has none
      {"NVIDIA H100 80GB HBM3", 81559, "H100"},
      {"NVIDIA H100 PCIe", 81559, "H100"},
      {"NVIDIA H100 NVL", 95830, "H100"},
      {"NVIDIA H200", 143771, "H200"},
      {"Tesla V100-SXM2-16GB", 16384, "V100M16"},
      {"Tesla V100-SXM2-32GB", 32768, "V100M32"},
      {"Tesla V100-PCIE-32GB", 32768, "V100M32"},
      {"Tesla T4", 15360, "T4"},
      {"NVIDIA GeForce RTX 4090", 24564, "RTX-4090"},
      {"NVIDIA RTX A6000", 49140, "RTX-A6000"},
      {"NVIDIA L40S", 46068, "L40S"},
      {"NVIDIA", 0, "NVIDIA"},
  };
  for (const auto& [name, mib, model] : cases) {
    EXPECT_EQ(NormalizeGpuModel(name, MemoryMib(mib)), model) << name;
  }
}

}  // namespace
}  // namespace corral::agent
