// Text from the server that the CLI prints as it is (a job's reported values, a checkpoint path,
// an event's reason) may come from a job: its control characters must not reach the terminal,
// where they could move the cursor, rewrite earlier lines or change the title.
#pragma once

#include <string>
#include <string_view>

namespace corral::cli {

// `text` with each C0 control character and DEL as \xNN, and each C1 control (U+0080..U+009F,
// UTF-8 C2 80..C2 9F) as \u00NN; the rest (printable ASCII, other UTF-8, invalid bytes) as is.
std::string TerminalSafe(std::string_view text);

}  // namespace corral::cli
