// How the processes of a distributed job find each other (docs/distributed.md): the one place
// that turns a launch's Distributed (task.h) into environment variables, a hostfile and the argv
// the runtime execs. Pure functions; ProcessRuntime writes the hostfile and execs, and
// `corral launch` (launch_command.h) applies RankEnvironment() to each process it starts.
//
// A part (task) with launcher none, deepspeed, tf or jax and P > 1 processes runs
// `corral launch --procs P -- ARGV`, which starts the P processes; with P == 1 the task is the
// process. torchrun starts its own P workers (and sets their RANK and LOCAL_RANK); with mpi,
// part 0 runs the job's command (mpirun with the hostfile) and the other parts only hold their
// nodes (`corral launch --hold`) until they are stopped.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "agent/task_setup.h"
#include "model/launcher.h"

namespace corral::agent {

// The node-level variables of a distributed launch (empty for one that is not), with
// N = nodes, P = procs_per_node, k = node_rank:
//   every launcher: MASTER_ADDR, MASTER_PORT (= port), NNODES = N, NODE_RANK = GROUP_RANK = k,
//     LOCAL_WORLD_SIZE = P, WORLD_SIZE = N × P, CORRAL_LAUNCHER (the launcher's name);
//   deepspeed: CROSS_RANK = k, CROSS_SIZE = N, LOCAL_SIZE = P;
//   tf: TF_CONFIG = {"cluster": {"worker": ["host:port+r" of every rank r, in rank order]},
//                    "task": {"type": "worker", "index": k × P}};
//   jax: JAX_COORDINATOR_ADDRESS = master_addr:port, JAX_NUM_PROCESSES = N × P.
// An address with a ':' (IPv6) is written "[addr]:port" in host:port values.
std::map<std::string, std::string> DistributedEnvironment(const TaskLaunch& launch);

// The variables of the process with `local_rank` (0..P-1) on a node whose node-level variables
// are `node_env` (DistributedEnvironment(), or the environment `corral launch` inherited):
// RANK = NODE_RANK × LOCAL_WORLD_SIZE + local_rank, LOCAL_RANK = local_rank and, when node_env
// has them, TF_CONFIG with task.index = RANK (TF_CONFIG present) and JAX_PROCESS_ID = RANK
// (JAX_COORDINATOR_ADDRESS present); for tf and jax (CORRAL_LAUNCHER) with LOCAL_WORLD_SIZE
// P > 1, CUDA_VISIBLE_DEVICES = the local_rank-th of P equal slices of the part's GPUs (all of
// them when they do not divide by P); for a batch task (node_env has SLURM_PROCID) SLURM_PROCID
// = RANK and SLURM_LOCALID = local_rank. A NODE_RANK that is missing or not a number reads as 0,
// such a LOCAL_WORLD_SIZE as 1; a TF_CONFIG that is not a JSON object with a "task" object is left
// alone.
std::map<std::string, std::string> RankEnvironment(
    const std::map<std::string, std::string>& node_env, int local_rank);

// Whether corral sets RANK and LOCAL_RANK for `launcher` (none, deepspeed, tf, jax): in the
// task's environment when P == 1, through `corral launch` otherwise. torchrun and mpirun set
// them for the processes they start.
bool SetsRankVariables(model::Launcher launcher);

// The hostfile of the job, in the OpenMPI and DeepSpeed format: one line "ADDR slots=S" per
// distinct host, in order of first appearance in `hosts`, S = P × (parts on that host).
std::string Hostfile(const Distributed& distributed);

// The variables that point at the hostfile the runtime wrote at `path`: CORRAL_HOSTFILE and,
// for mpi, OMPI_MCA_orte_default_hostfile.
std::map<std::string, std::string> HostfileEnvironment(const Distributed& distributed,
                                                       const std::string& path);

// Whether corral sets `name` in the environment of a part of `distributed` (any of the
// functions above, `corral launch` included): such names may not come from the job's env.
bool IsRendezvousEnvName(const Distributed& distributed, const std::string& name);

// The argv to exec for `launch`, given its argv after the shell wrap (`argv`) and the path of
// the corral binary (`self_exe`, for `corral launch`):
//   torchrun: torchrun --nnodes=N --nproc_per_node=P --node_rank=k --master_addr=A (the
//             underscore spellings: every torch version accepts them)
//             --master_port=PORT --redirects=2 --tee=2 ARGV... (each of the last two unless
//             the torchrun options leading ARGV set it: Debian 12's torchrun needs them)
//   none, deepspeed, tf, jax with P > 1: SELF_EXE launch --procs P -- ARGV...
//   mpi: part 0: ARGV; the other parts: SELF_EXE launch --hold
//   otherwise (P == 1, or not distributed): ARGV.
// With an output or error file (TaskLaunch::output_file, error_file) the result runs under
// `corral launch`, which copies what it writes into the files: [--output F] [--error E]
// [--truncate: a one-part job]
// added to a `launch --procs` command, else SELF_EXE launch --procs 1 --output F ... -- ARGV...
// (an mpi part that only holds its node writes nothing: unchanged).
std::vector<std::string> LaunchArgv(const TaskLaunch& launch, const std::vector<std::string>& argv,
                                    const std::string& self_exe);

}  // namespace corral::agent
