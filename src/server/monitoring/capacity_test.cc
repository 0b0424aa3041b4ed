#include "server/monitoring/capacity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "protocol/job_spec.h"
#include "server/monitoring/monitoring_views.h"

namespace corral::server {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

constexpr int64_t kNow = 1'800'000'000;  // on the hour

// A record as the store keeps it: `gpus` GPUs × `tasks`, submitted at `submit`, started and
// ended when given.
store::JobRecord Record(int64_t id, int gpus, int tasks, int64_t submit,
                        std::optional<int64_t> start, std::optional<int64_t> end,
                        int64_t time_limit_s = 0) {
  json submitted = {{"name", "j" + std::to_string(id)},
                    {"command", {"true"}},
                    {"resources", {{"gpus", gpus}}},
                    {"tasks", tasks},
                    {"project", "vision"}};
  if (time_limit_s > 0) submitted["time_limit_s"] = time_limit_s;
  auto spec = protocol::ParseJobSpec(submitted);
  EXPECT_TRUE(spec.ok()) << spec.status().ToString();
  store::JobRecord r;
  r.id = JobId(id);
  r.user = "ann";
  r.project = "vision";
  r.spec_json = ToJson(*spec).dump();
  r.state = end     ? model::JobState::kSucceeded
            : start ? model::JobState::kRunning
                    : model::JobState::kPending;
  r.submit_time = Seconds(submit);
  if (start) r.start_time = Seconds(*start);
  if (end) r.end_time = Seconds(*end);
  return r;
}

sched::SchedulerConfig Rules(const std::string& policy) {
  sched::SchedulerConfig rules;
  rules.policy = policy;
  return rules;
}

model::Node Node(const std::string& name, int gpus, const std::string& model = "A100") {
  model::Node n;
  n.name = name;
  n.cpu = CpuMilli(64000);
  n.memory = MemoryMib(512 * 1024);
  n.gpu_model = model;
  for (int i = 0; i < gpus; ++i) {
    model::Gpu g;
    g.index = i;
    g.memory = MemoryMib(81920);
    n.gpus.push_back(g);
  }
  n.runtimes = {"process"};
  return n;
}

TEST(CapacityTest, DemandCountsEveryJobFromSubmissionToItsEnd) {
  const std::vector<store::JobRecord> jobs = {
      Record(1, 2, 2, kNow - 7200, kNow - 3600, kNow - 1800),     // 4 GPUs for 1.5 h
      Record(2, 1, 1, kNow - 3600, std::nullopt, std::nullopt)};  // pending: to now
  const auto demand = DemandOf(jobs, Seconds(kNow));
  ASSERT_EQ(demand.size(), 2u);
  EXPECT_EQ(demand[0].to_s, kNow - 1800);
  EXPECT_DOUBLE_EQ(demand[0].gpus, 4);
  EXPECT_EQ(demand[1].to_s, kNow);
  const json view = ForecastView(jobs, 16, Seconds(kNow + 60), 1, 1);
  EXPECT_EQ(view["capacity_gpus"], 16);
  ASSERT_EQ(view["history"].size(), 24u);
  EXPECT_EQ(view["history"][23]["t"], kNow - 3600);
  EXPECT_DOUBLE_EQ(view["history"][22]["demand_gpus"].get<double>(), 4);
  EXPECT_DOUBLE_EQ(view["history"][23]["demand_gpus"].get<double>(), 4 * 0.5 + 1);
  ASSERT_EQ(view["forecast"].size(), 24u);
  EXPECT_EQ(view["forecast"][0]["t"], kNow);
  EXPECT_LE(view["forecast"][0]["low"].get<double>(), view["forecast"][0]["high"].get<double>());
}

// The dashboard said "demand now 0" while GPUs were allocated: it read the last whole hour of
// the history, which holds none of the jobs submitted this hour. Demand now is the jobs
// submitted and not ended at this second.
TEST(CapacityTest, DemandNowCountsTheJobsSubmittedThisHour) {
  const std::vector<store::JobRecord> jobs = {
      Record(1, 2, 2, kNow + 60, kNow + 61, std::nullopt),       // running: 4 GPUs
      Record(2, 1, 1, kNow + 120, std::nullopt, std::nullopt),   // pending: 1 GPU
      Record(3, 4, 1, kNow + 30, kNow + 40, kNow + 100),         // ended: nothing now
      Record(4, 8, 1, kNow + 900, std::nullopt, std::nullopt)};  // submitted after `now`
  const json view = ForecastView(jobs, 16, Seconds(kNow + 600), 1, 1);
  EXPECT_DOUBLE_EQ(view["history"][23]["demand_gpus"].get<double>(), 0);  // the hour before
  ASSERT_TRUE(view.contains("demand_now_gpus")) << view.dump();
  EXPECT_DOUBLE_EQ(view["demand_now_gpus"].get<double>(), 5);
}

TEST(CapacityTest, TraceReplaysRecordedRunLengths) {
  const std::vector<store::JobRecord> jobs = {
      Record(1, 8, 1, kNow - 5000, kNow - 4000, kNow - 1000),         // ran 3000 s
      Record(2, 1, 1, kNow - 100, kNow - 50, std::nullopt),           // running: 50 s so far
      Record(3, 4, 1, kNow - 90, std::nullopt, std::nullopt, 7200),   // pending: its limit
      Record(4, 4, 1, kNow - 80, std::nullopt, kNow - 70),            // cancelled while pending
      Record(5, 4, 1, kNow - 99'999, kNow - 99'000, kNow - 98'000)};  // before `since`
  const sim::Trace trace = TraceOf(jobs, Seconds(kNow - 10'000), Seconds(kNow));
  ASSERT_EQ(trace.jobs.size(), 3u);
  EXPECT_EQ(trace.jobs[0].duration, Seconds(3000));
  EXPECT_EQ(trace.jobs[0].job.resources.gpus.value(), 8);
  EXPECT_EQ(trace.jobs[1].duration, Seconds(50));
  EXPECT_EQ(trace.jobs[2].duration, Seconds(7200));
  EXPECT_FALSE(trace.jobs[2].job.time_limit.has_value());
}

TEST(CapacityTest, ExtraGpusCopyTheMostCommonNodeShape) {
  const std::vector<model::Node> nodes = {Node("a", 8), Node("b", 8), Node("c", 4, "T4")};
  const auto more = WithExtraGpus(nodes, 20);
  ASSERT_EQ(more.size(), 6u);
  EXPECT_EQ(more[3].name, "whatif-0");
  EXPECT_EQ(more[3].gpus.size(), 8u);
  EXPECT_EQ(more[3].gpu_model, "A100");
  EXPECT_EQ(more[5].gpus.size(), 4u);  // 8 + 8 + 4 = 20
  EXPECT_EQ(WithExtraGpus(nodes, 0).size(), 3u);
}

TEST(CapacityTest, MoreGpusShortenTheWaitsAndTheSmallestEnoughIsNamed) {
  // One 8-GPU node; 6 jobs of 8 GPUs for an hour, submitted together: they run one by one.
  std::vector<store::JobRecord> jobs;
  for (int i = 1; i <= 6; ++i) {
    jobs.push_back(
        Record(i, 8, 1, kNow - 86'400, kNow - 86'000 + 3600 * i, kNow - 86'000 + 3600 * (i + 1)));
  }
  const sim::Trace trace = TraceOf(jobs, Seconds(kNow - 2 * 86'400), Seconds(kNow));
  WhatIfRequest request;
  request.extra_gpus = {0, 8, 40};
  request.target_p90_wait_s = 3600;
  auto answer = WhatIf({Node("a", 8)}, trace, request, Rules("bestfit"));
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  const json& r = (*answer)["results"];
  ASSERT_EQ(r.size(), 3u);
  EXPECT_EQ((*answer)["jobs"], 6);
  EXPECT_EQ(r[0]["gpus"], 8);
  EXPECT_DOUBLE_EQ(r[0]["p90_wait_s"].get<double>(), 5 * 3600);  // nearest rank: the 6th
  EXPECT_DOUBLE_EQ(r[1]["p90_wait_s"].get<double>(), 2 * 3600);  // two at a time
  EXPECT_DOUBLE_EQ(r[2]["p90_wait_s"].get<double>(), 0);         // all at once
  EXPECT_EQ((*answer)["smallest_meeting_target"], 40);
  // A job bigger than any node is set aside, not held against every size; a job that cannot
  // start in a size counts as an infinite wait there.
  std::vector<store::JobRecord> more = jobs;
  more.push_back(Record(7, 16, 1, kNow - 86'400, std::nullopt, std::nullopt));
  request.extra_gpus = {0, 40};
  auto set_aside = WhatIf({Node("a", 8)}, TraceOf(more, Seconds(kNow - 2 * 86'400), Seconds(kNow)),
                          request, Rules("bestfit"));
  ASSERT_TRUE(set_aside.ok());
  EXPECT_EQ((*set_aside)["too_big"], 1);
  EXPECT_EQ((*set_aside)["jobs"], 6);
  EXPECT_EQ((*set_aside)["smallest_meeting_target"], 40);
  request.target_p90_wait_s = 1;
  request.extra_gpus = {0};
  EXPECT_TRUE((*WhatIf({Node("a", 8)}, trace, request, Rules("bestfit")))["smallest_meeting_target"]
                  .is_null());
  EXPECT_FALSE(WhatIf({Node("a", 8)}, trace, request, Rules("nonsense")).ok());
}

TEST(CapacityTest, TheWhatIfKeepsTheLiveRulesSuchAsAProjectsLimit) {
  // Two 8-GPU jobs of one project, submitted together, on 16 GPUs: both start at once, unless
  // the project may run only 8 GPUs at a time.
  std::vector<store::JobRecord> jobs = {
      Record(1, 8, 1, kNow - 86'400, kNow - 86'400, kNow - 86'400 + 3600),
      Record(2, 8, 1, kNow - 86'400, kNow - 86'400, kNow - 86'400 + 3600)};
  const sim::Trace trace = TraceOf(jobs, Seconds(kNow - 2 * 86'400), Seconds(kNow));
  WhatIfRequest request;
  request.extra_gpus = {0, 8};
  request.target_p90_wait_s = 60;
  auto free = WhatIf({Node("a", 8), Node("b", 8)}, trace, request, Rules("bestfit"));
  ASSERT_TRUE(free.ok()) << free.status().ToString();
  EXPECT_DOUBLE_EQ((*free)["results"][0]["p90_wait_s"].get<double>(), 0);
  sched::SchedulerConfig limited = Rules("bestfit");
  limited.sharing.projects["vision"].limit_milli = 8000;
  auto capped = WhatIf({Node("a", 8), Node("b", 8)}, trace, request, limited);
  ASSERT_TRUE(capped.ok()) << capped.status().ToString();
  // More GPUs do not help a project held by its own limit.
  for (const json& r : (*capped)["results"]) {
    EXPECT_DOUBLE_EQ(r["p90_wait_s"].get<double>(), 3600) << r;
  }
  EXPECT_TRUE((*capped)["smallest_meeting_target"].is_null());
}

TEST(CapacityTest, TheWhatIfPassesBetweenArrivalsAndEndsUnder2dLas) {
  // On one GPU, job 2 arrives 100 s after job 1, which runs 10,000 s. Under 2D-LAS (threshold
  // 3,600 GPU-s) job 2 preempts job 1 at the first pass after job 1's service crossed the
  // threshold (passes every 60 s from the arrival: at 3,640 s), not only when job 1 ends.
  const int64_t t0 = kNow - 86'400;
  std::vector<store::JobRecord> jobs = {Record(1, 1, 1, t0, t0, t0 + 10'000),
                                        Record(2, 1, 1, t0 + 100, t0 + 100, t0 + 150)};
  const sim::Trace trace = TraceOf(jobs, Seconds(kNow - 2 * 86'400), Seconds(kNow));
  WhatIfRequest request;
  request.extra_gpus = {0};
  sched::SchedulerConfig las = Rules("bestfit");
  las.order = sched::QueueOrder::kLas;
  las.las_thresholds_gpu_s = {3600};
  auto answer = WhatIf({Node("a", 1)}, trace, request, las);
  ASSERT_TRUE(answer.ok()) << answer.status().ToString();
  EXPECT_DOUBLE_EQ((*answer)["results"][0]["max_wait_s"].get<double>(), 3640 - 100);
}

TEST(CapacityTest, WhatIfRequestsAreChecked) {
  auto defaults = ParseWhatIf(json::object());
  ASSERT_TRUE(defaults.ok());
  EXPECT_EQ(defaults->extra_gpus, (std::vector<int>{0, 8, 16, 32, 64}));
  auto sorted = ParseWhatIf({{"extra_gpus", {16, 0, 16}}, {"target_p90_wait_s", 60}});
  ASSERT_TRUE(sorted.ok());
  EXPECT_EQ(sorted->extra_gpus, (std::vector<int>{0, 16}));
  const std::pair<json, const char*> bad[] = {
      {json::array(), "body: must be a JSON object"},
      {{{"extra", 1}}, "field 'extra': unknown"},
      {{{"extra_gpus", json::array()}}, "field 'extra_gpus': an array of 1 to 8"},
      {{{"extra_gpus", {-1}}}, "field 'extra_gpus': each must be an integer 0..100000"},
      {{{"target_p90_wait_s", "1h"}}, "field 'target_p90_wait_s'"},
      {{{"since", 30}}, "field 'since': must be a string"}};
  for (const auto& [body, message] : bad) {
    auto r = ParseWhatIf(body);
    ASSERT_FALSE(r.ok()) << body;
    EXPECT_THAT(r.status().message(), HasSubstr(message)) << body;
  }
}

TEST(ForecastCacheTest, AnswersAgainWithinItsTtlAndKeepsAFewKeys) {
  ForecastCache cache(Seconds(60));
  int computed = 0;
  auto compute = [&]() -> Result<json> { return json{{"n", ++computed}}; };
  EXPECT_EQ((*cache.Get(28, 7, Seconds(1000), compute))["n"], 1);
  EXPECT_EQ((*cache.Get(28, 7, Seconds(1059), compute))["n"], 1);  // within the minute
  EXPECT_EQ((*cache.Get(28, 1, Seconds(1059), compute))["n"], 2);  // another key
  EXPECT_EQ((*cache.Get(28, 7, Seconds(1060), compute))["n"], 3);  // a minute later
  // An error is passed on and not kept.
  auto failing = [&]() -> Result<json> { return IoError("store down"); };
  EXPECT_EQ(cache.Get(1, 1, Seconds(1100), failing).status().code(), StatusCode::kIoError);
  EXPECT_EQ((*cache.Get(1, 1, Seconds(1100), compute))["n"], 4);
  // Beyond kMaxEntries keys the oldest goes: (28, 1) was computed first of those left.
  for (int k = 2; k < 2 + static_cast<int>(ForecastCache::kMaxEntries); ++k) {
    (void)cache.Get(k, 1, Seconds(1101), compute);
  }
  const int before = computed;
  EXPECT_EQ((*cache.Get(28, 1, Seconds(1102), compute))["n"], before + 1);
  // Within the minute but in the next hour: the series moved on.
  EXPECT_EQ((*cache.Get(28, 1, Seconds(3590), compute))["n"], before + 2);
  EXPECT_EQ((*cache.Get(28, 1, Seconds(3600), compute))["n"], before + 3);
  EXPECT_EQ((*cache.Get(28, 1, Seconds(3610), compute))["n"], before + 3);
  // The clock stepped back (within the minute and the hour): not an answer from the future.
  EXPECT_EQ((*cache.Get(28, 1, Seconds(3670), compute))["n"], before + 4);
  EXPECT_EQ((*cache.Get(28, 1, Seconds(3640), compute))["n"], before + 5);
}

}  // namespace
}  // namespace corral::server
