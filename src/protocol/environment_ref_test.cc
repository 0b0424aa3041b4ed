// How environments are named (NAME, NAME@VERSION) and the container images they name.
#include "protocol/environment_ref.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

namespace corral::protocol {
namespace {

using ::testing::HasSubstr;

TEST(EnvironmentRefTest, NameOrNameAtVersion) {
  auto latest = ParseEnvironmentRef("pytorch", "environment");
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->name, "pytorch");
  EXPECT_FALSE(latest->version);
  auto pinned = ParseEnvironmentRef("pytorch@3", "environment");
  ASSERT_TRUE(pinned.ok());
  EXPECT_EQ(pinned->version, 3);
  for (const char* bad : {"", "@1", "pytorch@", "pytorch@0", "pytorch@x", "Py", "../x", "a\tb"}) {
    auto ref = ParseEnvironmentRef(bad, "environment");
    EXPECT_FALSE(ref.ok()) << bad;
    EXPECT_THAT(ref.status().message(), HasSubstr("field 'environment'")) << bad;
  }
  EXPECT_EQ(ToString("pytorch", 3), "pytorch@3");
}

TEST(ImageReference, OneArgvWordThatNoEngineReadsAsAnOption) {
  EXPECT_TRUE(IsImageReference("busybox"));
  EXPECT_TRUE(IsImageReference("nvcr.io/nvidia/pytorch:24.05-py3"));
  EXPECT_TRUE(IsImageReference("registry:5000/team/name_x:tag@sha256:0123abcd"));
  EXPECT_TRUE(IsImageReference("9image"));
  EXPECT_TRUE(IsImageReference(std::string(kMaxImageReferenceLength, 'a')));
  EXPECT_FALSE(IsImageReference(std::string(kMaxImageReferenceLength + 1, 'a')));
  EXPECT_FALSE(IsImageReference(""));
  EXPECT_FALSE(IsImageReference("--privileged"));
  EXPECT_FALSE(IsImageReference("-v"));
  EXPECT_FALSE(IsImageReference(".hidden"));
  EXPECT_FALSE(IsImageReference("busybox latest"));
  EXPECT_FALSE(IsImageReference("busybox\n--privileged"));
  EXPECT_FALSE(IsImageReference("busybox;reboot"));
  EXPECT_FALSE(IsImageReference("busybox$(reboot)"));
}

}  // namespace
}  // namespace corral::protocol
