#include "protocol/shell_messages.h"

#include <gtest/gtest.h>

namespace corral::protocol {
namespace {

TEST(ShellMessagesTest, ResizeRoundTripsAndIsBounded) {
  EXPECT_EQ(ResizeMessage({120, 40}), R"({"resize":[120,40]})");
  auto size = ParseResizeMessage(R"({"resize": [120, 40]})");
  ASSERT_TRUE(size.ok()) << size.status().message();
  EXPECT_EQ(size->cols, 120);
  EXPECT_EQ(size->rows, 40);
  for (const char* bad :
       {R"({"resize": [0, 40]})", R"({"resize": [120, 10001]})", R"({"resize": [120]})",
        R"({"resize": ["120", 40]})", R"({"resize": [1.5, 40]})", R"({"resize": [80, 24], "x": 1})",
        R"({"exit": 0})", "[80, 24]", "not json", ""}) {
    auto parsed = ParseResizeMessage(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_EQ(parsed.status().code(), StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_NE(ParseResizeMessage(R"({"resize": [0, 40]})").status().message().find("'resize'"),
            std::string::npos);
}

TEST(ShellMessagesTest, ExitCarriesCodeAndSignal) {
  EXPECT_EQ(ExitMessage({3, std::nullopt}), R"({"exit":3})");
  EXPECT_EQ(ExitMessage({129, 1}), R"({"exit":129,"signal":1})");
  auto exit = ParseExitMessage(R"({"exit":129,"signal":1})");
  ASSERT_TRUE(exit.ok());
  EXPECT_EQ(exit->code, 129);
  EXPECT_EQ(exit->signal, 1);
  auto plain = ParseExitMessage(R"({"exit":0})");
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->signal, std::nullopt);
  for (const char* bad : {R"({"exit":256})", R"({"exit":-1})", R"({"exit":"3"})", R"({})",
                          R"({"exit":0,"signal":0})", R"({"resize":[1,1]})", "3"}) {
    EXPECT_FALSE(ParseExitMessage(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace corral::protocol
