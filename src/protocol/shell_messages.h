// What `corral shell` (docs/sessions.md, "Interactive shells") says over its WebSocket besides
// the terminal's bytes, which travel as binary frames both ways. The client sends text frames
// {"resize": [COLS, ROWS]}; the task's pty server sends one text frame {"exit": CODE} (with
// "signal": N when the shell was killed by signal N, and CODE 128 + N) when the shell has ended,
// then closes the connection.
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"

namespace corral::protocol {

// The largest frame either side sends or accepts (terminal bytes are sent in pieces of at most
// this; a larger frame ends the connection).
inline constexpr size_t kMaxShellFrame = 64 * 1024;
// The largest terminal side accepted in a resize.
inline constexpr int kMaxTerminalSide = 10000;

struct TerminalSize {
  int cols = 0;  // 1..kMaxTerminalSide
  int rows = 0;  // 1..kMaxTerminalSide
};

struct ShellExit {
  int code = 0;               // the shell's exit code, or 128 + signal
  std::optional<int> signal;  // the signal that killed it
};

std::string ResizeMessage(TerminalSize size);
// A client's text frame. InvalidArgument naming the field for anything but a resize.
Result<TerminalSize> ParseResizeMessage(std::string_view text);

std::string ExitMessage(const ShellExit& exit);
// The server's text frame. InvalidArgument naming the field for anything but an exit.
Result<ShellExit> ParseExitMessage(std::string_view text);

}  // namespace corral::protocol
