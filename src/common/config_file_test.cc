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

// Found by fuzz/job_spec_yaml_fuzzer.cc: yaml-cpp passes bytes that are not UTF-8 through (and
// reads a file whose first bytes look like UTF-32 as UTF-32), and a document holding such a
// string could not be dumped (nlohmann threw), so `corral submit -f` failed with nlohmann's
// exception instead of naming the file and the place.
TEST(ConfigFile, TextThatIsNotUtf8IsRefusedNamingWhere) {
  const std::string refused = "job.yaml: not valid JSON or YAML: text that is not UTF-8 at ";
  for (const auto& [text, where] : std::vector<std::pair<std::string, std::string>>{
           {"name: caf\xe9\n", "line 1, column 7"},                 // Latin-1
           {"a: 1\nb: \xc0\xaf\n", "line 2, column 4"},             // an overlong '/'
           {"x: \xed\xa0\x80\n", "line 1, column 4"},               // a surrogate
           {"x: [\"ok\", \xf4\x90\x80\x80]", "line 1, column 11"},  // past U+10FFFF
           {"x: \xe2\x82", "line 1, column 4"},                     // cut short
           {"caf\xe9: 1\n", "line 1, column 1"}}) {                 // a key
    auto parsed = ParseJsonOrYaml(text, "job.yaml");
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << text;
    EXPECT_EQ(parsed.status().message(), refused + where);
  }
  // The fuzzer's input: NULs first, which yaml-cpp takes for UTF-32.
  const std::string utf32("\x01\0\0\0\0\0\0uenvironment: jup!!str esources", 38);
  EXPECT_THAT(ParseJsonOrYaml(utf32, "job.yaml").status().message(),
              ::testing::StartsWith(refused));
  auto utf8 = ParseJsonOrYaml("name: caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x84\n", "job.yaml");
  ASSERT_TRUE(utf8.ok()) << utf8.status().ToString();
  EXPECT_EQ(utf8->dump(), "{\"name\":\"caf\xc3\xa9 \xe2\x82\xac \xf0\x9f\x90\x84\"}");
}

std::string Repeated(const std::string& piece, int times) {
  std::string out;
  for (int i = 0; i < times; ++i) out += piece;
  return out;
}

TEST(ConfigFile, DeepDocumentsAreRefusedNamingTheLimit) {
  const std::string limit = "nests deeper than the limit of 64 levels";
  // JSON, and YAML flow and block styles; 1,000 levels is past yaml-cpp's own limit too.
  for (int levels : {65, 1000}) {
    auto json = ParseJsonOrYaml(Repeated("[", levels) + Repeated("]", levels), "deep.json");
    EXPECT_THAT(json.status().message(), ::testing::StartsWith("deep.json: " + limit)) << levels;
    auto flow = ParseJsonOrYaml(Repeated("{a: ", levels) + "1" + Repeated("}", levels), "f.yaml");
    EXPECT_THAT(flow.status().message(), ::testing::StartsWith("f.yaml: " + limit)) << levels;
  }
  std::string block;
  for (int i = 0; i < 70; ++i) block += std::string(2 * i, ' ') + "a:\n";
  block += std::string(140, ' ') + "b: 1\n";
  EXPECT_EQ(ParseJsonOrYaml(block, "b.yaml").status().message(), "b.yaml: " + limit);
  EXPECT_TRUE(ParseJsonOrYaml(Repeated("[", 64) + Repeated("]", 64), "ok.json").ok());
}

TEST(ConfigFile, YamlAliasesThatExpandTooFarAreRefused) {
  // "Billion laughs": nine levels of ten aliases each, 10^9 strings from 1 KiB of text.
  std::string bomb = "a0: &a0 [lol, lol, lol, lol, lol, lol, lol, lol, lol, lol]\n";
  for (int i = 1; i < 10; ++i) {
    const std::string prev = "*a" + std::to_string(i - 1);
    bomb += "a" + std::to_string(i) + ": &a" + std::to_string(i) + " [" + Repeated(prev + ", ", 9) +
            prev + "]\n";
  }
  auto refused = ParseJsonOrYaml(bomb, "bomb.yaml");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(),
              ::testing::HasSubstr("bomb.yaml: expands to more than 1000000 values"));
  // A few aliases are fine.
  auto fine = ParseJsonOrYaml("base: &b {gpus: 1}\nrun: *b\n", "ok.yaml");
  ASSERT_TRUE(fine.ok()) << fine.status().ToString();
  EXPECT_EQ((*fine)["run"]["gpus"], 1);
}

TEST(ConfigFile, OversizedTextIsRefusedBeforeParsing) {
  const std::string big(kMaxConfigFileBytes + 1, ' ');
  EXPECT_EQ(ParseJsonOrYaml(big, "big.yaml").status().code(), StatusCode::kResourceExhausted);
  // YAML is held to less (yaml-cpp builds its tree whole); the same size as JSON is read.
  std::string yaml = "a:\n";
  while (yaml.size() <= kMaxYamlFileBytes) yaml += "- x\n";
  auto refused = ParseJsonOrYaml(yaml, "list.yaml");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), ::testing::HasSubstr("give larger files as JSON"));
  std::string json = "[";
  while (json.size() <= kMaxYamlFileBytes) json += "\"x\",";
  json += "\"x\"]";
  EXPECT_TRUE(ParseJsonOrYaml(json, "list.json").ok());
}

TEST(ConfigFile, AliasedKeysCountAgainstTheBudget) {
  // A map with a long key, aliased many times: its keys are text too.
  std::string yaml = "k: &k {? " + std::string(100 * 1024, 'x') + " : 1}\nl: [";
  for (int i = 0; i < 200; ++i) yaml += "*k, ";
  yaml += "*k]\n";
  auto refused = ParseJsonOrYaml(yaml, "keys.yaml");
  EXPECT_EQ(refused.status().code(), StatusCode::kResourceExhausted) << refused.status().ToString();
  EXPECT_EQ(ParseJsonOrYaml("{[1]: 2}", "k.yaml").status().message(),
            "k.yaml: a mapping's keys must be strings");
}

}  // namespace
}  // namespace corral
