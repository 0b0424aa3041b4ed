#include "protocol/size_flag.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace corral::protocol {
namespace {

using ::testing::HasSubstr;

TEST(SizeFlagTest, OneNumberOrARange) {
  auto one = ParseSizeFlag("4", "--gpus");
  ASSERT_TRUE(one.ok());
  EXPECT_FALSE(one->IsRange());
  EXPECT_EQ(one->min, 4);
  auto negative = ParseSizeFlag("-1", "--gpus");  // the spec's check names its field
  ASSERT_TRUE(negative.ok());
  EXPECT_EQ(negative->min, -1);
  auto range = ParseSizeFlag("2-8", "--gpus");
  ASSERT_TRUE(range.ok());
  EXPECT_TRUE(range->IsRange());
  EXPECT_EQ(range->min, 2);
  EXPECT_EQ(range->max, 8);
  EXPECT_FALSE(ParseSizeFlag("4-4", "--gpus")->IsRange());
}

TEST(SizeFlagTest, ErrorsNameTheFlag) {
  for (const auto& [text, error] : std::vector<std::pair<std::string, std::string>>{
           {"8-2", "--gpus: 8-2: MIN must not exceed MAX"},
           {"0-2", "--gpus: 0-2: a range must lie within 1-4096"},
           {"2-5000", "--gpus: 2-5000: a range must lie within 1-4096"},
           {"two", "--gpus: expected N or MIN-MAX, got 'two'"},
           {"2-", "--gpus: expected N or MIN-MAX, got '2-'"},
           {"2-8-9", "--gpus: expected N or MIN-MAX, got '2-8-9'"},
           {"", "--gpus: expected N or MIN-MAX, got ''"},
           {"99999999999", "--gpus: expected N or MIN-MAX"},
       }) {
    auto parsed = ParseSizeFlag(text, "--gpus");
    ASSERT_FALSE(parsed.ok()) << text;
    EXPECT_THAT(parsed.status().message(), HasSubstr(error)) << text;
  }
}

}  // namespace
}  // namespace corral::protocol
