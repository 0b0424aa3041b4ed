// What an agent checks and sets up on its node for a launch of the protocol (protocol/task.h):
// that the launch agrees with itself and with this node (its workdir and environment prefixes
// exist), and the environment its task gets. The protocol's task types are used here, and by the
// rest of the agent, under their agent:: names.
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/task.h"

namespace corral::agent {

using protocol::AllocationId;
using protocol::Distributed;
using protocol::IsTerminal;
using protocol::LaunchEnvironment;
using protocol::LaunchSession;
using protocol::LogStream;
using protocol::ProcessState;
using protocol::ProcessStateName;
using protocol::TaskKey;
using protocol::TaskLaunch;
using protocol::TaskLaunchFromJson;
using protocol::TaskStatus;
using protocol::TaskStatusFromJson;
using protocol::ToString;

// Checks a launch; the error names the task and the field: "task 12-1: field 'workdir': must be
// an absolute path, got 'data'". Checks that workdir exists and is a directory, and that a
// distributed launch agrees with itself (node_rank == task_index, nodes == tasks, ranges; no
// shell with torchrun, which takes a script), that an environment's venv or conda prefix is an
// absolute path and, for runtime "process", an existing directory ("field 'environment.venv':
// '/opt/x' (environment 'torch@2') does not exist on this node"; a container ignores them), and
// that a batch task's script starts with "#!" (its argv, the script's arguments, may be empty),
// that a session's URL prefix is its job's (model::SessionUrlPrefix) and its token 64 hex
// characters.
Status Validate(const TaskLaunch& launch);
// The part of Validate that checks `submit_dir` (empty, or absolute without NUL bytes): the
// runtime checks it before it looks the folder up.
Status ValidateSubmitDir(const TaskLaunch& launch);

// True for the variables a job may not set: CORRAL_*, CUDA_VISIBLE_DEVICES,
// NVIDIA_VISIBLE_DEVICES and, for a distributed launch, the rendezvous variables corral sets
// for its launcher (IsRendezvousEnvName in rendezvous.h).
bool IsReservedEnvName(const std::string& name, const TaskLaunch& launch);

// The Slurm variables of a batch task (TaskLaunch::script; docs/batch.md): SLURM_JOB_ID (and
// SLURM_JOBID), SLURM_JOB_NAME, SLURM_NTASKS (SLURM_NPROCS) = parts x processes per part,
// SLURM_NTASKS_PER_NODE, SLURM_JOB_NUM_NODES (SLURM_NNODES) = parts, SLURM_NODEID = the part,
// SLURM_PROCID = the part's first rank and SLURM_LOCALID 0 (`corral launch` sets each
// process's), SLURM_SUBMIT_DIR; for an array element SLURM_ARRAY_TASK_ID and
// SLURM_ARRAY_JOB_ID. Only batch tasks get them, and not those of launcher mpi: mpirun (Open
// MPI's Slurm components) and PyTorch Lightning take a job with SLURM_* variables for a Slurm
// allocation and look for srun.
std::map<std::string, std::string> SlurmEnvironment(const TaskLaunch& launch);

// What the agent itself tells a task about the in-job channel (docs/in-job.md): the servers it
// reaches (CORRAL_SERVER, comma-separated URLs; empty: unset) and the file it writes when it
// stops the task (CORRAL_STOP_FILE; empty: unset), and the PEM bundle that verifies an https
// server (CORRAL_CA_CERT: the agent's --ca-cert, an absolute path; empty: unset). The job token
// and the checkpoint folder come from the launch (TaskLaunch::job_token, checkpoint_dir).
struct TaskChannel {
  std::string server;
  std::string stop_file;
  std::string ca_cert;
};

// The environment of a task, as "NAME=value" strings sorted by name: `base` (what the agent
// passes through, e.g. PATH and HOME), overridden by the job's env, then the corral variables:
// CUDA_VISIBLE_DEVICES and NVIDIA_VISIBLE_DEVICES (the GPU indices, comma-separated; for
// CPU-only tasks "" and "void"), CORRAL_JOB_ID, CORRAL_TASK_INDEX, CORRAL_NUM_TASKS,
// CORRAL_ALLOCATION_ID, CORRAL_GENERATION (the run: 1 the first), CORRAL_NODE_NAME,
// CORRAL_GPU_MILLI, CORRAL_SUBMIT_DIR (when the launch has one), CORRAL_JOB_TOKEN and
// CORRAL_CHECKPOINT_DIR (when the launch has them), CORRAL_SERVER, CORRAL_STOP_FILE and
// CORRAL_CA_CERT (when `channel` has them); for a batch task
// SlurmEnvironment(); for a distributed launch also
// DistributedEnvironment(), RankEnvironment(..., 0) when the task is the only process of its
// part and corral sets the ranks (procs_per_node == 1, SetsRankVariables()), and
// HostfileEnvironment(hostfile) when `hostfile` is not empty (the path where the runtime wrote
// Hostfile()). All from rendezvous.h; `hostfile` is ignored for other launches. With an
// environment: CORRAL_ENVIRONMENT=NAME@VERSION and, for a venv (conda prefix), PATH starting
// with <venv>/bin (<conda>/bin) and VIRTUAL_ENV (CONDA_PREFIX); those win over the job's env. A
// session's task also gets the session variables (LaunchSession).
std::vector<std::string> TaskEnvironment(const TaskLaunch& launch, const std::string& node_name,
                                         const std::map<std::string, std::string>& base,
                                         const std::string& hostfile = "",
                                         const TaskChannel& channel = {});

}  // namespace corral::agent
