#include "agent/host_setup.h"

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <system_error>

#include "agent/executable.h"
#include "model/node.h"
#include "protocol/agent_messages.h"

namespace corral::agent {

HostSetup FindHostSetup(std::string_view path, const std::string& envs_root, size_t max_prefixes,
                        size_t max_text) {
  HostSetup out;
  for (const char* tool : model::kHostTools) {
    if (!FindExecutable(tool, path).empty()) out.tools.emplace_back(tool);
  }
  std::error_code ec;
  for (const auto& entry : std::filesystem::directory_iterator(envs_root, ec)) {
    std::error_code is_dir;
    const std::string prefix = entry.path().string();
    if (entry.is_directory(is_dir) && prefix.size() <= max_text) out.env_prefixes.push_back(prefix);
  }
  std::sort(out.env_prefixes.begin(), out.env_prefixes.end());
  if (out.env_prefixes.size() > max_prefixes) {
    out.dropped_prefixes = out.env_prefixes.size() - max_prefixes;
    out.env_prefixes.resize(max_prefixes);
  }
  return out;
}

std::string DroppedPrefixesWarning(const HostSetup& host) {
  if (host.dropped_prefixes == 0) return "";
  return std::to_string(host.dropped_prefixes) + " environment folders under " + model::kEnvsRoot +
         " are not reported (at most " + std::to_string(host.env_prefixes.size()) +
         " are, by name: the first is " + host.env_prefixes.front() +
         "): environments in the others are refused as if this node lacked them";
}

HostSetup FindHostSetup() {
  const char* path = std::getenv("PATH");
  return FindHostSetup(path == nullptr ? "" : path, model::kEnvsRoot,
                       protocol::kMaxInventoryEnvPrefixes, protocol::kMaxInventoryText);
}

}  // namespace corral::agent
