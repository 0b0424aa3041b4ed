// The server's part of a submission (job_submission.h): its defaults for the CPU and memory a
// job spec leaves out (ApplyResourceDefaults), alone and through the controller (the submission
// event says what was filled in; placement counts it), and the scheduler's view of a spec.
#include "server/control/job_submission.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "protocol/job_spec_testing.h"
#include "server/control/controller.h"
#include "server/test_store.h"

namespace corral::server {
namespace {

using nlohmann::json;

using protocol::spec_testing::Parse;
using protocol::spec_testing::Spec;

// The spec's resources once `defaults` were applied, with what they filled in.
std::pair<model::TaskResources, std::string> Effective(const json& spec,
                                                       const ResourceDefaults& defaults = {}) {
  JobSpec parsed = Parse(spec);
  const std::string filled = protocol::ToString(ApplyResourceDefaults(defaults, parsed));
  return {parsed.resources, filled};
}

ResourceDefaults CpusPerGpu(int64_t cpus) {
  ResourceDefaults d;
  d.cpus_per_gpu = cpus;
  return d;
}

ResourceDefaults MemoryPerCpu(int64_t mib) {
  ResourceDefaults d;
  d.memory_per_cpu = MemoryMib(mib);
  return d;
}

TEST(ApplyEnvironmentTest, ABatchScriptKeepsItsScriptAndNeedsAHostSide) {
  JobSpec spec = Parse({{"script", {{"text", "#!/bin/sh\n"}}}, {"environment", "py"}});
  EnvironmentSpec host;
  host.name = "py";
  host.venv = "/opt/corral/envs/py";
  host.image = "python:3";
  host.command = {"python3"};
  ASSERT_TRUE(ApplyEnvironment(host, 2, spec).ok());
  EXPECT_TRUE(spec.command.empty());  // the script runs, not the environment's command
  EXPECT_TRUE(protocol::ParseJobSpec(protocol::ToJson(spec), SpecOrigin::kStored).ok());
  EnvironmentSpec image_only = host;
  image_only.venv.clear();
  spec = Parse({{"script", {{"text", "#!/bin/sh\n"}}}, {"environment", "py"}});
  const Status refused = ApplyEnvironment(image_only, 2, spec);
  EXPECT_THAT(refused.message(), ::testing::HasSubstr("field 'script': environment 'py@2' runs "
                                                      "only in a container"));
}

TEST(ToModelJobTest, TheSchedulerSeesThePartsAndWhatEachAsks) {
  // A gang of 3 parts, 4 ranks each, 2 CPUs per rank: 8 CPUs per part.
  JobSpec spec = Parse(Spec({{"gpus", 4}, {"cpus", 2}}, 4, 3));
  EXPECT_TRUE(ApplyResourceDefaults(CpusPerGpu(16), spec).empty());  // asked: no default
  EXPECT_EQ(ToModelJob(spec, store::JobRecord{}).resources.cpu, CpuMilli(8000));
  EXPECT_EQ(ToModelJob(spec, store::JobRecord{}).tasks, 3);
}

TEST(ToModelJobTest, AnElasticJobAsksItsMinAndCarriesItsRange) {
  json elastic = Spec({{"gpus", 4}});
  elastic["elastic"] = {{"unit", "nodes"}, {"min", 1}, {"max", 3}};
  const model::Job job = ToModelJob(Parse(elastic), store::JobRecord{});
  ASSERT_TRUE(job.elastic.has_value());
  EXPECT_EQ(job.elastic->max, 3);
  EXPECT_EQ(job.elastic->unit, model::ElasticUnit::kNodes);
  EXPECT_EQ(job.tasks, 1);
}

TEST(ResourceDefaultsTest, AJobWithoutGpusAsksOneCpuPerProcess) {
  auto [one, note] = Effective(Spec(json::object()));
  EXPECT_EQ(one.cpu, CpuMilli(1000));
  EXPECT_EQ(one.memory, MemoryMib(0));  // no memory default unless the server sets one
  EXPECT_EQ(note, "resources.cpu_milli 1000 (1 CPU per process, as the job asks no GPU)");
  // A gang of 2 parts with 3 processes each: 3 CPUs per part.
  EXPECT_EQ(Effective(Spec(json::object(), 3, 2)).first.cpu, CpuMilli(3000));
  // What was asked stands, 0 included.
  auto [zero, none] = Effective(Spec({{"cpu_milli", 0}}));
  EXPECT_EQ(zero.cpu, CpuMilli(0));
  EXPECT_EQ(none, "");
}

TEST(ResourceDefaultsTest, AGpuJobAsksNoCpuUnlessTheServerSetsAPerGpuDefault) {
  auto [plain, none] = Effective(Spec({{"gpus", 2}}));
  EXPECT_EQ(plain.cpu, CpuMilli(0));
  EXPECT_EQ(none, "");
  auto [two, note] = Effective(Spec({{"gpus", 2}}, 2), CpusPerGpu(8));
  EXPECT_EQ(two.cpu, CpuMilli(16000));  // per GPU, whatever the processes
  EXPECT_EQ(note,
            "resources.cpu_milli 16000 (8 CPUs per GPU: the server's --default-cpus-per-gpu)");
  // A share of one GPU gets its share of the CPUs.
  EXPECT_EQ(Effective(Spec({{"gpus", 1}, {"gpu_milli", 250}}), CpusPerGpu(8)).first.cpu,
            CpuMilli(2000));
  // A job without GPUs keeps its 1 CPU per process.
  EXPECT_EQ(Effective(Spec(json::object()), CpusPerGpu(8)).first.cpu, CpuMilli(1000));
}

TEST(ResourceDefaultsTest, MemoryPerCpuFollowsTheCpuRequestAskedOrDefaulted) {
  auto [defaulted, note] = Effective(Spec(json::object(), 2), MemoryPerCpu(4096));
  EXPECT_EQ(defaulted.memory, MemoryMib(8192));
  EXPECT_EQ(note,
            "resources.cpu_milli 2000 (1 CPU per process, as the job asks no GPU); "
            "resources.memory_mib 8192 (4096 MiB per CPU: the server's "
            "--default-memory-per-cpu-mib)");
  // Asked CPU, defaulted memory; rounded up to a whole MiB.
  auto [asked, memory_only] = Effective(Spec({{"cpu_milli", 1500}}), MemoryPerCpu(1000));
  EXPECT_EQ(asked.memory, MemoryMib(1500));
  EXPECT_THAT(memory_only, ::testing::StartsWith("resources.memory_mib 1500"));
  EXPECT_EQ(Effective(Spec({{"cpu_milli", 1}}), MemoryPerCpu(1000)).first.memory, MemoryMib(1));
  EXPECT_EQ(Effective(Spec({{"cpus", 3}}), MemoryPerCpu(100)).first.memory, MemoryMib(300));
  // Asked memory stands; a GPU job without CPU gets no memory either.
  EXPECT_EQ(Effective(Spec({{"memory_mib", 10}}), MemoryPerCpu(4096)).first.memory, MemoryMib(10));
  EXPECT_EQ(Effective(Spec({{"gpus", 1}}), MemoryPerCpu(4096)).first.memory, MemoryMib(0));
  ResourceDefaults both = MemoryPerCpu(1024);
  both.cpus_per_gpu = 4;
  EXPECT_EQ(Effective(Spec({{"gpus", 2}}), both).first.memory, MemoryMib(8192));
}

TEST(ResourceDefaultsTest, EveryArrayElementGetsThem) {
  json spec = Spec(json::object());
  spec["array"] = {{"indices", {0, 1, 2}}};
  JobSpec parsed = Parse(spec);
  ASSERT_FALSE(ApplyResourceDefaults(MemoryPerCpu(512), parsed).empty());
  for (const ArrayElement& e : ArrayElements(parsed)) {
    EXPECT_EQ(e.spec.resources.cpu, CpuMilli(1000)) << e.index;
    EXPECT_EQ(e.spec.resources.memory, MemoryMib(512)) << e.index;
  }
}

TEST(ResourceDefaultsTest, AStoredSpecHoldsTheEffectiveRequestAndIsNeverDefaultedAgain) {
  JobSpec spec = Parse(Spec({{"cpus", 2}}, 2));
  (void)ApplyResourceDefaults(MemoryPerCpu(100), spec);
  const json stored = ToJson(spec);
  EXPECT_EQ(stored["resources"]["cpu_milli"], 4000);
  EXPECT_EQ(stored["resources"]["memory_mib"], 400);
  EXPECT_FALSE(stored["resources"].contains("cpus"));
  auto again = ParseJobSpec(stored, SpecOrigin::kStored);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_TRUE(ApplyResourceDefaults(MemoryPerCpu(7), *again).empty());
  EXPECT_EQ(again->resources, spec.resources);
  // A CPU-only job stored before the defaults existed keeps asking 0.
  json old = ToJson(Parse(Spec({{"cpu_milli", 0}, {"memory_mib", 0}})));
  auto kept = ParseJobSpec(old, SpecOrigin::kStored);
  ASSERT_TRUE(kept.ok());
  EXPECT_TRUE(ApplyResourceDefaults({}, *kept).empty());
  EXPECT_EQ(kept->resources.cpu, CpuMilli(0));
}

// Through the controller: the defaults are the server's, said in the submission event and in the
// stored spec, and placement counts them.
class SubmittedDefaultsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    store_ = test_store_.store();
    ASSERT_NE(store_, nullptr);
    auto alice = store_->CreateUser("alice", false, Seconds(1));
    ASSERT_TRUE(alice.ok());
    ASSERT_TRUE(store_->CreateProject("default", "", Seconds(1)).ok());
    alice_ = {alice->id, "alice", false, {"default"}};
    ControllerConfig config;
    config.resource_defaults = MemoryPerCpu(256);
    auto c = Controller::Create(config, *store_, clock_);
    ASSERT_TRUE(c.ok()) << c.status().ToString();
    controller_ = std::move(c).value();
  }

  TestStore test_store_{"job-spec"};  // outlives the controller (declared before it)
  FakeClock clock_{Seconds(1000)};
  store::Store* store_ = nullptr;
  std::unique_ptr<Controller> controller_;
  Principal alice_;
};

TEST_F(SubmittedDefaultsTest, ACpuOnlyArrayRunsAsManyElementsAsTheNodeHasCpus) {
  protocol::RegisterRequest node;
  node.name = "a";
  node.node_id = "node-a-0123456789abcdef";
  node.inventory.hostname = "h";
  node.inventory.cpu = CpuMilli(2000);
  node.inventory.memory = MemoryMib(1 << 20);
  ASSERT_TRUE(controller_->RegisterNode(node).ok());
  json spec = Spec(json::object());
  spec["array"] = {{"indices", {0, 1, 2, 3, 4}}};
  auto array = controller_->SubmitArray(alice_, Parse(spec));
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  const std::string reason =
      "submitted with defaults: resources.cpu_milli 1000 (1 CPU per process, as the job "
      "asks no GPU); resources.memory_mib 256 (256 MiB per CPU: the server's "
      "--default-memory-per-cpu-mib)";
  EXPECT_EQ(array->reason, reason);
  EXPECT_EQ(array->defaults,
            (std::vector<protocol::ResourceDefault>{
                {"resources.cpu_milli", 1000, "1 CPU per process, as the job asks no GPU"},
                {"resources.memory_mib", 256,
                 "256 MiB per CPU: the server's --default-memory-per-cpu-mib"}}));
  controller_->Tick();
  int started = 0, waiting_for_cpu = 0;
  for (JobId id : array->array_ids) {
    auto view = controller_->JobView(alice_, id);
    ASSERT_TRUE(view.ok()) << view.status().ToString();
    EXPECT_EQ(view->spec.resources.cpu, CpuMilli(1000));
    EXPECT_EQ(view->spec.resources.memory, MemoryMib(256));
    EXPECT_EQ(view->events[0].reason, reason);
    if (view->summary.state != model::JobState::kPending) {
      ++started;
    } else if (view->summary.pending_reason->code == "insufficient_cpu_memory") {
      ++waiting_for_cpu;
    }
  }
  EXPECT_EQ(started, 2);
  EXPECT_EQ(waiting_for_cpu, 3);
}

TEST_F(SubmittedDefaultsTest, AJobThatAsksEverythingIsSubmittedPlainly) {
  auto job = controller_->Submit(alice_, Parse(Spec({{"cpus", 1}, {"memory_mib", 64}})));
  ASSERT_TRUE(job.ok()) << job.status().ToString();
  EXPECT_EQ(job->reason, "submitted");
  EXPECT_TRUE(job->defaults.empty());
  EXPECT_EQ(store_->GetJob(job->id)->reason, "submitted");
}

}  // namespace
}  // namespace corral::server
