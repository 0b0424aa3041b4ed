#include "agent/gpu_metrics.h"

#include <gtest/gtest.h>
#include <unistd.h>

#include <map>
#include <nlohmann/json.hpp>

namespace corral::agent {
namespace {

RunningTask Holding(int64_t alloc, std::vector<int> gpus, int pid, bool in_container = false) {
  RunningTask t;
  t.launch.key = TaskKey{AllocationId(alloc), 2};
  t.launch.gpus = std::move(gpus);
  t.pid = pid;
  t.in_container = in_container;
  return t;
}

GpuSample WithProcesses(int index, std::vector<int> pids) {
  GpuSample s;
  s.index = index;
  s.gpu_utilization_percent = 10 * index;
  for (int pid : pids) s.processes.push_back({pid, MemoryMib(100)});
  return s;
}

TEST(GpuMetricsTest, ProcessesBelongToTheTaskAboveThemInTheProcessTree) {
  // 100 -> 101 -> 102 (task 1's tree); 200 is task 2's pid; 900 has no task above it.
  const std::map<int, int> parent = {{101, 100}, {102, 101}, {100, 1}, {200, 1}, {900, 1}};
  ParentOf parent_of = [&](int pid) -> std::optional<int> {
    auto it = parent.find(pid);
    if (it == parent.end()) return std::nullopt;
    return it->second;
  };
  const std::vector<RunningTask> running = {Holding(1, {0, 1}, 100), Holding(2, {2}, 200),
                                            Holding(3, {3}, 300, /*in_container=*/true)};
  const std::vector<GpuSample> samples = {WithProcesses(0, {102}), WithProcesses(1, {900}),
                                          WithProcesses(2, {200, 101}), WithProcesses(3, {4242}),
                                          WithProcesses(4, {})};
  auto gpus = Attribute(samples, running, parent_of);
  ASSERT_EQ(gpus.size(), 5u);
  ASSERT_EQ(gpus[0].tasks.size(), 1u);
  EXPECT_EQ(gpus[0].tasks[0], (TaskKey{AllocationId(1), 2}));
  EXPECT_TRUE(gpus[0].sample.processes.empty());
  ASSERT_EQ(gpus[0].processes.size(), 1u);
  EXPECT_EQ(gpus[0].processes[0].task, (TaskKey{AllocationId(1), 2}));
  // A process no task started, on task 1's GPU: kept, without a task (foreign use).
  EXPECT_FALSE(gpus[1].processes[0].task.has_value());
  // Task 1's process on task 2's GPU still belongs to task 1.
  EXPECT_EQ(gpus[2].processes[0].task, (TaskKey{AllocationId(2), 2}));
  EXPECT_EQ(gpus[2].processes[1].task, (TaskKey{AllocationId(1), 2}));
  // A container's processes are not below the task's pid: the container task holding the GPU.
  EXPECT_EQ(gpus[3].processes[0].task, (TaskKey{AllocationId(3), 2}));
  EXPECT_TRUE(gpus[4].tasks.empty());

  nlohmann::json j = protocol::ToJson(GpuMetricsReport(gpus, 1234));
  EXPECT_EQ(j["sampled_at_ms"], 1234);
  EXPECT_EQ(j["gpus"][0]["tasks"][0], "1-2");
  EXPECT_EQ(j["gpus"][2]["utilization_percent"], 20);
  EXPECT_EQ(j["gpus"][2]["processes"][1]["task"], "1-2");
  EXPECT_EQ(j["gpus"][1]["processes"][0].count("task"), 0u);
  EXPECT_EQ(j["gpus"][0].count("power_mw"), 0u);  // not reported: absent
}

TEST(GpuMetricsTest, ProcParentOfReadsTheKernelsAnswer) {
  EXPECT_EQ(ProcParentOf(getpid()), getppid());
  EXPECT_FALSE(ProcParentOf(-5).has_value());
}

}  // namespace
}  // namespace corral::agent
