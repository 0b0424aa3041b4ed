#include "agent/rendezvous.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>

#include "agent/distributed_test_support.h"

namespace corral::agent {
namespace {

using model::Launcher;
using Env = std::map<std::string, std::string>;
using Argv = std::vector<std::string>;

// Part 1 of a job of 2 parts with 3 processes each: ranks 3, 4, 5.
TaskLaunch DistributedLaunch(Launcher launcher, int procs = 3) {
  TaskLaunch l;
  l.task_index = 1;
  l.tasks = 2;
  l.argv = {"python3", "train.py"};
  l.distributed = SecondOfTwoParts(launcher, procs);
  return l;
}

Env Common(const std::string& launcher, int procs = 3) {
  return {{"MASTER_ADDR", "10.77.0.2"},
          {"MASTER_PORT", "29500"},
          {"NNODES", "2"},
          {"NODE_RANK", "1"},
          {"GROUP_RANK", "1"},
          {"LOCAL_WORLD_SIZE", std::to_string(procs)},
          {"WORLD_SIZE", std::to_string(2 * procs)},
          {"CORRAL_LAUNCHER", launcher}};
}

TEST(DistributedEnvironmentTest, NoneTorchrunAndMpiGetTheCommonVariables) {
  EXPECT_EQ(DistributedEnvironment(DistributedLaunch(Launcher::kNone)), Common("none"));
  EXPECT_EQ(DistributedEnvironment(DistributedLaunch(Launcher::kTorchrun)), Common("torchrun"));
  EXPECT_EQ(DistributedEnvironment(DistributedLaunch(Launcher::kMpi)), Common("mpi"));
}

TEST(DistributedEnvironmentTest, DeepspeedAddsCrossAndLocalSizes) {
  Env want = Common("deepspeed");
  want.insert({{"CROSS_RANK", "1"}, {"CROSS_SIZE", "2"}, {"LOCAL_SIZE", "3"}});
  EXPECT_EQ(DistributedEnvironment(DistributedLaunch(Launcher::kDeepspeed)), want);
}

TEST(DistributedEnvironmentTest, TfConfigListsEveryRankAsAWorker) {
  TaskLaunch l = DistributedLaunch(Launcher::kTf, 2);
  Env env = DistributedEnvironment(l);
  ASSERT_EQ(env.count("TF_CONFIG"), 1u);
  nlohmann::json config = nlohmann::json::parse(env["TF_CONFIG"]);
  EXPECT_EQ(config, nlohmann::json::parse(R"({
      "cluster": {"worker": ["10.77.0.2:29500", "10.77.0.2:29501",
                             "10.77.0.3:29502", "10.77.0.3:29503"]},
      "task": {"type": "worker", "index": 2}})"));
  env.erase("TF_CONFIG");
  EXPECT_EQ(env, Common("tf", 2));
}

TEST(DistributedEnvironmentTest, JaxGetsTheCoordinatorAndTheProcessCount) {
  Env want = Common("jax");
  want.insert({{"JAX_COORDINATOR_ADDRESS", "10.77.0.2:29500"}, {"JAX_NUM_PROCESSES", "6"}});
  EXPECT_EQ(DistributedEnvironment(DistributedLaunch(Launcher::kJax)), want);
}

TEST(DistributedEnvironmentTest, Ipv6AddressesAreBracketedInHostPortValues) {
  TaskLaunch l = DistributedLaunch(Launcher::kJax, 1);
  l.distributed->master_addr = "fd00::2";
  EXPECT_EQ(DistributedEnvironment(l)["JAX_COORDINATOR_ADDRESS"], "[fd00::2]:29500");
  EXPECT_EQ(DistributedEnvironment(l)["MASTER_ADDR"], "fd00::2");
  l.distributed->launcher = Launcher::kTf;
  l.distributed->hosts = {"fd00::2", "fd00::3"};
  auto config = nlohmann::json::parse(DistributedEnvironment(l)["TF_CONFIG"]);
  EXPECT_EQ(config["cluster"]["worker"], nlohmann::json({"[fd00::2]:29500", "[fd00::3]:29501"}));
}

TEST(DistributedEnvironmentTest, ATaskThatIsNotDistributedGetsNothing) {
  TaskLaunch l = DistributedLaunch(Launcher::kNone);
  l.distributed.reset();
  EXPECT_TRUE(DistributedEnvironment(l).empty());
}

TEST(RankEnvironmentTest, RankIsNodeRankTimesLocalWorldSizePlusLocalRank) {
  const Env node = DistributedEnvironment(DistributedLaunch(Launcher::kNone));
  EXPECT_EQ(RankEnvironment(node, 0), (Env{{"RANK", "3"}, {"LOCAL_RANK", "0"}}));
  EXPECT_EQ(RankEnvironment(node, 2), (Env{{"RANK", "5"}, {"LOCAL_RANK", "2"}}));
}

TEST(RankEnvironmentTest, TfConfigAndJaxProcessIdFollowTheRank) {
  const Env tf = DistributedEnvironment(DistributedLaunch(Launcher::kTf));
  Env env = RankEnvironment(tf, 1);
  EXPECT_EQ(env["RANK"], "4");
  auto config = nlohmann::json::parse(env["TF_CONFIG"]);
  EXPECT_EQ(config["task"], nlohmann::json::parse(R"({"type": "worker", "index": 4})"));
  EXPECT_EQ(config["cluster"]["worker"].size(), 6u);
  EXPECT_EQ(env.count("JAX_PROCESS_ID"), 0u);

  const Env jax = DistributedEnvironment(DistributedLaunch(Launcher::kJax));
  EXPECT_EQ(RankEnvironment(jax, 2),
            (Env{{"RANK", "5"}, {"LOCAL_RANK", "2"}, {"JAX_PROCESS_ID", "5"}}));
}

TEST(RankEnvironmentTest, TfAndJaxProcessesGetTheirOwnGpus) {
  Env jax = DistributedEnvironment(DistributedLaunch(Launcher::kJax));  // P = 3
  jax["CUDA_VISIBLE_DEVICES"] = "0,1,4,5,6,7";
  EXPECT_EQ(RankEnvironment(jax, 0)["CUDA_VISIBLE_DEVICES"], "0,1");
  EXPECT_EQ(RankEnvironment(jax, 2)["CUDA_VISIBLE_DEVICES"], "6,7");
  jax["CUDA_VISIBLE_DEVICES"] = "0,1";  // does not divide by 3: left as it is
  EXPECT_EQ(RankEnvironment(jax, 1).count("CUDA_VISIBLE_DEVICES"), 0u);
  Env none = DistributedEnvironment(DistributedLaunch(Launcher::kNone));
  none["CUDA_VISIBLE_DEVICES"] = "0,1,2";  // torch-style: every process sees all
  EXPECT_EQ(RankEnvironment(none, 1).count("CUDA_VISIBLE_DEVICES"), 0u);
}

TEST(RankEnvironmentTest, MissingOrMalformedNodeVariablesHaveFallbacks) {
  EXPECT_EQ(RankEnvironment({}, 2), (Env{{"RANK", "2"}, {"LOCAL_RANK", "2"}}));
  EXPECT_EQ(RankEnvironment({{"NODE_RANK", "x"}, {"LOCAL_WORLD_SIZE", "4"}}, 1)["RANK"], "1");
  EXPECT_EQ(RankEnvironment({{"NODE_RANK", "2"}, {"LOCAL_WORLD_SIZE", "4 "}}, 1)["RANK"], "3");
  Env env = RankEnvironment({{"TF_CONFIG", "not json"}}, 0);
  EXPECT_EQ(env.count("TF_CONFIG"), 0u);
}

// The server refuses job env names with model::IsRendezvousEnvName; the agent derives them from
// what it sets. The two lists must agree, launcher by launcher.
TEST(RendezvousEnvNameTest, TheModelsListIsWhatTheAgentSets) {
  for (Launcher launcher : {Launcher::kNone, Launcher::kTorchrun, Launcher::kMpi,
                            Launcher::kDeepspeed, Launcher::kTf, Launcher::kJax}) {
    const Distributed d = DistributedLaunch(launcher).distributed.value();
    std::set<std::string> agent;
    TaskLaunch launch = DistributedLaunch(launcher);
    const Env node = DistributedEnvironment(launch);
    for (const auto& [name, value] : node) agent.insert(name);
    for (const auto& [name, value] : HostfileEnvironment(d, "/h")) agent.insert(name);
    if (SetsRankVariables(launcher)) {
      for (const auto& [name, value] : RankEnvironment(node, 0)) agent.insert(name);
    }
    for (const std::string& name : agent) {
      EXPECT_TRUE(model::IsRendezvousEnvName(launcher, name))
          << model::LauncherName(launcher) << ": " << name;
      EXPECT_TRUE(IsRendezvousEnvName(d, name));
    }
    for (const char* name : {"RANK", "LOCAL_RANK", "TF_CONFIG", "CROSS_RANK", "JAX_PROCESS_ID",
                             "OMPI_MCA_orte_default_hostfile", "MY_VAR"}) {
      EXPECT_EQ(model::IsRendezvousEnvName(launcher, name), agent.count(name) == 1)
          << model::LauncherName(launcher) << ": " << name;
    }
  }
}

TEST(HostfileTest, OneLinePerHostWithTheSlotsOfItsParts) {
  Distributed d = *DistributedLaunch(Launcher::kMpi, 2).distributed;
  d.nodes = 3;
  d.hosts = {"10.77.0.3", "10.77.0.2", "10.77.0.3"};
  EXPECT_EQ(Hostfile(d), "10.77.0.3 slots=4\n10.77.0.2 slots=2\n");
}

TEST(HostfileTest, MpiFindsItThroughOpenMpisVariable) {
  const Distributed mpi = *DistributedLaunch(Launcher::kMpi).distributed;
  EXPECT_EQ(HostfileEnvironment(mpi, "/w/hostfiles/1-1"),
            (Env{{"CORRAL_HOSTFILE", "/w/hostfiles/1-1"},
                 {"OMPI_MCA_orte_default_hostfile", "/w/hostfiles/1-1"}}));
  const Distributed ds = *DistributedLaunch(Launcher::kDeepspeed).distributed;
  EXPECT_EQ(HostfileEnvironment(ds, "/h"), (Env{{"CORRAL_HOSTFILE", "/h"}}));
}

TEST(RendezvousEnvNameTest, ExactlyTheNamesCorralSetsForTheLauncher) {
  auto reserved = [](Launcher launcher, const std::string& name) {
    return IsRendezvousEnvName(*DistributedLaunch(launcher).distributed, name);
  };
  for (Launcher l : {Launcher::kNone, Launcher::kTorchrun, Launcher::kMpi, Launcher::kDeepspeed,
                     Launcher::kTf, Launcher::kJax}) {
    for (const char* name :
         {"MASTER_ADDR", "MASTER_PORT", "NNODES", "NODE_RANK", "GROUP_RANK", "LOCAL_WORLD_SIZE",
          "WORLD_SIZE", "CORRAL_LAUNCHER", "CORRAL_HOSTFILE"}) {
      EXPECT_TRUE(reserved(l, name)) << name;
    }
    EXPECT_FALSE(reserved(l, "SEED"));
  }
  EXPECT_TRUE(reserved(Launcher::kNone, "RANK"));
  EXPECT_TRUE(reserved(Launcher::kNone, "LOCAL_RANK"));
  EXPECT_FALSE(reserved(Launcher::kNone, "TF_CONFIG"));
  EXPECT_FALSE(reserved(Launcher::kTorchrun, "RANK"));  // torchrun sets it
  EXPECT_FALSE(reserved(Launcher::kMpi, "RANK"));
  EXPECT_TRUE(reserved(Launcher::kMpi, "OMPI_MCA_orte_default_hostfile"));
  EXPECT_FALSE(reserved(Launcher::kNone, "OMPI_MCA_orte_default_hostfile"));
  EXPECT_TRUE(reserved(Launcher::kDeepspeed, "CROSS_RANK"));
  EXPECT_TRUE(reserved(Launcher::kDeepspeed, "LOCAL_SIZE"));
  EXPECT_TRUE(reserved(Launcher::kTf, "TF_CONFIG"));
  EXPECT_TRUE(reserved(Launcher::kJax, "JAX_PROCESS_ID"));
  EXPECT_TRUE(reserved(Launcher::kJax, "JAX_NUM_PROCESSES"));
  EXPECT_FALSE(reserved(Launcher::kTf, "JAX_PROCESS_ID"));
}

TEST(LaunchArgvTest, TorchrunGetsTheRendezvousAsFlags) {
  EXPECT_EQ(LaunchArgv(DistributedLaunch(Launcher::kTorchrun), {"train.py", "--lr=1"}, "/c"),
            (Argv{"torchrun", "--nnodes=2", "--nproc_per_node=3", "--node_rank=1",
                  "--master_addr=10.77.0.2", "--master_port=29500", "--redirects=2", "--tee=2",
                  "train.py", "--lr=1"}));
}

// Debian 12's torchrun needs --redirects and --tee other than 0: corral gives 2 unless the job's
// own torchrun options (before its script) say otherwise; the script's options are its own.
TEST(LaunchArgvTest, TorchrunsRedirectsAndTeeAreTheJobsWhenItGivesThem) {
  const TaskLaunch l = DistributedLaunch(Launcher::kTorchrun);
  const Argv rendezvous = {"torchrun",
                           "--nnodes=2",
                           "--nproc_per_node=3",
                           "--node_rank=1",
                           "--master_addr=10.77.0.2",
                           "--master_port=29500"};
  auto with = [&](Argv tail) {
    Argv out = rendezvous;
    out.insert(out.end(), tail.begin(), tail.end());
    return out;
  };
  EXPECT_EQ(LaunchArgv(l, {"--redirects=3", "--tee", "1", "t.py"}, "/c"),
            with({"--redirects=3", "--tee", "1", "t.py"}));
  EXPECT_EQ(LaunchArgv(l, {"-r", "1", "t.py"}, "/c"), with({"--tee=2", "-r", "1", "t.py"}));
  EXPECT_EQ(LaunchArgv(l, {"--max_restarts=0", "t.py", "--tee=0"}, "/c"),
            with({"--redirects=2", "--tee=2", "--max_restarts=0", "t.py", "--tee=0"}));
}

TEST(LaunchArgvTest, SeveralProcessesPerPartRunUnderCorralLaunch) {
  for (Launcher l : {Launcher::kNone, Launcher::kDeepspeed, Launcher::kTf, Launcher::kJax}) {
    EXPECT_EQ(LaunchArgv(DistributedLaunch(l), {"/bin/sh", "-c", "x"}, "/usr/bin/corral"),
              (Argv{"/usr/bin/corral", "launch", "--procs", "3", "--", "/bin/sh", "-c", "x"}));
    EXPECT_EQ(LaunchArgv(DistributedLaunch(l, 1), {"python3", "t.py"}, "/usr/bin/corral"),
              (Argv{"python3", "t.py"}));
  }
}

TEST(LaunchArgvTest, OutputFilesRunUnderCorralLaunchWhichWritesThem) {
  TaskLaunch l = DistributedLaunch(Launcher::kNone);
  l.output_file = "out_7.txt";
  EXPECT_EQ(LaunchArgv(l, {"x"}, "/c"),
            (Argv{"/c", "launch", "--output", "out_7.txt", "--procs", "3", "--", "x"}));
  l.error_file = "err_7.txt";
  l.distributed.reset();
  l.tasks = 1;
  EXPECT_EQ(LaunchArgv(l, {"x"}, "/c"),
            (Argv{"/c", "launch", "--procs", "1", "--output", "out_7.txt", "--error", "err_7.txt",
                  "--truncate", "--", "x"}));
  l = DistributedLaunch(Launcher::kTorchrun, 1);
  l.output_file = "o";
  const Argv torchrun = LaunchArgv(l, {"t.py"}, "/c");
  EXPECT_EQ(Argv(torchrun.begin(), torchrun.begin() + 7),
            (Argv{"/c", "launch", "--procs", "1", "--output", "o", "--"}));
  EXPECT_EQ(torchrun[7], "torchrun");
  l = DistributedLaunch(Launcher::kMpi);
  l.output_file = "o";
  EXPECT_EQ(LaunchArgv(l, {"mpirun", "a.out"}, "/c"), (Argv{"/c", "launch", "--hold"}));
  // An error file alone; a job argument that reads like --hold changes nothing.
  l = DistributedLaunch(Launcher::kNone);
  l.error_file = "e";
  EXPECT_EQ(LaunchArgv(l, {"x", "--hold"}, "/c"),
            (Argv{"/c", "launch", "--error", "e", "--procs", "3", "--", "x", "--hold"}));
}

TEST(LaunchArgvTest, MpiRunsTheCommandOnPartZeroAndHoldsTheOthers) {
  TaskLaunch l = DistributedLaunch(Launcher::kMpi);
  EXPECT_EQ(LaunchArgv(l, {"mpirun", "a.out"}, "/c"), (Argv{"/c", "launch", "--hold"}));
  l.task_index = 0;
  l.distributed->node_rank = 0;
  EXPECT_EQ(LaunchArgv(l, {"mpirun", "a.out"}, "/c"), (Argv{"mpirun", "a.out"}));
}

TEST(LaunchArgvTest, ATaskThatIsNotDistributedRunsItsArgv) {
  TaskLaunch l = DistributedLaunch(Launcher::kTorchrun);
  l.distributed.reset();
  EXPECT_EQ(LaunchArgv(l, {"python3", "t.py"}, "/c"), (Argv{"python3", "t.py"}));
}

}  // namespace
}  // namespace corral::agent
