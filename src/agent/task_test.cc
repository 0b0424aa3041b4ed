#include "agent/task.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace corral::agent {
namespace {

using ::testing::HasSubstr;

TaskLaunch ValidLaunch() {
  TaskLaunch l;
  l.job_id = JobId(7);
  l.task_index = 1;
  l.tasks = 2;
  l.key = TaskKey{AllocationId(12), 3};
  l.argv = {"python3", "train.py"};
  l.workdir = "/tmp";
  l.env = {{"K", "V"}};
  l.gpus = {0, 1};
  l.gpu_milli = MilliGpu(1000);
  l.cpu = CpuMilli(8000);
  l.memory = MemoryMib(32768);
  l.time_limit = Seconds(3600);
  l.user = "alice";
  l.project = "vision";
  return l;
}

TEST(TaskLaunchTest, ValidLaunchPasses) { EXPECT_TRUE(Validate(ValidLaunch()).ok()); }

TEST(TaskLaunchTest, ErrorsNameTheTaskAndTheField) {
  struct Case {
    std::function<void(TaskLaunch&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](TaskLaunch& l) { l.argv.clear(); }, "task 12-3: field 'argv': must not be empty"},
      {[](TaskLaunch& l) { l.argv = {""}; }, "field 'argv[0]': must not be empty"},
      {[](TaskLaunch& l) { l.argv[1] = std::string("a\0b", 3); },
       "field 'argv[1]': contains a NUL byte"},
      {[](TaskLaunch& l) { l.workdir = "data/x"; },
       "field 'workdir': must be an absolute path, got 'data/x'"},
      {[](TaskLaunch& l) { l.workdir = "/nonexistent/corral"; },
       "field 'workdir': '/nonexistent/corral' does not exist on this node"},
      {[](TaskLaunch& l) { l.workdir = "/etc/hostname"; }, "is not a directory"},
      {[](TaskLaunch& l) {
         l.env = {{"1X", "v"}};
       },
       "field 'env': '1X' is not a valid"},
      {[](TaskLaunch& l) {
         l.env = {{"A=B", "v"}};
       },
       "field 'env': 'A=B' is not a valid"},
      {[](TaskLaunch& l) {
         l.env = {{"", "v"}};
       },
       "field 'env': '' is not a valid"},
      {[](TaskLaunch& l) {
         l.env = {{"CORRAL_JOB_ID", "1"}};
       },
       "'CORRAL_JOB_ID' is set by corral and may not be overridden"},
      {[](TaskLaunch& l) {
         l.env = {{"NVIDIA_VISIBLE_DEVICES", "all"}};
       },
       "'NVIDIA_VISIBLE_DEVICES' is set by corral"},
      {[](TaskLaunch& l) {
         l.gpus = {1, 1};
       },
       "field 'gpus': GPU 1 is listed twice"},
      {[](TaskLaunch& l) { l.gpus = {-1}; }, "field 'gpus[0]': must be >= 0"},
      {[](TaskLaunch& l) { l.task_index = 2; }, "field 'task_index': must be in 0..1, got 2"},
      {[](TaskLaunch& l) { l.tasks = 0; }, "field 'tasks': must be >= 1"},
      {[](TaskLaunch& l) { l.gpu_milli = MilliGpu(1001); }, "field 'gpu_milli': must be 0..1000"},
      {[](TaskLaunch& l) { l.memory = MemoryMib(-1); }, "field 'memory_mib': must be >= 0"},
      {[](TaskLaunch& l) { l.time_limit = Seconds(-1); }, "field 'time_limit_s': must be >= 0"},
  };
  for (const Case& c : cases) {
    TaskLaunch l = ValidLaunch();
    c.change(l);
    Status s = Validate(l);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

TEST(TaskEnvironmentTest, CorralVariablesWinAndBaseIsOverriddenByTheJob) {
  TaskLaunch l = ValidLaunch();
  l.env = {{"PATH", "/opt/bin"}, {"K", "V"}};
  std::vector<std::string> env = TaskEnvironment(l, "gpu-07", {{"PATH", "/bin"}, {"HOME", "/"}});
  EXPECT_EQ(env, (std::vector<std::string>{"CORRAL_ALLOCATION_ID=12", "CORRAL_GPU_MILLI=1000",
                                           "CORRAL_JOB_ID=7", "CORRAL_NODE_NAME=gpu-07",
                                           "CORRAL_NUM_TASKS=2", "CORRAL_TASK_INDEX=1",
                                           "CUDA_VISIBLE_DEVICES=0,1", "HOME=/", "K=V",
                                           "NVIDIA_VISIBLE_DEVICES=0,1", "PATH=/opt/bin"}));
}

TEST(TaskEnvironmentTest, ReservedNamesInTheJobEnvAreIgnored) {
  TaskLaunch l = ValidLaunch();
  l.gpus.clear();
  l.gpu_milli = MilliGpu(0);
  l.env = {{"CUDA_VISIBLE_DEVICES", "0,1,2,3"}, {"CORRAL_NODE_NAME", "other"}};
  std::vector<std::string> env = TaskEnvironment(l, "gpu-07", {});
  EXPECT_THAT(env, ::testing::Contains("CUDA_VISIBLE_DEVICES="));
  EXPECT_THAT(env, ::testing::Contains("NVIDIA_VISIBLE_DEVICES=void"));
  EXPECT_THAT(env, ::testing::Contains("CORRAL_NODE_NAME=gpu-07"));
  EXPECT_THAT(env, ::testing::Not(::testing::Contains("CORRAL_NODE_NAME=other")));
}

TEST(TaskJsonTest, LaunchRoundTripsInProtocolFieldNames) {
  TaskLaunch l = ValidLaunch();
  nlohmann::json j = ToJson(l);
  EXPECT_EQ(j["allocation_id"], 12);
  EXPECT_EQ(j["generation"], 3);
  EXPECT_EQ(j["cpu_milli"], 8000);
  EXPECT_EQ(j["time_limit_s"], 3600);
  auto back = TaskLaunchFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
}

TEST(TaskJsonTest, LaunchFromTheProtocolDraftExample) {
  auto j = nlohmann::json::parse(R"({"job_id": 7, "task_index": 0, "tasks": 2,
      "allocation_id": 12, "generation": 1, "argv": ["python3", "train.py"], "shell": false,
      "workdir": "/data/x", "env": {"K": "V"}, "gpus": [0, 1], "gpu_milli": 1000,
      "cpu_milli": 8000, "memory_mib": 32768, "time_limit_s": 3600, "user": "alice",
      "project": "vision"})");
  auto l = TaskLaunchFromJson(j);
  ASSERT_TRUE(l.ok()) << l.status().ToString();
  EXPECT_EQ(l->job_id, JobId(7));
  EXPECT_EQ(l->tasks, 2);
  EXPECT_EQ(l->key, (TaskKey{AllocationId(12), 1}));
  EXPECT_EQ(l->argv, (std::vector<std::string>{"python3", "train.py"}));
  EXPECT_EQ(l->gpus, (std::vector<int>{0, 1}));
  EXPECT_EQ(l->memory, MemoryMib(32768));
  EXPECT_EQ(l->env.at("K"), "V");
}

TEST(TaskJsonTest, LaunchErrorsNameTheField) {
  struct Case {
    const char* json;
    const char* message;
  };
  const Case cases[] = {
      {R"([1])", "must be a JSON object"},
      {R"({"allocation_id": 1, "generation": 1, "argv": ["a"], "workdir": "/"})",
       "field 'job_id': is required"},
      {R"({"job_id": "7", "allocation_id": 1, "generation": 1, "argv": ["a"], "workdir": "/"})",
       "field 'job_id': must be an integer"},
      {R"({"job_id": 7, "allocation_id": 1, "generation": 1, "argv": "a", "workdir": "/"})",
       "field 'argv': must be an array of strings"},
      {R"({"job_id": 7, "allocation_id": 1, "generation": 1, "argv": ["a"], "workdir": "/",
           "env": {"A": 1}})",
       "field 'env.A': must be a string"},
      {R"({"job_id": 7, "allocation_id": 1, "generation": 1, "argv": ["a"], "workdir": "/",
           "shell": "yes"})",
       "field 'shell': must be true or false"},
      {R"({"job_id": 7, "allocation_id": 1, "generation": 1, "argv": ["a"]})",
       "field 'workdir': is required"},
  };
  for (const Case& c : cases) {
    auto l = TaskLaunchFromJson(nlohmann::json::parse(c.json));
    ASSERT_FALSE(l.ok()) << c.json;
    EXPECT_THAT(l.status().message(), HasSubstr(c.message));
  }
}

TEST(TaskJsonTest, StatusRoundTrips) {
  TaskStatus s;
  s.job_id = JobId(7);
  s.task_index = 1;
  s.key = TaskKey{AllocationId(12), 1};
  s.state = TaskState::kKilled;
  s.pid = 4242;
  s.signal = 15;
  s.started_at = Seconds(1700000000);
  s.ended_at = Seconds(1700000100);
  s.message = "cancelled";
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["state"], "killed");
  EXPECT_FALSE(j.contains("exit_code"));
  auto back = TaskStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  j["state"] = "sleeping";
  EXPECT_THAT(TaskStatusFromJson(j).status().message(), HasSubstr("unknown state 'sleeping'"));
}

TEST(TaskStateTest, Names) {
  EXPECT_STREQ(TaskStateName(TaskState::kFailedToStart), "failed_to_start");
  EXPECT_STREQ(TaskStateName(TaskState::kLost), "lost");
  EXPECT_FALSE(IsTerminal(TaskState::kRunning));
  EXPECT_TRUE(IsTerminal(TaskState::kExited));
}

}  // namespace
}  // namespace corral::agent
