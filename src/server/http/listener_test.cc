#include "server/http/listener.h"

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <unistd.h>

namespace corral::server {
namespace {

// Addresses as accept() gives them.
sockaddr_storage AddressOf(const char* text) {
  sockaddr_storage address{};
  if (inet_pton(AF_INET, text, &reinterpret_cast<sockaddr_in&>(address).sin_addr) == 1) {
    address.ss_family = AF_INET;
  } else {
    EXPECT_EQ(inet_pton(AF_INET6, text, &reinterpret_cast<sockaddr_in6&>(address).sin6_addr), 1)
        << text;
    address.ss_family = AF_INET6;
  }
  return address;
}

std::string Counted(const char* text) {
  const sockaddr_storage a = AddressOf(text);
  return CountedAddress(reinterpret_cast<const sockaddr*>(&a));
}

TEST(CountedAddressTest, IPv6CountsByItsSlash64AndMappedIPv4AsIPv4) {
  EXPECT_EQ(Counted("192.0.2.7"), "192.0.2.7");
  EXPECT_EQ(Counted("2001:db8:1:2:a:b:c:d"), "2001:db8:1:2::/64");
  EXPECT_EQ(Counted("2001:db8:1:2::99"), "2001:db8:1:2::/64");
  EXPECT_EQ(Counted("2001:db8:1:3::99"), "2001:db8:1:3::/64");
  EXPECT_EQ(Counted("::ffff:192.0.2.7"), "192.0.2.7");
  sockaddr_storage other{};
  other.ss_family = AF_UNIX;
  EXPECT_EQ(CountedAddress(reinterpret_cast<const sockaddr*>(&other)), "");
  const sockaddr_storage v6 = AddressOf("2001:db8::1");
  EXPECT_EQ(AddressText(reinterpret_cast<const sockaddr*>(&v6)), "2001:db8::1");
}

TEST(ListenTest, BindsAFreePortAndNamesTheFlagWhenItCannot) {
  auto first = Listen("127.0.0.1", 0, "--listen");
  ASSERT_TRUE(first.ok());
  EXPECT_GT(first->port, 0);
  auto again = Listen("127.0.0.1", first->port, "--listen");
  ASSERT_FALSE(again.ok());
  EXPECT_NE(again.status().message().find("--listen: cannot bind 127.0.0.1:"), std::string::npos)
      << again.status().message();
  close(first->fd);
}

}  // namespace
}  // namespace corral::server
