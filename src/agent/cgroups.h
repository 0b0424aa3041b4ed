// Linux control groups for task limits: one group per task, with a CPU quota and a memory limit.
// Supports cgroup v2 (the unified hierarchy mounted at the root) and v1 (separate memory and cpu
// hierarchies, as on hybrid machines whose v2 mount carries no controllers).
//
// Layout: <root>/<parent>/<name> (v2), or <root>/memory/<parent>/<name> and
// <root>/cpu/<parent>/<name> (v1). The parent belongs to one agent: corral/<cluster>/<node>
// (AgentCgroupParent), so that agents of several clusters, or several agents of one, on a host
// never share a group; a task's clean-up kills only what is in the task's own group.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "common/status.h"
#include "common/units.h"

namespace corral::agent {

enum class CgroupVersion { kNone, kV1, kV2 };

// Zero means unlimited.
struct CgroupLimits {
  CpuMilli cpu{0};      // quota: cpu/1000 CPUs' worth of time per 100 ms period
  MemoryMib memory{0};  // hard limit; swap is limited to the same (v1 memsw) or none (v2)
};

// The cgroup of one task.
struct TaskCgroup {
  std::vector<std::string> dirs;  // absolute; one (v2) or one per v1 hierarchy
  std::string memory_dir;         // the dir with memory.* files; empty without memory controller
  std::string note;               // limits that could not be applied; empty when all were
};

// "corral/<cluster_id>/<node_name>": the parent of one agent's task groups. Both must be safe
// path components (model::ValidateClusterId, protocol/names.h's node names).
std::string AgentCgroupParent(const std::string& cluster_id, const std::string& node_name);

// Knows where the hierarchies are and makes task groups there. Copyable, no mutable state, and
// its methods only touch the files of the groups they are given.
class CgroupManager {
 public:
  // Finds the hierarchies under `root` and creates `parent` in each (a relative path of one or
  // more components, each level created as needed and, on v2, delegated the memory and cpu
  // controllers; existing ones are reused). Never fails: when cgroups cannot be used (not
  // mounted, no memory/cpu controller, not writable, a parent with an empty, "." or ".."
  // component) version() is kNone and unavailable_reason() says why.
  static CgroupManager Detect(const std::string& root = "/sys/fs/cgroup",
                              const std::string& parent = "corral");
  // A manager that never makes groups (tasks run without limits).
  static CgroupManager Disabled(std::string reason);

  CgroupVersion version() const { return version_; }
  const std::string& unavailable_reason() const { return reason_; }

  // Creates the group `name` (letters, digits, '-', '_', '.') and applies the limits. Controllers
  // that exist get a group even without a limit (so that every process of the task can be
  // found and killed). A limit that cannot be applied is described in the result's note; an
  // error only when no group at all could be made (or the manager is kNone).
  Result<TaskCgroup> Create(const std::string& name, const CgroupLimits& limits) const;

  // The files a process writes its own pid into to join the group (all hierarchies).
  static std::vector<std::string> ProcsFiles(const TaskCgroup& group);
  // Sends SIGKILL to every process listed in the groups. Best effort.
  static void KillAll(const TaskCgroup& group);
  // Removes the group directories. FailedPrecondition while a process is still in one (call
  // again later); OK if they are already gone.
  static Status Remove(const TaskCgroup& group);
  // How many processes the kernel's OOM killer killed in the group; nullopt if unknown.
  static std::optional<int64_t> OomKills(const TaskCgroup& group);
  // Removes the (empty) parent groups, then those of their ancestors under `root` that are
  // empty (other agents' groups keep theirs); for tests and for uninstalling.
  Status RemoveParent() const;

 private:
  CgroupManager() = default;

  CgroupVersion version_ = CgroupVersion::kNone;
  std::string reason_;
  // Absolute parent directories: v2_parent_ for v2; memory_parent_/cpu_parent_ for v1 (either
  // may be empty when that hierarchy is missing).
  std::string v2_parent_;
  bool v2_memory_ = false;
  bool v2_cpu_ = false;
  std::string memory_parent_;
  std::string cpu_parent_;
  int parent_levels_ = 0;  // components of `parent`: the ancestors RemoveParent may remove
};

}  // namespace corral::agent
