// What the server does with a submitted job spec (protocol/job_spec.h) beyond its codec, as it
// needs the server's state: the environment the spec names (ApplyEnvironment, with the version
// the environment catalog resolved), the cluster's resource defaults for what the spec leaves out
// (ApplyResourceDefaults, from corral server flags), and the scheduler's view of a stored job
// (ToModelJob). Pure functions; the controller calls them at submission and when it loads jobs.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/units.h"
#include "model/job.h"
#include "protocol/api_job.h"
#include "protocol/job_spec.h"
#include "server/control/environment.h"
#include "store/store.h"

namespace corral::server {

// The server speaks of the protocol's job spec by its plain names.
using protocol::ArrayElement;
using protocol::ArrayElements;
using protocol::IsDistributed;
using protocol::JobSpec;
using protocol::ParseJobSpec;
using protocol::PortsOf;
using protocol::SpecOrigin;

// The CPUs per process of a job without GPUs that asks none, as Slurm gives each task one.
inline constexpr int64_t kDefaultCpusPerProc = 1;

// The cluster's defaults for what a submitted spec leaves out (corral server flags).
struct ResourceDefaults {
  // --default-cpus-per-gpu: whole CPUs per GPU of a GPU job that asks no CPU (Slurm's
  // DefCpuPerGPU); a share of a GPU gets its share of them. 0: such a job asks no CPU.
  int64_t cpus_per_gpu = 0;
  // --default-memory-per-cpu-mib: MiB per CPU asked (or defaulted) of a job that asks no memory
  // (Slurm's DefMemPerCPU). 0: off, such a job asks no memory.
  MemoryMib memory_per_cpu{0};
};

// Fills in the CPU and memory `spec` left out (cpu_given, memory_given), once per submission:
//  - CPU: a job without GPUs asks kDefaultCpusPerProc per process, procs_per_node × 1000
//    milli-CPU per task; a GPU job asks cpus_per_gpu per GPU, cpus_per_gpu × gpus × gpu_milli
//    milli-CPU per task (none when cpus_per_gpu is 0).
//  - memory: memory_per_cpu per CPU of the task's CPU request (asked or defaulted), rounded up
//    to a whole MiB; none when memory_per_cpu is 0.
// Returns what it filled in, for the submitter (the submission's answer, and as text
// protocol::ToString its submission event): {"resources.cpu_milli", 1000, "1 CPU per process, as
// the job asks no GPU"} and the like; none when the spec asked everything.
std::vector<protocol::ResourceDefault> ApplyResourceDefaults(const ResourceDefaults& defaults,
                                                             JobSpec& spec);

// Makes `spec` use version `version` of environment `env`: "environment" becomes
// "NAME@VERSION", an empty command the environment's command, and the environment's variables go
// under the spec's (and under each array element's); then checks the spec again as a whole
// (protocol::CheckJobSpec). InvalidArgument naming the field when the command is still empty,
// the variables are too many or hold a name corral sets for the job (rendezvous variables of its
// launcher), or a line break where the job may run in a container, the array grows too big, or
// the tasks have fewer GPUs than the environment's gpus.min.
Status ApplyEnvironment(const EnvironmentSpec& env, int64_t version, JobSpec& spec);

// The scheduler's view of job `record` with the (validated) spec `spec`.
model::Job ToModelJob(const JobSpec& spec, const store::JobRecord& record);

}  // namespace corral::server
