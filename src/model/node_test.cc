#include "model/node.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace corral::model {
namespace {

TEST(NodeName, HostnamesAreNamesAndPathTricksAreNot) {
  for (const std::string name : {"n1", "gpu-a.rack2.example.org", "Node_7", "dev"}) {
    EXPECT_TRUE(ValidateNodeName(name).ok()) << name;
  }
  // Agents use the name as a path component and in cgroup and container names.
  for (const std::string& name : std::vector<std::string>{
           "", ".", "..", "../etc", "a/b", "-n", ".hidden", "a b", "a:b", std::string(254, 'a')}) {
    Status s = ValidateNodeName(name);
    EXPECT_FALSE(s.ok()) << name;
    EXPECT_NE(s.message().find("node name"), std::string::npos) << s.message();
  }
}

TEST(ClusterId, SixteenLowercaseHexCharacters) {
  EXPECT_TRUE(ValidateClusterId("0123456789abcdef").ok());
  for (const std::string id : {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF",
                               "../../../../tmp/x", "0123456789abcdeg"}) {
    EXPECT_FALSE(ValidateClusterId(id).ok()) << id;
  }
}

}  // namespace
}  // namespace corral::model
