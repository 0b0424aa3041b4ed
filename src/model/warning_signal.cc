#include "model/warning_signal.h"

#include <signal.h>

#include <array>
#include <cctype>
#include <charconv>
#include <utility>

namespace corral::model {

namespace {

constexpr std::array<std::pair<std::string_view, int>, 28> kSignals = {{
    {"HUP", SIGHUP},       {"INT", SIGINT},   {"QUIT", SIGQUIT},   {"ILL", SIGILL},
    {"TRAP", SIGTRAP},     {"ABRT", SIGABRT}, {"BUS", SIGBUS},     {"FPE", SIGFPE},
    {"KILL", SIGKILL},     {"USR1", SIGUSR1}, {"SEGV", SIGSEGV},   {"USR2", SIGUSR2},
    {"PIPE", SIGPIPE},     {"ALRM", SIGALRM}, {"TERM", SIGTERM},   {"CHLD", SIGCHLD},
    {"CONT", SIGCONT},     {"STOP", SIGSTOP}, {"TSTP", SIGTSTP},   {"TTIN", SIGTTIN},
    {"TTOU", SIGTTOU},     {"URG", SIGURG},   {"XCPU", SIGXCPU},   {"XFSZ", SIGXFSZ},
    {"VTALRM", SIGVTALRM}, {"PROF", SIGPROF}, {"WINCH", SIGWINCH}, {"SYS", SIGSYS},
}};

constexpr int kLastSignal = 64;

std::string Upper(std::string_view text) {
  std::string out(text);
  for (char& c : out) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return out;
}

Result<int> Number(std::string_view text) {
  int value = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (err != std::errc() || end != text.data() + text.size() || text.empty()) {
    return InvalidArgument("not a number");
  }
  return value;
}

Status Bad(std::string_view field, const std::string& why) {
  return InvalidArgument(std::string(field) + ": " + why);
}

}  // namespace

Result<int> ParseSignal(std::string_view text, std::string_view field) {
  std::string name = Upper(text);
  if (name.rfind("SIG", 0) == 0) name.erase(0, 3);
  int signal = 0;
  if (auto number = Number(name); number.ok()) {
    signal = *number;
  } else if (name.rfind("RTMIN+", 0) == 0) {
    auto offset = Number(std::string_view(name).substr(6));
    if (offset.ok() && *offset >= 0 && *offset <= SIGRTMAX - SIGRTMIN) signal = SIGRTMIN + *offset;
  } else {
    for (const auto& [known, number] : kSignals) {
      if (name == known) signal = number;
    }
  }
  if (signal < 1 || signal > kLastSignal) {
    return Bad(field, "unknown signal '" + std::string(text) + "' (a name such as USR1, or 1..64)");
  }
  if (signal == SIGKILL || signal == SIGSTOP) {
    return Bad(field, SignalName(signal) + " cannot be caught: the job could not act on it");
  }
  return signal;
}

std::string SignalName(int signal) {
  for (const auto& [name, number] : kSignals) {
    if (number == signal) return std::string(name);
  }
  return std::to_string(signal);
}

Result<WarningSignal> ParseWarningSignal(std::string_view text, std::string_view field) {
  WarningSignal warning;
  const size_t at = text.find('@');
  auto signal = ParseSignal(text.substr(0, at), field);
  if (!signal.ok()) return signal.status();
  warning.signal = *signal;
  if (at != std::string_view::npos) {
    auto lead = Number(text.substr(at + 1));
    if (!lead.ok() || *lead < 0 || *lead > kMaxWarningLead.value()) {
      return Bad(field, "expected SIG@SECONDS with SECONDS in 0.." +
                            std::to_string(kMaxWarningLead.value()) + ", got '" +
                            std::string(text) + "'");
    }
    warning.before = Seconds(*lead);
  }
  return warning;
}

}  // namespace corral::model
