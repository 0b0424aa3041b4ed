// Finding programs on the agent's host: one rule for the container engine's discovery, the host
// setup's tool list and the process runtime's checks.
#pragma once

#include <string>
#include <string_view>

namespace corral::agent {

// True when `path` names a regular file (after symlinks) that the agent's user may execute.
bool IsExecutableFile(const std::string& path);

// The first executable `name` under a colon-separated `search` list (PATH's syntax), as
// "DIR/name"; "" when there is none. A relative entry (an empty one means ".") resolves against
// `relative_base`, a task's working directory, as execvp would from there; without one, only
// absolute entries count (the agent's own working directory means nothing to what it reports).
std::string FindExecutable(std::string_view name, std::string_view search,
                           std::string_view relative_base = {});

}  // namespace corral::agent
