#include "protocol/shell_messages.h"

#include <nlohmann/json.hpp>

namespace corral::protocol {

namespace {

using nlohmann::json;

Result<json> ParseObject(std::string_view text) {
  json j = json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!j.is_object()) return InvalidArgument("shell message: must be a JSON object");
  return j;
}

}  // namespace

std::string ResizeMessage(TerminalSize size) {
  return json{{"resize", {size.cols, size.rows}}}.dump();
}

Result<TerminalSize> ParseResizeMessage(std::string_view text) {
  auto j = ParseObject(text);
  if (!j.ok()) return j.status();
  if (j->size() != 1 || !j->contains("resize")) {
    return InvalidArgument("shell message: field 'resize': required, and nothing else");
  }
  const json& r = (*j)["resize"];
  const auto side = [](const json& v) {
    return v.is_number_integer() && v.get<int64_t>() >= 1 && v.get<int64_t>() <= kMaxTerminalSide;
  };
  if (!r.is_array() || r.size() != 2 || !side(r[0]) || !side(r[1])) {
    return InvalidArgument("shell message: field 'resize': must be [COLS, ROWS], each 1.." +
                           std::to_string(kMaxTerminalSide));
  }
  return TerminalSize{r[0].get<int>(), r[1].get<int>()};
}

std::string ExitMessage(const ShellExit& exit) {
  json j{{"exit", exit.code}};
  if (exit.signal) j["signal"] = *exit.signal;
  return j.dump();
}

Result<ShellExit> ParseExitMessage(std::string_view text) {
  auto j = ParseObject(text);
  if (!j.ok()) return j.status();
  ShellExit exit;
  const json& code = j->contains("exit") ? (*j)["exit"] : json();
  if (!code.is_number_integer() || code.get<int64_t>() < 0 || code.get<int64_t>() > 255) {
    return InvalidArgument("shell message: field 'exit': must be 0..255");
  }
  exit.code = code.get<int>();
  if (j->contains("signal")) {
    const json& signal = (*j)["signal"];
    if (!signal.is_number_integer() || signal.get<int64_t>() < 1 || signal.get<int64_t>() > 64) {
      return InvalidArgument("shell message: field 'signal': must be 1..64");
    }
    exit.signal = signal.get<int>();
  }
  return exit;
}

}  // namespace corral::protocol
