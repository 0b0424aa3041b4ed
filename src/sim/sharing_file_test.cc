#include "sim/sharing_file.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>

namespace corral::sim {
namespace {

using ::testing::HasSubstr;

TEST(SharingFile, ReadsYamlAndNamesTheFileInErrors) {
  const auto dir = std::filesystem::temp_directory_path();
  const std::string good = (dir / "corral_sharing_good.yaml").string();
  const std::string bad = (dir / "corral_sharing_bad.yaml").string();
  std::ofstream(good) << "projects:\n  a: {gpus: 4}\n  b:\n    weight: 3\nreclaim: true\n";
  std::ofstream(bad) << "projects:\n  a: {gpus: four}\n";
  auto c = ReadSharingFile(good);
  ASSERT_TRUE(c.ok()) << c.status().message();
  EXPECT_EQ(c->projects.at("a").quota_milli, 4000);
  EXPECT_EQ(c->projects.at("b").weight, 3);
  auto e = ReadSharingFile(bad);
  ASSERT_FALSE(e.ok());
  EXPECT_THAT(e.status().message(), HasSubstr(bad + ": field 'projects.a.gpus'"));
  auto missing = ReadSharingFile((dir / "corral_sharing_missing.yaml").string());
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(missing.status().message(), HasSubstr("corral_sharing_missing.yaml"));
  std::filesystem::remove(good);
  std::filesystem::remove(bad);
}

}  // namespace
}  // namespace corral::sim
