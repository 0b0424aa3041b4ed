// What the server's listeners share: a bound, listening TCP socket, and the client address that
// per-address caps count a connection against.
#pragma once

#include <sys/socket.h>

#include <string>

#include "common/status.h"

namespace corral::server {

struct ListenSocket {
  int fd = -1;   // listening, close-on-exec; the caller owns it
  int port = 0;  // as bound (the one picked when asked for 0)
};

// Binds and listens on `host`:`port` ("" or "*": every address; port 0: any free port), for the
// flag named `flag` (which errors name: "--listen: cannot bind 0.0.0.0:80: Permission denied").
Result<ListenSocket> Listen(const std::string& host, int port, const std::string& flag);

// The client address that per-address caps count against: an IPv4 address as is ("192.0.2.7"),
// an IPv6 one by its /64 prefix ("2001:db8:1:2::/64": a host is usually given a whole /64, so it
// could otherwise use a fresh address for every connection), an IPv4-mapped IPv6 one
// (::ffff:a.b.c.d) as its IPv4 address; "" for another family.
std::string CountedAddress(const sockaddr* address);

// The address as text, without a prefix ("192.0.2.7", "2001:db8::1"); "" for another family.
std::string AddressText(const sockaddr* address);

}  // namespace corral::server
