#include "agent/cgroups.h"

#include <errno.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <tuple>
#include <vector>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

constexpr int64_t kCpuPeriodUs = 100000;
constexpr int64_t kMinCpuQuotaUs = 1000;  // the kernel's minimum

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// mkdir that accepts an existing directory.
Status MakeDir(const std::string& path) {
  if (mkdir(path.c_str(), 0755) == 0 || errno == EEXIST) return Status::Ok();
  return IoError("cannot create cgroup " + path + ": " + ErrnoText(errno));
}

// `parent`'s components, or an error naming it when one is empty, "." or "..".
Result<std::vector<std::string>> ParentLevels(const std::string& parent) {
  std::vector<std::string> levels;
  size_t start = 0;
  while (true) {
    const size_t slash = parent.find('/', start);
    std::string level = parent.substr(start, slash - start);
    if (level.empty() || level == "." || level == "..") {
      return InvalidArgument("cgroup parent '" + parent + "': empty, '.' or '..' component");
    }
    levels.push_back(std::move(level));
    if (slash == std::string::npos) return levels;
    start = slash + 1;
  }
}

// Creates base/levels[0]/levels[1]/... one level at a time; returns the deepest. With `enable`
// (v2), delegates those controllers to each level's children.
Result<std::string> MakeLevels(const std::string& base, const std::vector<std::string>& levels,
                               const std::string& enable = "") {
  std::string dir = base;
  for (const std::string& level : levels) {
    dir += "/" + level;
    CORRAL_RETURN_IF_ERROR(MakeDir(dir));
    if (enable.empty()) continue;
    if (Status s = WriteExisting(dir + "/cgroup.subtree_control", enable); !s.ok()) {
      return IoError("cannot delegate controllers to " + dir + ": " + s.message());
    }
  }
  return dir;
}

bool HasWord(const std::string& text, const std::string& word) {
  size_t pos = 0;
  while ((pos = text.find(word, pos)) != std::string::npos) {
    bool start = pos == 0 || std::isspace(static_cast<unsigned char>(text[pos - 1]));
    size_t end = pos + word.size();
    bool stop = end == text.size() || std::isspace(static_cast<unsigned char>(text[end]));
    if (start && stop) return true;
    pos = end;
  }
  return false;
}

int64_t CpuQuotaUs(CpuMilli cpu) {
  return std::max(kMinCpuQuotaUs, cpu.value() * kCpuPeriodUs / 1000);
}

void AddNote(std::string& note, const std::string& what) {
  if (!note.empty()) note += "; ";
  note += what;
}

}  // namespace

std::string AgentCgroupParent(const std::string& cluster_id, const std::string& node_name) {
  return "corral/" + cluster_id + "/" + node_name;
}

CgroupManager CgroupManager::Disabled(std::string reason) {
  CgroupManager m;
  m.reason_ = std::move(reason);
  return m;
}

CgroupManager CgroupManager::Detect(const std::string& root, const std::string& parent) {
  Result<std::vector<std::string>> levels = ParentLevels(parent);
  if (!levels.ok()) return Disabled(levels.status().message());
  CgroupManager m;
  m.parent_levels_ = static_cast<int>(levels->size());
  if (auto controllers = ReadFile(root + "/cgroup.controllers"); controllers.ok()) {
    m.v2_memory_ = HasWord(*controllers, "memory");
    m.v2_cpu_ = HasWord(*controllers, "cpu");
    if (!m.v2_memory_ && !m.v2_cpu_) {
      return Disabled("cgroup v2 at " + root + " has neither the memory nor the cpu controller");
    }
    // Children of `parent` get the controllers only if the root and `parent` delegate them.
    std::string enable = std::string(m.v2_memory_ ? "+memory " : "") + (m.v2_cpu_ ? "+cpu" : "");
    (void)WriteExisting(root + "/cgroup.subtree_control", enable);  // often already enabled
    Result<std::string> dir = MakeLevels(root, *levels, enable);
    if (!dir.ok()) return Disabled(dir.status().message());
    m.v2_parent_ = *dir;
    m.version_ = CgroupVersion::kV2;
    return m;
  }
  const bool memory = Exists(root + "/memory/memory.limit_in_bytes");
  const bool cpu = Exists(root + "/cpu/cpu.cfs_quota_us");
  if (!memory && !cpu) {
    return Disabled("no cgroup v2 controllers at " + root +
                    " and no cgroup v1 memory or cpu hierarchy under it");
  }
  std::string failures;
  for (auto [present, hierarchy, made] : {std::tuple{memory, "/memory", &m.memory_parent_},
                                          std::tuple{cpu, "/cpu", &m.cpu_parent_}}) {
    if (!present) continue;
    Result<std::string> dir = MakeLevels(root + hierarchy, *levels);
    if (dir.ok())
      *made = *dir;
    else
      AddNote(failures, dir.status().message());
  }
  if (m.memory_parent_.empty() && m.cpu_parent_.empty()) return Disabled(failures);
  m.version_ = CgroupVersion::kV1;
  return m;
}

Result<TaskCgroup> CgroupManager::Create(const std::string& name,
                                         const CgroupLimits& limits) const {
  if (version_ == CgroupVersion::kNone) return FailedPrecondition(reason_);
  if (name.empty() || name == "." || name == ".." ||
      !std::all_of(name.begin(), name.end(), [](char c) {
        return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.';
      })) {
    return InvalidArgument("cgroup name '" + name + "': only letters, digits, '-', '_', '.'");
  }
  TaskCgroup group;
  const bool want_memory = limits.memory.value() > 0;
  const bool want_cpu = limits.cpu.value() > 0;
  const std::string memory_bytes = std::to_string(limits.memory.value() * 1024 * 1024);
  const std::string quota = std::to_string(CpuQuotaUs(limits.cpu));

  if (version_ == CgroupVersion::kV2) {
    const std::string dir = v2_parent_ + "/" + name;
    CORRAL_RETURN_IF_ERROR(MakeDir(dir));
    group.dirs.push_back(dir);
    if (v2_memory_) group.memory_dir = dir;
    if (want_memory) {
      if (!v2_memory_) {
        AddNote(group.note, "memory limit not applied: no memory controller");
      } else if (Status s = WriteExisting(dir + "/memory.max", memory_bytes); !s.ok()) {
        AddNote(group.note, "memory limit not applied: " + s.message());
      } else if (Exists(dir + "/memory.swap.max")) {
        (void)WriteExisting(dir + "/memory.swap.max", "0");
      }
    }
    if (want_cpu) {
      if (!v2_cpu_) {
        AddNote(group.note, "cpu limit not applied: no cpu controller");
      } else if (Status s =
                     WriteExisting(dir + "/cpu.max", quota + " " + std::to_string(kCpuPeriodUs));
                 !s.ok()) {
        AddNote(group.note, "cpu limit not applied: " + s.message());
      }
    }
    return group;
  }

  std::string failures;
  if (!memory_parent_.empty()) {
    const std::string dir = memory_parent_ + "/" + name;
    if (Status s = MakeDir(dir); !s.ok()) {
      AddNote(failures, s.message());
    } else {
      group.dirs.push_back(dir);
      group.memory_dir = dir;
      if (want_memory) {
        if (Status w = WriteExisting(dir + "/memory.limit_in_bytes", memory_bytes); !w.ok()) {
          AddNote(group.note, "memory limit not applied: " + w.message());
        } else if (Exists(dir + "/memory.memsw.limit_in_bytes")) {
          // No swapping past the limit either (only present with swap accounting).
          (void)WriteExisting(dir + "/memory.memsw.limit_in_bytes", memory_bytes);
        }
      }
    }
  }
  if (want_memory && group.memory_dir.empty()) {
    AddNote(group.note, "memory limit not applied: no writable memory hierarchy");
  }
  bool cpu_group = false;
  if (!cpu_parent_.empty()) {
    const std::string dir = cpu_parent_ + "/" + name;
    if (Status s = MakeDir(dir); !s.ok()) {
      AddNote(failures, s.message());
    } else {
      group.dirs.push_back(dir);
      cpu_group = true;
      if (want_cpu) {
        Status w = WriteExisting(dir + "/cpu.cfs_period_us", std::to_string(kCpuPeriodUs));
        if (w.ok()) w = WriteExisting(dir + "/cpu.cfs_quota_us", quota);
        if (!w.ok()) AddNote(group.note, "cpu limit not applied: " + w.message());
      }
    }
  }
  if (want_cpu && !cpu_group) {
    AddNote(group.note, "cpu limit not applied: no writable cpu hierarchy");
  }
  if (group.dirs.empty()) return IoError(failures);
  return group;
}

std::vector<std::string> CgroupManager::ProcsFiles(const TaskCgroup& group) {
  std::vector<std::string> files;
  for (const std::string& dir : group.dirs) files.push_back(dir + "/cgroup.procs");
  return files;
}

void CgroupManager::KillAll(const TaskCgroup& group) {
  for (const std::string& file : ProcsFiles(group)) {
    auto text = ReadFile(file);
    if (!text.ok()) continue;
    size_t pos = 0;
    while (pos < text->size()) {
      size_t nl = text->find('\n', pos);
      if (nl == std::string::npos) nl = text->size();
      std::string line = text->substr(pos, nl - pos);
      pos = nl + 1;
      if (line.empty()) continue;
      char* end = nullptr;
      long pid = std::strtol(line.c_str(), &end, 10);
      if (end != nullptr && *end == '\0' && pid > 1) kill(static_cast<pid_t>(pid), SIGKILL);
    }
  }
}

Status CgroupManager::Remove(const TaskCgroup& group) {
  for (const std::string& dir : group.dirs) {
    if (rmdir(dir.c_str()) == 0 || errno == ENOENT) continue;
    if (errno == EBUSY) return FailedPrecondition("cgroup " + dir + " still has processes");
    return IoError("cannot remove cgroup " + dir + ": " + ErrnoText(errno));
  }
  return Status::Ok();
}

std::optional<int64_t> CgroupManager::OomKills(const TaskCgroup& group) {
  if (group.memory_dir.empty()) return std::nullopt;
  for (const char* file : {"/memory.events", "/memory.oom_control"}) {
    auto text = ReadFile(group.memory_dir + file);
    if (!text.ok()) continue;
    size_t at = text->find("oom_kill ");
    if (at == std::string::npos) continue;
    return std::strtoll(text->c_str() + at + 9, nullptr, 10);
  }
  return std::nullopt;
}

Status CgroupManager::RemoveParent() const {
  for (std::string dir : {v2_parent_, memory_parent_, cpu_parent_}) {
    if (dir.empty()) continue;
    if (rmdir(dir.c_str()) != 0 && errno != ENOENT) {
      return IoError("cannot remove cgroup " + dir + ": " + ErrnoText(errno));
    }
    // The ancestors go only when empty: another agent's groups may live there.
    for (int level = 1; level < parent_levels_; ++level) {
      dir.resize(dir.rfind('/'));
      if (rmdir(dir.c_str()) != 0) break;
    }
  }
  return Status::Ok();
}

}  // namespace corral::agent
