#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "agent/distributed_test_support.h"
#include "agent/task_setup.h"

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

// Part 1 of 2, two processes each, launcher none.
TaskLaunch DistributedTaskLaunch() {
  TaskLaunch l = ValidLaunch();
  l.distributed = SecondOfTwoParts(model::Launcher::kNone, 2);
  return l;
}

TEST(TaskLaunchTest, ValidLaunchPasses) {
  EXPECT_TRUE(Validate(ValidLaunch()).ok());
  EXPECT_TRUE(Validate(DistributedTaskLaunch()).ok());
}

TEST(TaskLaunchTest, DistributedErrorsNameTheField) {
  struct Case {
    std::function<void(TaskLaunch&)> change;
    std::string message;
  };
  const std::vector<Case> cases = {
      {[](TaskLaunch& l) { l.distributed->node_rank = 0; },
       "task 12-3: field 'distributed.node_rank': must equal task_index (1), got 0"},
      {[](TaskLaunch& l) {
         l.distributed->nodes = 3;
         l.distributed->hosts.push_back("10.77.0.4");
       },
       "field 'distributed.nodes': must equal tasks (2), got 3"},
      {[](TaskLaunch& l) { l.distributed->node_rank = 2; },
       "field 'distributed.node_rank': must be in 0..1, got 2"},
      {[](TaskLaunch& l) { l.distributed->procs_per_node = 0; },
       "field 'distributed.procs_per_node': must be in 1..64, got 0"},
      {[](TaskLaunch& l) { l.distributed->port = 65534; },
       "field 'distributed.port': must be in 1024..65531"},
      {[](TaskLaunch& l) { l.distributed->hosts.pop_back(); },
       "field 'distributed.hosts': must have one address per node (2), got 1"},
      {[](TaskLaunch& l) { l.distributed->hosts[1] = "a\nb"; }, "field 'distributed.hosts[1]'"},
      {[](TaskLaunch& l) { l.distributed->master_addr = ""; }, "field 'distributed.master_addr'"},
      {[](TaskLaunch& l) {
         l.distributed->launcher = model::Launcher::kTorchrun;
         l.shell = true;
         l.argv = {"python3 train.py"};
       },
       "field 'shell': must be false with launcher torchrun"},
      {[](TaskLaunch& l) {
         l.env = {{"RANK", "0"}};
       },
       "field 'env': 'RANK' is set by corral and may not be overridden"},
      {[](TaskLaunch& l) {
         l.env = {{"MASTER_PORT", "1"}};
       },
       "'MASTER_PORT' is set by corral"},
  };
  for (const Case& c : cases) {
    TaskLaunch l = DistributedTaskLaunch();
    c.change(l);
    Status s = Validate(l);
    EXPECT_EQ(s.code(), StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(s.message(), HasSubstr(c.message));
  }
}

TEST(TaskLaunchTest, RendezvousNamesAreReservedOnlyWhereCorralSetsThem) {
  TaskLaunch plain = ValidLaunch();
  plain.env = {{"MASTER_ADDR", "127.0.0.1"}, {"RANK", "0"}, {"TF_CONFIG", "{}"}};
  EXPECT_TRUE(Validate(plain).ok());  // not distributed: the job's own business
  TaskLaunch torchrun = DistributedTaskLaunch();
  torchrun.distributed->launcher = model::Launcher::kTorchrun;
  torchrun.env = {{"RANK", "0"}, {"TF_CONFIG", "{}"}};  // torchrun sets RANK itself
  EXPECT_TRUE(Validate(torchrun).ok());
}

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
  EXPECT_EQ(env, (std::vector<std::string>{
                     "CORRAL_ALLOCATION_ID=12", "CORRAL_GENERATION=3", "CORRAL_GPU_MILLI=1000",
                     "CORRAL_JOB_ID=7", "CORRAL_NODE_NAME=gpu-07", "CORRAL_NUM_TASKS=2",
                     "CORRAL_TASK_INDEX=1", "CUDA_VISIBLE_DEVICES=0,1", "HOME=/", "K=V",
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

TEST(TaskEnvironmentTest, TheInJobChannelIsSetByCorralAndCannotBeOverridden) {
  TaskLaunch l = ValidLaunch();
  EXPECT_THAT(TaskEnvironment(l, "n", {}),
              ::testing::Not(::testing::Contains(::testing::StartsWith("CORRAL_STOP_FILE="))));
  l.job_token = "crj_7_abc";
  l.checkpoint_dir = "/ckpt/7";
  for (const char* name : {"CORRAL_SERVER", "CORRAL_JOB_TOKEN", "CORRAL_CHECKPOINT_DIR",
                           "CORRAL_STOP_FILE", "CORRAL_CA_CERT"}) {
    EXPECT_TRUE(IsReservedEnvName(name, l)) << name;
    l.env[name] = "fake";
  }
  std::vector<std::string> env = TaskEnvironment(
      l, "n", {}, "",
      TaskChannel{"http://s:1,http://t:2", "/w/stops/12-3/stop.json", "/etc/corral/ca.pem"});
  EXPECT_THAT(env, ::testing::IsSupersetOf(
                       {"CORRAL_SERVER=http://s:1,http://t:2", "CORRAL_JOB_TOKEN=crj_7_abc",
                        "CORRAL_CHECKPOINT_DIR=/ckpt/7", "CORRAL_STOP_FILE=/w/stops/12-3/stop.json",
                        "CORRAL_CA_CERT=/etc/corral/ca.pem"}));
  EXPECT_THAT(TaskEnvironment(l, "n", {}, "", TaskChannel{"http://s:1", "/w/s", ""}),
              ::testing::Not(::testing::Contains(::testing::StartsWith("CORRAL_CA_CERT="))));
  EXPECT_THAT(env, ::testing::Not(::testing::Contains(::testing::EndsWith("=fake"))));
  l.env.clear();
  auto back = TaskLaunchFromJson(ToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->job_token, "crj_7_abc");
  EXPECT_EQ(back->checkpoint_dir, "/ckpt/7");
  l.checkpoint_dir = "ckpt/7";
  EXPECT_THAT(Validate(l).message(), ::testing::HasSubstr("field 'checkpoint_dir'"));
}

TEST(TaskEnvironmentTest, ArrayElementsSeeTheirIndex) {
  TaskLaunch l = ValidLaunch();
  EXPECT_THAT(TaskEnvironment(l, "n", {}),
              ::testing::Not(::testing::Contains(::testing::StartsWith("CORRAL_ARRAY_INDEX="))));
  l.array_index = 42;
  l.env = {{"CORRAL_ARRAY_INDEX", "7"}};  // reserved: the job cannot fake it
  EXPECT_THAT(TaskEnvironment(l, "n", {}), ::testing::Contains("CORRAL_ARRAY_INDEX=42"));
  l.env.clear();
  auto back = TaskLaunchFromJson(ToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->array_index, 42);
  nlohmann::json bad = ToJson(l);
  bad["array_index"] = -1;
  EXPECT_THAT(TaskLaunchFromJson(bad).status().message(), ::testing::HasSubstr("array_index"));
}

TEST(TaskEnvironmentTest, ABatchTaskGetsSlurmsVariablesAndACommandDoesNot) {
  TaskLaunch l = ValidLaunch();  // part 1 of 2, job 7
  EXPECT_THAT(TaskEnvironment(l, "n", {}),
              ::testing::Not(::testing::Contains(::testing::StartsWith("SLURM_"))));
  l.script = "#!/bin/sh\necho\n";
  l.job_name = "train";
  l.submit_dir = "/home/a";
  l.array_index = 3;
  l.array_id = 5;
  l.env = {{"SLURM_JOB_ID", "99"}};  // corral's own win
  const std::vector<std::string> env = TaskEnvironment(l, "n", {});
  for (const char* expected :
       {"SLURM_JOB_ID=7", "SLURM_JOBID=7", "SLURM_JOB_NAME=train", "SLURM_NTASKS=2",
        "SLURM_NTASKS_PER_NODE=1", "SLURM_JOB_NUM_NODES=2", "SLURM_NNODES=2", "SLURM_NODEID=1",
        "SLURM_PROCID=1", "SLURM_LOCALID=0", "SLURM_SUBMIT_DIR=/home/a", "SLURM_ARRAY_TASK_ID=3",
        "SLURM_ARRAY_JOB_ID=5"}) {
    EXPECT_THAT(env, ::testing::Contains(std::string(expected)));
  }
  auto back = TaskLaunchFromJson(ToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_EQ(back->script, l.script);
  EXPECT_EQ(back->job_name, "train");
  EXPECT_EQ(back->array_id, 5);
}

TEST(TaskEnvironmentTest, ABatchTaskOfLauncherMpiGetsNoSlurmVariables) {
  TaskLaunch l = ValidLaunch();
  l.script = "#!/bin/sh\nmpirun a.out\n";
  l.distributed = Distributed{model::Launcher::kMpi, 1, 1, 2, "10.0.0.1", 29500, {"a", "b"}};
  EXPECT_THAT(TaskEnvironment(l, "n", {}),
              ::testing::Not(::testing::Contains(::testing::StartsWith("SLURM_"))));
}

TEST(TaskEnvironmentTest, ABatchTasksArgvAreItsScriptsArguments) {
  TaskLaunch l = ValidLaunch();
  l.script = "#!/bin/sh\n";
  l.argv.clear();
  EXPECT_TRUE(Validate(l).ok()) << Validate(l).message();
  l.script = "echo no interpreter\n";
  EXPECT_THAT(Validate(l).message(), HasSubstr("field 'script': must start with #!"));
}

TEST(TaskEnvironmentTest, ASessionGetsItsPortPrefixAndToken) {
  TaskLaunch l = ValidLaunch();
  const std::string token(64, 'a');
  l.session = LaunchSession{29501, "/sessions/7/", token};
  l.env = {{"CORRAL_SESSION_PORT", "80"}};  // reserved: the job cannot move the port
  ASSERT_FALSE(Validate(l).ok());
  l.env.clear();
  ASSERT_TRUE(Validate(l).ok()) << Validate(l).message();
  EXPECT_THAT(TaskEnvironment(l, "n", {}),
              ::testing::IsSupersetOf(std::vector<std::string>{
                  "CORRAL_SESSION_PORT=29501", "CORRAL_SESSION_URL_PREFIX=/sessions/7/",
                  "CORRAL_SESSION_TOKEN=" + token}));
  auto back = TaskLaunchFromJson(ToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  ASSERT_TRUE(back->session);
  EXPECT_EQ(back->session->port, 29501);
  EXPECT_EQ(back->session->token, token);

  TaskLaunch other_job = l;
  other_job.session->url_prefix = "/sessions/8/";
  EXPECT_THAT(Validate(other_job).message(), ::testing::HasSubstr("field 'session.url_prefix'"));
  TaskLaunch short_token = l;
  short_token.session->token = "abc";
  EXPECT_THAT(Validate(short_token).message(), ::testing::HasSubstr("field 'session.token'"));
  nlohmann::json low_port = ToJson(l);
  low_port["session"]["port"] = 22;
  EXPECT_THAT(TaskLaunchFromJson(low_port).status().message(),
              ::testing::HasSubstr("session.port"));
  EXPECT_FALSE(back->session->shell);
  EXPECT_FALSE(ToJson(l)["session"].contains("shell"));
}

TEST(TaskEnvironmentTest, AShellSessionMayHaveNoArgvAndSaysSoOnTheWire) {
  TaskLaunch l = ValidLaunch();
  l.session = LaunchSession{29501, "/sessions/7/", std::string(64, 'a'), /*shell=*/true};
  l.argv.clear();  // the login shell
  EXPECT_TRUE(Validate(l).ok()) << Validate(l).message();
  auto back = TaskLaunchFromJson(ToJson(l));
  ASSERT_TRUE(back.ok()) << back.status().message();
  EXPECT_TRUE(back->session->shell);
  EXPECT_TRUE(back->argv.empty());
  TaskLaunch app = l;
  app.session->shell = false;  // an app's session must name its program
  EXPECT_THAT(Validate(app).message(), ::testing::HasSubstr("field 'argv'"));
}

TEST(TaskEnvironmentTest, OneProcessPerPartIsItsRankAndFindsTheHostfile) {
  TaskLaunch l = DistributedTaskLaunch();
  l.distributed->procs_per_node = 1;
  l.distributed->launcher = model::Launcher::kJax;
  l.env.clear();
  std::vector<std::string> env = TaskEnvironment(l, "gpu-07", {}, "/w/hostfiles/12-3");
  EXPECT_EQ(env, (std::vector<std::string>{
                     "CORRAL_ALLOCATION_ID=12",
                     "CORRAL_GENERATION=3",
                     "CORRAL_GPU_MILLI=1000",
                     "CORRAL_HOSTFILE=/w/hostfiles/12-3",
                     "CORRAL_JOB_ID=7",
                     "CORRAL_LAUNCHER=jax",
                     "CORRAL_NODE_NAME=gpu-07",
                     "CORRAL_NUM_TASKS=2",
                     "CORRAL_TASK_INDEX=1",
                     "CUDA_VISIBLE_DEVICES=0,1",
                     "GROUP_RANK=1",
                     "JAX_COORDINATOR_ADDRESS=10.77.0.2:29500",
                     "JAX_NUM_PROCESSES=2",
                     "JAX_PROCESS_ID=1",
                     "LOCAL_RANK=0",
                     "LOCAL_WORLD_SIZE=1",
                     "MASTER_ADDR=10.77.0.2",
                     "MASTER_PORT=29500",
                     "NNODES=2",
                     "NODE_RANK=1",
                     "NVIDIA_VISIBLE_DEVICES=0,1",
                     "RANK=1",
                     "WORLD_SIZE=2",
                 }));
}

TEST(TaskEnvironmentTest, RanksAreLeftToTheLauncherOfSeveralProcesses) {
  TaskLaunch l = DistributedTaskLaunch();  // none, 2 processes: `corral launch` sets the ranks
  std::vector<std::string> env = TaskEnvironment(l, "gpu-07", {}, "/h");
  EXPECT_THAT(env, ::testing::Contains("WORLD_SIZE=4"));
  EXPECT_THAT(env, ::testing::Contains("CORRAL_HOSTFILE=/h"));
  for (const std::string& e : env) {
    EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("RANK=")));
    EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("LOCAL_RANK=")));
    EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("OMPI_")));
  }
  l.distributed->procs_per_node = 1;
  l.distributed->launcher = model::Launcher::kTorchrun;  // torchrun sets them
  env = TaskEnvironment(l, "gpu-07", {}, "/h");
  for (const std::string& e : env) EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("RANK=")));
  l.distributed->launcher = model::Launcher::kMpi;  // mpirun sets them, and reads the hostfile
  env = TaskEnvironment(l, "gpu-07", {}, "/h");
  EXPECT_THAT(env, ::testing::Contains("OMPI_MCA_orte_default_hostfile=/h"));
  for (const std::string& e : env) EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("RANK=")));
}

TEST(TaskEnvironmentTest, NonDistributedTasksIgnoreTheHostfileAndKeepRendezvousNames) {
  TaskLaunch l = ValidLaunch();
  l.env = {{"MASTER_ADDR", "127.0.0.1"}};
  std::vector<std::string> env = TaskEnvironment(l, "gpu-07", {}, "/h");
  EXPECT_THAT(env, ::testing::Contains("MASTER_ADDR=127.0.0.1"));
  for (const std::string& e : env) {
    EXPECT_THAT(e, ::testing::Not(::testing::StartsWith("CORRAL_HOSTFILE=")));
  }
}

TEST(TaskJsonTest, LaunchRoundTripsInProtocolFieldNames) {
  TaskLaunch l = ValidLaunch();
  nlohmann::json j = ToJson(l);
  EXPECT_EQ(j["allocation_id"], 12);
  EXPECT_EQ(j["generation"], 3);
  EXPECT_EQ(j["cpu_milli"], 8000);
  EXPECT_EQ(j["time_limit_s"], 3600);
  EXPECT_FALSE(j.contains("distributed"));  // absent when the task is not distributed
  auto back = TaskLaunchFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  EXPECT_FALSE(back->distributed.has_value());
}

TEST(TaskJsonTest, EnvironmentRoundTrips) {
  TaskLaunch l = ValidLaunch();
  l.environment = LaunchEnvironment{
      "pytorch", 2, "process", "nvcr.io/nvidia/pytorch:24.05-py3", "/opt/corral/envs/pytorch", ""};
  nlohmann::json j = ToJson(l);
  auto back = TaskLaunchFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->environment.has_value());
  EXPECT_EQ(back->environment->venv, "/opt/corral/envs/pytorch");
  EXPECT_EQ(ToJson(*back), j);
  j["environment"].erase("runtime");
  EXPECT_THAT(TaskLaunchFromJson(j).status().message(),
              HasSubstr("field 'environment.runtime': is required"));
}

TEST(TaskJsonTest, DistributedRoundTrips) {
  TaskLaunch l = DistributedTaskLaunch();
  l.distributed->launcher = model::Launcher::kDeepspeed;
  nlohmann::json j = ToJson(l);
  EXPECT_EQ(j["distributed"], nlohmann::json::parse(R"({"launcher": "deepspeed",
      "procs_per_node": 2, "node_rank": 1, "nodes": 2, "master_addr": "10.77.0.2",
      "port": 29500, "hosts": ["10.77.0.2", "10.77.0.3"]})"));
  auto back = TaskLaunchFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_TRUE(back->distributed.has_value());
  EXPECT_EQ(back->distributed->launcher, model::Launcher::kDeepspeed);
  EXPECT_EQ(back->distributed->hosts, (std::vector<std::string>{"10.77.0.2", "10.77.0.3"}));
  EXPECT_EQ(ToJson(*back), j);
  j["distributed"] = nullptr;
  back = TaskLaunchFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_FALSE(back->distributed.has_value());
}

TEST(TaskJsonTest, DistributedErrorsNameTheField) {
  const nlohmann::json valid = nlohmann::json::parse(R"({"launcher": "torchrun",
      "procs_per_node": 2, "node_rank": 1, "nodes": 2, "master_addr": "10.77.0.2",
      "port": 29500, "hosts": ["10.77.0.2", "10.77.0.3"]})");
  struct Case {
    const char* field;
    nlohmann::json value;  // null: the field is left out
    const char* message;
  };
  const std::vector<Case> cases = {
      {"launcher", nullptr, "field 'distributed.launcher': is required"},
      {"launcher", 1, "field 'distributed.launcher': must be a string"},
      {"launcher", "slurm", "field 'distributed.launcher': unknown launcher 'slurm'"},
      {"procs_per_node", nullptr, "field 'distributed.procs_per_node': is required"},
      {"procs_per_node", "2", "field 'distributed.procs_per_node': must be an integer"},
      {"procs_per_node", 65, "field 'distributed.procs_per_node': must be in 1..64, got 65"},
      {"procs_per_node", int64_t{1} << 40, "field 'distributed.procs_per_node': out of range"},
      {"node_rank", nullptr, "field 'distributed.node_rank': is required"},
      {"node_rank", 2, "field 'distributed.node_rank': must be in 0..1, got 2"},
      {"node_rank", -1, "field 'distributed.node_rank': must be in 0..1, got -1"},
      {"nodes", nullptr, "field 'distributed.nodes': is required"},
      {"nodes", 0, "field 'distributed.nodes': must be in 1..1000000"},
      {"master_addr", nullptr, "field 'distributed.master_addr': is required"},
      {"master_addr", "a b", "field 'distributed.master_addr': address 'a b'"},
      {"port", nullptr, "field 'distributed.port': is required"},
      {"port", 1.5, "field 'distributed.port': must be an integer"},
      {"port", 80, "field 'distributed.port': must be in 1024..65531"},
      {"port", 65534, "field 'distributed.port': must be in 1024..65531"},
      {"hosts", nullptr, "field 'distributed.hosts': is required"},
      {"hosts", "10.77.0.2", "field 'distributed.hosts': must be an array of strings"},
      {"hosts", nlohmann::json({"10.77.0.2", 3}),
       "field 'distributed.hosts': must be an array of strings"},
      {"hosts", nlohmann::json({"10.77.0.2"}),
       "field 'distributed.hosts': must have one address per node (2), got 1"},
      {"hosts", nlohmann::json({"10.77.0.2", "x\ny"}), "field 'distributed.hosts[1]'"},
  };
  nlohmann::json launch = ToJson(ValidLaunch());
  launch["distributed"] = valid;
  ASSERT_TRUE(TaskLaunchFromJson(launch).ok());
  for (const Case& c : cases) {
    nlohmann::json d = valid;
    if (c.value.is_null()) {
      d.erase(c.field);
    } else {
      d[c.field] = c.value;
    }
    launch["distributed"] = d;
    auto l = TaskLaunchFromJson(launch);
    ASSERT_FALSE(l.ok()) << c.field << " = " << c.value;
    EXPECT_THAT(l.status().message(), HasSubstr(c.message));
  }
  launch["distributed"] = nlohmann::json::array();
  EXPECT_THAT(TaskLaunchFromJson(launch).status().message(),
              HasSubstr("field 'distributed': must be an object"));
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
  s.state = ProcessState::kKilled;
  s.pid = 4242;
  s.signal = 15;
  s.started_at = Seconds(1700000000);
  s.ended_at = Seconds(1700000100);
  s.message = "cancelled";
  s.end_cause = model::TaskEndCause::kStopped;
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["state"], "killed");
  EXPECT_FALSE(j.contains("exit_code"));
  auto back = TaskStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(ToJson(*back), j);
  j["state"] = "sleeping";
  EXPECT_THAT(TaskStatusFromJson(j).status().message(), HasSubstr("unknown state 'sleeping'"));
}

// The end cause travels as a lowercase name; an exited or killed task must have one, others none,
// and an unknown one is refused naming the field and the valid names.
TEST(TaskJsonTest, EndCauseIsRequiredForAnEndAndChecked) {
  TaskStatus s;
  s.job_id = JobId(7);
  s.key = TaskKey{AllocationId(12), 1};
  s.state = ProcessState::kKilled;
  s.signal = 9;
  s.ended_at = Seconds(1700000100);
  s.message = "time limit of 60 s reached";
  s.end_cause = model::TaskEndCause::kTimeLimit;
  nlohmann::json j = ToJson(s);
  EXPECT_EQ(j["end_cause"], "time_limit");
  auto back = TaskStatusFromJson(j);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  EXPECT_EQ(back->end_cause, model::TaskEndCause::kTimeLimit);

  j.erase("end_cause");
  EXPECT_EQ(TaskStatusFromJson(j).status().message(),
            "task status: field 'end_cause': is required when 'state' is killed");
  j["state"] = "lost";
  j["end_cause"] = "stopped";
  EXPECT_EQ(TaskStatusFromJson(j).status().message(),
            "task status: field 'end_cause': must be absent when 'state' is lost");
  j["state"] = "killed";

  j["end_cause"] = "melted";
  EXPECT_EQ(TaskStatusFromJson(j).status().message(),
            "task status: field 'end_cause': unknown end cause 'melted' (one of exited, "
            "signalled, stopped, time_limit, out_of_memory, fenced)");
  j["end_cause"] = 3;
  EXPECT_THAT(TaskStatusFromJson(j).status().message(), HasSubstr("field 'end_cause'"));
}

TEST(TaskStateTest, Names) {
  EXPECT_STREQ(ProcessStateName(ProcessState::kFailedToStart), "failed_to_start");
  EXPECT_STREQ(ProcessStateName(ProcessState::kLost), "lost");
  EXPECT_FALSE(IsTerminal(ProcessState::kRunning));
  EXPECT_TRUE(IsTerminal(ProcessState::kExited));
}

}  // namespace
}  // namespace corral::agent
