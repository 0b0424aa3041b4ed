#include "common/config_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral {
namespace {

TEST(ConfigFile, YamlScalarsGetTheirTypes) {
  auto j =
      ParseJsonOrYaml("a: 3\nb: 1.5\nh: 1e3\nc: true\nd: '7'\ne: text\nf: '-'\ng: [1, x]\n", "t");
  ASSERT_TRUE(j.ok()) << j.status().ToString();
  EXPECT_EQ((*j)["a"], 3);
  EXPECT_EQ((*j)["b"], 1.5);
  EXPECT_EQ((*j)["h"], 1000.0);
  EXPECT_EQ((*j)["c"], true);
  EXPECT_EQ((*j)["d"], "7");
  EXPECT_EQ((*j)["e"], "text");
  EXPECT_EQ((*j)["f"], "-");  // quoted
  EXPECT_EQ((*j)["g"], nlohmann::json({1, "x"}));
}

TEST(ConfigFile, JsonIsReadAsJsonAndGarbageIsNamed) {
  EXPECT_EQ(*ParseJsonOrYaml(R"({"x": [1, 2]})", "t"), nlohmann::json({{"x", {1, 2}}}));
  auto bad = ParseJsonOrYaml("a: [1, 2\n", "policy.yaml");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), ::testing::HasSubstr("policy.yaml"));
  EXPECT_EQ(ReadJsonOrYamlFile("/nonexistent/x.yaml").status().code(), StatusCode::kIoError);
}

}  // namespace
}  // namespace corral
