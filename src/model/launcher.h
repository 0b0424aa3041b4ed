// How the parts of a distributed job start their processes (docs/distributed.md). A job of N
// tasks ("parts", one per node or node share) with P processes per part has N × P ranks; rank
// r = node_rank × P + local_rank.
#pragma once

#include <string>
#include <string_view>

#include "common/status.h"

namespace corral::model {

enum class Launcher {
  kNone,       // each part runs the command P times (P = 1: once), with env:// variables set
  kTorchrun,   // each part runs one `torchrun` that starts the P processes (elastic agent)
  kMpi,        // part 0 runs the command (mpirun/horovodrun with the hostfile); others hold
  kDeepspeed,  // as kNone, plus DeepSpeed's variables and hostfile
  kTf,         // as kNone, plus TF_CONFIG (one worker per rank)
  kJax,        // as kNone, plus the JAX coordinator address, process id and count
};

inline constexpr int kMaxProcsPerNode = 64;

// The ports corral hands out to distributed jobs, a block of consecutive ones per job
// (server/control/rendezvous_ports.h), from torchrun's default MASTER_PORT on.
inline constexpr int kFirstRendezvousPort = 29500;
inline constexpr int kLastRendezvousPort = 30999;
inline constexpr int kRendezvousPortCount = kLastRendezvousPort - kFirstRendezvousPort + 1;

// True for the variables corral sets in every part of a distributed job with `launcher`
// (docs/distributed.md; agent/rendezvous.h sets them, and its tests check the two agree).
// A job's env may not set them.
bool IsRendezvousEnvName(Launcher launcher, std::string_view name);

// True for the variables corral sets in every task (CORRAL_*, CUDA_VISIBLE_DEVICES,
// NVIDIA_VISIBLE_DEVICES). A job's env may not set them.
bool IsTaskEnvName(std::string_view name);

// "none" | "torchrun" | "mpi" | "deepspeed" | "tf" | "jax"; the error lists the names.
Result<Launcher> ParseLauncher(std::string_view name);
std::string_view LauncherName(Launcher launcher);

}  // namespace corral::model
