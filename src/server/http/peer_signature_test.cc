#include "server/http/peer_signature.h"

#include <gtest/gtest.h>

namespace corral::server {
namespace {

using std::chrono::seconds;
using std::chrono::system_clock;

const std::string kKey(40, 'k');

HttpRequest Request(const std::string& method, const std::string& target) {
  HttpRequest r;
  r.method = method;
  r.target = target;
  r.client_address = "192.0.2.7";
  r.counted_address = "192.0.2.7";
  return r;
}

// The head the leader reads: the follower's request with its signed header, from the follower.
HttpRequest Forwarded(const HttpRequest& original, const std::string& header) {
  HttpRequest r = original;
  r.client_address = r.counted_address = "10.0.0.2";
  r.headers.emplace(kPeerHeader, header);
  return r;
}

TEST(PeerSignatureTest, ASignedHeaderVouchesForTheAddresses) {
  const PeerSignature peer(kKey);
  HttpRequest original = Request("POST", "/api/v1/login?next=%2F");
  original.client_address = "2001:db8::7";
  original.counted_address = "2001:db8::/64";
  const auto now = system_clock::now();
  auto vouched = peer.Verify(Forwarded(original, peer.Sign(original, now)), now + seconds(29));
  ASSERT_TRUE(vouched.has_value());
  EXPECT_EQ(vouched->address, "2001:db8::7");
  EXPECT_EQ(vouched->counted, "2001:db8::/64");
}

TEST(PeerSignatureTest, NoHeaderVouchesForNothing) {
  EXPECT_FALSE(PeerSignature(kKey).Verify(Request("GET", "/"), system_clock::now()));
}

TEST(PeerSignatureTest, AnotherClustersKeyIsRefused) {
  const auto now = system_clock::now();
  const HttpRequest original = Request("GET", "/api/v1/jobs");
  const std::string header = PeerSignature(std::string(40, 'x')).Sign(original, now);
  EXPECT_FALSE(PeerSignature(kKey).Verify(Forwarded(original, header), now));
}

TEST(PeerSignatureTest, TheSignatureCoversMethodTargetAndAddress) {
  const PeerSignature peer(kKey);
  const auto now = system_clock::now();
  const HttpRequest original = Request("GET", "/api/v1/jobs");
  const std::string header = peer.Sign(original, now);
  HttpRequest other_method = Forwarded(original, header);
  other_method.method = "DELETE";
  EXPECT_FALSE(peer.Verify(other_method, now));
  HttpRequest other_target = Forwarded(original, header);
  other_target.target = "/api/v1/jobs/1";
  EXPECT_FALSE(peer.Verify(other_target, now));
  std::string other_address = header;
  other_address.replace(0, std::string("192.0.2.7").size(), "192.0.2.8");
  EXPECT_FALSE(peer.Verify(Forwarded(original, other_address), now));
}

TEST(PeerSignatureTest, AHeaderSignedOver30SecondsAwayIsRefused) {
  const PeerSignature peer(kKey);
  const auto now = system_clock::now();
  const HttpRequest original = Request("GET", "/");
  const std::string header = peer.Sign(original, now);
  EXPECT_TRUE(peer.Verify(Forwarded(original, header), now + seconds(30)));
  EXPECT_FALSE(peer.Verify(Forwarded(original, header), now + seconds(31)));
  EXPECT_FALSE(peer.Verify(Forwarded(original, header), now - seconds(31)));  // from the future
}

TEST(PeerSignatureTest, MalformedHeadersAreRefused) {
  const PeerSignature peer(kKey);
  const auto now = system_clock::now();
  const HttpRequest original = Request("GET", "/");
  const std::string header = peer.Sign(original, now);
  for (const std::string& bad :
       {std::string(), std::string("192.0.2.7"), header + " extra",
        header.substr(0, header.rfind(' ')), std::string("a b -5 ") + std::string(64, '0'),
        std::string("a b 99999999999999999999 ") + std::string(64, '0')}) {
    EXPECT_FALSE(peer.Verify(Forwarded(original, bad), now)) << bad;
  }
}

}  // namespace
}  // namespace corral::server
