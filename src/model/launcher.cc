#include "model/launcher.h"

#include <array>
#include <utility>

namespace corral::model {

namespace {
constexpr std::array<std::pair<Launcher, std::string_view>, 6> kNames = {{
    {Launcher::kNone, "none"},
    {Launcher::kTorchrun, "torchrun"},
    {Launcher::kMpi, "mpi"},
    {Launcher::kDeepspeed, "deepspeed"},
    {Launcher::kTf, "tf"},
    {Launcher::kJax, "jax"},
}};
}  // namespace

Result<Launcher> ParseLauncher(std::string_view name) {
  for (const auto& [launcher, text] : kNames) {
    if (text == name) return launcher;
  }
  return InvalidArgument("unknown launcher '" + std::string(name) +
                         "' (known: none, torchrun, mpi, deepspeed, tf, jax)");
}

std::string_view LauncherName(Launcher launcher) {
  for (const auto& [l, text] : kNames) {
    if (l == launcher) return text;
  }
  return "none";
}

}  // namespace corral::model
