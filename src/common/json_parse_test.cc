#include "common/json_parse.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace corral {
namespace {

using ::testing::HasSubstr;

std::string Nested(int levels, const std::string& open, const std::string& inner,
                   const std::string& close) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += open;
  text += inner;
  for (int i = 0; i < levels; ++i) text += close;
  return text;
}

TEST(ParseJsonTest, ReadsWhatIsWithinTheLimits) {
  auto value = ParseJson(R"({"a": [1, 2, {"b": "c"}], "d": null})", "body");
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_EQ((*value)["a"][2]["b"], "c");
  // 64 levels, the limit, are read; the top level counts as one.
  auto deepest = ParseJson(Nested(64, R"({"a":)", "1", "}"), "body");
  ASSERT_TRUE(deepest.ok()) << deepest.status().ToString();
}

TEST(ParseJsonTest, RefusesDeepNestingNamingTheLimitWithoutBuildingIt) {
  for (const auto& [open, close] : {std::pair{"[", "]"}, {R"({"a":)", "}"}}) {
    auto refused = ParseJson(Nested(65, open, "1", close), "request body");
    EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(refused.status().message(),
                HasSubstr("request body: nests deeper than the limit of 64 levels (at byte "));
  }
  // 100,000 levels (the reviewer's crash): refused, nothing built, no recursion.
  auto attack = ParseJson(Nested(100000, R"({"a":)", "1", "}"), "body", {1 << 30, 64});
  EXPECT_EQ(attack.status().code(), StatusCode::kInvalidArgument);
  // A smaller limit where the format needs less (trace lines).
  EXPECT_FALSE(ParseJson(Nested(17, "[", "", "]"), "line 3", {1 << 20, 16}).ok());
  EXPECT_TRUE(ParseJson(Nested(16, "[", "", "]"), "line 3", {1 << 20, 16}).ok());
}

TEST(ParseJsonTest, NamesWhereTheDepthIsExceededAndIgnoresBracketsInStrings) {
  EXPECT_EQ(ParseJson("[[[1]]]", "body", {1 << 20, 2}).status().message(),
            "body: nests deeper than the limit of 2 levels (at byte 2)");
  auto quoted = ParseJson(R"(["[[[[[[", "\"[[[[["])", "body", {1 << 20, 2});
  ASSERT_TRUE(quoted.ok()) << quoted.status().ToString();
  EXPECT_EQ((*quoted)[0], "[[[[[[");
}

TEST(ParseJsonTest, ManySiblingsParseInOnePass) {
  // 1 MiB of empty objects side by side (a parser callback made this quadratic: 77 s).
  std::string wide = R"({"a":[)";
  while (wide.size() < (1 << 20) - 16) wide += "{},";
  wide += "{}]}";
  auto value = ParseJson(wide, "body", {size_t{2} << 20, kMaxJsonDepth});
  ASSERT_TRUE(value.ok()) << value.status().ToString();
  EXPECT_GT((*value)["a"].size(), 300000u);
}

TEST(ParseJsonTest, ANumberOutOfRangeIsASyntaxErrorNotACrash) {
  auto huge = ParseJson(R"({"gpus": 1e500})", "spec.json");
  EXPECT_EQ(huge.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(huge.status().message(), HasSubstr("spec.json: not valid JSON: number overflow"));
}

TEST(ParseJsonTest, RefusesOversizedDocumentsBeforeParsing) {
  const std::string big = "[" + std::string(100, ' ') + "]";
  auto refused = ParseJson(big, "answer", {64, kMaxJsonDepth});
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.status().message(), "answer: 102 bytes, over the limit of 64");
}

// An array read an element at a time: every element, in order, each whole (nested arrays and
// scalars too); the errors of ParseJson; `each`'s first error.
TEST(ParseJsonArrayTest, HandsOverEachElementInOrder) {
  std::vector<nlohmann::json> seen;
  auto keep = [&](size_t i, nlohmann::json& item) {
    EXPECT_EQ(i, seen.size());
    seen.push_back(std::move(item));
    return Status::Ok();
  };
  ASSERT_TRUE(
      ParseJsonArray(R"([{"a": [1, {"b": 2}]}, [3, [4]], 5, "six", null, {}])", "list", {}, keep)
          .ok());
  ASSERT_EQ(seen.size(), 6u);
  EXPECT_EQ(seen[0], nlohmann::json::parse(R"({"a": [1, {"b": 2}]})"));
  EXPECT_EQ(seen[1], nlohmann::json::parse("[3, [4]]"));
  EXPECT_EQ(seen[2], 5);
  EXPECT_EQ(seen[3], "six");
  EXPECT_TRUE(seen[4].is_null());
  EXPECT_EQ(seen[5], nlohmann::json::object());
  seen.clear();
  ASSERT_TRUE(ParseJsonArray("[]", "list", {}, keep).ok());
  EXPECT_TRUE(seen.empty());
}

TEST(ParseJsonArrayTest, RefusesWhatParseJsonRefusesAndOtherDocuments) {
  auto ignore = [](size_t, nlohmann::json&) { return Status::Ok(); };
  EXPECT_THAT(ParseJsonArray(R"({"a": 1})", "list", {}, ignore).message(),
              HasSubstr("list: must be a JSON array"));
  EXPECT_THAT(ParseJsonArray("7", "list", {}, ignore).message(),
              HasSubstr("list: must be a JSON array"));
  EXPECT_THAT(ParseJsonArray("[1, 2", "list", {}, ignore).message(),
              HasSubstr("list: not valid JSON"));
  EXPECT_THAT(ParseJsonArray(Nested(65, "[", "1", "]"), "list", {}, ignore).message(),
              HasSubstr("nests deeper than the limit of 64"));
  EXPECT_EQ(ParseJsonArray("[1, 2, 3]", "list", JsonLimits{4, 64}, ignore).code(),
            StatusCode::kResourceExhausted);
  int calls = 0;
  Status s = ParseJsonArray("[1, 2, 3]", "list", {}, [&](size_t i, nlohmann::json&) {
    ++calls;
    return i == 1 ? InvalidArgument("second") : Status::Ok();
  });
  EXPECT_EQ(s.message(), "second");
  EXPECT_EQ(calls, 2);  // none after the first error
}

TEST(ParseJsonTest, NamesTheSyntaxError) {
  auto bad = ParseJson(R"({"a": )", "spec.json");
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("spec.json: not valid JSON: parse error at line 1"));
  EXPECT_FALSE(ParseJson("[1, 2] trailing", "body").ok());
  EXPECT_FALSE(ParseJson("", "body").ok());
}

}  // namespace
}  // namespace corral
