#include "agent/node_identity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

using ::testing::HasSubstr;
using ::testing::MatchesRegex;

class NodeIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/corral-node-id-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override {
    std::error_code ec;
    std::filesystem::remove_all(dir_, ec);
  }

  std::string dir_;
};

TEST_F(NodeIdentityTest, CreatedOncePrivateAndStableAcrossLoads) {
  const mode_t old_umask = umask(0);  // the mode must not depend on the umask
  auto first = LoadOrCreateNodeId(dir_);
  umask(old_umask);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_THAT(*first, MatchesRegex("[0-9a-f]{32}"));
  struct stat st;
  ASSERT_EQ(stat((dir_ + "/node.id").c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  EXPECT_FALSE(std::filesystem::exists(dir_ + "/node.id.tmp"));

  auto second = LoadOrCreateNodeId(dir_);
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(*second, *first);
}

TEST_F(NodeIdentityTest, AFileWithoutTheNewlineIsRead) {
  std::ofstream(dir_ + "/node.id") << "0123456789abcdef0123456789abcdef";
  auto id = LoadOrCreateNodeId(dir_);
  ASSERT_TRUE(id.ok()) << id.status().ToString();
  EXPECT_EQ(*id, "0123456789abcdef0123456789abcdef");
}

TEST_F(NodeIdentityTest, DifferentWorkDirsGetDifferentIds) {
  const std::string other = dir_ + "/other";
  ASSERT_EQ(mkdir(other.c_str(), 0700), 0);
  auto a = LoadOrCreateNodeId(dir_);
  auto b = LoadOrCreateNodeId(other);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_NE(*a, *b);
}

TEST_F(NodeIdentityTest, MalformedFileIsRejectedNamingThePathAndKept) {
  for (const std::string content : {"", "\n", "not-hex", "0123456789ABCDEF0123456789ABCDEF\n",
                                    "0123456789abcdef0123456789abcdef00\n"}) {
    SCOPED_TRACE("content '" + content + "'");
    std::ofstream(dir_ + "/node.id", std::ios::trunc) << content;
    auto id = LoadOrCreateNodeId(dir_);
    ASSERT_FALSE(id.ok());
    EXPECT_EQ(id.status().code(), StatusCode::kInvalidArgument);
    EXPECT_THAT(id.status().message(), HasSubstr(dir_ + "/node.id"));
    auto kept = ReadFile(dir_ + "/node.id");
    ASSERT_TRUE(kept.ok());
    EXPECT_EQ(*kept, content);
  }
}

TEST_F(NodeIdentityTest, MissingWorkDirIsAnError) {
  auto id = LoadOrCreateNodeId(dir_ + "/missing");
  ASSERT_FALSE(id.ok());
  EXPECT_THAT(id.status().message(), HasSubstr(dir_ + "/missing/node.id"));
}

TEST_F(NodeIdentityTest, OneAgentPerWorkDir) {
  auto first = WorkDirLock::Acquire(dir_);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  auto second = WorkDirLock::Acquire(dir_);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(),
              HasSubstr("work dir " + dir_ + " is in use by another agent (pid " +
                        std::to_string(getpid()) + "): give each agent its own --work-dir"));
  // Another process sees it held too; once released (the holder ended), it is free again.
  const std::string lock_file = dir_ + "/agent.lock";
  auto held_elsewhere = [&] { return system(("flock -n " + lock_file + " true").c_str()) != 0; };
  EXPECT_TRUE(held_elsewhere());
  { WorkDirLock released = std::move(first).value(); }
  EXPECT_FALSE(held_elsewhere());
  EXPECT_TRUE(WorkDirLock::Acquire(dir_).ok());
}

}  // namespace
}  // namespace corral::agent
