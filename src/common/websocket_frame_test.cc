#include "common/websocket_frame.h"

#include <gtest/gtest.h>

namespace corral {
namespace {

// Decodes all of `bytes` as `peer` sent them; the frames, or the first error.
Result<std::vector<WebSocketFrame>> DecodeAll(WebSocketPeer peer, const std::string& bytes,
                                              size_t max = 1 << 20) {
  WebSocketDecoder decoder(peer, max);
  decoder.Append(bytes);
  std::vector<WebSocketFrame> frames;
  while (true) {
    auto next = decoder.Next();
    if (!next.ok()) return next.status();
    if (!*next) return frames;
    frames.push_back(**next);
  }
}

TEST(WebSocketFrameTest, RoundTripsEveryLengthEncodingBothWays) {
  for (size_t size : {size_t{0}, size_t{1}, size_t{125}, size_t{126}, size_t{65535}, size_t{65536},
                      size_t{70000}}) {
    std::string payload(size, '\0');
    for (size_t i = 0; i < size; ++i) payload[i] = static_cast<char>(i * 7);
    auto server =
        DecodeAll(WebSocketPeer::kServer, EncodeWebSocketFrame(WebSocketOpcode::kBinary, payload));
    ASSERT_TRUE(server.ok()) << size << ": " << server.status().message();
    ASSERT_EQ(server->size(), 1u);
    EXPECT_EQ((*server)[0].payload, payload) << size;
    const std::string masked =
        EncodeWebSocketFrame(WebSocketOpcode::kText, payload, uint32_t{0xA1B2C3D4});
    if (size > 0) EXPECT_EQ(masked.find(payload), std::string::npos) << size;  // masked on the wire
    auto client = DecodeAll(WebSocketPeer::kClient, masked);
    ASSERT_TRUE(client.ok()) << size << ": " << client.status().message();
    ASSERT_EQ(client->size(), 1u);
    EXPECT_EQ((*client)[0].opcode, WebSocketOpcode::kText);
    EXPECT_EQ((*client)[0].payload, payload) << size;
  }
}

TEST(WebSocketFrameTest, KnownBytesFromTheRfc) {
  // RFC 6455, 5.7: a single-frame unmasked text message "Hello", and the masked one.
  EXPECT_EQ(EncodeWebSocketFrame(WebSocketOpcode::kText, "Hello"),
            std::string("\x81\x05\x48\x65\x6c\x6c\x6f", 7));
  EXPECT_EQ(EncodeWebSocketFrame(WebSocketOpcode::kText, "Hello", uint32_t{0x37fa213d}),
            std::string("\x81\x85\x37\xfa\x21\x3d\x7f\x9f\x4d\x51\x58", 11));
}

TEST(WebSocketFrameTest, WaitsForWholeFramesFedByteByByte) {
  const std::string bytes =
      EncodeWebSocketFrame(WebSocketOpcode::kBinary, std::string(300, 'x'), uint32_t{7}) +
      EncodeWebSocketFrame(WebSocketOpcode::kPing, "p", uint32_t{9});
  WebSocketDecoder decoder(WebSocketPeer::kClient, 1024);
  std::vector<WebSocketFrame> frames;
  for (char c : bytes) {
    decoder.Append(std::string(1, c));
    auto next = decoder.Next();
    ASSERT_TRUE(next.ok());
    if (*next) frames.push_back(**next);
  }
  ASSERT_EQ(frames.size(), 2u);
  EXPECT_EQ(frames[0].payload, std::string(300, 'x'));
  EXPECT_EQ(frames[1].opcode, WebSocketOpcode::kPing);
}

TEST(WebSocketFrameTest, RefusesWhatTheCodecDoesNotSpeak) {
  const std::string masked = EncodeWebSocketFrame(WebSocketOpcode::kBinary, "ab", uint32_t{1});
  const std::string plain = EncodeWebSocketFrame(WebSocketOpcode::kBinary, "ab");
  // Masking must match the sender's side.
  EXPECT_EQ(DecodeAll(WebSocketPeer::kClient, plain).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(DecodeAll(WebSocketPeer::kServer, masked).status().code(),
            StatusCode::kInvalidArgument);
  // A fragment (FIN clear), a continuation, extension bits, an unknown opcode.
  std::string fragment = plain;
  fragment[0] = static_cast<char>(0x02);
  std::string continuation = plain;
  continuation[0] = static_cast<char>(0x80);
  std::string extension = plain;
  extension[0] = static_cast<char>(0xC2);
  std::string unknown = plain;
  unknown[0] = static_cast<char>(0x83);
  for (const std::string& bad : {fragment, continuation, extension, unknown}) {
    EXPECT_EQ(DecodeAll(WebSocketPeer::kServer, bad).status().code(), StatusCode::kInvalidArgument);
  }
  // Over the bound: refused from the header alone, before the payload arrives.
  EXPECT_EQ(
      DecodeAll(WebSocketPeer::kServer,
                EncodeWebSocketFrame(WebSocketOpcode::kBinary, std::string(101, 'x')).substr(0, 2),
                100)
          .status()
          .code(),
      StatusCode::kResourceExhausted);
  // A control frame over 125 bytes, whatever the bound.
  EXPECT_EQ(DecodeAll(WebSocketPeer::kServer,
                      EncodeWebSocketFrame(WebSocketOpcode::kPing, std::string(126, 'x')))
                .status()
                .code(),
            StatusCode::kInvalidArgument);
}

TEST(WebSocketFrameTest, ClosePayloadIsCodeThenBoundedReason) {
  EXPECT_EQ(WebSocketClosePayload(1000, ""), std::string("\x03\xe8", 2));
  EXPECT_EQ(WebSocketClosePayload(1002, std::string(500, 'r')).size(), 125u);
}

}  // namespace
}  // namespace corral
