#include "server/http/listener.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

namespace corral::server {

Result<ListenSocket> Listen(const std::string& host, int port, const std::string& flag) {
  const std::string where = host + ":" + std::to_string(port);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE | AI_NUMERICSERV;
  addrinfo* found = nullptr;
  const bool any = host.empty() || host == "*";
  if (const int err =
          getaddrinfo(any ? nullptr : host.c_str(), std::to_string(port).c_str(), &hints, &found);
      err != 0) {
    return IoError(flag + ": cannot bind " + where + ": " + gai_strerror(err));
  }
  ListenSocket bound;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr && bound.fd < 0; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
    if (fd < 0) continue;
    const int one = 1;
    setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 1024) == 0) {
      bound.fd = fd;
    } else {
      why = std::strerror(errno);
      close(fd);
    }
  }
  freeaddrinfo(found);
  if (bound.fd < 0) return IoError(flag + ": cannot bind " + where + ": " + why);
  sockaddr_storage address{};
  socklen_t len = sizeof address;
  getsockname(bound.fd, reinterpret_cast<sockaddr*>(&address), &len);
  bound.port =
      ntohs(address.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6*>(&address)->sin6_port
                                          : reinterpret_cast<sockaddr_in*>(&address)->sin_port);
  return bound;
}

std::string CountedAddress(const sockaddr* address) {
  if (address == nullptr || address->sa_family != AF_INET6) return AddressText(address);
  in6_addr ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&ip)) return AddressText(address);
  std::fill(std::begin(ip.s6_addr) + 8, std::end(ip.s6_addr), 0);  // the interface id
  char text[INET6_ADDRSTRLEN] = "";
  inet_ntop(AF_INET6, &ip, text, sizeof text);
  return std::string(text) + "/64";
}

std::string AddressText(const sockaddr* address) {
  char text[INET6_ADDRSTRLEN] = "";
  if (address == nullptr) return "";
  if (address->sa_family == AF_INET) {
    inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(address)->sin_addr, text, sizeof text);
    return text;
  }
  if (address->sa_family != AF_INET6) return "";
  const in6_addr& ip = reinterpret_cast<const sockaddr_in6*>(address)->sin6_addr;
  if (IN6_IS_ADDR_V4MAPPED(&ip)) {
    inet_ntop(AF_INET, &ip.s6_addr[12], text, sizeof text);
  } else {
    inet_ntop(AF_INET6, &ip, text, sizeof text);
  }
  return text;
}

}  // namespace corral::server
