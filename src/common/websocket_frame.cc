#include "common/websocket_frame.h"

namespace corral {

namespace {

constexpr size_t kMaxControlPayload = 125;  // RFC 6455, 5.5

bool IsKnown(uint8_t opcode) {
  switch (static_cast<WebSocketOpcode>(opcode)) {
    case WebSocketOpcode::kText:
    case WebSocketOpcode::kBinary:
    case WebSocketOpcode::kClose:
    case WebSocketOpcode::kPing:
    case WebSocketOpcode::kPong:
      return true;
  }
  return false;
}

}  // namespace

std::string EncodeWebSocketFrame(WebSocketOpcode opcode, std::string_view payload,
                                 std::optional<uint32_t> mask) {
  std::string out;
  out.reserve(payload.size() + 14);
  out.push_back(static_cast<char>(0x80 | static_cast<uint8_t>(opcode)));  // FIN, no RSV
  const uint8_t masked = mask ? 0x80 : 0;
  const uint64_t n = payload.size();
  if (n < 126) {
    out.push_back(static_cast<char>(masked | n));
  } else if (n <= 0xFFFF) {
    out.push_back(static_cast<char>(masked | 126));
    out.push_back(static_cast<char>(n >> 8));
    out.push_back(static_cast<char>(n & 0xFF));
  } else {
    out.push_back(static_cast<char>(masked | 127));
    for (int shift = 56; shift >= 0; shift -= 8) out.push_back(static_cast<char>(n >> shift));
  }
  if (!mask) return out.append(payload);
  const char key[4] = {static_cast<char>(*mask >> 24), static_cast<char>(*mask >> 16),
                       static_cast<char>(*mask >> 8), static_cast<char>(*mask)};
  out.append(key, 4);
  for (size_t i = 0; i < payload.size(); ++i) out.push_back(payload[i] ^ key[i % 4]);
  return out;
}

std::string WebSocketClosePayload(uint16_t code, std::string_view reason) {
  std::string out = {static_cast<char>(code >> 8), static_cast<char>(code & 0xFF)};
  return out.append(reason.substr(0, kMaxControlPayload - 2));
}

Result<std::optional<WebSocketFrame>> WebSocketDecoder::Next() {
  const std::optional<WebSocketFrame> kNeedMore;
  if (buffer_.size() < 2) return kNeedMore;
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(buffer_[i]); };
  const uint8_t first = byte(0), second = byte(1);
  if ((first & 0x70) != 0) return InvalidArgument("websocket: extension bits set");
  if ((first & 0x80) == 0 || (first & 0x0F) == 0) {
    return InvalidArgument("websocket: fragmented messages are not accepted");
  }
  if (!IsKnown(first & 0x0F)) return InvalidArgument("websocket: unknown opcode");
  const bool masked = (second & 0x80) != 0;
  if (masked != (peer_ == WebSocketPeer::kClient)) {
    return InvalidArgument(peer_ == WebSocketPeer::kClient
                               ? "websocket: a client's frame must be masked"
                               : "websocket: a server's frame must not be masked");
  }
  size_t header = 2;
  uint64_t length = second & 0x7F;
  if (length == 126 || length == 127) {
    const size_t bytes = length == 126 ? 2 : 8;
    if (buffer_.size() < header + bytes) return kNeedMore;
    length = 0;
    for (size_t i = 0; i < bytes; ++i) length = (length << 8) | byte(header + i);
    header += bytes;
  }
  const auto opcode = static_cast<WebSocketOpcode>(first & 0x0F);
  const bool control = (first & 0x08) != 0;
  if (control && length > kMaxControlPayload) {
    return InvalidArgument("websocket: a control frame over 125 bytes");
  }
  if (length > max_) {
    return Status(StatusCode::kResourceExhausted, "websocket: a frame of " +
                                                      std::to_string(length) + " bytes (at most " +
                                                      std::to_string(max_) + ")");
  }
  const size_t key_at = header;
  if (masked) header += 4;
  if (buffer_.size() < header + length) return kNeedMore;
  WebSocketFrame frame;
  frame.opcode = opcode;
  frame.payload = buffer_.substr(header, length);
  if (masked) {
    for (size_t i = 0; i < frame.payload.size(); ++i) frame.payload[i] ^= buffer_[key_at + i % 4];
  }
  buffer_.erase(0, header + length);
  return std::optional<WebSocketFrame>(std::move(frame));
}

}  // namespace corral
