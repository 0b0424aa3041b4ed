// What the agent finds for environments (host_setup.h): known tools that are executables on a
// PATH, and the folders under the environments' root.
#include "agent/host_setup.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <filesystem>
#include <fstream>

#include "agent/executable.h"

namespace corral::agent {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

class HostSetupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    root_ =
        std::filesystem::temp_directory_path() / ("host_setup_test." + std::to_string(getpid()));
    std::filesystem::create_directories(root_ / "bin1");
    std::filesystem::create_directories(root_ / "bin2");
    std::filesystem::create_directories(root_ / "envs" / "torch");
    std::filesystem::create_directories(root_ / "envs" / "jax");
    std::ofstream(root_ / "envs" / "not-a-folder") << "x";
  }
  void TearDown() override { std::filesystem::remove_all(root_); }
  void Tool(const std::string& dir, const std::string& name, mode_t mode) {
    const auto file = root_ / dir / name;
    std::ofstream(file) << "#!/bin/sh\n";
    chmod(file.c_str(), mode);
  }
  std::filesystem::path root_;
};

TEST_F(HostSetupTest, FindsExecutableToolsOnThePathAndTheFolders) {
  Tool("bin1", "jupyter-notebook", 0755);
  Tool("bin2", "python3", 0755);
  Tool("bin2", "jupyter-lab", 0644);  // not executable
  Tool("bin2", "ruby", 0755);         // not a tool agents look for
  const std::string path = (root_ / "bin1").string() + "::" + (root_ / "bin2").string();
  HostSetup found = FindHostSetup(path, (root_ / "envs").string(), 32, 128);
  EXPECT_THAT(found.tools, ElementsAre("python3", "jupyter-notebook"));
  EXPECT_THAT(found.env_prefixes,
              ElementsAre((root_ / "envs" / "jax").string(), (root_ / "envs" / "torch").string()));
  EXPECT_THAT(FindHostSetup(path, (root_ / "envs").string(), 1, 128).env_prefixes,
              ElementsAre((root_ / "envs" / "jax").string()));
  EXPECT_THAT(FindHostSetup("", (root_ / "missing").string(), 32, 128).tools, IsEmpty());
  EXPECT_THAT(FindHostSetup("", (root_ / "missing").string(), 32, 128).env_prefixes, IsEmpty());
}

TEST_F(HostSetupTest, FindExecutableTakesTheFirstOnThePathAndRelativeEntriesOnlyWithABase) {
  Tool("bin1", "tool", 0644);  // not executable: skipped
  Tool("bin2", "tool", 0755);
  const std::string bin1 = (root_ / "bin1").string(), bin2 = (root_ / "bin2").string();
  EXPECT_EQ(FindExecutable("tool", bin1 + ":" + bin2), bin2 + "/tool");
  EXPECT_EQ(FindExecutable("tool", bin1), "");
  EXPECT_EQ(FindExecutable("tool", "bin2"), "") << "a relative entry without a base";
  EXPECT_EQ(FindExecutable("tool", "bin1:bin2", root_.string()), root_.string() + "/bin2/tool");
  EXPECT_EQ(FindExecutable("tool", "", (root_ / "bin2").string()), bin2 + "/./tool")
      << "an empty entry is the base itself";
  EXPECT_FALSE(IsExecutableFile(root_.string())) << "a folder is not an executable file";
  EXPECT_TRUE(IsExecutableFile(bin2 + "/tool"));
}

TEST_F(HostSetupTest, FoldersLeftOutAreCountedAndSaid) {
  HostSetup all = FindHostSetup("", (root_ / "envs").string(), 32, 128);
  EXPECT_EQ(all.dropped_prefixes, 0u);
  EXPECT_EQ(DroppedPrefixesWarning(all), "");
  HostSetup cut = FindHostSetup("", (root_ / "envs").string(), 1, 128);
  EXPECT_EQ(cut.dropped_prefixes, 1u);
  EXPECT_THAT(DroppedPrefixesWarning(cut),
              ::testing::HasSubstr("1 environment folders under /opt/corral/envs are not reported "
                                   "(at most 1 are, by name"));
}

}  // namespace
}  // namespace corral::agent
