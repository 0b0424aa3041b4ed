#include "sched/policy_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::sched {
namespace {

using ::testing::HasSubstr;

// The simulator's --sharing file: the sharing fields of the policy format.
Result<SharingConfig> Sharing(const nlohmann::json& json) {
  auto policy = ParseSchedulingPolicy(json, {"projects", "reclaim", "fair_share"});
  if (!policy.ok()) return policy.status();
  return policy->sharing;
}

nlohmann::json Json(const char* text) { return nlohmann::json::parse(text); }

TEST(PolicyConfig, ReadsProjectsReclaimAndFairShare) {
  auto c = Sharing(Json(R"({
    "projects": {"a": {"weight": 2, "gpus": 64, "model_gpus": {"A100": 8.5}, "limit_gpus": 96},
                 "b": {}},
    "reclaim": false,
    "fair_share": {"half_life_s": 3600, "fair_share_weight": 500, "age_weight": 0,
                   "age_unit_s": 60}})"));
  ASSERT_TRUE(c.ok()) << c.status().message();
  const ProjectPolicy& a = c->projects.at("a");
  EXPECT_EQ(a.weight, 2);
  EXPECT_EQ(a.quota_milli, 64000);
  EXPECT_EQ(a.model_quota_milli.at("A100"), 8500);
  EXPECT_EQ(a.limit_milli, 96000);
  const ProjectPolicy& b = c->projects.at("b");
  EXPECT_EQ(b.weight, 1);
  EXPECT_EQ(b.quota_milli, 0);
  EXPECT_FALSE(b.limit_milli);
  auto unlimited = Sharing(Json(R"({"projects": {"a": {"limit_gpus": null}}})"));
  ASSERT_TRUE(unlimited.ok());
  EXPECT_FALSE(unlimited->projects.at("a").limit_milli);
  EXPECT_FALSE(c->reclaim);
  EXPECT_EQ(c->fair_share.half_life, Seconds(3600));
  EXPECT_EQ(c->fair_share.fair_share_weight, 500);
  EXPECT_EQ(c->fair_share.age_weight, 0);
  EXPECT_EQ(c->fair_share.age_unit, Seconds(60));
}

TEST(PolicyConfig, DefaultsAreTheSchedulers) {
  auto c = Sharing(Json("{}"));
  ASSERT_TRUE(c.ok());
  const SharingConfig defaults;
  EXPECT_TRUE(c->projects.empty());
  EXPECT_EQ(c->reclaim, defaults.reclaim);
  EXPECT_EQ(c->fair_share.half_life, defaults.fair_share.half_life);
  EXPECT_EQ(c->fair_share.age_unit, defaults.fair_share.age_unit);
}

TEST(PolicyConfig, ErrorsNameTheField) {
  const std::pair<const char*, const char*> cases[] = {
      {R"([1, 2])", "must be an object"},
      {R"({"project": {}})", "field 'project': unknown"},
      {R"({"projects": []})", "field 'projects': must be an object"},
      {R"({"projects": {"a": 3}})", "field 'projects.a': must be an object"},
      {R"({"projects": {"a": {"wieght": 1}}})", "field 'projects.a.wieght': unknown"},
      {R"({"projects": {"a": {"weight": 0}}})", "field 'projects.a.weight': must be a number > 0"},
      {R"({"projects": {"a": {"weight": "2"}}})", "field 'projects.a.weight'"},
      {R"({"projects": {"a": {"gpus": -1}}})", "field 'projects.a.gpus': must be a number >= 0"},
      {R"({"projects": {"a": {"gpus": 1e300}}})", "field 'projects.a.gpus'"},
      {R"({"projects": {"a": {"limit_gpus": true}}})", "field 'projects.a.limit_gpus'"},
      {R"({"projects": {"a": {"model_gpus": [1]}}})", "field 'projects.a.model_gpus'"},
      {R"({"projects": {"a": {"model_gpus": {"A100": -2}}}})",
       "field 'projects.a.model_gpus.A100'"},
      {R"({"projects": {"a": {"model_gpus": {"": 2}}}})", "a model name is empty"},
      {R"({"reclaim": "yes"})", "field 'reclaim': must be true or false"},
      {R"({"fair_share": {"half_life_s": 0}})",
       "field 'fair_share.half_life_s': must be an integer > 0"},
      {R"({"fair_share": {"half_life_s": 1.5}})", "field 'fair_share.half_life_s'"},
      {R"({"fair_share": {"age_weight": -1}})", "field 'fair_share.age_weight'"},
      {R"({"fair_share": {"decay": 1}})", "field 'fair_share.decay': unknown"},
  };
  for (const auto& [text, want] : cases) {
    auto c = Sharing(Json(text));
    ASSERT_FALSE(c.ok()) << text;
    EXPECT_THAT(c.status().message(), HasSubstr(want)) << text;
  }
}

TEST(PolicyConfig, OrderBlockingAndLasThresholdsRoundTrip) {
  auto p = ParseSchedulingPolicy(nlohmann::json::parse(
      R"({"order": "las", "blocking": "strict", "las_thresholds_gpu_s": [10, 100]})"));
  ASSERT_TRUE(p.ok()) << p.status().message();
  EXPECT_EQ(p->order, QueueOrder::kLas);
  EXPECT_EQ(p->blocking, Blocking::kStrict);
  EXPECT_EQ(p->las_thresholds_gpu_s, (std::vector<int64_t>{10, 100}));
  for (const char* bad : {R"({"order": "fastest"})", R"({"blocking": 1})",
                          R"({"las_thresholds_gpu_s": [100, 10]})"}) {
    auto refused = ParseSchedulingPolicy(nlohmann::json::parse(bad));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  // A reader may leave fields out: the server takes projects from its store.
  auto server =
      ParseSchedulingPolicy(nlohmann::json::parse(R"({"projects": {}})"), {"order", "blocking"});
  EXPECT_THAT(server.status().message(), HasSubstr("field 'projects': unknown"));
  for (Blocking b : {Blocking::kSkip, Blocking::kStrict, Blocking::kBackfill}) {
    EXPECT_EQ(*ParseBlocking(BlockingName(b)), b);
  }
}

// SRTF and SRSF preempt by estimated remaining run time and assume a free resume: the server's
// policy file refuses them, naming the field and why (docs/decisions.md).
TEST(PolicyConfig, RemainingTimeOrdersAreSimulatorOnly) {
  for (const char* name : {"srtf", "srsf"}) {
    auto order = ParseQueueOrder(name);
    ASSERT_TRUE(order.ok()) << name;
    EXPECT_EQ(QueueOrderName(*order), name);
    auto refused = ParseSchedulingPolicy(
        nlohmann::json::parse(std::string(R"({"order": ")") + name + R"("})"));
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument) << name;
    EXPECT_THAT(refused.status().message(), HasSubstr("field 'order'")) << name;
    EXPECT_THAT(refused.status().message(), HasSubstr("simulator only")) << name;
  }
}

TEST(PolicyConfig, ProjectSharingRoundTripsAndKeepsTheSchedulersBounds) {
  auto p = ParseProjectSharing(
      nlohmann::json::parse(R"({"weight": 2, "gpus": 1.5, "model_gpus": {"A100": 4}})"));
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(ProjectSharingJson(*p),
            nlohmann::json::parse(R"({"weight": 2.0, "gpus": 1.5, "model_gpus": {"A100": 4.0}})"));
  auto capped = ParseProjectSharing(nlohmann::json::parse(R"({"user_limit_gpus": 4})"));
  ASSERT_TRUE(capped.ok());
  EXPECT_EQ(capped->user_limit_milli, 4000);
  EXPECT_EQ(ProjectSharingJson(*capped)["user_limit_gpus"], 4.0);
  auto tiny = ParseProjectSharing(nlohmann::json::parse(R"({"weight": 1e-9})"), "projects.x");
  EXPECT_THAT(tiny.status().message(), HasSubstr("field 'projects.x.weight'"));
}

}  // namespace
}  // namespace corral::sched
