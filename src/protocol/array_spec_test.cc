#include "protocol/array_spec.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "model/job.h"

namespace corral::protocol {
namespace {

using nlohmann::json;
using ::testing::HasSubstr;

std::vector<int> Indices(std::string_view text) {
  auto array = ParseArrayFlag(text);
  EXPECT_TRUE(array.ok()) << text << ": " << array.status().ToString();
  return array.ok() ? (*array)["indices"].get<std::vector<int>>() : std::vector<int>{};
}

// The message of the error ParseArrayFlag gives for `text` (empty when it gives none).
std::string ArrayError(std::string_view text) {
  auto array = ParseArrayFlag(text);
  EXPECT_FALSE(array.ok()) << text;
  EXPECT_EQ(array.status().code(), StatusCode::kInvalidArgument) << text;
  return array.ok() ? "" : array.status().message();
}

TEST(ArrayFlag, RangesListsStepsAndALimit) {
  EXPECT_EQ(Indices("0-3"), (std::vector<int>{0, 1, 2, 3}));
  EXPECT_EQ(Indices("1,3,5-7"), (std::vector<int>{1, 3, 5, 6, 7}));
  EXPECT_EQ(Indices("0-20:5"), (std::vector<int>{0, 5, 10, 15, 20}));
  EXPECT_EQ(Indices("0-21:5"), (std::vector<int>{0, 5, 10, 15, 20}));
  EXPECT_EQ(Indices("7"), (std::vector<int>{7}));
  EXPECT_EQ(Indices("9,2"), (std::vector<int>{9, 2}));  // the order given
  auto limited = ParseArrayFlag("0-99%8");
  ASSERT_TRUE(limited.ok());
  EXPECT_EQ((*limited)["max_running"], 8);
  EXPECT_EQ((*limited)["indices"].size(), 100u);
  EXPECT_FALSE(ParseArrayFlag("0-3")->contains("max_running"));
  EXPECT_FALSE(ParseArrayFlag("0-3")->contains("env"));
  EXPECT_EQ(Indices("0-9999").size(), static_cast<size_t>(model::kMaxArrayElements));
}

TEST(ArrayFlag, ErrorsNameTheBadPart) {
  EXPECT_THAT(ArrayError(""), HasSubstr("--array: empty"));
  EXPECT_THAT(ArrayError("0-5,x-3"), HasSubstr("part 'x-3': 'x' is not an index"));
  EXPECT_THAT(ArrayError("1,,3"), HasSubstr("an empty part"));
  EXPECT_THAT(ArrayError("1,"), HasSubstr("an empty part"));
  EXPECT_THAT(ArrayError("-3"), HasSubstr("part '-3': '' is not an index"));
  EXPECT_THAT(ArrayError("5-2"), HasSubstr("part '5-2': the range ends before it starts"));
  EXPECT_THAT(ArrayError("0-9:0"), HasSubstr("part '0-9:0': the step '0' must be >= 1"));
  EXPECT_THAT(ArrayError("4:2"), HasSubstr("part '4:2': a step needs a range"));
  EXPECT_THAT(ArrayError("1-3,2"), HasSubstr("part '2': index 2 is given twice"));
  EXPECT_THAT(ArrayError("0-9%0"), HasSubstr("the running limit '%0' must be an integer"));
  EXPECT_THAT(ArrayError("0-9%x"), HasSubstr("'%x'"));
  EXPECT_THAT(ArrayError("0-9%2%3"), HasSubstr("'%2%3'"));
  EXPECT_THAT(ArrayError("0-10000"), HasSubstr("more than 10000 indices"));
  EXPECT_THAT(ArrayError("0-99999999999"), HasSubstr("'99999999999' is not an index"));
  EXPECT_THAT(ArrayError("1-2-3"), HasSubstr("'2-3' is not an index"));
}

TEST(Sweep, GridIsEveryCombinationWithTheLastNameFastest) {
  json sweep = json::parse(R"({"grid": {"lr": [0.1, 0.01], "batch": [32, 64], "fp16": [true]},
                               "max_running": 4})");
  auto array = ArrayFromSweep(sweep, "sweep.yaml");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ((*array)["indices"], json({0, 1, 2, 3}));
  EXPECT_EQ((*array)["max_running"], 4);
  EXPECT_EQ((*array)["env"], json::parse(R"([
    {"batch": "32", "fp16": "true", "lr": "0.1"},
    {"batch": "32", "fp16": "true", "lr": "0.01"},
    {"batch": "64", "fp16": "true", "lr": "0.1"},
    {"batch": "64", "fp16": "true", "lr": "0.01"}])"));
}

TEST(Sweep, RunsAreTakenAsListed) {
  json sweep = json::parse(R"({"runs": [{"lr": 0.1}, {"lr": 1e-5, "batch": 64, "opt": "adam"}]})");
  auto array = ArrayFromSweep(sweep, "sweep.json");
  ASSERT_TRUE(array.ok()) << array.status().ToString();
  EXPECT_EQ((*array)["indices"], json({0, 1}));
  EXPECT_FALSE(array->contains("max_running"));
  EXPECT_EQ((*array)["env"],
            json::parse(R"([{"lr": "0.1"}, {"batch": "64", "lr": "1e-05", "opt": "adam"}])"));
}

TEST(Sweep, ErrorsNameTheFileAndTheField) {
  auto error = [](const std::string& text) {
    auto array = ArrayFromSweep(json::parse(text), "s.yaml");
    EXPECT_EQ(array.status().code(), StatusCode::kInvalidArgument) << text;
    return array.ok() ? std::string() : array.status().message();
  };
  EXPECT_THAT(error("[1, 2]"), HasSubstr("s.yaml: a sweep must be a mapping"));
  EXPECT_THAT(error(R"({"grid": {"a": [1]}, "runs": [{}]})"), HasSubstr("exactly one of"));
  EXPECT_THAT(error(R"({})"), HasSubstr("exactly one of"));
  EXPECT_THAT(error(R"({"grid": {"a": [1]}, "max_runing": 2})"),
              HasSubstr("s.yaml: field 'max_runing': unknown"));
  EXPECT_THAT(error(R"({"grid": {"a": [1]}, "max_running": 0})"),
              HasSubstr("field 'max_running': must be an integer from 1 to 10000"));
  EXPECT_THAT(error(R"({"grid": {"learning-rate": [1]}})"),
              HasSubstr("parameter 'learning-rate': not a valid environment variable name"));
  EXPECT_THAT(error(R"({"runs": [{"2x": 1}]})"), HasSubstr("parameter '2x'"));
  EXPECT_THAT(error(R"({"grid": {"a": []}})"), HasSubstr("field 'grid.a': must be a non-empty"));
  EXPECT_THAT(error(R"({"grid": {"a": [1, null]}})"),
              HasSubstr("field 'grid.a[1]': must be a string, number or true/false"));
  EXPECT_THAT(error(R"({"runs": [{"a": [1]}]})"), HasSubstr("field 'runs[0].a'"));
  EXPECT_THAT(error(R"({"runs": [1]})"), HasSubstr("field 'runs[0]': must map"));
  EXPECT_THAT(error(R"({"runs": []})"), HasSubstr("field 'runs': must be a list of 1 to 10000"));
  json big = {{"grid", {{"a", std::vector<int>(100)}, {"b", std::vector<int>(101)}}}};
  EXPECT_THAT(error(big.dump()), HasSubstr("more than 10000 combinations"));
}

}  // namespace
}  // namespace corral::protocol
