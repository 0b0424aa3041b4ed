// The pure parts of the container engine module (flags, version output, the engine's argv and
// env file) and its command runner, with stand-in engines (small scripts) where an engine is run.
// container_runtime_test.cc runs real containers.
#include "agent/container_engine.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;

class ContainerEngineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-engine-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    root_ = tmpl;
    workdir_ = root_ + "/wd";
    ASSERT_TRUE(std::filesystem::create_directory(workdir_));
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(root_, ec);
  }

  // An executable script standing in for an engine CLI.
  std::string Script(const std::string& name, const std::string& body) {
    const std::string path = root_ + "/" + name;
    std::ofstream(path) << "#!/bin/sh\n" << body << "\n";
    EXPECT_EQ(chmod(path.c_str(), 0755), 0);
    return path;
  }

  static ContainerEngine Podman() {
    ContainerEngine e;
    e.cli = EngineCli{EngineKind::kPodman, "/usr/bin/podman", "4.3.1"};
    e.gpu_passing = GpuPassing::kCdi;
    e.env = {"PATH=/usr/bin"};
    return e;
  }

  TaskLaunch Launch() const {
    TaskLaunch l;
    l.job_id = JobId(42);
    l.key = TaskKey{AllocationId(12), 1};
    l.argv = {"python3", "train.py", "--lr", "0.1"};
    l.workdir = workdir_;
    l.environment =
        LaunchEnvironment{"pytorch", 3, "container", "nvcr.io/nvidia/pytorch:24.05-py3", "", ""};
    return l;
  }

  // The argv between "run" and "--env-file": what the tests below look at.
  static std::vector<std::string> Options(const ContainerRun& run) {
    auto end = std::find(run.argv.begin(), run.argv.end(), "--env-file");
    return std::vector<std::string>(run.argv.begin() + 2, end);
  }

  std::string root_;
  std::string workdir_;
};

TEST_F(ContainerEngineTest, GpuPassingAndCdiKindFlags) {
  EXPECT_EQ(*ParseGpuPassing("cdi"), GpuPassing::kCdi);
  EXPECT_EQ(*ParseGpuPassing("gpus-flag"), GpuPassing::kGpusFlag);
  EXPECT_STREQ(GpuPassingName(GpuPassing::kGpusFlag), "gpus-flag");
  EXPECT_THAT(ParseGpuPassing("nvidia").status().message(),
              HasSubstr("--container-gpus: must be cdi or gpus-flag, got 'nvidia'"));
  EXPECT_TRUE(ValidateCdiKind("nvidia.com/gpu").ok());
  EXPECT_TRUE(ValidateCdiKind("corral.test/gpu-7_a").ok());
  for (const char* bad : {"", "gpu", "nvidia.com/", "/gpu", "nvidia.com/gpu/x", "-x.com/gpu",
                          "nvidia.com/gpu=0", "a b/gpu"}) {
    Status s = ValidateCdiKind(bad);
    EXPECT_FALSE(s.ok()) << bad;
    EXPECT_THAT(s.message(), HasSubstr("--cdi-kind")) << bad;
  }
}

TEST_F(ContainerEngineTest, DataMountsAreCheckedWhenParsed) {
  Result<DataMount> rw = ParseDataMount(root_ + ":/data");
  ASSERT_TRUE(rw.ok()) << rw.status().ToString();
  EXPECT_EQ(*rw, (DataMount{root_, "/data", false}));
  Result<DataMount> ro = ParseDataMount(root_ + ":/mnt/sets:ro");
  ASSERT_TRUE(ro.ok()) << ro.status().ToString();
  EXPECT_EQ(*ro, (DataMount{root_, "/mnt/sets", true}));
  const std::vector<std::pair<std::string, std::string>> bad = {
      {root_, "expected SRC:DST or SRC:DST:ro (paths without ':')"},
      {root_ + ":/a:ro:x", "expected SRC:DST or SRC:DST:ro (paths without ':')"},
      {root_ + ":/a:rw", "the option must be ro, got 'rw'"},
      {"data:/data", "SRC must be an absolute path"},
      {root_ + ":data", "DST must be an absolute path"},
      {root_ + ":", "DST must be an absolute path"},
      {root_ + ":/a,b", "DST must not contain ','"},
      {root_ + "/../x:/data", "SRC must not contain '..'"},
      {root_ + ":/data/../etc", "DST must not contain '..'"},
      {root_ + ":/", "DST must not be the container's root"},
      {root_ + "/missing:/data", "SRC " + root_ + "/missing: No such file or directory"},
  };
  for (const auto& [spec, why] : bad) {
    Result<DataMount> m = ParseDataMount(spec);
    ASSERT_FALSE(m.ok()) << spec;
    EXPECT_EQ(m.status().message(), "--container-mount '" + spec + "': " + why);
  }
}

TEST_F(ContainerEngineTest, VersionOutputGivesKindAndVersion) {
  Result<EngineCli> podman = ParseVersionOutput("/usr/bin/podman", "podman version 4.3.1\n");
  ASSERT_TRUE(podman.ok());
  EXPECT_EQ(podman->kind, EngineKind::kPodman);
  EXPECT_EQ(podman->version, "4.3.1");
  EXPECT_EQ(podman->path, "/usr/bin/podman");
  EXPECT_EQ(Describe(*podman), "podman 4.3.1");
  Result<EngineCli> docker =
      ParseVersionOutput("/usr/bin/docker", "Docker version 28.2.2, build e6534b4\n");
  ASSERT_TRUE(docker.ok());
  EXPECT_EQ(Describe(*docker), "docker 28.2.2");
  // podman-docker's `docker` is podman: the output decides.
  EXPECT_EQ(ParseVersionOutput("/usr/bin/docker", "podman version 4.9.0")->kind,
            EngineKind::kPodman);
  for (const char* bad : {"", "nerdctl version 1.7", "podman version ", "Docker version"}) {
    Result<EngineCli> cli = ParseVersionOutput("/x/engine", bad);
    ASSERT_FALSE(cli.ok()) << bad;
    EXPECT_THAT(cli.status().message(), HasSubstr("`/x/engine --version` answered")) << bad;
  }
}

TEST_F(ContainerEngineTest, EngineEnvironmentTakesOnlyWhatEnginesNeed) {
  EXPECT_THAT(EngineEnvironment({}),
              ElementsAre("PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"));
  EXPECT_THAT(EngineEnvironment({{"PATH", "/opt/bin"},
                                 {"CONTAINERS_CONF", "/etc/corral/containers.conf"},
                                 {"DOCKER_HOST", "unix:///run/d.sock"},
                                 {"HOME", "/root"},
                                 {"CORRAL_JOIN_TOKEN", "secret"},
                                 {"LD_PRELOAD", "/tmp/x.so"},
                                 {"LANG", "C.UTF-8"}}),
              ElementsAre("CONTAINERS_CONF=/etc/corral/containers.conf",
                          "DOCKER_HOST=unix:///run/d.sock", "HOME=/root", "PATH=/opt/bin"));
}

TEST_F(ContainerEngineTest, ContainerSeesItsGpusAsOrdinalsAndTheNodeIndicesApart) {
  TaskLaunch l = Launch();
  l.gpus = {1, 3};
  l.env = {{"FOO", "bar baz"}};
  const std::vector<std::string> env = ContainerEnvironment(l, "node-a", "");
  EXPECT_THAT(env, testing::IsSupersetOf({"CUDA_VISIBLE_DEVICES=0,1", "NVIDIA_VISIBLE_DEVICES=1,3",
                                          "CORRAL_GPU_INDICES=1,3", "CORRAL_JOB_ID=42",
                                          "CORRAL_NODE_NAME=node-a", "FOO=bar baz",
                                          "CORRAL_ENVIRONMENT=pytorch@3"}));
  EXPECT_TRUE(std::is_sorted(env.begin(), env.end()));
  for (const std::string& e : env) {
    const std::string name = e.substr(0, e.find('='));
    EXPECT_TRUE(name != "PATH" && name != "HOME" && name != "LANG") << e;
  }
  l.gpus = {};
  EXPECT_THAT(ContainerEnvironment(l, "node-a", ""),
              testing::IsSupersetOf(
                  {"CUDA_VISIBLE_DEVICES=", "NVIDIA_VISIBLE_DEVICES=void", "CORRAL_GPU_INDICES="}));
}

TEST_F(ContainerEngineTest, HostSetupOfTheEnvironmentIsIgnoredInAContainer) {
  TaskLaunch l = Launch();
  l.environment->venv = root_;  // an existing directory: a process launch would use it
  for (const std::string& e : ContainerEnvironment(l, "node-a", "")) {
    EXPECT_THAT(e, Not(HasSubstr(root_)));
    EXPECT_THAT(e, Not(HasSubstr("VIRTUAL_ENV")));
  }
}

TEST_F(ContainerEngineTest, RunCommandOfAGpuTaskWithLimits) {
  ContainerEngine engine = Podman();
  engine.mounts = {{"/srv/datasets", "/datasets", true}, {"/srv/cache", "/cache", false}};
  TaskLaunch l = Launch();
  l.gpus = {1, 3};
  l.memory = MemoryMib(2048);
  l.cpu = CpuMilli(1500);
  Result<ContainerRun> run =
      PlanContainerRun(engine, l, "corral-12-1", ContainerUser{1000, 100, {100, 27, 27, 44}},
                       "node-a", "", root_ + "/container.env");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_EQ(run->argv, (std::vector<std::string>{"/usr/bin/podman",
                                                 "run",
                                                 "--rm",
                                                 "--init",
                                                 "--name",
                                                 "corral-12-1",
                                                 "--log-driver=none",
                                                 "--network=host",
                                                 "--security-opt=no-new-privileges",
                                                 "--cap-drop=all",
                                                 "--user",
                                                 "1000:100",
                                                 "--group-add",
                                                 "27",
                                                 "--group-add",
                                                 "44",
                                                 "-w",
                                                 workdir_,
                                                 "-v",
                                                 workdir_ + ":" + workdir_,
                                                 "-v",
                                                 "/srv/datasets:/datasets:ro",
                                                 "-v",
                                                 "/srv/cache:/cache",
                                                 "--memory=2048m",
                                                 "--memory-swap=2048m",
                                                 "--cpus=1.5",
                                                 "--device",
                                                 "nvidia.com/gpu=1",
                                                 "--device",
                                                 "nvidia.com/gpu=3",
                                                 "--env-file",
                                                 root_ + "/container.env",
                                                 "--",
                                                 "nvcr.io/nvidia/pytorch:24.05-py3",
                                                 "python3",
                                                 "train.py",
                                                 "--lr",
                                                 "0.1"}));
}

TEST_F(ContainerEngineTest, CpuOnlyTaskWithoutLimitsGetsNoDevicesAndNoLimitFlags) {
  Result<ContainerRun> run = PlanContainerRun(Podman(), Launch(), "corral-12-1",
                                              ContainerUser{0, 0, {}}, "node-a", "", "/e");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_THAT(Options(*run),
              ElementsAre("--rm", "--init", "--name", "corral-12-1", "--log-driver=none",
                          "--network=host", "--security-opt=no-new-privileges", "--cap-drop=all",
                          "--user", "0:0", "-w", workdir_, "-v", workdir_ + ":" + workdir_));
}

TEST_F(ContainerEngineTest, GpusFlagModeAndOtherCdiKinds) {
  TaskLaunch l = Launch();
  l.gpus = {0, 3};
  ContainerEngine docker = Podman();
  docker.cli = EngineCli{EngineKind::kDocker, "/usr/bin/docker", "28.2.2"};
  docker.gpu_passing = GpuPassing::kGpusFlag;
  Result<ContainerRun> run = PlanContainerRun(docker, l, "corral-12-1", {}, "n", "", "/e");
  ASSERT_TRUE(run.ok());
  EXPECT_EQ(run->argv[0], "/usr/bin/docker");
  std::vector<std::string> options = Options(*run);
  EXPECT_THAT(std::vector<std::string>(options.end() - 2, options.end()),
              ElementsAre("--gpus", "\"device=0,3\""));
  ContainerEngine cdi = Podman();
  cdi.cdi_kind = "corral.test/gpu";
  options = Options(*PlanContainerRun(cdi, l, "corral-12-1", {}, "n", "", "/e"));
  EXPECT_THAT(std::vector<std::string>(options.end() - 4, options.end()),
              ElementsAre("--device", "corral.test/gpu=0", "--device", "corral.test/gpu=3"));
}

TEST_F(ContainerEngineTest, CpusAreWrittenAsDecimals) {
  for (const auto& [milli, text] : std::vector<std::pair<int64_t, std::string>>{
           {250, "--cpus=0.25"}, {1000, "--cpus=1"}, {2005, "--cpus=2.005"}, {1, "--cpus=0.001"}}) {
    TaskLaunch l = Launch();
    l.cpu = CpuMilli(milli);
    EXPECT_EQ(Options(*PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", "", "/e")).back(),
              text);
  }
}

TEST_F(ContainerEngineTest, ShellLaunchRunsUnderTheImagesShell) {
  TaskLaunch l = Launch();
  l.shell = true;
  l.argv = {"echo $0 $1", "a", "b"};
  Result<ContainerRun> run = PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", "", "/e");
  ASSERT_TRUE(run.ok());
  EXPECT_THAT(
      std::vector<std::string>(run->argv.end() - 6, run->argv.end()),
      ElementsAre("nvcr.io/nvidia/pytorch:24.05-py3", "/bin/sh", "-c", "echo $0 $1", "a", "b"));
}

TEST_F(ContainerEngineTest, VariablesGoToTheEnvFileNeverToTheCommandLine) {
  TaskLaunch l = Launch();
  l.env = {{"API_KEY", "s3cret value=1 # not a comment"}, {"LD_PRELOAD", "/tmp/evil.so"}};
  Result<ContainerRun> run = PlanContainerRun(Podman(), l, "corral-12-1", {}, "node-a", "", "/e");
  ASSERT_TRUE(run.ok());
  for (const std::string& a : run->argv) {
    EXPECT_THAT(a, Not(HasSubstr("s3cret")));
    EXPECT_THAT(a, Not(HasSubstr("evil")));
  }
  std::string expected;
  for (const std::string& e : ContainerEnvironment(l, "node-a", "")) expected += e + "\n";
  EXPECT_EQ(run->env_file, expected);
  EXPECT_THAT("\n" + run->env_file, HasSubstr("\nAPI_KEY=s3cret value=1 # not a comment\n"));
  EXPECT_THAT(run->env_file, HasSubstr("\nLD_PRELOAD=/tmp/evil.so\n"));
}

TEST_F(ContainerEngineTest, DistributedPartMountsItsHostfileAndRunsTorchrunInTheImage) {
  TaskLaunch l = Launch();
  l.tasks = 2;
  l.task_index = 1;
  l.distributed =
      Distributed{model::Launcher::kTorchrun, 4, 1, 2, "10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  const std::string hostfile = root_ + "/hostfiles/12-1";
  Result<ContainerRun> run = PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", hostfile, "/e");
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_THAT(Options(*run), testing::Contains(hostfile + ":" + hostfile + ":ro"));
  EXPECT_THAT(std::vector<std::string>(run->argv.end() - 13, run->argv.end() - 4),
              ElementsAre("nvcr.io/nvidia/pytorch:24.05-py3", "torchrun", "--nnodes=2",
                          "--nproc_per_node=4", "--node_rank=1", "--master_addr=10.0.0.1",
                          "--master_port=29500", "--redirects=2", "--tee=2"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_HOSTFILE=" + hostfile + "\n"));
  EXPECT_THAT(run->env_file, HasSubstr("MASTER_ADDR=10.0.0.1\n"));
}

TEST_F(ContainerEngineTest, TheStopFileAndTheCheckpointFolderAreAtTheirHostPathsInside) {
  TaskLaunch l = Launch();
  l.checkpoint_dir = "/shared/checkpoints/12";
  l.job_token = "crj_12_x";
  TaskChannel channel{"https://a:1", root_ + "/stops/12-1/stop.json", "/etc/corral/ca.pem"};
  Result<ContainerRun> run =
      PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", "", "/e", "", channel);
  ASSERT_TRUE(run.ok()) << run.status().ToString();
  EXPECT_THAT(Options(*run), testing::Contains(root_ + "/stops/12-1:" + root_ + "/stops/12-1:ro"));
  EXPECT_THAT(Options(*run), testing::Contains("/shared/checkpoints/12:/shared/checkpoints/12"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_STOP_FILE=" + channel.stop_file + "\n"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_CHECKPOINT_DIR=/shared/checkpoints/12\n"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_JOB_TOKEN=crj_12_x\n"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_SERVER=https://a:1\n"));
  EXPECT_THAT(Options(*run), testing::Contains("/etc/corral/ca.pem:/etc/corral/ca.pem:ro"));
  EXPECT_THAT(run->env_file, HasSubstr("CORRAL_CA_CERT=/etc/corral/ca.pem\n"));
  channel.ca_cert = "/etc/a,b.pem";
  EXPECT_THAT(PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", "", "/e", "", channel)
                  .status()
                  .message(),
              HasSubstr("--ca-cert"));
  channel.ca_cert.clear();
  l.checkpoint_dir = "/shared/a:b";
  EXPECT_THAT(PlanContainerRun(Podman(), l, "corral-12-1", {}, "n", "", "/e", "", channel)
                  .status()
                  .message(),
              HasSubstr("field 'checkpoint_dir'"));
}

TEST_F(ContainerEngineTest, LaunchesAContainerCannotRunAreRefusedNamingTheField) {
  auto error = [&](const TaskLaunch& l, const ContainerEngine& engine = Podman()) {
    Result<ContainerRun> run = PlanContainerRun(engine, l, "corral-12-1", {}, "n", "", "/e");
    EXPECT_FALSE(run.ok());
    return run.ok() ? std::string() : run.status().message();
  };
  TaskLaunch l = Launch();
  l.environment->image = "";
  EXPECT_EQ(error(l),
            "task 12-1: field 'environment.image': the container runtime needs an image "
            "(environment 'pytorch@3' has none)");
  for (const char* image : {"--privileged", "ubuntu latest", "-v/:/host", "a\nb", "/abs"}) {
    l.environment->image = image;
    EXPECT_EQ(error(l), "task 12-1: field 'environment.image': '" + std::string(image) +
                            "' is not an image reference");
  }
  l = Launch();
  l.workdir = "/data/a:b";
  EXPECT_THAT(error(l), HasSubstr("field 'workdir': '/data/a:b' contains ':' or ','"));
  l = Launch();
  l.env = {{"PEM", "line1\nline2"}};
  EXPECT_THAT(error(l), HasSubstr("field 'env.PEM': has a line break"));
  l.env = {{"BIG", std::string(70000, 'x')}};
  EXPECT_THAT(error(l), HasSubstr("field 'env.BIG': is longer than the container engine's env"));
  l = Launch();
  l.tasks = 2;
  l.distributed =
      Distributed{model::Launcher::kNone, 2, 0, 2, "10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  EXPECT_THAT(error(l),
              HasSubstr("field 'distributed': launcher none with procs_per_node 2 runs `corral "
                        "launch`, which the container runtime does not run yet"));
  l.task_index = 1;
  l.distributed =
      Distributed{model::Launcher::kMpi, 1, 1, 2, "10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  EXPECT_THAT(error(l), HasSubstr("field 'distributed': launcher mpi on part 1 runs `corral"));
  ContainerEngine engine = Podman();
  engine.mounts = {{"/srv", workdir_, false}};
  EXPECT_THAT(error(Launch(), engine),
              HasSubstr("field 'workdir': '" + workdir_ +
                        "' is also where --container-mount /srv:" + workdir_ + " mounts"));
}

TEST_F(ContainerEngineTest, RunEngineCommandRunsNoShellAndPassesExactlyItsEnvironment) {
  Result<EngineOutput> out =
      RunEngineCommand({"/usr/bin/env"}, {"A=1", "B=two words"}, Seconds(10));
  ASSERT_TRUE(out.ok()) << out.status().ToString();
  EXPECT_EQ(out->exit_code, 0);
  EXPECT_EQ(out->output, "A=1\nB=two words\n");
  out = RunEngineCommand({"/bin/echo", "$HOME", "a;b"}, {}, Seconds(10));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->output, "$HOME a;b\n");
  EXPECT_FALSE(RunEngineCommand({root_ + "/nothing"}, {}, Seconds(10)).ok());
}

TEST_F(ContainerEngineTest, RunEngineCommandGivesExitCodeAndBothStreams) {
  const std::string script = Script("engine", "echo out; echo err >&2; exit 3");
  Result<EngineOutput> out = RunEngineCommand({script}, {}, Seconds(10));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 3);
  EXPECT_EQ(out->output, "out\nerr\n");
}

TEST_F(ContainerEngineTest, RunEngineCommandStopsAtTheTimeoutAndAtTheCommandsExit) {
  const auto start = std::chrono::steady_clock::now();
  Result<EngineOutput> out = RunEngineCommand({Script("slow", "exec sleep 30")}, {}, Seconds(1));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, -1);
  // A child left behind holds the output pipe open: the command's own exit ends the wait.
  out = RunEngineCommand({Script("leaves", "sleep 30 & exit 4")}, {}, Seconds(20));
  ASSERT_TRUE(out.ok());
  EXPECT_EQ(out->exit_code, 4);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST_F(ContainerEngineTest, FindsTheEngineTheFlagNames) {
  Result<EngineSearch> none = FindContainerEngine(ContainerSettings{"none"});
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->engine);
  EXPECT_EQ(none->why_none, "--container-engine none");

  ContainerSettings settings;
  settings.choice = Script("podman", "echo 'podman version 9.1.0'");
  Result<EngineSearch> podman = FindContainerEngine(settings);
  ASSERT_TRUE(podman.ok()) << podman.status().ToString();
  ASSERT_TRUE(podman->engine);
  EXPECT_EQ(Describe(podman->engine->cli), "podman 9.1.0");
  EXPECT_EQ(podman->engine->cli.path, settings.choice);
  EXPECT_EQ(podman->engine->gpu_passing, GpuPassing::kCdi);
  EXPECT_EQ(podman->engine->cdi_kind, "nvidia.com/gpu");

  settings.choice = Script("docker", "echo 'Docker version 27.0.1, build x'");
  settings.mounts = {{root_, "/data", true}};
  Result<EngineSearch> docker = FindContainerEngine(settings);
  ASSERT_TRUE(docker.ok()) << docker.status().ToString();
  EXPECT_EQ(docker->engine->gpu_passing, GpuPassing::kGpusFlag);
  EXPECT_EQ(docker->engine->mounts, settings.mounts);
  settings.gpu_passing = GpuPassing::kCdi;
  EXPECT_EQ(FindContainerEngine(settings)->engine->gpu_passing, GpuPassing::kCdi);
}

TEST_F(ContainerEngineTest, EngineFlagErrorsNameTheFlag) {
  auto message = [](const ContainerSettings& s) {
    Result<EngineSearch> r = FindContainerEngine(s);
    EXPECT_FALSE(r.ok());
    return r.ok() ? std::string() : r.status().message();
  };
  EXPECT_EQ(message(ContainerSettings{"podman"}),
            "--container-engine: must be auto, none or an absolute path, got 'podman'");
  EXPECT_EQ(message(ContainerSettings{root_ + "/missing"}),
            "--container-engine: " + root_ + "/missing is not an executable file");
  EXPECT_THAT(
      message(ContainerSettings{Script("broken", "echo 'no daemon' >&2; exit 1")}),
      HasSubstr("--container-engine: `" + root_ + "/broken --version` exited 1: no daemon"));
  EXPECT_THAT(message(ContainerSettings{Script("other", "echo 'nerdctl version 1.7.0'")}),
              HasSubstr("answered 'nerdctl version 1.7.0': neither podman nor docker"));
  ContainerSettings bad_kind;
  bad_kind.choice = "none";
  bad_kind.cdi_kind = "gpu";
  EXPECT_THAT(message(bad_kind), HasSubstr("--cdi-kind: must be VENDOR/CLASS"));
}

TEST_F(ContainerEngineTest, AutoTakesPodmanFirstThenDockerFromPath) {
  const char* saved = getenv("PATH");
  const std::string old_path = saved != nullptr ? saved : "";
  const std::string bin = root_ + "/bin";
  ASSERT_TRUE(std::filesystem::create_directory(bin));
  auto restore = [&] { setenv("PATH", old_path.c_str(), 1); };
  setenv("PATH", ("relative:" + bin).c_str(), 1);
  Result<EngineSearch> found = FindContainerEngine(ContainerSettings{"auto"});
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->engine);
  EXPECT_EQ(found->why_none, "no podman or docker in PATH (relative:" + bin + ")");

  Script("bin/docker", "echo 'Docker version 28.2.2, build e6534b4'");
  found = FindContainerEngine(ContainerSettings{"auto"});
  ASSERT_TRUE(found.ok() && found->engine);
  EXPECT_EQ(found->engine->cli.path, bin + "/docker");
  EXPECT_THAT(found->engine->env, testing::Contains("PATH=relative:" + bin));

  Script("bin/podman", "exit 2");  // found first, but does not answer: docker is taken
  found = FindContainerEngine(ContainerSettings{"auto"});
  ASSERT_TRUE(found.ok() && found->engine);
  EXPECT_EQ(found->engine->cli.kind, EngineKind::kDocker);

  std::filesystem::remove(bin + "/docker");
  found = FindContainerEngine(ContainerSettings{"auto"});
  restore();
  ASSERT_TRUE(found.ok());
  EXPECT_FALSE(found->engine);
  EXPECT_EQ(found->why_none, "`" + bin + "/podman --version` exited 2");
}

TEST_F(ContainerEngineTest, RemoveContainerIgnoresOnlyAMissingContainer) {
  const std::string log = root_ + "/argv.log";
  ContainerEngine engine = Podman();
  engine.cli.path = Script("podman", "echo \"$@\" >> " + log + "\nexit 0");
  EXPECT_TRUE(RemoveContainer(engine, "corral-1-1").ok());
  engine.cli.kind = EngineKind::kDocker;
  EXPECT_TRUE(RemoveContainer(engine, "corral-1-1").ok());
  EXPECT_EQ(*ReadFile(log), "rm -f --time 0 corral-1-1\nrm -f corral-1-1\n");

  engine.cli.path = Script("missing",
                           "echo 'Error response from daemon: No such container: corral-1-1' >&2\n"
                           "exit 1");
  EXPECT_TRUE(RemoveContainer(engine, "corral-1-1").ok());
  engine.cli.path = Script("failing", "echo 'Error: cannot lock storage' >&2\nexit 125");
  Status s = RemoveContainer(engine, "corral-1-1");
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_EQ(s.message(), "`docker rm -f corral-1-1` exited 125: Error: cannot lock storage");
}

TEST_F(ContainerEngineTest, RemoveContainerGivesUpOnAHungEngineAfter10Seconds) {
  // The reconcile loop's thread waits for it: a hung engine must not hold it for long.
  ContainerEngine engine = Podman();
  engine.cli.path = Script("hung", "exec sleep 60");
  const auto start = std::chrono::steady_clock::now();
  Status s = RemoveContainer(engine, "corral-1-1");
  const auto waited = std::chrono::steady_clock::now() - start;
  EXPECT_EQ(s.code(), StatusCode::kIoError);
  EXPECT_THAT(s.message(), HasSubstr("`podman rm -f corral-1-1` did not finish"));
  EXPECT_GE(waited, std::chrono::seconds(9));
  EXPECT_LT(waited, std::chrono::seconds(15));
}

}  // namespace
}  // namespace corral::agent
