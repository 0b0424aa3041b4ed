#include "server/control/partitions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace corral::server {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

protocol::PartitionTable Table() {
  auto table = protocol::ParsePartitionTable(nlohmann::json::parse(R"({
    "partitions": [{"name": "gpu", "gpu_models": ["A100", "H100"], "default": true},
                   {"name": "debug", "max_time_s": 600}],
    "qos": [{"name": "high", "priority": 100}]})"));
  EXPECT_TRUE(table.ok()) << table.status().message();
  return table.ok() ? *table : protocol::PartitionTable{};
}

TEST(PartitionsTest, TheDefaultPartitionGivesItsModelsToAJobThatNamesNone) {
  protocol::JobSpec spec;
  auto warnings = ApplyPartitions(Table(), spec);
  ASSERT_TRUE(warnings.ok());
  EXPECT_TRUE(warnings->empty());
  EXPECT_EQ(spec.partition, "gpu");
  EXPECT_THAT(spec.resources.gpu_models, ElementsAre("A100", "H100"));
}

TEST(PartitionsTest, APartitionBoundsModelsAndTimeLimits) {
  protocol::JobSpec spec;
  spec.partition = "gpu";
  spec.resources.gpu_models = {"T4"};
  auto refused = ApplyPartitions(Table(), spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(),
              HasSubstr("field 'resources.gpu_models': partition 'gpu' has GPU models A100, H100, "
                        "not 'T4'"));
  spec = {};
  spec.partition = "debug";
  ASSERT_TRUE(ApplyPartitions(Table(), spec).ok());
  EXPECT_EQ(spec.time_limit_s, 600);  // none asked: the partition's most
  spec.time_limit_s = 3600;
  refused = ApplyPartitions(Table(), spec);
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(refused.status().message(), HasSubstr("allows at most 10m, asked 1h"));
}

TEST(PartitionsTest, AQosGivesItsPriorityToJobsThatSetNone) {
  protocol::JobSpec spec;
  spec.qos = "high";
  ASSERT_TRUE(ApplyPartitions(Table(), spec).ok());
  EXPECT_EQ(spec.priority, 100);
  spec.priority = 5;
  ASSERT_TRUE(ApplyPartitions(Table(), spec).ok());
  EXPECT_EQ(spec.priority, 5);
}

TEST(PartitionsTest, UnknownNamesAreRefusedNamingTheOnesThereAre) {
  protocol::JobSpec spec;
  spec.partition = "big";
  EXPECT_THAT(ApplyPartitions(Table(), spec).status().message(),
              HasSubstr("field 'partition': no partition 'big' here; there are: gpu, debug"));
  spec = {};
  spec.qos = "low";
  EXPECT_THAT(ApplyPartitions(Table(), spec).status().message(),
              HasSubstr("field 'qos': no QoS 'low' here; there are: high"));
}

TEST(PartitionsTest, WithoutATableNamesAreDroppedWithAWarning) {
  protocol::JobSpec spec;
  spec.partition = "gpu";
  spec.qos = "high";
  auto warnings = ApplyPartitions({}, spec);
  ASSERT_TRUE(warnings.ok());
  EXPECT_THAT(*warnings, ElementsAre("partition 'gpu' ignored: this cluster defines no partitions",
                                     "qos 'high' ignored: this cluster defines no QoS"));
  EXPECT_TRUE(spec.partition.empty());
  EXPECT_TRUE(spec.qos.empty());
  EXPECT_EQ(spec.priority, 0);
}

TEST(PartitionsTest, TheTableIsCheckedAndRoundTrips) {
  const protocol::PartitionTable table = Table();
  EXPECT_EQ(protocol::ParsePartitionTable(protocol::ToJson(table)).value(), table);
  for (const auto& [text, why] : std::vector<std::pair<std::string, std::string>>{
           {R"({"partitions": [{"name": "a"}, {"name": "a"}]})", "'a' is given twice"},
           {R"({"partitions": [{"name": "a b"}]})", "not a valid name"},
           {R"({"partitions": [{"name": "a", "default": true}, {"name": "b", "default": true}]})",
            "only one partition may be"},
           {R"({"qos": [{"name": "q", "priority": 5000}]})", "qos[0].priority"},
           {R"([])", "must be a JSON object"}}) {
    auto parsed = protocol::ParsePartitionTable(nlohmann::json::parse(text));
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(why)) << text;
  }
}

}  // namespace
}  // namespace corral::server
