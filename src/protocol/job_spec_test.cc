// The job spec's codec: every field's checks name the field, the checks across fields, sessions,
// arrays, resources.cpus against resources.cpu_milli, and the stored form's round trip. What the
// server adds at submission (environments, resource defaults) is server/job_submission_test.cc.
#include "protocol/job_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <signal.h>

#include <nlohmann/json.hpp>

#include "protocol/job_spec_testing.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

using spec_testing::Parse;
using spec_testing::Spec;

// `base` with `field` set to `value` (a top-level field, or "resources.NAME").
json With(json base, const std::string& field, json value) {
  if (field.rfind("resources.", 0) == 0) {
    base["resources"][field.substr(10)] = std::move(value);
  } else {
    base[field] = std::move(value);
  }
  return base;
}

TEST(JobSpecTest, EveryErrorNamesTheField) {
  const json good = {{"command", {"python3", "train.py"}}};
  struct Case {
    json spec;
    std::string error;
  };
  const std::vector<Case> bad = {
      {json::array(), "job spec: must be a JSON object"},
      {With(good, "comand", {"true"}), "field 'comand': unknown field"},
      {json::object(), "field 'command': is required (or an environment with a default command)"},
      {With(good, "command", json::array()), "field 'command': must not be empty"},
      {With(good, "command", "true"), "field 'command': must be a list of arguments"},
      {With(With(good, "shell", true), "command", {"a", "b"}),
       "field 'command': must be one string when shell is true"},
      {With(good, "shell", "yes"), "field 'shell': must be true or false"},
      {With(good, "name", 7), "field 'name': must be a string"},
      {With(good, "name", std::string("a\0b", 3)), "field 'name': a job name must be"},
      {With(good, "name", std::string(129, 'x')), "field 'name': a job name must be"},
      {With(good, "name", "../x"), "field 'name': a job name must be"},
      {With(good, "project", std::string("a\0b", 3)), "field 'project': contains a NUL byte"},
      {With(good, "project", std::string(64 * 1024 + 1, 'x')),
       "field 'project': longer than 64 KiB"},
      {With(good, "workdir", "data"), "field 'workdir': must be an absolute path"},
      {With(good, "env", {{"1X", "a"}}), "field 'env.1X': is not a valid variable name"},
      {With(good, "env", {{"X", 1}}), "field 'env.X': must be a string"},
      {With(good, "env", {{"CORRAL_JOB_ID", "1"}}),
       "field 'env.CORRAL_JOB_ID': is set by corral in every task"},
      {With(With(good, "tasks", 2), "env", {{"MASTER_PORT", "1"}}),
       "field 'env.MASTER_PORT': is set by corral in distributed jobs"},
      {With(good, "resources", 2), "field 'resources': must be an object"},
      {With(good, "resources.gpus", -1),
       "field 'resources.gpus': must be between 0 and 1024, got -1"},
      {With(good, "resources.gpu_milli", 1001), "field 'resources.gpu_milli': must be between 0"},
      {With(good, "resources.cpu_milli", 1.5), "field 'resources.cpu_milli': must be an integer"},
      {With(good, "resources.memory_mib", -1), "field 'resources.memory_mib'"},
      {With(good, "resources.gpu_models", "A100"), "field 'resources.gpu_models': must be a list"},
      {With(good, "resources.disk", 1), "field 'resources.disk': unknown field"},
      {With(good, "tasks", 0), "field 'tasks': must be between 1 and 4096, got 0"},
      {With(good, "priority", 1001), "field 'priority': must be between -1000 and 1000"},
      // Above int64: not read as -1 (which would be in range).
      {With(good, "priority", json::parse("18446744073709551615")),
       "field 'priority': must be between -1000 and 1000, got 18446744073709551615"},
      {With(good, "time_limit_s", -5), "field 'time_limit_s': must be between 0"},
      {With(good, "time_limit_s", "1h"), "field 'time_limit_s': must be an integer"},
      {With(good, "max_restarts", -1), "field 'max_restarts'"},
      {With(good, "procs_per_node", 65), "field 'procs_per_node': must be between 1 and 64"},
      {With(good, "launcher", "slurm"), "field 'launcher'"},
      {With(With(With(good, "command", json::array({"train.py"})), "launcher", "torchrun"), "shell",
            true),
       "field 'shell': must be false with launcher torchrun"},
      {With(With(With(good, "launcher", "tf"), "tasks", 100), "procs_per_node", 16),
       "field 'procs_per_node': tf needs a port per rank: 1600 ranks are more than the 1500 ports"},
      {With(good, "environment", "Py Torch"), "field 'environment'"},
      {With(good, "array", {{"indices", {0, 1, 0}}}), "field 'array.indices[2]': 0 is repeated"},
      {With(good, "array", {{"indices", {0}}, {"size", 1}}), "field 'array.size': unknown field"},
      {With(good, "array", {{"indices", {0, 1}}, {"env", {json::object()}}}),
       "field 'array.env': must be a list of one object per index (2)"},
  };
  for (const Case& c : bad) {
    auto spec = ParseJobSpec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec.dump();
    EXPECT_EQ(spec.status().code(), StatusCode::kInvalidArgument) << c.spec.dump();
    EXPECT_THAT(spec.status().message(), HasSubstr(c.error)) << c.spec.dump();
  }
}

TEST(JobSpecTest, AnEnvironmentMayStandForTheCommand) {
  JobSpec spec = Parse({{"environment", "pytorch@3"}});
  EXPECT_TRUE(spec.command.empty());
  EXPECT_EQ(spec.environment, "pytorch@3");
  // Found by fuzz/job_spec_json_fuzzer.cc: ToJson wrote "command": [], which ParseJobSpec
  // refuses ("must not be empty"), so such a spec could not be read back, stored or shown.
  for (SpecOrigin origin : {SpecOrigin::kStored, SpecOrigin::kShown}) {
    auto again = ParseJobSpec(ToJson(spec), origin);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(ToJson(*again), ToJson(spec));
  }
}

TEST(JobSpecTest, CheckJobSpecRefusesWhatAChangeAfterParsingBroke) {
  // The server fills in an environment's command and variables after parsing.
  JobSpec shell = Parse({{"environment", "e"}, {"shell", true}});
  EXPECT_TRUE(CheckJobSpec(shell).ok());
  shell.command = {"a", "b"};
  EXPECT_THAT(CheckJobSpec(shell).message(),
              HasSubstr("field 'command': must be one string when shell is true"));
  JobSpec array = Parse({{"command", {"true"}}, {"tasks", 2}, {"array", {{"indices", {4, 5}}}}});
  ASSERT_TRUE(array.array.has_value());
  array.array->env = {{{"A", "1"}}, {{"WORLD_SIZE", "3"}}};
  EXPECT_THAT(CheckJobSpec(array).message(),
              HasSubstr("field 'array.env[1].WORLD_SIZE': is set by corral in distributed jobs"));
}

TEST(JobSpecTest, TheStoredFormRoundTrips) {
  const json submitted = {
      {"name", "train"},
      {"project", "vision"},
      {"command", {"python3", "train.py"}},
      {"workdir", "/data/train"},
      {"env", {{"SEED", "1"}}},
      {"resources",
       {{"gpus", 2}, {"gpu_models", {"A100-80GB"}}, {"cpu_milli", 16000}, {"memory_mib", 65536}}},
      {"tasks", 2},
      {"priority", -3},
      {"time_limit_s", 3600},
      {"max_restarts", 1},
      {"launcher", "torchrun"},
      {"procs_per_node", 2},
      {"environment", "pytorch@3"}};
  JobSpec spec = Parse(submitted);
  EXPECT_EQ(spec.resources.gpu_milli, MilliGpu(1000));  // whole GPUs unless said otherwise
  EXPECT_EQ(spec.launcher, model::Launcher::kTorchrun);
  EXPECT_TRUE(IsDistributed(spec));
  EXPECT_EQ(PortsOf(spec), 1);
  const json stored = ToJson(spec);
  auto again = ParseJobSpec(stored, SpecOrigin::kStored);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(ToJson(*again), stored);
  for (const char* field :
       {"name", "project", "command", "workdir", "env", "tasks", "priority", "time_limit_s",
        "max_restarts", "launcher", "procs_per_node", "environment"}) {
    EXPECT_EQ(stored[field], submitted[field]) << field;
  }
  EXPECT_EQ(stored["resources"]["gpu_models"], submitted["resources"]["gpu_models"]);
}

TEST(JobSpecTest, ArrayElementsAreTheSpecWithEachIndexsEnvMergedOverItsOwn) {
  JobSpec spec = Parse(
      {{"command", {"true"}},
       {"env", {{"A", "spec"}, {"B", "spec"}}},
       {"array",
        {{"indices", {7, 3}}, {"max_running", 1}, {"env", {{{"A", "seven"}}, json::object()}}}}});
  ASSERT_TRUE(spec.array.has_value());
  EXPECT_EQ(spec.array->max_running, std::optional<int>(1));
  std::vector<ArrayElement> elements = ArrayElements(spec);
  ASSERT_EQ(elements.size(), 2u);
  EXPECT_EQ(elements[0].index, 7);
  EXPECT_EQ(elements[0].spec.env,
            (std::map<std::string, std::string>{{"A", "seven"}, {"B", "spec"}}));
  EXPECT_EQ(elements[1].index, 3);
  EXPECT_EQ(elements[1].spec.env, spec.env);
  EXPECT_FALSE(elements[1].spec.array.has_value());
  EXPECT_FALSE(ToJson(spec).contains("array"));  // a stored spec is one job's
  EXPECT_TRUE(ArrayElements(Parse({{"command", {"true"}}})).empty());
}

TEST(CpusTest, WholeCpusArePerProcessSoAPartAsksThemTimesItsProcesses) {
  // A gang of 3 parts, 4 ranks each, 2 CPUs per rank: 8 CPUs per part, the gang 24.
  JobSpec spec = Parse(Spec({{"gpus", 4}, {"cpus", 2}}, 4, 3));
  EXPECT_EQ(spec.resources.cpu, CpuMilli(8000));
  EXPECT_TRUE(spec.cpu_given);
  EXPECT_FALSE(spec.memory_given);  // left to the server's defaults
  // cpu_milli stays per part, whatever procs_per_node is.
  EXPECT_EQ(Parse(Spec({{"cpu_milli", 1500}}, 4)).resources.cpu, CpuMilli(1500));
}

TEST(CpusTest, CpusAndCpuMilliTogetherAreRefusedNamingBoth) {
  auto both = ParseJobSpec(Spec({{"cpus", 2}, {"cpu_milli", 2000}}));
  ASSERT_FALSE(both.ok());
  EXPECT_EQ(both.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(both.status().message(), HasSubstr("field 'resources.cpus'"));
  EXPECT_THAT(both.status().message(), HasSubstr("resources.cpu_milli"));
  for (const json& bad : {json(0), json(-1), json(1.5), json("2"), json(kMaxCpusPerProc + 1)}) {
    auto parsed = ParseJobSpec(Spec({{"cpus", bad}}));
    ASSERT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("field 'resources.cpus'")) << bad;
  }
}

json SessionSpecJson(json session) {
  return {{"command", {"app"}}, {"session", std::move(session)}};
}

const std::string kToken(64, 'a');

TEST(SessionSpecTest, ErrorsNameTheField) {
  struct Case {
    json spec;
    std::string error;
  };
  const std::vector<Case> bad = {
      {SessionSpecJson(5), "field 'session': must be an object"},
      {SessionSpecJson({{"idle", 60}}), "session.idle"},
      {SessionSpecJson({{"idle_timeout_s", 59}}),
       "field 'session.idle_timeout_s': must be 0 (never stopped when idle) or at least 60"},
      {SessionSpecJson({{"idle_timeout_s", -1}}), "field 'session.idle_timeout_s'"},
      {SessionSpecJson({{"idle_timeout_s", "1h"}}), "field 'session.idle_timeout_s'"},
      {SessionSpecJson({{"token", kToken}}), "field 'session.token': is generated by the server"},
      {{{"command", {"app"}}, {"tasks", 2}, {"session", json::object()}},
       "field 'tasks': must be 1 for a session"},
      {{{"command", {"app"}}, {"launcher", "torchrun"}, {"session", json::object()}},
       "field 'launcher': must be none for a session"},
      {{{"command", {"app"}}, {"procs_per_node", 2}, {"session", json::object()}},
       "field 'procs_per_node': must be 1 for a session"},
      {{{"command", {"app"}}, {"array", {{"indices", {0, 1}}}}, {"session", json::object()}},
       "field 'array': a session is one job"},
      {{{"command", {"app"}},
        {"env", {{"CORRAL_SESSION_PORT", "80"}}},
        {"session", json::object()}},
       "field 'env.CORRAL_SESSION_PORT': is set by corral"},
  };
  for (const Case& c : bad) {
    auto spec = ParseJobSpec(c.spec);
    ASSERT_FALSE(spec.ok()) << c.spec.dump();
    EXPECT_THAT(spec.status().message(), HasSubstr(c.error)) << c.spec.dump();
  }
}

TEST(SessionSpecTest, AShellMayLeaveOutItsCommand) {
  // `corral shell` without a command: the task user's login shell.
  auto shell = ParseJobSpec({{"session", {{"shell", true}, {"idle_timeout_s", 0}}}});
  ASSERT_TRUE(shell.ok()) << shell.status().ToString();
  EXPECT_TRUE(shell->session->shell);
  EXPECT_TRUE(shell->command.empty());
  EXPECT_EQ(ToJson(*shell)["session"], json({{"idle_timeout_s", 0}, {"shell", true}}));
  EXPECT_FALSE(ParseJobSpec(SessionSpecJson(json::object()))->session->shell);
  EXPECT_FALSE(ToJson(*ParseJobSpec(SessionSpecJson(json::object())))["session"].contains("shell"));
  // Any other session, or no session, still needs one.
  EXPECT_THAT(ParseJobSpec({{"session", json::object()}}).status().message(),
              HasSubstr("field 'command': is required"));
  EXPECT_THAT(ParseJobSpec({{"session", {{"shell", false}}}}).status().message(),
              HasSubstr("field 'command': is required"));
  EXPECT_THAT(ParseJobSpec(SessionSpecJson({{"shell", "yes"}})).status().message(),
              HasSubstr("field 'session.shell': must be true or false"));
}

TEST(SessionSpecTest, StoredSpecsCarryTheSaltNotTheSecretAndRoundTrip) {
  auto submitted = ParseJobSpec(SessionSpecJson({{"idle_timeout_s", 0}}));
  ASSERT_TRUE(submitted.ok()) << submitted.status().ToString();
  ASSERT_TRUE(submitted->session.has_value());
  EXPECT_EQ(submitted->session->idle_timeout_s, std::optional<int64_t>(0));
  EXPECT_FALSE(ParseJobSpec(SessionSpecJson(json::object()))->session->idle_timeout_s);

  JobSpec spec = *submitted;
  spec.session->salt = kToken;
  const json stored = ToJson(spec);
  EXPECT_EQ(stored["session"], json({{"idle_timeout_s", 0}, {"salt", kToken}}));
  auto again = ParseJobSpec(stored, SpecOrigin::kStored);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->session->salt, kToken);
  EXPECT_EQ(ToJson(*again), stored);
  // A spec stored before secrets were derived holds the secret: read, and written back as it was.
  auto legacy = ParseJobSpec(SessionSpecJson({{"token", kToken}}), SpecOrigin::kStored);
  ASSERT_TRUE(legacy.ok()) << legacy.status().ToString();
  EXPECT_EQ(legacy->session->stored_token, kToken);
  EXPECT_TRUE(legacy->session->salt.empty());
  EXPECT_EQ(ToJson(*legacy)["session"], json({{"token", kToken}}));
  // A stored session must have a well-formed salt (or token); a submitted one neither.
  EXPECT_THAT(ParseJobSpec(SessionSpecJson(json::object()), SpecOrigin::kStored).status().message(),
              HasSubstr("field 'session.salt': is required"));
  EXPECT_THAT(
      ParseJobSpec(SessionSpecJson({{"salt", "XYZ"}}), SpecOrigin::kStored).status().message(),
      HasSubstr("64 lowercase hex"));
  EXPECT_THAT(ParseJobSpec(SessionSpecJson({{"salt", kToken}})).status().message(),
              HasSubstr("field 'session.salt': is generated by the server"));
  EXPECT_FALSE(ParseJobSpec(stored).ok());
  // Job views show the spec without the salt, and read it back so.
  JobSpec without = spec;
  without.session->salt.clear();
  const json shown = ToJson(without);
  EXPECT_FALSE(shown["session"].contains("salt"));
  EXPECT_EQ(shown["session"]["idle_timeout_s"], 0);
  EXPECT_EQ(shown["command"], stored["command"]);
  EXPECT_TRUE(ParseJobSpec(shown, SpecOrigin::kShown).ok());
  EXPECT_FALSE(ParseJobSpec(stored, SpecOrigin::kShown).ok());
  // A newer server may show fields this corral does not know: read, not refused (a CLI older
  // than its server still shows the job); given by a user, they are refused.
  json newer = shown;
  newer["dependencies"] = json::array({"afterok:3"});
  newer["resources"]["gpu_memory_mib"] = 40000;
  newer["session"]["kind"] = "jupyter";
  EXPECT_TRUE(ParseJobSpec(newer, SpecOrigin::kShown).ok());
  EXPECT_THAT(ParseJobSpec(newer, SpecOrigin::kStored).status().message(),
              HasSubstr("unknown field"));
}

}  // namespace
}  // namespace corral::protocol

namespace corral::protocol {
namespace {

TEST(SubmitDirTest, ItIsAnAbsolutePathKeptInTheStoredForm) {
  const json spec = {{"command", {"true"}}, {"submit_dir", "/home/a/proj"}};
  JobSpec parsed = spec_testing::Parse(spec);
  EXPECT_EQ(parsed.submit_dir, "/home/a/proj");
  auto stored = ParseJobSpec(ToJson(parsed), SpecOrigin::kStored);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->submit_dir, "/home/a/proj");
  EXPECT_FALSE(ToJson(spec_testing::Parse({{"command", {"true"}}})).contains("submit_dir"));
  EXPECT_THAT(ParseJobSpec({{"command", {"true"}}, {"submit_dir", "proj"}}).status().message(),
              ::testing::HasSubstr("field 'submit_dir': must be an absolute path"));
  EXPECT_THAT(ParseJobSpec({{"command", {"true"}}, {"submit_dir", 3}}).status().message(),
              ::testing::HasSubstr("field 'submit_dir'"));
}

TEST(WarningSignalSpecTest, ItNeedsATimeLimitAndRoundTrips) {
  const json spec = {{"command", {"true"}},
                     {"time_limit_s", 600},
                     {"signal", {{"name", "SIGUSR1"}, {"before_s", 90}}}};
  JobSpec parsed = spec_testing::Parse(spec);
  ASSERT_TRUE(parsed.warning_signal);
  EXPECT_EQ(*parsed.warning_signal, (model::WarningSignal{SIGUSR1, Seconds(90)}));
  EXPECT_EQ(ToJson(parsed)["signal"], json({{"name", "USR1"}, {"before_s", 90}}));
  auto stored = ParseJobSpec(ToJson(parsed), SpecOrigin::kStored);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->warning_signal, parsed.warning_signal);
  // A number, and Slurm's default lead.
  JobSpec numbered = spec_testing::Parse(
      {{"command", {"true"}}, {"time_limit_s", 600}, {"signal", {{"name", SIGUSR2}}}});
  EXPECT_EQ(*numbered.warning_signal, (model::WarningSignal{SIGUSR2, Seconds(60)}));
  struct Case {
    json signal;
    std::string error;
  };
  for (const Case& c : std::vector<Case>{
           {"USR1", "field 'signal': must be an object"},
           {json::object(), "field 'signal.name': is required"},
           {{{"name", "USR9"}}, "field 'signal.name': unknown signal 'USR9'"},
           {{{"name", "KILL"}}, "field 'signal.name': KILL cannot be caught"},
           {{{"name", true}}, "field 'signal.name': must be a signal's name (USR1) or number"},
           {{{"name", "USR1"}, {"before_s", 70000}}, "field 'signal.before_s'"},
           {{{"name", "USR1"}, {"when", 1}}, "field 'signal.when': unknown field"},
       }) {
    EXPECT_THAT(
        ParseJobSpec({{"command", {"true"}}, {"time_limit_s", 30}, {"signal", {{"name", "USR1"}}}})
            .status()
            .message(),
        ::testing::HasSubstr("field 'signal.before_s': must be less than time_limit_s (30), "
                             "got 60: it would be sent at the start"));
    EXPECT_THAT(ParseJobSpec({{"command", {"true"}}, {"time_limit_s", 600}, {"signal", c.signal}})
                    .status()
                    .message(),
                ::testing::HasSubstr(c.error))
        << c.signal.dump();
  }
  EXPECT_THAT(
      ParseJobSpec({{"command", {"true"}}, {"signal", {{"name", "USR1"}}}}).status().message(),
      ::testing::HasSubstr("field 'signal': needs a time limit"));
}

}  // namespace
}  // namespace corral::protocol

namespace corral::protocol {
namespace {

TEST(CheckpointGraceSpecTest, IsBoundedAndStored) {
  JobSpec parsed = spec_testing::Parse({{"command", {"true"}}, {"checkpoint_grace_s", 120}});
  EXPECT_EQ(parsed.checkpoint_grace, Seconds(120));
  auto stored = ParseJobSpec(ToJson(parsed), SpecOrigin::kStored);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->checkpoint_grace, Seconds(120));
  EXPECT_FALSE(ToJson(spec_testing::Parse({{"command", {"true"}}})).contains("checkpoint_grace_s"));
  for (const json& bad : {json(-1), json(3601), json("60s")}) {
    EXPECT_THAT(
        ParseJobSpec({{"command", {"true"}}, {"checkpoint_grace_s", bad}}).status().message(),
        HasSubstr("field 'checkpoint_grace_s'"))
        << bad;
  }
}

TEST(DependencySpecTest, SlurmsTextIsReadTypedAndStoredCanonically) {
  JobSpec parsed = spec_testing::Parse({{"command", {"true"}},
                                        {"dependency", "afterok:12:13,afterany:14"},
                                        {"kill_on_invalid_dep", true}});
  ASSERT_EQ(parsed.dependencies.size(), 3u);
  EXPECT_EQ(parsed.dependencies[2],
            (model::Dependency{model::DependencyType::kAfterAny, JobId(14)}));
  EXPECT_TRUE(parsed.kill_on_invalid_dep);
  const json stored_json = ToJson(parsed);
  EXPECT_EQ(stored_json["dependency"], "afterok:12:13,afterany:14");
  auto stored = ParseJobSpec(stored_json, SpecOrigin::kStored);
  ASSERT_TRUE(stored.ok());
  EXPECT_EQ(stored->dependencies, parsed.dependencies);
  EXPECT_TRUE(stored->kill_on_invalid_dep);
  const json plain = ToJson(spec_testing::Parse({{"command", {"true"}}}));
  EXPECT_FALSE(plain.contains("dependency"));
  EXPECT_FALSE(plain.contains("kill_on_invalid_dep"));
  EXPECT_THAT(ParseJobSpec({{"command", {"true"}}, {"dependency", "singleton"}}).status().message(),
              ::testing::HasSubstr("field 'dependency': Slurm's 'singleton' is not supported"));
  EXPECT_THAT(ParseJobSpec({{"command", {"true"}}, {"dependency", 12}}).status().message(),
              ::testing::HasSubstr("field 'dependency'"));
  EXPECT_THAT(
      ParseJobSpec({{"command", {"true"}}, {"kill_on_invalid_dep", "yes"}}).status().message(),
      ::testing::HasSubstr("field 'kill_on_invalid_dep': must be true or false"));
}

TEST(ElasticSpecTest, TheSizeIsMinWhenLeftOutAndTheFormRoundTrips) {
  JobSpec gpus = Parse({{"command", {"true"}}, {"elastic", {{"min", 2}, {"max", 8}}}});
  ASSERT_TRUE(gpus.elastic.has_value());
  EXPECT_EQ(gpus.elastic->unit, model::ElasticUnit::kGpus);
  EXPECT_EQ(gpus.resources.gpus, GpuCount(2));
  EXPECT_EQ(gpus.resources.gpu_milli, kWholeGpu);
  EXPECT_FALSE(IsDistributed(gpus));

  JobSpec nodes =
      Parse(With(Spec({{"gpus", 4}}), "elastic", {{"unit", "nodes"}, {"min", 1}, {"max", 2}}));
  EXPECT_EQ(nodes.tasks, 1);
  EXPECT_EQ(MaxTasks(nodes), 2);
  EXPECT_TRUE(IsDistributed(nodes));  // it gets rendezvous variables at one node too

  for (const JobSpec& spec : {gpus, nodes}) {
    const json stored = ToJson(spec);
    auto again = ParseJobSpec(stored, SpecOrigin::kStored);
    ASSERT_TRUE(again.ok()) << again.status().ToString();
    EXPECT_EQ(again->elastic, spec.elastic);
    EXPECT_EQ(ToJson(*again), stored);
  }
  EXPECT_EQ(ToJson(gpus)["elastic"], json({{"unit", "gpus"}, {"min", 2}, {"max", 8}, {"step", 0}}));

  // A stored spec may hold any size in the range (a submitted one: MIN).
  json grown = ToJson(gpus);
  grown["resources"]["gpus"] = 8;
  auto stored = ParseJobSpec(grown, SpecOrigin::kStored);
  ASSERT_TRUE(stored.ok()) << stored.status().ToString();
  EXPECT_EQ(stored->resources.gpus, GpuCount(8));
  EXPECT_THAT(ParseJobSpec(grown).status().message(),
              HasSubstr("field 'resources.gpus': must be elastic.min (2) or left out"));
}

TEST(ElasticSpecTest, WhatMakesNoSenseIsRefusedNamingTheField) {
  const json good = {{"command", {"true"}}, {"elastic", {{"min", 2}, {"max", 8}}}};
  auto elastic = [&](json e) { return With(good, "elastic", std::move(e)); };
  struct Case {
    json spec;
    std::string error;
  };
  const std::vector<Case> bad = {
      {elastic(4), "field 'elastic': must be an object"},
      {elastic({{"min", 2}, {"max", 8}, {"size", 1}}), "field 'elastic.size': unknown field"},
      {elastic({{"max", 8}}), "field 'elastic.min': is required"},
      {elastic({{"min", 2}}), "field 'elastic.max': is required"},
      {elastic({{"unit", "tpus"}, {"min", 2}, {"max", 8}}),
       "field 'elastic.unit': must be gpus or nodes, got 'tpus'"},
      {elastic({{"min", 0}, {"max", 8}}), "field 'elastic.min': must be between 1 and 4096"},
      {elastic({{"min", 2}, {"max", 5000}}), "field 'elastic.max': must be between 1 and 4096"},
      {elastic({{"min", 8}, {"max", 2}}),
       "field 'elastic.min': must not exceed elastic.max (2), got 8"},
      {elastic({{"min", 2}, {"max", 8}, {"step", -1}}), "field 'elastic.step': must be between 0"},
      {With(good, "resources", {{"gpus", 4}}),
       "field 'resources.gpus': must be elastic.min (2) or left out for an elastic job, got 4"},
      {With(With(good, "resources", {{"gpus", 1}, {"gpu_milli", 500}}), "elastic",
            {{"min", 1}, {"max", 4}}),
       "field 'resources.gpu_milli': an elastic job uses whole GPUs, not a share"},
      // The CLI's form: the size left out (the range sets it), a share asked.
      {With(With(good, "resources", {{"gpu_milli", 500}}), "elastic", {{"min", 2}, {"max", 8}}),
       "field 'resources.gpu_milli': an elastic job uses whole GPUs, not a share"},
      {With(good, "tasks", 2), "field 'tasks': must be 1 for a range of GPUs"},
      {With(Spec({{"gpus", 1}, {"gpu_milli", 500}}), "elastic",
            {{"unit", "nodes"}, {"min", 1}, {"max", 2}}),
       "field 'resources.gpu_milli': an elastic job uses whole GPUs, not a share"},
      {With(Spec({{"gpus", 1}}, 1, 3), "elastic", {{"unit", "nodes"}, {"min", 1}, {"max", 2}}),
       "field 'tasks': must be elastic.min (1) or left out for an elastic job, got 3"},
      {With(good, "session", json::object()), "field 'elastic': a session is not elastic"},
      {With(Spec({{"gpus", 0}}), "elastic", {{"unit", "nodes"}, {"min", 1}, {"max", 2}}),
       "field 'resources.gpus': must be at least 1 for a job elastic by nodes"},
  };
  for (const Case& c : bad) {
    auto parsed = ParseJobSpec(c.spec);
    ASSERT_FALSE(parsed.ok()) << c.spec.dump();
    EXPECT_THAT(parsed.status().message(), HasSubstr(c.error)) << c.spec.dump();
  }
  // An array of elastic jobs: each element is one elastic job.
  JobSpec array = Parse(With(good, "array", {{"indices", {0, 1}}}));
  for (const ArrayElement& element : ArrayElements(array)) {
    EXPECT_EQ(element.spec.elastic, array.elastic);
  }
}

}  // namespace
}  // namespace corral::protocol
