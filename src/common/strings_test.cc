#include "common/strings.h"

#include <gtest/gtest.h>

namespace corral {
namespace {

TEST(StringsTest, Trim) {
  EXPECT_EQ(Trim("  a b\t\r\n"), "a b");
  EXPECT_EQ(Trim(" \t "), "");
  EXPECT_EQ(Trim(""), "");
  EXPECT_EQ(Trim("x"), "x");
}

TEST(StringsTest, LowerTouchesOnlyAsciiLetters) {
  EXPECT_EQ(Lower("Set-Cookie: ABC_z9"), "set-cookie: abc_z9");
  EXPECT_EQ(Lower("\xc3\x89"), "\xc3\x89");  // not ASCII: unchanged
}

TEST(StringsTest, Join) {
  EXPECT_EQ(Join({}, " "), "");
  EXPECT_EQ(Join({"echo"}, " "), "echo");
  EXPECT_EQ(Join({"echo", "$HOME", "|", "wc"}, " "), "echo $HOME | wc");
}

TEST(StringsTest, SplitKeepsEmptyParts) {
  EXPECT_EQ(Split("a,,b", ','), (std::vector<std::string>{"a", "", "b"}));
  EXPECT_EQ(Split("", ','), (std::vector<std::string>{""}));
  EXPECT_EQ(Split("user,", ','), (std::vector<std::string>{"user", ""}));
}

TEST(StringsTest, NearestNameSuggestsOnlyWhatIsFewEditsAway) {
  const std::vector<std::string> commands = {"submit", "jobs", "job", "cancel", "logs", "nodes"};
  EXPECT_EQ(NearestName("sbumit", commands), "submit");  // two neighbours swapped: one edit
  EXPECT_EQ(NearestName("submt", commands), "submit");
  EXPECT_EQ(NearestName("cancle", commands), "cancel");
  EXPECT_EQ(NearestName("node", commands), "nodes");
  EXPECT_EQ(NearestName("jobz", commands), "jobs");  // the first of the equally close
  EXPECT_EQ(NearestName("frobnicate", commands), "");
  EXPECT_EQ(NearestName("xy", commands), "");
  EXPECT_EQ(NearestName("", commands), "");
  EXPECT_EQ(NearestName("gpux", {"gpus", "gpu-milli", "gpu-model"}), "gpus");
  EXPECT_EQ(NearestName("limt", {"limit", "all", "state"}), "limit");
  EXPECT_EQ(NearestName(std::string(65, 'a'), {std::string(65, 'a')}), "");
}

}  // namespace
}  // namespace corral
