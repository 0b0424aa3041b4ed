#include "sim/trace.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "sim/csv.h"
#include "sim/generator.h"
#include "sim/testdata_path.h"

namespace corral::sim {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;

std::string TempPath(const std::string& name) { return ::testing::TempDir() + "/" + name; }

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

void WriteAll(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Asserts that `status` is an InvalidArgument whose message contains every fragment.
void ExpectError(const Status& status, const std::vector<std::string>& fragments) {
  ASSERT_FALSE(status.ok());
  EXPECT_EQ(status.code(), StatusCode::kInvalidArgument) << status.ToString();
  for (const auto& fragment : fragments) EXPECT_THAT(status.message(), HasSubstr(fragment));
}

// Field-by-field equality of two trace jobs (model::Job has no operator==).
void ExpectSameJob(const TraceJob& a, const TraceJob& b) {
  EXPECT_EQ(a.job.id, b.job.id);
  EXPECT_EQ(a.job.name, b.job.name);
  EXPECT_EQ(a.job.user, b.job.user);
  EXPECT_EQ(a.job.project, b.job.project);
  EXPECT_EQ(a.job.priority, b.job.priority);
  EXPECT_EQ(a.job.submit_time, b.job.submit_time);
  EXPECT_EQ(a.job.tasks, b.job.tasks);
  EXPECT_EQ(a.job.resources, b.job.resources);
  EXPECT_EQ(a.job.time_limit, b.job.time_limit);
  EXPECT_EQ(a.job.expected_duration, b.job.expected_duration);
  EXPECT_EQ(a.duration, b.duration);
}

// ---------------------------------------------------------------------------------------------
// CSV

TEST(CsvTest, SplitsQuotedFields) {
  auto fields = SplitCsvLine(R"(a, "b,c" ,"say ""hi""",,  d )");
  ASSERT_TRUE(fields.ok()) << fields.status().ToString();
  EXPECT_THAT(*fields, ElementsAre("a", "b,c", "say \"hi\"", "", "d"));
  EXPECT_THAT(*SplitCsvLine(""), ElementsAre(""));
  EXPECT_THAT(*SplitCsvLine("x,"), ElementsAre("x", ""));
}

// A reader's row reuses the last row's buffers: fewer, shorter or quoted fields leave nothing of
// the row before, and views of quoted fields stay valid while later ones are unescaped.
TEST(CsvTest, SplittingIntoReusedFieldsLeavesNothingOfTheLastRow) {
  std::string quoted;
  std::vector<std::string_view> fields;
  ASSERT_TRUE(SplitCsvLineInto("a long first field, b ,c,d", quoted, fields).ok());
  EXPECT_THAT(fields, ElementsAre("a long first field", "b", "c", "d"));
  ASSERT_TRUE(SplitCsvLineInto(R"(x,"y ""q""")", quoted, fields).ok());
  EXPECT_THAT(fields, ElementsAre("x", "y \"q\""));
  const std::string many = R"("a""",  "b" ,c,"",")" + std::string(300, 'z') + R"(","""""")";
  ASSERT_TRUE(SplitCsvLineInto(many, quoted, fields).ok());
  EXPECT_THAT(fields, ElementsAre("a\"", "b", "c", "", std::string(300, 'z'), "\"\""));
  ExpectError(SplitCsvLineInto(R"(1,"2)", quoted, fields), {"field 2", "unterminated"});
  EXPECT_THAT(fields, ElementsAre("1"));
}

// Lines are read in blocks: a line across a block's end, a last line without a newline and an
// empty line keep their text and their numbers.
TEST(CsvTest, LinesAcrossReadBlocksKeepTheirTextAndNumbers) {
  const std::string path = TempPath("blocks.txt");
  const std::string a(70000, 'a'), b(65535, 'b');
  WriteAll(path, a + "\r\n" + b + "\n\nlast");
  auto lines = LineReader::Open(path);
  ASSERT_TRUE(lines.ok()) << lines.status().ToString();
  std::vector<std::pair<int64_t, std::string>> read;
  while (lines->Next()) read.emplace_back(lines->line(), lines->text());
  EXPECT_TRUE(lines->status().ok()) << lines->status().ToString();
  EXPECT_THAT(read, ElementsAre(std::pair<int64_t, std::string>{1, a},
                                std::pair<int64_t, std::string>{2, b},
                                std::pair<int64_t, std::string>{3, ""},
                                std::pair<int64_t, std::string>{4, "last"}));
}

TEST(CsvTest, RejectsMalformedQuotes) {
  ExpectError(SplitCsvLine(R"(a,"b)").status(), {"field 2", "unterminated"});
  ExpectError(SplitCsvLine(R"("a"b,c)").status(), {"field 1", "after a closing quote"});
}

TEST(CsvTest, ReportsFileLineAndField) {
  const std::string path = TempPath("csv_fields.csv");
  WriteAll(path, "\xEF\xBB\xBFn,t,x\r\n\r\n1,2.6,ok\r\n-3,abc,\r\n");
  auto csv = CsvReader::Open(path);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  EXPECT_THAT(csv->columns(), ElementsAre("n", "t", "x"));
  ASSERT_TRUE(csv->NextRow());
  EXPECT_EQ(csv->line(), 3);
  EXPECT_EQ(csv->Int("n", 0, 10), 1);
  EXPECT_EQ(csv->Time("t"), Seconds(3));
  EXPECT_EQ(csv->Text("x"), "ok");
  EXPECT_EQ(csv->Text("absent"), "");
  ASSERT_TRUE(csv->NextRow());
  csv->Int("n", 0, 10);
  ExpectError(csv->status(), {path + ":4: field 'n': must be between 0 and 10, got -3"});
  EXPECT_FALSE(csv->NextRow());
}

// A column looked up once reads as its name does in every row, absent columns included, and an
// error names it.
TEST(CsvTest, ColumnsLookedUpOnceReadAsNames) {
  const std::string path = TempPath("csv_columns.csv");
  WriteAll(path, "n,t,x\n1,2.6,ok\n4,5,\n7,x,y\n");
  auto csv = CsvReader::Open(path);
  ASSERT_TRUE(csv.ok()) << csv.status().ToString();
  const CsvReader::Column n = csv->ColumnOf("n"), t = csv->ColumnOf("t"), x = csv->ColumnOf("x"),
                          absent = csv->ColumnOf("absent");
  EXPECT_EQ(absent.index, CsvReader::Column::kAbsent);
  for (int row = 0; row < 2; ++row) {
    ASSERT_TRUE(csv->NextRow());
    EXPECT_EQ(csv->Int(n, 0, 10), csv->Int("n", 0, 10));
    EXPECT_EQ(csv->Time(t), csv->Time("t"));
    EXPECT_EQ(csv->Double(t, 0, 10), csv->Double("t", 0, 10));
    EXPECT_EQ(csv->Text(x), csv->Text("x"));
    EXPECT_EQ(csv->Text(absent), "");
  }
  ASSERT_TRUE(csv->NextRow());
  csv->Time(t);
  ExpectError(csv->status(), {path + ":4: field 't': expected a time in seconds"});
}

TEST(CsvTest, RejectsDuplicateAndEmptyHeaders) {
  const std::string path = TempPath("csv_header.csv");
  WriteAll(path, "a,b,a\n1,2,3\n");
  ExpectError(CsvReader::Open(path).status(), {path + ":1", "'a' appears twice"});
  WriteAll(path, "\n\n");
  ExpectError(CsvReader::Open(path).status(), {path, "empty file"});
}

TEST(CsvTest, MissingFileIsIoErrorNamingThePath) {
  const std::string path = TestData("no_such_file.csv");
  auto csv = CsvReader::Open(path);
  ASSERT_FALSE(csv.ok());
  EXPECT_EQ(csv.status().code(), StatusCode::kIoError);
  EXPECT_THAT(csv.status().message(), HasSubstr(path));
  EXPECT_EQ(LineReader::Open(CORRAL_SIM_TESTDATA).status().code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// Formats and helpers

TEST(TraceFormatTest, ParsesNamesAndDetectsFiles) {
  EXPECT_EQ(*ParseTraceFormat("openb"), TraceFormat::kOpenb);
  EXPECT_EQ(*ParseTraceFormat("tiresias"), TraceFormat::kTiresias);
  EXPECT_EQ(*ParseTraceFormat("helios"), TraceFormat::kHelios);
  EXPECT_EQ(*ParseTraceFormat("jsonl"), TraceFormat::kJsonl);
  ExpectError(ParseTraceFormat("philly").status(), {"'philly'", "openb"});
  EXPECT_EQ(TraceFormatName(TraceFormat::kHelios), "helios");

  EXPECT_EQ(*DetectTraceFormat(TestData("openb_pods.csv")), TraceFormat::kOpenb);
  EXPECT_EQ(*DetectTraceFormat(TestData("openb_pods_multigpu.csv")), TraceFormat::kOpenb);
  EXPECT_EQ(*DetectTraceFormat(TestData("tiresias.csv")), TraceFormat::kTiresias);
  EXPECT_EQ(*DetectTraceFormat(TestData("helios.csv")), TraceFormat::kHelios);
  EXPECT_EQ(*DetectTraceFormat(TestData("jobs.jsonl")), TraceFormat::kJsonl);
  ExpectError(DetectTraceFormat(TestData("openb_nodes.csv")).status(),
              {"openb_nodes.csv", "sn,cpu_milli"});
  EXPECT_EQ(DetectTraceFormat(TestData("missing.csv")).status().code(), StatusCode::kIoError);
}

TEST(TraceFormatTest, ReadTraceDispatches) {
  auto trace = ReadTrace(TestData("tiresias.csv"), TraceFormat::kTiresias, 4);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->jobs[2].job.tasks, 4);
  EXPECT_EQ(ReadTrace(TestData("helios.csv"), TraceFormat::kHelios, 8)->jobs.size(), 3u);
  EXPECT_EQ(ReadTrace(TestData("jobs.jsonl"), TraceFormat::kJsonl, 8)->jobs.size(), 3u);
  EXPECT_EQ(ReadTrace(TestData("openb_pods.csv"), TraceFormat::kOpenb, 8)->jobs.size(), 6u);
}

TEST(SplitIntoGangTest, SplitsEvenlyOrRefuses) {
  auto shape = [](int64_t total, int64_t max) {
    auto g = SplitIntoGang(total, max);
    return g ? std::to_string(g->tasks) + "x" + std::to_string(g->gpus_per_task) : "none";
  };
  EXPECT_EQ(shape(0, 8), "1x0");
  EXPECT_EQ(shape(8, 8), "1x8");
  EXPECT_EQ(shape(16, 8), "2x8");
  EXPECT_EQ(shape(12, 8), "2x6");
  EXPECT_EQ(shape(9, 8), "none");
  EXPECT_EQ(shape(4, 0), "none");
}

TEST(NumberedNameTest, PadsToMinimumDigits) {
  EXPECT_EQ(NumberedName("n", 7, 4), "n0007");
  EXPECT_EQ(NumberedName("n", 12345, 4), "n12345");
  EXPECT_EQ(NumberedName("job-", 3, 0), "job-3");
}

// ---------------------------------------------------------------------------------------------
// openb

TEST(OpenbTest, ReadsNodes) {
  auto gpu_nodes = ReadOpenbNodes(TestData("openb_nodes.csv"));
  ASSERT_TRUE(gpu_nodes.ok()) << gpu_nodes.status().ToString();
  ASSERT_EQ(gpu_nodes->size(), 2u);
  const model::Node& n = (*gpu_nodes)[1];
  EXPECT_EQ(n.name, "openb-node-0002");
  EXPECT_EQ(n.gpu_model, "V100M32");
  EXPECT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.gpus[7].index, 7);
  EXPECT_EQ(n.cpu, CpuMilli(96000));
  EXPECT_EQ(n.memory, MemoryMib(786432));

  auto all = ReadOpenbNodes(TestData("openb_nodes.csv"), /*gpu_nodes_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 3u);
  EXPECT_EQ((*all)[0].name, "openb-node-0000");
  EXPECT_EQ((*all)[0].gpu_model, "");
  EXPECT_THAT((*all)[0].gpus, IsEmpty());
}

TEST(OpenbTest, RejectsDuplicateNodeNames) {
  ExpectError(ReadOpenbNodes(TestData("openb_nodes_duplicate.csv")).status(),
              {"openb_nodes_duplicate.csv:4: field 'sn'", "'openb-node-0000'", "line 2"});
}

TEST(OpenbTest, ReadsPods) {
  auto trace = ReadOpenbPods(TestData("openb_pods.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 6u);
  struct Want {
    std::string name;
    int priority;
    int64_t submit, duration, gpus, milli, cpu, memory;
    std::vector<std::string> models;
  };
  const std::vector<Want> want = {
      {"pod-a", 1, 0, 12537496, 1, 1000, 12000, 16384, {}},
      {"pod-b", 0, 100, 250, 1, 460, 6000, 12288, {"V100M16", "V100M32"}},
      {"pod-c", 0, 200, 90, 8, 1000, 88000, 327680, {}},
      {"pod-d", 1, 300, 695, 0, 0, 8000, 30517, {}},
      {"pod-e", 0, 400, 125, 1, 1000, 4000, 8192, {"T4"}},  // never scheduled; milli 0 = whole
      {"pod-f", 1, 500, 0, 1, 1000, 4000, 8192, {}},        // milli capped; negative life -> 0
  };
  for (size_t i = 0; i < want.size(); ++i) {
    SCOPED_TRACE(want[i].name);
    const TraceJob& t = trace->jobs[i];
    EXPECT_EQ(t.job.id, JobId(static_cast<int64_t>(i)));
    EXPECT_EQ(t.job.name, want[i].name);
    EXPECT_EQ(t.job.user, "default");
    EXPECT_EQ(t.job.project, "default");
    EXPECT_EQ(t.job.priority, want[i].priority);
    EXPECT_EQ(t.job.tasks, 1);
    EXPECT_EQ(t.job.submit_time, Seconds(want[i].submit));
    EXPECT_EQ(t.duration, Seconds(want[i].duration));
    EXPECT_EQ(t.job.expected_duration, Seconds(want[i].duration));
    EXPECT_EQ(t.job.resources,
              model::MakeResources(static_cast<int>(want[i].gpus), static_cast<int>(want[i].milli),
                                   want[i].cpu, want[i].memory, want[i].models));
  }
}

TEST(OpenbTest, ReadsMultigpuFilesWithoutTimes) {
  auto trace = ReadOpenbPods(TestData("openb_pods_multigpu.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3u);
  EXPECT_EQ(trace->jobs[1].job.resources.gpu_milli, MilliGpu(460));
  EXPECT_EQ(trace->jobs[2].job.resources.gpus, GpuCount(4));
  for (const TraceJob& t : trace->jobs) {
    EXPECT_EQ(t.job.submit_time, Seconds(0));
    EXPECT_EQ(t.duration, Seconds(0));
    EXPECT_EQ(t.job.priority, 0);
  }
}

TEST(OpenbTest, MalformedPodFilesNameFileLineAndField) {
  ExpectError(ReadOpenbPods(TestData("openb_pods_bad_int.csv")).status(),
              {"openb_pods_bad_int.csv:3: field 'num_gpu': expected an integer, got 'x'"});
  ExpectError(ReadOpenbPods(TestData("openb_pods_missing_column.csv")).status(),
              {"openb_pods_missing_column.csv:1", "missing column 'num_gpu'"});
  ExpectError(ReadOpenbPods(TestData("openb_pods_short_row.csv")).status(),
              {"openb_pods_short_row.csv:3", "expected 11 fields", "got 10"});
  ExpectError(ReadOpenbPods(TestData("openb_pods_bad_share.csv")).status(),
              {"openb_pods_bad_share.csv:2", "field 'resources.gpu_milli'", "got 500"});
  ExpectError(ReadOpenbPods(TestData("openb_pods_bad_quote.csv")).status(),
              {"openb_pods_bad_quote.csv:2", "field 6", "unterminated"});
  const Status missing = ReadOpenbPods(TestData("absent.csv")).status();
  EXPECT_EQ(missing.code(), StatusCode::kIoError);
  EXPECT_THAT(missing.message(), HasSubstr("absent.csv"));
}

// ---------------------------------------------------------------------------------------------
// Tiresias and Helios

TEST(TiresiasTest, ReadsJobsAndSplitsGangs) {
  auto trace = ReadTiresias(TestData("tiresias.csv"), 8);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 4u);
  const TraceJob& first = trace->jobs[0];
  EXPECT_EQ(first.job.id, JobId(0));
  EXPECT_EQ(first.job.name, "vgg19");
  EXPECT_EQ(first.job.user, "default");
  EXPECT_EQ(first.job.submit_time, Seconds(0));
  EXPECT_EQ(first.duration, Seconds(164));
  EXPECT_EQ(first.job.expected_duration, Seconds(164));
  EXPECT_EQ(first.job.resources, model::MakeResources(1, 1000, 0, 0));

  const TraceJob& gang = trace->jobs[2];
  EXPECT_EQ(gang.job.id, JobId(7));  // ids come from the file
  EXPECT_EQ(gang.job.name, "inception4");
  EXPECT_EQ(gang.job.tasks, 2);
  EXPECT_EQ(gang.job.resources, model::MakeResources(8, 1000, 0, 0));
  EXPECT_EQ(gang.job.submit_time, Seconds(53));

  EXPECT_EQ(trace->jobs[3].job.resources, model::MakeResources(0, 0, 0, 0));
}

TEST(TiresiasTest, MalformedFiles) {
  ExpectError(ReadTiresias(TestData("tiresias_bad_gang.csv"), 8).status(),
              {"tiresias_bad_gang.csv:3: field 'num_gpu'", "9 GPUs", "at most 8"});
  ExpectError(ReadTiresias(TestData("tiresias_dup_id.csv"), 8).status(),
              {"tiresias_dup_id.csv:3: field 'job_id'", "duplicate value '4'", "line 2"});
  ExpectError(ReadTiresias(TestData("tiresias.csv"), 0).status(), {"max_gpus_per_task"});
}

TEST(HeliosTest, ReadsJobs) {
  auto trace = ReadHelios(TestData("helios.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3u);
  const TraceJob& a = trace->jobs[0];
  EXPECT_EQ(a.job.id, JobId(0));
  EXPECT_EQ(a.job.name, "job-a1");
  EXPECT_EQ(a.job.user, "alice");
  EXPECT_EQ(a.job.project, "vc1");
  EXPECT_EQ(a.job.tasks, 1);
  EXPECT_EQ(a.job.resources, model::MakeResources(8, 1000, 48000, 0));
  EXPECT_EQ(a.duration, Seconds(3600));

  const TraceJob& b = trace->jobs[1];
  EXPECT_EQ(b.job.id, JobId(1));
  EXPECT_EQ(b.job.tasks, 2);
  EXPECT_EQ(b.job.resources, model::MakeResources(8, 1000, 48000, 0));
  EXPECT_EQ(b.job.submit_time, Seconds(10));
  EXPECT_EQ(b.duration, Seconds(7200));  // 7200.4 rounded

  const TraceJob& c = trace->jobs[2];
  EXPECT_EQ(c.job.user, "default");
  EXPECT_EQ(c.job.project, "default");
  EXPECT_EQ(c.job.tasks, 1);
  EXPECT_EQ(c.job.resources, model::MakeResources(0, 0, 4000, 0));
}

TEST(HeliosTest, RejectsGpusNotDivisibleOverNodes) {
  ExpectError(ReadHelios(TestData("helios_bad_divide.csv")).status(),
              {"helios_bad_divide.csv:2: field 'gpu_num'", "3 GPUs", "2 nodes"});
}

// ---------------------------------------------------------------------------------------------
// JSON Lines

TEST(JsonlTest, ReadsJobsWithDefaults) {
  auto trace = ReadJsonl(TestData("jobs.jsonl"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  ASSERT_EQ(trace->jobs.size(), 3u);
  const TraceJob& full = trace->jobs[0];
  EXPECT_EQ(full.job.id, JobId(5));
  EXPECT_EQ(full.job.name, "train");
  EXPECT_EQ(full.job.user, "alice");
  EXPECT_EQ(full.job.project, "vision");
  EXPECT_EQ(full.job.priority, 2);
  EXPECT_EQ(full.job.submit_time, Seconds(0));
  EXPECT_EQ(full.duration, Seconds(3600));
  EXPECT_EQ(full.job.time_limit, Seconds(7200));
  EXPECT_EQ(full.job.expected_duration, Seconds(3000));
  EXPECT_EQ(full.job.tasks, 2);
  EXPECT_EQ(full.job.resources, model::MakeResources(8, 1000, 32000, 65536, {"A100-80GB", "H100"}));

  const TraceJob& share = trace->jobs[1];
  EXPECT_EQ(share.job.id, JobId(1));  // position among the jobs of the file
  EXPECT_EQ(share.job.name, "");
  EXPECT_EQ(share.job.user, "default");
  EXPECT_EQ(share.job.project, "default");
  EXPECT_EQ(share.job.priority, 0);
  EXPECT_EQ(share.job.tasks, 1);
  EXPECT_EQ(share.job.time_limit, std::nullopt);
  EXPECT_EQ(share.job.expected_duration, std::nullopt);
  EXPECT_EQ(share.job.resources, model::MakeResources(1, 250, 0, 0));

  const TraceJob& cpu = trace->jobs[2];
  EXPECT_EQ(cpu.job.id, JobId(2));
  EXPECT_EQ(cpu.job.resources, model::MakeResources(0, 0, 4000, 0));
  EXPECT_EQ(cpu.duration, Seconds(5));
}

TEST(JsonlTest, MalformedFilesNameFileLineAndField) {
  ExpectError(ReadJsonl(TestData("jobs_unknown_field.jsonl")).status(),
              {"jobs_unknown_field.jsonl:2: field 'priorty': unknown field"});
  ExpectError(ReadJsonl(TestData("jobs_unknown_resource_field.jsonl")).status(),
              {"jobs_unknown_resource_field.jsonl:1: field 'resources.gpu_mili': unknown field"});
  ExpectError(ReadJsonl(TestData("jobs_bad_share.jsonl")).status(),
              {"jobs_bad_share.jsonl:2: job 9: field 'resources.gpu_milli'", "got 500"});
  ExpectError(ReadJsonl(TestData("jobs_missing_required.jsonl")).status(),
              {"jobs_missing_required.jsonl:1: field 'duration': is required"});
  ExpectError(ReadJsonl(TestData("jobs_bad_type.jsonl")).status(),
              {"jobs_bad_type.jsonl:1: field 'submit_time': expected an integer, got \"soon\""});
  ExpectError(ReadJsonl(TestData("jobs_bad_json.jsonl")).status(),
              {"jobs_bad_json.jsonl:2: not valid JSON"});
  ExpectError(ReadJsonl(TestData("jobs_dup_id.jsonl")).status(),
              {"jobs_dup_id.jsonl:2: field 'id': duplicate value '3' (first on line 1)"});
  EXPECT_EQ(ReadJsonl(TestData("absent.jsonl")).status().code(), StatusCode::kIoError);
}

TEST(JsonlTest, RejectsOtherShapesAndRanges) {
  const std::string path = TempPath("shapes.jsonl");
  auto error_for = [&](const std::string& line) {
    WriteAll(path, line + "\n");
    return ReadJsonl(path).status();
  };
  ExpectError(error_for("[1,2]"), {path + ":1: expected a JSON object"});
  ExpectError(error_for(R"({"submit_time":0,"duration":1,"resources":5})"),
              {"field 'resources': expected an object"});
  ExpectError(error_for(R"({"submit_time":0,"duration":1,"resources":{}})"),
              {"field 'resources.gpus': is required"});
  ExpectError(error_for(R"({"submit_time":0,"duration":1.5,"resources":{"gpus":1}})"),
              {"field 'duration': expected an integer, got 1.5"});
  ExpectError(error_for(R"({"submit_time":-1,"duration":1,"resources":{"gpus":1}})"),
              {"field 'submit_time': must be between 0"});
  ExpectError(
      error_for(R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpu_models":[1]}})"),
      {"field 'resources.gpu_models': expected an array of strings"});
  ExpectError(error_for(R"({"submit_time":0,"duration":1,"tasks":0,"resources":{"gpus":1}})"),
              {"field 'tasks'"});
  ExpectError(
      error_for(R"({"submit_time":18446744073709551615,"duration":1,"resources":{"gpus":1}})"),
      {"field 'submit_time': expected an integer"});
  // null counts as absent.
  WriteAll(path, R"({"submit_time":0,"duration":1,"time_limit":null,"resources":{"gpus":1}})");
  EXPECT_TRUE(ReadJsonl(path).ok());
}

TEST(JsonlTest, WriteThenReadRoundTrips) {
  auto original = ReadJsonl(TestData("jobs.jsonl"));
  ASSERT_TRUE(original.ok()) << original.status().ToString();
  // Add jobs from the CSV readers too (gangs, shares, model lists).
  auto pods = ReadOpenbPods(TestData("openb_pods.csv"));
  ASSERT_TRUE(pods.ok());
  for (TraceJob t : pods->jobs) {
    t.job.id = JobId(100 + t.job.id.value());
    original->jobs.push_back(std::move(t));
  }
  const std::string path = TempPath("roundtrip.jsonl");
  ASSERT_TRUE(WriteJsonl(*original, path).ok());
  auto back = ReadJsonl(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->jobs.size(), original->jobs.size());
  for (size_t i = 0; i < back->jobs.size(); ++i) ExpectSameJob(back->jobs[i], original->jobs[i]);

  const std::string again = TempPath("roundtrip2.jsonl");
  ASSERT_TRUE(WriteJsonl(*back, again).ok());
  EXPECT_EQ(ReadAll(path), ReadAll(again));
  EXPECT_THAT(ReadAll(path),
              HasSubstr(R"({"id":5,"name":"train","user":"alice","project":"vision","priority":2,)"
                        R"("submit_time":0,"duration":3600,"time_limit":7200,)"
                        R"("expected_duration":3000,"tasks":2,"resources":{"gpus":8,)"
                        R"("gpu_milli":1000,"cpu_milli":32000,"memory_mib":65536,)"
                        R"("gpu_models":["A100-80GB","H100"]}})"));
}

// The lines of `path`, each as written (without its newline).
std::vector<std::string> LinesOf(const std::string& path) {
  std::vector<std::string> lines;
  std::istringstream text(ReadAll(path));
  for (std::string line; std::getline(text, line);) lines.push_back(line);
  return lines;
}

// `line` with a space after its first character: the same JSON, outside ScanJsonlJob's subset
// (no whitespace between tokens), so ReadJsonl reads it with the general parser.
std::string Spaced(const std::string& line) { return line.substr(0, 1) + " " + line.substr(1); }

TEST(JsonlScanTest, WrittenLinesScanAsTheGeneralReaderReadsThem) {
  GeneratorConfig config;
  config.jobs = 3000;
  config.seed = 7;
  config.gpu_models = {"A100-80GB", "V100"};
  config.templates_per_user = 3;
  Trace trace = GenerateWorkload(config);
  auto fixture = ReadJsonl(TestData("jobs.jsonl"));
  ASSERT_TRUE(fixture.ok()) << fixture.status().ToString();
  for (TraceJob t : fixture->jobs) {  // time limits, expected durations, names, model lists
    t.job.id = JobId(1'000'000 + t.job.id.value());
    trace.jobs.push_back(std::move(t));
  }
  const std::string compact = TempPath("scan_compact.jsonl");
  ASSERT_TRUE(WriteJsonl(trace, compact).ok());
  const std::vector<std::string> lines = LinesOf(compact);
  ASSERT_EQ(lines.size(), trace.jobs.size());
  std::string spaced_text;
  for (const std::string& line : lines) spaced_text += Spaced(line) + "\n";
  const std::string spaced = TempPath("scan_spaced.jsonl");
  WriteAll(spaced, spaced_text);

  auto general = ReadJsonl(spaced);
  ASSERT_TRUE(general.ok()) << general.status().ToString();
  auto read = ReadJsonl(compact);
  ASSERT_TRUE(read.ok()) << read.status().ToString();
  ASSERT_EQ(general->jobs.size(), lines.size());
  ASSERT_EQ(read->jobs.size(), lines.size());
  for (size_t i = 0; i < lines.size(); ++i) {
    SCOPED_TRACE(lines[i]);
    const auto default_id = static_cast<int64_t>(i);
    std::optional<TraceJob> scanned = ScanJsonlJob(lines[i], default_id);
    ASSERT_TRUE(scanned.has_value()) << "a written line is in the subset";
    EXPECT_FALSE(ScanJsonlJob(Spaced(lines[i]), default_id).has_value());
    ExpectSameJob(*scanned, general->jobs[i]);
    ExpectSameJob(read->jobs[i], general->jobs[i]);
  }
}

TEST(JsonlScanTest, EdgeValuesInsideTheSubsetScanAsTheGeneralReaderReadsThem) {
  const std::vector<std::string> lines = {
      R"({"submit_time":0,"duration":0,"resources":{"gpus":0}})",
      R"({"resources":{"gpu_models":[],"gpus":2,"memory_mib":7},"duration":5,"submit_time":3})",
      R"({"id":1000000000000000,"priority":-2147483648,"submit_time":1000000000000000,)"
      R"("duration":1,"time_limit":1,"expected_duration":0,"tasks":1000000,)"
      R"("resources":{"gpus":0,"gpu_milli":0,"cpu_milli":0}})",
      R"({"priority":2147483647,"name":"","user":"a b~!","project":"p/q","submit_time":-0,)"
      R"("duration":10,"resources":{"gpus":1,"gpu_milli":250,"gpu_models":["x","y z"]}})",
  };
  const std::string path = TempPath("scan_edges.jsonl");
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    std::optional<TraceJob> scanned = ScanJsonlJob(line, 0);
    ASSERT_TRUE(scanned.has_value());
    WriteAll(path, Spaced(line) + "\n");
    auto general = ReadJsonl(path);
    ASSERT_TRUE(general.ok()) << general.status().ToString();
    ASSERT_EQ(general->jobs.size(), 1u);
    ExpectSameJob(*scanned, general->jobs[0]);
  }
}

TEST(JsonlScanTest, LinesOutsideTheSubsetAreLeftToTheGeneralReader) {
  const std::string ok_tail = R"("duration":1,"resources":{"gpus":1}})";
  const std::vector<std::string> lines = {
      "",
      "[1,2]",
      "{}",
      "{" + ok_tail,                                       // submit_time missing
      R"({"submit_time":0,"duration":1})",                 // resources missing
      R"({"submit_time":0,"duration":1,"resources":{}})",  // resources.gpus missing
      R"({"submit_time":0,"duration":1,"resources":5})",   // wrong type
      R"({ "submit_time":0,)" + ok_tail,                   // whitespace
      R"({"submit_time": 0,)" + ok_tail,                   // whitespace
      R"({"submit_time":0,)" + ok_tail + " ",              // trailing whitespace
      R"({"submit_time":0,)" + ok_tail + "x",              // trailing text
      R"({"submit_time":0,"submit_time":1,)" + ok_tail,    // repeated key
      R"({"submit_time":0,"priorty":1,)" + ok_tail,        // unknown key
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpu_mili":5}})",
      R"({"submit_time":0,"time_limit":null,)" + ok_tail,        // null
      R"({"submit_time":"0",)" + ok_tail,                        // string for a number
      R"({"submit_time":0.0,)" + ok_tail,                        // fraction
      R"({"submit_time":1e3,)" + ok_tail,                        // exponent
      R"({"submit_time":1E3,)" + ok_tail,                        // exponent
      R"({"submit_time":01,)" + ok_tail,                         // leading zero
      R"({"submit_time":-01,)" + ok_tail,                        // leading zero
      R"({"submit_time":-,)" + ok_tail,                          // no digits
      R"({"submit_time":-1,)" + ok_tail,                         // below the range
      R"({"submit_time":1000000000000001,)" + ok_tail,           // past the range
      R"({"submit_time":1000000000000000000,)" + ok_tail,        // 19 digits
      R"({"submit_time":18446744073709551616,)" + ok_tail,       // past uint64
      R"({"submit_time":0,"tasks":0,)" + ok_tail,                // below the range
      R"({"submit_time":0,"time_limit":0,)" + ok_tail,           // below the range
      R"({"submit_time":0,"priority":2147483648,)" + ok_tail,    // past int
      R"({"submit_time":0,"name":"a\"b",)" + ok_tail,            // escape
      R"({"submit_time":0,"name":"a\u0062",)" + ok_tail,         // escape
      "{\"submit_time\":0,\"name\":\"caf\xc3\xa9\"," + ok_tail,  // UTF-8
      "{\"submit_time\":0,\"name\":\"\xff\"," + ok_tail,         // not UTF-8
      "{\"submit_time\":0,\"name\":\"a\tb\"," + ok_tail,         // control character
      R"({"submit_time":0,"name":5,)" + ok_tail,                 // number for a string
      R"({"submit_time":0,"name":"x)",                           // unterminated
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpu_models":[1]}})",
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpu_models":["a",]}})",
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpu_models":"a"}})",
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1}})"
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1}})",   // two objects
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1},})",  // trailing comma
      R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpus":2}})",
  };
  for (const std::string& line : lines) {
    SCOPED_TRACE(line);
    EXPECT_FALSE(ScanJsonlJob(line, 0).has_value());
  }
  // The general reader's errors, unchanged: the line is parsed as before.
  const std::string path = TempPath("scan_outside.jsonl");
  WriteAll(path, R"({"submit_time":0,"duration":1,"resources":{"gpus":1,"gpus":2}})"
                 "\n");
  auto repeated = ReadJsonl(path);  // nlohmann keeps the last of repeated keys
  ASSERT_TRUE(repeated.ok()) << repeated.status().ToString();
  EXPECT_EQ(repeated->jobs[0].job.resources.gpus, GpuCount(2));
  WriteAll(path, R"({"submit_time":0,"name":"a\"b",)" + ok_tail + "\n");
  auto escaped = ReadJsonl(path);
  ASSERT_TRUE(escaped.ok()) << escaped.status().ToString();
  EXPECT_EQ(escaped->jobs[0].job.name, "a\"b");
  WriteAll(path, R"({"submit_time":1e3,)" + ok_tail + "\n");
  ExpectError(ReadJsonl(path).status(),
              {path + ":1: field 'submit_time': expected an integer, got 1000.0"});
}

TEST(JsonlTest, WriteToBadPathIsIoError) {
  EXPECT_EQ(WriteJsonl(Trace{}, "/nonexistent-dir/x.jsonl").code(), StatusCode::kIoError);
}

TEST(NodesJsonlTest, ReadsNodes) {
  auto nodes = ReadNodesJsonl(TestData("nodes.jsonl"));
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 2u);
  const model::Node& n = (*nodes)[0];
  EXPECT_EQ(n.name, "n1");
  EXPECT_EQ(n.gpu_model, "A100-80GB");
  ASSERT_EQ(n.gpus.size(), 8u);
  EXPECT_EQ(n.gpus[3].nvlink_domain, 0);
  EXPECT_EQ(n.gpus[4].nvlink_domain, 1);
  EXPECT_EQ(n.gpus[4].index, 4);
  EXPECT_EQ(n.gpus[4].memory, MemoryMib(81920));
  EXPECT_EQ(n.cpu, CpuMilli(128000));
  EXPECT_EQ(n.memory, MemoryMib(1048576));
  EXPECT_EQ(n.labels, (std::map<std::string, std::string>{{"rack", "r1"}}));
  const model::Node& cpu = (*nodes)[1];
  EXPECT_EQ(cpu.name, "cpu1");
  EXPECT_TRUE(cpu.gpus.empty());
  EXPECT_TRUE(cpu.labels.empty());
}

TEST(NodesJsonlTest, RejectsBadNodes) {
  ExpectError(ReadNodesJsonl(TestData("nodes_bad_nvlink.jsonl")).status(),
              {"nodes_bad_nvlink.jsonl:1: field 'nvlink_domains'", "expected 8 entries", "got 4"});
  const std::string path = TempPath("nodes_bad.jsonl");
  WriteAll(path, R"({"name":"a","gpus":2,"cpu_milli":1000,"memory_mib":1})");
  ExpectError(ReadNodesJsonl(path).status(), {path + ":1: node 'a': field 'gpu_model'"});
  WriteAll(path, R"({"name":"a","gpus":0,"cpu_milli":1000,"memory_mib":1,"label":{}})");
  ExpectError(ReadNodesJsonl(path).status(), {path + ":1: field 'label': unknown field"});
  WriteAll(path,
           "{\"name\":\"a\",\"gpus\":0,\"cpu_milli\":1,\"memory_mib\":1}\n"
           "{\"name\":\"a\",\"gpus\":0,\"cpu_milli\":1,\"memory_mib\":1}\n");
  ExpectError(ReadNodesJsonl(path).status(), {path + ":2: field 'name': duplicate value 'a'"});
}

TEST(NodesJsonlTest, WriteThenReadRoundTrips) {
  auto nodes = ReadNodesJsonl(TestData("nodes.jsonl"));
  ASSERT_TRUE(nodes.ok());
  auto spec = ParseNodeSpec("2x4xV100");
  nodes->insert(nodes->end(), spec->begin(), spec->end());
  const std::string path = TempPath("nodes_roundtrip.jsonl");
  ASSERT_TRUE(WriteNodesJsonl(*nodes, path).ok());
  auto back = ReadNodesJsonl(path);
  ASSERT_TRUE(back.ok()) << back.status().ToString();
  ASSERT_EQ(back->size(), nodes->size());
  for (size_t i = 0; i < nodes->size(); ++i) {
    const model::Node& a = (*nodes)[i];
    const model::Node& b = (*back)[i];
    EXPECT_EQ(a.name, b.name);
    EXPECT_EQ(a.gpu_model, b.gpu_model);
    EXPECT_EQ(a.cpu, b.cpu);
    EXPECT_EQ(a.memory, b.memory);
    EXPECT_EQ(a.labels, b.labels);
    ASSERT_EQ(a.gpus.size(), b.gpus.size());
    for (size_t g = 0; g < a.gpus.size(); ++g) {
      EXPECT_EQ(a.gpus[g].index, b.gpus[g].index);
      EXPECT_EQ(a.gpus[g].memory, b.gpus[g].memory);
      EXPECT_EQ(a.gpus[g].nvlink_domain, b.gpus[g].nvlink_domain);
    }
  }
  // GPUs of different sizes cannot be written.
  (*nodes)[0].gpus[1].memory = MemoryMib(1);
  ExpectError(WriteNodesJsonl(*nodes, path), {"node 'n1'", "gpu_memory_mib"});
}

// ---------------------------------------------------------------------------------------------
// Cluster sources

TEST(NodeSpecTest, BuildsNodes) {
  auto nodes = ParseNodeSpec("2x4xV100,1x8xA100-80GB,1x0xcpu");
  ASSERT_TRUE(nodes.ok()) << nodes.status().ToString();
  ASSERT_EQ(nodes->size(), 4u);
  EXPECT_EQ((*nodes)[0].name, "n0000");
  EXPECT_EQ((*nodes)[1].name, "n0001");
  EXPECT_EQ((*nodes)[1].gpu_model, "V100");
  EXPECT_EQ((*nodes)[1].gpus.size(), 4u);
  EXPECT_EQ((*nodes)[1].cpu, CpuMilli(64000));
  EXPECT_EQ((*nodes)[1].memory, MemoryMib(int64_t{4} * 65536));
  EXPECT_EQ((*nodes)[2].name, "n0002");
  EXPECT_EQ((*nodes)[2].gpu_model, "A100-80GB");
  EXPECT_EQ((*nodes)[2].gpus.size(), 8u);
  EXPECT_EQ((*nodes)[2].cpu, CpuMilli(128000));
  EXPECT_EQ((*nodes)[3].gpu_model, "");
  EXPECT_TRUE((*nodes)[3].gpus.empty());
  EXPECT_EQ((*nodes)[3].cpu, CpuMilli(8000));
  EXPECT_EQ((*nodes)[3].memory, MemoryMib(65536));
  for (const model::Node& n : *nodes) EXPECT_TRUE(model::Validate(n).ok());
}

TEST(NodeSpecTest, NamesTheBadPart) {
  ExpectError(ParseNodeSpec("2x4xV100,3x8").status(), {"'3x8'", "missing 'x'"});
  ExpectError(ParseNodeSpec("ax4xV100").status(), {"'ax4xV100'", "COUNT"});
  ExpectError(ParseNodeSpec("0x4xV100").status(), {"'0x4xV100'", "COUNT"});
  ExpectError(ParseNodeSpec("2x-1xV100").status(), {"'2x-1xV100'", "GPUS"});
  ExpectError(ParseNodeSpec("2x4x").status(), {"'2x4x'", "MODEL"});
  ExpectError(ParseNodeSpec("2x0xV100").status(), {"'2x0xV100'", "COUNTx0xcpu"});
  ExpectError(ParseNodeSpec("").status(), {"''"});
  ExpectError(ParseNodeSpec("2x4xV100,").status(), {"''"});
}

TEST(ParseNodeSpecTest, RackLabels) {
  auto nodes = ParseNodeSpec("5x8xA100@2,2x4xT4@4,1x4xT4");
  ASSERT_TRUE(nodes.ok()) << nodes.status().message();
  std::vector<std::string> racks;
  for (const model::Node& n : *nodes) {
    auto rack = n.labels.find(model::kRackLabel);
    racks.push_back(rack == n.labels.end() ? "-" : rack->second);
  }
  EXPECT_EQ(racks, (std::vector<std::string>{"rack00", "rack00", "rack01", "rack01", "rack02",
                                             "rack03", "rack03", "-"}));
  EXPECT_EQ((*nodes)[0].gpu_model, "A100");
  ExpectError(ParseNodeSpec("2x8xA100@0").status(), {"'2x8xA100@0'", "PER_RACK"});
  ExpectError(ParseNodeSpec("2x8xA100@x").status(), {"PER_RACK"});
}

TEST(LoadNodesTest, DispatchesOnSource) {
  EXPECT_EQ(LoadNodes("gen:3x2xT4")->size(), 3u);
  EXPECT_EQ(LoadNodes(TestData("nodes.jsonl"))->size(), 2u);
  EXPECT_EQ(LoadNodes(TestData("openb_nodes.csv"))->size(), 2u);  // GPU nodes only
  ExpectError(LoadNodes("gen:x").status(), {"'x'"});
  EXPECT_EQ(LoadNodes(TestData("absent.csv")).status().code(), StatusCode::kIoError);
}

// ---------------------------------------------------------------------------------------------
// Robustness: no input crashes a reader.

// Every fixture, with every byte replaced by a few troublesome characters (and truncated at every
// byte), read by every reader: each must return a value or an error, never crash.
TEST(RobustnessTest, MutatedFixturesNeverCrash) {
  const std::vector<std::string> fixtures = {"openb_nodes.csv", "openb_pods.csv", "tiresias.csv",
                                             "helios.csv",      "jobs.jsonl",     "nodes.jsonl"};
  const std::string csv_path = TempPath("mutated.csv");
  const std::string jsonl_path = TempPath("mutated.jsonl");
  int errors = 0;
  for (const std::string& name : fixtures) {
    const std::string text = ReadAll(TestData(name));
    const bool jsonl = name.ends_with(".jsonl");
    const std::string& path = jsonl ? jsonl_path : csv_path;
    auto read_all = [&](const std::string& content) {
      WriteAll(path, content);
      if (jsonl) {
        errors += !ReadJsonl(path).ok();
        errors += !ReadNodesJsonl(path).ok();
      } else {
        errors += !ReadOpenbPods(path).ok();
        errors += !ReadOpenbNodes(path, false).ok();
        errors += !ReadTiresias(path, 3).ok();
        errors += !ReadHelios(path).ok();
        errors += !DetectTraceFormat(path).ok();
      }
    };
    for (size_t i = 0; i < text.size(); ++i) {
      for (char c : {',', '"', 'x', '-', '9', '\n', '{', '\0'}) {
        std::string mutated = text;
        mutated[i] = c;
        read_all(mutated);
      }
      read_all(text.substr(0, i));
    }
  }
  EXPECT_GT(errors, 0);
}

// ---------------------------------------------------------------------------------------------
// The real public traces (../shared/traces), when present.

class SharedTracesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const char* dir = std::getenv("CORRAL_SHARED_TRACES");
    std::error_code ec;
    if (dir == nullptr || !std::filesystem::is_directory(dir, ec)) {
      GTEST_SKIP() << "CORRAL_SHARED_TRACES is not set to an existing directory ("
                   << (dir ? dir : "unset") << "); skipping the real-trace checks";
    }
    dir_ = dir;
  }
  std::string Path(const std::string& name) const { return dir_ + "/" + name; }
  std::string dir_;
};

int64_t TotalGpus(const std::vector<model::Node>& nodes) {
  int64_t total = 0;
  for (const model::Node& n : nodes) total += static_cast<int64_t>(n.gpus.size());
  return total;
}

TEST_F(SharedTracesTest, OpenbNodes) {
  auto gpu_nodes = ReadOpenbNodes(Path("openb_node_list_gpu_node.csv"));
  ASSERT_TRUE(gpu_nodes.ok()) << gpu_nodes.status().ToString();
  EXPECT_EQ(gpu_nodes->size(), 1213u);
  EXPECT_EQ(TotalGpus(*gpu_nodes), 6212);
  auto all = ReadOpenbNodes(Path("openb_node_list_all_node.csv"), /*gpu_nodes_only=*/false);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  EXPECT_EQ(all->size(), 1523u);
  EXPECT_EQ(TotalGpus(*all), 6212);
  EXPECT_EQ(LoadNodes(Path("openb_node_list_all_node.csv"))->size(), 1213u);
}

TEST_F(SharedTracesTest, OpenbPods) {
  auto trace = ReadOpenbPods(Path("openb_pod_list_default.csv"));
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->jobs.size(), 8152u);
  int64_t milli = 0;
  for (const TraceJob& t : trace->jobs) milli += t.job.TotalMilli().value();
  EXPECT_GT(milli, 0);
  for (const char* name : {"openb_pod_list_gpushare40.csv", "openb_pod_list_multigpu20.csv",
                           "openb_pod_list_cpu050.csv", "openb_pod_list_gpuspec10.csv"}) {
    SCOPED_TRACE(name);
    EXPECT_EQ(*DetectTraceFormat(Path(name)), TraceFormat::kOpenb);
    auto variant = ReadOpenbPods(Path(name));
    ASSERT_TRUE(variant.ok()) << variant.status().ToString();
    EXPECT_GT(variant->jobs.size(), 7000u);
  }
}

TEST_F(SharedTracesTest, TiresiasAndPhillyRuntimes) {
  EXPECT_EQ(*DetectTraceFormat(Path("tiresias_60_job.csv")), TraceFormat::kTiresias);
  auto trace = ReadTiresias(Path("tiresias_60_job.csv"), 8);
  ASSERT_TRUE(trace.ok()) << trace.status().ToString();
  EXPECT_EQ(trace->jobs.size(), 60u);
  auto samples = ReadRuntimeSamples(Path("philly_runtime.csv"));
  ASSERT_TRUE(samples.ok()) << samples.status().ToString();
  EXPECT_EQ(samples->size(), 83154u);
}

}  // namespace
}  // namespace corral::sim

namespace corral::sim {
namespace {

// Deeply nested JSON must be refused with an error, not overflow the stack.
TEST(JsonlTest, DeepNestingIsAnErrorNotACrash) {
  const std::string path = TempPath("deep.jsonl");
  WriteAll(path, std::string(200000, '[') + "\n");
  ExpectError(ReadJsonl(path).status(),
              {"deep.jsonl:1", "nests deeper than the limit of 16 levels"});
  WriteAll(path, "{\"id\":1,\"submit_time\":0,\"duration\":1,\"resources\":{\"gpus\":1},\"name\":" +
                     std::string(50000, '[') + std::string(50000, ']') + "}\n");
  ExpectError(ReadJsonl(path).status(),
              {"deep.jsonl:1", "nests deeper than the limit of 16 levels"});
  WriteAll(path, "[1,2,3]\n");
  ExpectError(ReadJsonl(path).status(), {"expected a JSON object, got an array"});
  const std::string nodes = TempPath("deep_nodes.jsonl");
  WriteAll(nodes, std::string(100000, '{') + "\n");
  ExpectError(ReadNodesJsonl(nodes).status(),
              {"deep_nodes.jsonl:1", "nests deeper than the limit of 16 levels"});
  WriteAll(nodes, "{\"name\":" + std::string(100000, '[') + "\n");
  ExpectError(ReadNodesJsonl(nodes).status(),
              {"deep_nodes.jsonl:1", "nests deeper than the limit of 16 levels"});
}

// A line over LineReader::kMaxLineBytes ends the reading with an error naming it, without
// reading the line whole.
TEST(JsonlTest, AnOverlongLineIsAnError) {
  const std::string path = TempPath("long.jsonl");
  WriteAll(path, "# a comment\n\"" + std::string(LineReader::kMaxLineBytes + 10, 'x') + "\"\n");
  ExpectError(ReadJsonl(path).status(), {"long.jsonl:2", "a line over the limit of 1048576 bytes"});
}

}  // namespace
}  // namespace corral::sim
