#include "model/launcher.h"

#include <algorithm>
#include <array>
#include <initializer_list>
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

bool IsRendezvousEnvName(Launcher launcher, std::string_view name) {
  static constexpr std::array<std::string_view, 9> kEvery = {
      "MASTER_ADDR",      "MASTER_PORT", "NNODES",          "NODE_RANK",      "GROUP_RANK",
      "LOCAL_WORLD_SIZE", "WORLD_SIZE",  "CORRAL_LAUNCHER", "CORRAL_HOSTFILE"};
  auto in = [&](std::initializer_list<std::string_view> names) {
    return std::find(names.begin(), names.end(), name) != names.end();
  };
  if (std::find(kEvery.begin(), kEvery.end(), name) != kEvery.end()) return true;
  const bool ranks = in({"RANK", "LOCAL_RANK"});
  switch (launcher) {
    case Launcher::kNone:
      return ranks;
    case Launcher::kTorchrun:
      return false;
    case Launcher::kMpi:
      return name == "OMPI_MCA_orte_default_hostfile";
    case Launcher::kDeepspeed:
      return ranks || in({"CROSS_RANK", "CROSS_SIZE", "LOCAL_SIZE"});
    case Launcher::kTf:
      return ranks || name == "TF_CONFIG";
    case Launcher::kJax:
      return ranks || in({"JAX_COORDINATOR_ADDRESS", "JAX_NUM_PROCESSES", "JAX_PROCESS_ID"});
  }
  return false;
}

bool IsTaskEnvName(std::string_view name) {
  return name.rfind("CORRAL_", 0) == 0 || name == "CUDA_VISIBLE_DEVICES" ||
         name == "NVIDIA_VISIBLE_DEVICES";
}

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
