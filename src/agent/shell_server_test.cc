#include "agent/shell_server.h"

#include <gtest/gtest.h>

namespace corral::agent {
namespace {

TEST(ShellServerTest, HandshakeAcceptIsTheRfcsExample) {
  // RFC 6455, section 1.3.
  EXPECT_EQ(WebSocketAccept("dGhlIHNhbXBsZSBub25jZQ=="), "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

}  // namespace
}  // namespace corral::agent
