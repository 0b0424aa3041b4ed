#include "agent/host_resources.h"

#include <unistd.h>

#include <algorithm>
#include <charconv>
#include <climits>
#include <vector>

#include "agent/file_io.h"

namespace corral::agent {
namespace {

// Values at or above this are "no limit" (v1 reports unlimited memory as ~2^63 rounded to a page).
constexpr int64_t kUnlimited = int64_t{1} << 60;

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t' || s.front() == '\n')) {
    s.remove_prefix(1);
  }
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t' || s.back() == '\n')) {
    s.remove_suffix(1);
  }
  return s;
}

std::optional<int64_t> ParseInt(std::string_view s) {
  s = Trim(s);
  int64_t v = 0;
  auto [end, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || end != s.data() + s.size()) return std::nullopt;
  return v;
}

// "/a/b" -> {"/a/b", "/a", ""}: the cgroup and its ancestors, relative to a hierarchy root.
std::vector<std::string> SelfAndAncestors(std::string path) {
  std::vector<std::string> out;
  while (!path.empty() && path.back() == '/') path.pop_back();
  while (true) {
    out.push_back(path);
    if (path.empty()) break;
    size_t slash = path.rfind('/');
    path = slash == std::string::npos ? "" : path.substr(0, slash);
  }
  return out;
}

struct Limits {
  std::optional<CpuMilli> cpu;
  std::optional<MemoryMib> memory;

  void LowerCpu(CpuMilli c) { cpu = cpu ? std::min(*cpu, c) : c; }
  void LowerMemory(MemoryMib m) { memory = memory ? std::min(*memory, m) : m; }
};

void ReadV2Limits(const std::string& root, const std::string& path, Limits& limits) {
  for (const std::string& dir : SelfAndAncestors(path)) {
    if (auto text = ReadFile(root + dir + "/cpu.max"); text.ok()) {
      if (auto cpu = ParseCpuMax(*text)) limits.LowerCpu(*cpu);
    }
    if (auto text = ReadFile(root + dir + "/memory.max"); text.ok()) {
      auto bytes = ParseInt(*text);  // "max" does not parse: no limit
      if (bytes && *bytes > 0 && *bytes < kUnlimited) limits.LowerMemory(MemoryMib(*bytes >> 20));
    }
  }
}

void ReadV1CpuLimits(const std::string& hierarchy, const std::string& path, Limits& limits) {
  for (const std::string& dir : SelfAndAncestors(path)) {
    auto quota_text = ReadFile(hierarchy + dir + "/cpu.cfs_quota_us");
    auto period_text = ReadFile(hierarchy + dir + "/cpu.cfs_period_us");
    if (!quota_text.ok() || !period_text.ok()) continue;
    auto quota = ParseInt(*quota_text);
    auto period = ParseInt(*period_text);
    if (quota && period && *quota > 0 && *period > 0) {
      limits.LowerCpu(CpuMilli(*quota * 1000 / *period));
    }
  }
}

void ReadV1MemoryLimits(const std::string& hierarchy, const std::string& path, Limits& limits) {
  for (const std::string& dir : SelfAndAncestors(path)) {
    if (auto text = ReadFile(hierarchy + dir + "/memory.limit_in_bytes"); text.ok()) {
      auto bytes = ParseInt(*text);
      if (bytes && *bytes > 0 && *bytes < kUnlimited) limits.LowerMemory(MemoryMib(*bytes >> 20));
    }
  }
}

// Limits from the cgroups named in /proc/self/cgroup ("id:controllers:path" lines).
Limits ReadCgroupLimits(const HostPaths& paths) {
  Limits limits;
  auto text = ReadFile(paths.proc + "/self/cgroup");
  if (!text.ok()) return limits;
  std::string_view rest = *text;
  while (!rest.empty()) {
    size_t nl = rest.find('\n');
    std::string_view line = rest.substr(0, nl);
    rest = nl == std::string_view::npos ? std::string_view() : rest.substr(nl + 1);
    size_t c1 = line.find(':');
    size_t c2 = c1 == std::string_view::npos ? c1 : line.find(':', c1 + 1);
    if (c2 == std::string_view::npos) continue;
    std::string controllers(line.substr(c1 + 1, c2 - c1 - 1));
    std::string path(line.substr(c2 + 1));
    if (controllers.empty()) {  // the v2 hierarchy
      ReadV2Limits(paths.cgroup, path, limits);
      continue;
    }
    std::vector<std::string> names;
    for (size_t start = 0; start <= controllers.size();) {
      size_t comma = controllers.find(',', start);
      if (comma == std::string::npos) comma = controllers.size();
      names.push_back(controllers.substr(start, comma - start));
      start = comma + 1;
    }
    auto has = [&](const char* n) {
      return std::find(names.begin(), names.end(), n) != names.end();
    };
    // The hierarchy is mounted under its controller list ("cpu,cpuacct"); distributions also
    // link the single names, so try both.
    if (has("cpu")) {
      ReadV1CpuLimits(paths.cgroup + "/" + controllers, path, limits);
      if (controllers != "cpu") ReadV1CpuLimits(paths.cgroup + "/cpu", path, limits);
    }
    if (has("memory")) ReadV1MemoryLimits(paths.cgroup + "/memory", path, limits);
  }
  return limits;
}

}  // namespace

Result<MemoryMib> ParseMemTotal(std::string_view meminfo) {
  size_t at = meminfo.find("MemTotal:");
  if (at == std::string_view::npos) return InvalidArgument("meminfo: no MemTotal line");
  std::string_view rest = meminfo.substr(at + 9);
  rest = rest.substr(0, rest.find('\n'));
  rest = Trim(rest);
  if (rest.size() < 3 || rest.substr(rest.size() - 2) != "kB") {
    return InvalidArgument("meminfo: MemTotal is not in kB: '" + std::string(rest) + "'");
  }
  auto kb = ParseInt(rest.substr(0, rest.size() - 2));
  if (!kb || *kb <= 0) return InvalidArgument("meminfo: bad MemTotal '" + std::string(rest) + "'");
  return MemoryMib(*kb / 1024);
}

std::optional<CpuMilli> ParseCpuMax(std::string_view cpu_max) {
  cpu_max = Trim(cpu_max);
  size_t space = cpu_max.find(' ');
  if (space == std::string_view::npos) return std::nullopt;
  auto quota = ParseInt(cpu_max.substr(0, space));
  auto period = ParseInt(cpu_max.substr(space + 1));
  if (!quota || !period || *quota <= 0 || *period <= 0) return std::nullopt;
  return CpuMilli(*quota * 1000 / *period);
}

Result<HostResources> DetectHostResources(const HostPaths& paths) {
  HostResources host;
  char name[HOST_NAME_MAX + 1] = {};
  if (gethostname(name, sizeof(name) - 1) != 0 || name[0] == '\0') {
    return IoError("gethostname: " + ErrnoText(errno));
  }
  host.hostname = name;

  long cpus = sysconf(_SC_NPROCESSORS_ONLN);
  if (cpus < 1) cpus = 1;
  host.cpu = CpuMilli(int64_t{cpus} * 1000);

  auto meminfo = ReadFile(paths.proc + "/meminfo");
  if (!meminfo.ok()) return meminfo.status();
  auto total = ParseMemTotal(*meminfo);
  if (!total.ok())
    return Status(total.status().code(), paths.proc + "/" + total.status().message());
  host.memory = *total;

  Limits limits = ReadCgroupLimits(paths);
  if (limits.cpu && *limits.cpu < host.cpu) host.cpu = std::max(*limits.cpu, CpuMilli(1));
  if (limits.memory && *limits.memory < host.memory) host.memory = *limits.memory;
  return host;
}

DeclaredResources DeclareResources(int64_t cpus, int64_t memory_mib, int fake_gpus) {
  DeclaredResources declared;
  if (cpus > 0) declared.cpu = CpuMilli(cpus * 1000);
  if (memory_mib > 0) declared.memory = MemoryMib(memory_mib);
  declared.min_cpu = CpuMilli(kCpusPerFakeGpu * 1000 * fake_gpus);
  return declared;
}

HostResources Offered(HostResources detected, const DeclaredResources& declared) {
  detected.cpu = declared.cpu.value_or(std::max(detected.cpu, declared.min_cpu));
  if (declared.memory) detected.memory = *declared.memory;
  return detected;
}

}  // namespace corral::agent
