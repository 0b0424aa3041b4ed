// What the process runtime finds on this node for environments (docs/environments.md, "Runs
// here"): which of the known tools (model::kHostTools) are executables on a PATH, and the folders
// directly under the environments' root (model::kEnvsRoot). The agent looks once, at start, and
// reports them in its inventory; installing a tool takes an agent restart to show.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace corral::agent {

struct HostSetup {
  std::vector<std::string> tools;         // in model::kHostTools order
  std::vector<std::string> env_prefixes;  // absolute, sorted; at most `max_prefixes`
  size_t dropped_prefixes = 0;            // folders left out beyond `max_prefixes`
};

// The agent's warning about left-out folders ("" when none were): environments whose folder
// was left out are refused at submission as if the node lacked it.
std::string DroppedPrefixesWarning(const HostSetup& host);

// Looks in each folder of `path` (PATH's value, ':'-separated) for the known tools, and lists
// the folders under `envs_root` (absent: none), keeping the first `max_prefixes` by name and
// leaving out names longer than `max_text` bytes as a whole path.
HostSetup FindHostSetup(std::string_view path, const std::string& envs_root, size_t max_prefixes,
                        size_t max_text);
// This agent's: its PATH, model::kEnvsRoot, and the inventory's bounds (protocol/agent_messages.h).
HostSetup FindHostSetup();

}  // namespace corral::agent
