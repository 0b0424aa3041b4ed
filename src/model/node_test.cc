#include "model/node.h"

#include <gtest/gtest.h>

#include <string>

namespace corral::model {
namespace {

TEST(ClusterId, SixteenLowercaseHexCharacters) {
  EXPECT_TRUE(ValidateClusterId("0123456789abcdef").ok());
  for (const std::string id : {"", "0123456789abcde", "0123456789abcdef0", "0123456789ABCDEF",
                               "../../../../tmp/x", "0123456789abcdeg"}) {
    EXPECT_FALSE(ValidateClusterId(id).ok()) << id;
  }
}

}  // namespace
}  // namespace corral::model
