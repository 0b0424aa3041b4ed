#include "server/http/peer_signature.h"

#include <sstream>

#include "server/http/auth.h"

namespace corral::server {

namespace {
int64_t UnixSeconds(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::seconds>(t.time_since_epoch()).count();
}
}  // namespace

PeerSignature::PeerSignature(const std::string& session_key)
    : key_(HmacSha256Hex(session_key, "corral peer v1")) {}

std::string PeerSignature::Mac(const std::string& address, const std::string& counted, int64_t time,
                               const HttpRequest& request) const {
  // Newline-separated: no part may hold one (a target never does: it is a request line's).
  return HmacSha256Hex(key_, address + "\n" + counted + "\n" + std::to_string(time) + "\n" +
                                 request.method + "\n" + request.target);
}

std::string PeerSignature::Sign(const HttpRequest& request,
                                std::chrono::system_clock::time_point now) const {
  const int64_t time = UnixSeconds(now);
  const std::string& counted =
      request.counted_address.empty() ? request.client_address : request.counted_address;
  return request.client_address + " " + counted + " " + std::to_string(time) + " " +
         Mac(request.client_address, counted, time, request);
}

std::optional<VouchedAddress> PeerSignature::Verify(
    const HttpRequest& head, std::chrono::system_clock::time_point now) const {
  if (!head.HasHeader(kPeerHeader)) return std::nullopt;
  std::istringstream in(head.Header(kPeerHeader));
  VouchedAddress vouched;
  std::string time_text, mac, extra;
  if (!(in >> vouched.address >> vouched.counted >> time_text >> mac) || (in >> extra)) {
    return std::nullopt;
  }
  if (time_text.empty() || time_text.size() > 18 ||
      time_text.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  const int64_t time = std::stoll(time_text);
  const int64_t age = UnixSeconds(now) - time;
  if (age > kPeerSignatureLifetime.count() || -age > kPeerSignatureLifetime.count()) {
    return std::nullopt;
  }
  const std::string expected = Mac(vouched.address, vouched.counted, time, head);
  if (mac.size() != expected.size() || !SecureEquals(mac, expected)) return std::nullopt;
  return vouched;
}

}  // namespace corral::server
