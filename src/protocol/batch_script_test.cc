#include "protocol/batch_script.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "protocol/job_spec.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

// The spec `corral batch` sends for `text` with the request's own fields `over`.
json Request(const std::string& text, json over = json::object()) {
  over["script"] = {{"text", text}};
  return over;
}

json Expand(const std::string& text, json over = json::object()) {
  auto expanded = ExpandBatchScript(Request(text, std::move(over)));
  EXPECT_TRUE(expanded.ok()) << expanded.status().message();
  return expanded.ok() ? expanded->spec : json();
}

TEST(BatchScriptTest, ReadsTheDoneWhenScriptWithSlurmsMeaning) {
  const json spec = Expand(
      "#!/bin/bash\n"
      "#SBATCH -J x\n"
      "#SBATCH --gres=gpu:2\n"
      "#SBATCH -t 0:10:00\n"
      "#SBATCH -o out_%j.txt\n"
      "#SBATCH --dependency=afterok:12\n"
      "\n"
      "python3 train.py\n",
      {{"submit_dir", "/home/a"}});
  EXPECT_EQ(spec["name"], "x");
  EXPECT_EQ(spec["resources"]["gpus"], 2);
  EXPECT_EQ(spec["time_limit_s"], 600);
  EXPECT_EQ(spec["output_file"], "out_%j.txt");
  EXPECT_EQ(spec["dependency"], "afterok:12");
  EXPECT_EQ(spec["submit_dir"], "/home/a");
  EXPECT_TRUE(spec.contains("script"));
  EXPECT_FALSE(spec.contains("command"));
}

TEST(BatchScriptTest, DirectivesEndAtTheFirstCommand) {
  const json spec = Expand("#!/bin/sh\n#SBATCH -J before\necho hi\n#SBATCH -J after\n");
  EXPECT_EQ(spec["name"], "before");
}

TEST(BatchScriptTest, CommentsAndBlankLinesDoNotEndDirectives) {
  const json spec = Expand("#!/bin/sh\n\n# a comment\n   \n#SBATCH --job-name=late  # why\n");
  EXPECT_EQ(spec["name"], "late");
}

TEST(BatchScriptTest, SlurmTimeFormsAreMinutesFirst) {
  for (const auto& [text, seconds] :
       std::vector<std::pair<std::string, int64_t>>{{"10", 600},
                                                    {"1:30", 90},
                                                    {"1:00:00", 3600},
                                                    {"2-0", 172800},
                                                    {"1-2:30", 95400},
                                                    {"1-00:00:05", 86405},
                                                    {"UNLIMITED", 0}}) {
    auto parsed = ParseSlurmTime(text, "--time");
    ASSERT_TRUE(parsed.ok()) << text << ": " << parsed.status().message();
    EXPECT_EQ(*parsed, seconds) << text;
  }
  for (const std::string bad : {"", "1h", "-5", "1:99", "x:10"}) {
    EXPECT_FALSE(ParseSlurmTime(bad, "--time").ok()) << bad;
  }
}

TEST(BatchScriptTest, RanksBecomePartsAndProcessesPerPart) {
  json spec = Expand("#!/bin/sh\n#SBATCH -N 2\n#SBATCH --ntasks-per-node=4\n#SBATCH -c 3\n");
  EXPECT_EQ(spec["tasks"], 2);
  EXPECT_EQ(spec["procs_per_node"], 4);
  EXPECT_EQ(spec["resources"]["cpus"], 3);
  spec = Expand("#!/bin/sh\n#SBATCH --nodes=2 --ntasks=8 --gpus=8\n");
  EXPECT_EQ(spec["procs_per_node"], 4);
  EXPECT_EQ(spec["resources"]["gpus"], 4);  // --gpus is the job's, 4 per node
  spec = Expand("#!/bin/sh\n#SBATCH -n 2 --gpus-per-task=a100:1\n");
  EXPECT_EQ(spec.value("tasks", 1), 1);
  EXPECT_EQ(spec["procs_per_node"], 2);
  EXPECT_EQ(spec["resources"]["gpus"], 2);
  EXPECT_EQ(spec["resources"]["gpu_models"], json::array({"a100"}));
  auto uneven = ExpandBatchScript(Request("#!/bin/sh\n#SBATCH -N 2 -n 3\n"));
  ASSERT_FALSE(uneven.ok());
  EXPECT_THAT(uneven.status().message(), HasSubstr("does not divide"));
}

TEST(BatchScriptTest, MemoryInSlurmUnits) {
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH --mem=16G\n")["resources"]["memory_mib"], 16384);
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH --mem=4000\n")["resources"]["memory_mib"], 4000);
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH --mem-per-cpu=1G -c 4\n")["resources"]["memory_mib"], 4096);
  EXPECT_FALSE(ExpandBatchScript(Request("#!/bin/sh\n#SBATCH --mem=4X\n")).ok());
}

TEST(BatchScriptTest, CommandLineOverCorralLinesOverSbatchLines) {
  const std::string script =
      "#!/bin/sh\n#SBATCH -J slurm -t 10 --gres=gpu:4\n#CORRAL --name corral --gpus 2\n";
  json spec = Expand(script);
  EXPECT_EQ(spec["name"], "corral");
  EXPECT_EQ(spec["resources"]["gpus"], 2);
  EXPECT_EQ(spec["time_limit_s"], 600);
  spec = Expand(script, {{"name", "flag"}, {"resources", {{"gpus", 1}}}});
  EXPECT_EQ(spec["name"], "flag");
  EXPECT_EQ(spec["resources"]["gpus"], 1);
  EXPECT_EQ(spec["time_limit_s"], 600);
  // A CPU request above replaces the other form below: a spec gives one.
  spec = Expand("#!/bin/sh\n#SBATCH -c 4\n", {{"resources", {{"cpu_milli", 500}}}});
  EXPECT_FALSE(spec["resources"].contains("cpus"));
  EXPECT_TRUE(ParseJobSpec(spec).ok());
}

TEST(BatchScriptTest, CorralLinesTakeSubmitsLongFlags) {
  const json spec = Expand(
      "#!/bin/sh\n#CORRAL --time-limit 2h --env A=1 --env B=2 --afterok 4 --afterany 5\n"
      "#CORRAL --signal USR1@90 --array 0-3%2 --kill-on-invalid-dep\n");
  EXPECT_EQ(spec["time_limit_s"], 7200);
  EXPECT_EQ(spec["env"], (json{{"A", "1"}, {"B", "2"}}));
  EXPECT_EQ(spec["dependency"], "afterok:4,afterany:5");
  EXPECT_EQ(spec["signal"]["before_s"], 90);
  EXPECT_EQ(spec["array"]["max_running"], 2);
  EXPECT_EQ(spec["kill_on_invalid_dep"], true);
  auto unknown = ExpandBatchScript(Request("#!/bin/sh\n#CORRAL --gpuz 2\n"));
  ASSERT_FALSE(unknown.ok());
  EXPECT_THAT(unknown.status().message(), HasSubstr("line 2: #CORRAL --gpuz: unknown option"));
}

TEST(BatchScriptTest, UnknownAndUnsupportedSbatchOptionsAreWarningsNamingTheLine) {
  auto expanded = ExpandBatchScript(
      Request("#!/bin/sh\n#SBATCH --mail-type=END --frobnicate 3\n#SBATCH --exclusive -J ok\n"));
  ASSERT_TRUE(expanded.ok()) << expanded.status().message();
  EXPECT_EQ(expanded->spec["name"], "ok");
  ASSERT_EQ(expanded->warnings.size(), 3u);
  EXPECT_THAT(expanded->warnings[0], HasSubstr("line 2: #SBATCH --mail-type: ignored"));
  EXPECT_THAT(expanded->warnings[1], HasSubstr("line 2: #SBATCH --frobnicate: ignored"));
  EXPECT_THAT(expanded->warnings[2], HasSubstr("line 3: #SBATCH --exclusive: ignored"));
}

TEST(BatchScriptTest, RelativeChdirIsTakenFromTheSubmitFolder) {
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH -D runs/a\n", {{"submit_dir", "/home/u/p"}})["workdir"],
            "/home/u/p/runs/a");
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH -D /abs\n", {{"submit_dir", "/home/u"}})["workdir"], "/abs");
}

TEST(BatchScriptTest, RefusesWhatSbatchRefusesAndBoundsInput) {
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {"echo no shebang\n", "must start with #!"},
           {"#!/bin/sh\n#SBATCH -J 'open\n", "unterminated quote"},
           {"#!/bin/sh\n#SBATCH stray\n", "'stray' is not an option"},
           {"#!/bin/sh\n#SBATCH --time\n", "needs a value"},
           {"#!/bin/sh\n#SBATCH -N 4-2\n", "line 2: #SBATCH -N: 4-2: MIN must not exceed MAX"},
           {"#!/bin/sh\n#SBATCH -N 0\n", "expected at least 1 node, got '0'"},
           {"#!/bin/sh\n#SBATCH -N 1-2 -n 4\n", "--ntasks with a node range"},
           {"#!/bin/sh\n#SBATCH -N 1-2 --gpus 4\n", "--gpus with a node range"},
           {std::string("#!/bin/sh\n\0x", 12), "NUL"},
           {"#!/bin/sh\n" + std::string(kMaxScriptBytes, '#'), "longer than"},
       }) {
    auto parsed = ExpandBatchScript(Request(text));
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(why)) << text;
  }
  std::string many = "#!/bin/sh\n";
  for (size_t i = 0; i <= kMaxDirectives; ++i) many += "#SBATCH --exclusive\n";
  EXPECT_FALSE(ParseDirectives(many).ok());
}

TEST(BatchScriptTest, ANodeRangeIsAJobElasticByNodes) {
  json spec = Expand("#!/bin/sh\n#SBATCH --nodes=1-2 --gpus-per-node=4 --ntasks-per-node=4\n");
  EXPECT_EQ(spec["elastic"], (json{{"unit", "nodes"}, {"min", 1}, {"max", 2}, {"step", 0}}));
  EXPECT_FALSE(spec.contains("tasks"));  // MIN, set by the spec's codec
  EXPECT_EQ(spec["procs_per_node"], 4);
  auto parsed = ParseJobSpec(spec);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  EXPECT_EQ(parsed->tasks, 1);
  EXPECT_EQ(parsed->resources.gpus, GpuCount(4));
  EXPECT_EQ(Expand("#!/bin/sh\n#SBATCH -N 2-2\n")["tasks"], 2);  // one number
  // #CORRAL lines take submit's ranges and --gpu-step.
  spec = Expand("#!/bin/sh\n#CORRAL --gpu-step 2 --gpus 2-8\n");
  EXPECT_EQ(spec["elastic"], (json{{"unit", "gpus"}, {"min", 2}, {"max", 8}, {"step", 2}}));
  EXPECT_EQ(Expand("#!/bin/sh\n#CORRAL --nodes 1-3\n")["elastic"]["unit"], "nodes");
}

TEST(BatchScriptTest, ParsesQuotedValuesAndShortOptionsGluedToTheirValue) {
  auto directives = ParseDirectives("#!/bin/sh\n#SBATCH -Jname \"--comment=a b\" -o 'x y'\n");
  ASSERT_TRUE(directives.ok()) << directives.status().message();
  EXPECT_THAT(*directives, ElementsAre(Directive{2, DirectiveKind::kSbatch, "-J", "name"},
                                       Directive{2, DirectiveKind::kSbatch, "--comment", "a b"},
                                       Directive{2, DirectiveKind::kSbatch, "-o", "x y"}));
}

TEST(BatchScriptTest, ARequestWithoutScriptIsUnchanged) {
  const json request = {{"command", {"true"}}};
  auto expanded = ExpandBatchScript(request);
  ASSERT_TRUE(expanded.ok());
  EXPECT_EQ(expanded->spec, request);
}

TEST(BatchScriptTest, TheSpecKeepsTheScriptAndRefusesACommandBesideIt) {
  json request = Request("#!/bin/sh\necho $1\n");
  request["script"]["args"] = {"a", "b"};
  auto parsed = ParseJobSpec(request);
  ASSERT_TRUE(parsed.ok()) << parsed.status().message();
  ASSERT_TRUE(parsed->script);
  EXPECT_THAT(parsed->script->args, ElementsAre("a", "b"));
  EXPECT_EQ(ParseJobSpec(ToJson(*parsed), SpecOrigin::kStored)->script->text,
            "#!/bin/sh\necho $1\n");
  request["command"] = {"x"};
  auto both = ParseJobSpec(request);
  ASSERT_FALSE(both.ok());
  EXPECT_THAT(both.status().message(), HasSubstr("script.args"));
}

TEST(BatchScriptTest, WithoutANameTheJobIsNamedAfterItsScript) {
  json request = Request("#!/bin/sh\n");
  request["script"]["name"] = "train.sh";
  EXPECT_EQ(ExpandBatchScript(request)->spec["name"], "train.sh");
  request["script"]["text"] = "#!/bin/sh\n#SBATCH -J given\n";
  EXPECT_EQ(ExpandBatchScript(request)->spec["name"], "given");
  request["script"]["text"] = "#!/bin/sh\n";
  request["script"]["name"] = "not a name!";
  EXPECT_FALSE(ExpandBatchScript(request)->spec.contains("name"));
}

TEST(BatchScriptTest, ErrorsNameTheLineAndOptionOnce) {
  auto bad = ExpandBatchScript(Request("#!/bin/sh\n#SBATCH --time=1h\n"));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(),
            "script: line 2: #SBATCH --time: expected minutes, M:S, H:M:S, D-H, D-H:M or "
            "D-H:M:S (Slurm's forms), got '1h'");
  auto warned = ExpandBatchScript(Request("#!/bin/sh\n#SBATCH --mem-per-gpu=4G\n"));
  ASSERT_TRUE(warned.ok());
  EXPECT_THAT(warned->warnings,
              ElementsAre(HasSubstr("--mem-per-gpu: ignored: the job asks no GPU")));
}

TEST(BatchScriptTest, ABatchScriptIsNotRunByAShellFlag) {
  json request = Request("#!/bin/sh\n");
  request["shell"] = true;
  auto refused = ParseJobSpec(request);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("field 'shell': must be false for a batch"));
}

TEST(BatchScriptTest, OutputPatternsTakeTheJobsValues) {
  const OutputNames names{
      .job_id = 17, .array_id = 15, .array_index = 2, .job_name = "train", .user = "ana"};
  EXPECT_EQ(ExpandOutputPattern("out_%j.txt", names), "out_17.txt");
  EXPECT_EQ(ExpandOutputPattern("%x-%A_%a.%u.log", names), "train-15_2.ana.log");
  EXPECT_EQ(ExpandOutputPattern("100%%-%N-%", names), "100%-%N-%");
  EXPECT_EQ(ExpandOutputPattern("%a", OutputNames{.job_id = 3, .array_id = 3}), "4294967294");
}

}  // namespace
}  // namespace corral::protocol
