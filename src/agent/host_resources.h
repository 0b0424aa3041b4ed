// The CPU, memory and name of the machine the agent runs on, for the node inventory.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include "common/status.h"
#include "common/units.h"

namespace corral::agent {

struct HostResources {
  std::string hostname;
  CpuMilli cpu{0};      // online CPUs × 1000, lowered to the agent's cgroup CPU quota if any
  MemoryMib memory{0};  // MemTotal, lowered to the agent's cgroup memory limit if any
};

// Where DetectHostResources() reads from; tests point it at a prepared directory.
struct HostPaths {
  std::string proc = "/proc";             // reads <proc>/meminfo and <proc>/self/cgroup
  std::string cgroup = "/sys/fs/cgroup";  // cgroup v2 files, or v1 hierarchies beneath
};

// Reads the host's resources. A cgroup limit counts when it is set on the agent's own cgroup or
// any ancestor (v2: cpu.max, memory.max; v1: cpu.cfs_quota_us/cpu.cfs_period_us,
// memory.limit_in_bytes); the lowest one wins. Unreadable cgroup files count as no limit.
// Errors: meminfo unreadable or without MemTotal, no hostname.
Result<HostResources> DetectHostResources(const HostPaths& paths = {});

// What an operator declares a node offers, in place of what DetectHostResources() found: less, to
// keep some for the system; more, for fake-GPU and dev nodes whose jobs only pretend.
struct DeclaredResources {
  std::optional<CpuMilli> cpu;      // corral agent/dev --cpus N: N × 1000
  std::optional<MemoryMib> memory;  // --memory-mib M
  CpuMilli min_cpu{0};              // without `cpu`: the node offers at least this much
};

// CPUs a node with fake GPUs offers per GPU unless --cpus says otherwise (at least; more when
// the machine has more): GPU servers have about this many per GPU, and the jobs of a dev cluster
// or a test on a small machine then fit as they would there.
inline constexpr int64_t kCpusPerFakeGpu = 8;

// The declaration of --cpus and --memory-mib (0: not given, the detected value stands) on a node
// with `fake_gpus` fake GPUs (0 for real ones: kCpusPerFakeGpu applies to fakes only).
DeclaredResources DeclareResources(int64_t cpus, int64_t memory_mib, int fake_gpus);

// What the node offers: `detected` with `declared` in its place.
HostResources Offered(HostResources detected, const DeclaredResources& declared);

// Parsers, exposed for tests.
// "MemTotal:       24683948 kB" line of /proc/meminfo -> MiB.
Result<MemoryMib> ParseMemTotal(std::string_view meminfo);
// v2 cpu.max "150000 100000" -> 1500 milli-CPU; "max 100000" -> nullopt.
std::optional<CpuMilli> ParseCpuMax(std::string_view cpu_max);

}  // namespace corral::agent
