// The WebSocket frame codec (RFC 6455, section 5) that `corral shell` speaks both ways: the
// CLI's client (cli/shell_command.h) and the task's pty server (agent/shell_server.h). Bytes in,
// frames out, no I/O.
//
// What it accepts is bounded and simple: whole messages only (a frame with FIN clear, or a
// continuation frame, is a protocol error: neither side fragments), a payload of at most
// `max_payload` bytes (control frames at most 125, as the RFC says), no extension bits. A frame
// from a client must be masked and one from a server must not (section 5.1); the decoder is told
// which side it reads.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace corral {

enum class WebSocketOpcode : uint8_t {
  kText = 0x1,
  kBinary = 0x2,
  kClose = 0x8,
  kPing = 0x9,
  kPong = 0xA,
};

struct WebSocketFrame {
  WebSocketOpcode opcode = WebSocketOpcode::kBinary;
  std::string payload;  // unmasked
};

// Who sent the frames a decoder reads.
enum class WebSocketPeer { kClient, kServer };

// A client's frame is masked with `mask` (4 bytes, from a source the peer cannot predict: the
// caller's RNG); a server's (`mask` nullopt) is not. `payload` of any size (the 64-bit length).
std::string EncodeWebSocketFrame(WebSocketOpcode opcode, std::string_view payload,
                                 std::optional<uint32_t> mask = std::nullopt);

// The payload of a close frame: the status code (1000 normal, 1002 protocol error, 1009 too big,
// ...) then a reason of at most 123 bytes (cut there).
std::string WebSocketClosePayload(uint16_t code, std::string_view reason);

class WebSocketDecoder {
 public:
  WebSocketDecoder(WebSocketPeer peer, size_t max_payload) : peer_(peer), max_(max_payload) {}

  // Appends bytes read from the connection.
  void Append(std::string_view bytes) { buffer_.append(bytes); }

  // The next whole frame, nullopt when more bytes are needed. Errors (the connection must then
  // be closed): ResourceExhausted for a payload over `max_payload` (close code 1009),
  // InvalidArgument for any other frame this codec refuses (file comment; 1002).
  Result<std::optional<WebSocketFrame>> Next();

 private:
  WebSocketPeer peer_;
  size_t max_;
  std::string buffer_;
};

}  // namespace corral
