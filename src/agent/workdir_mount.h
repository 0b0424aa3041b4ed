// A container task's workdir, mounted without resolving it as root (docs/container-runtime.md).
// The container engine runs as root: handed a workdir path, it would mount a directory that the
// task's user cannot reach itself (one under another user's private directory, or behind a link
// the user planted). So the agent opens the workdir with the task user's rights, in a child
// process that switches to that user, and binds exactly the directory it opened at a staging
// path of its own; the engine mounts the staging path. Root only (mount(2)).
#pragma once

#include <optional>
#include <string>

#include "agent/shim.h"
#include "common/status.h"

namespace corral::agent {

// Opens `path` as a directory with `user`'s rights: in a forked child that takes the user's
// groups, gid and uid (nullopt: this process's own rights, no child). Returns the descriptor
// (O_CLOEXEC), which the caller closes. Errors name the path and the reason ("workdir
// /home/bob/x: Permission denied as uid 1001").
Result<int> OpenDirectoryAs(const std::optional<ShimIdentity>& user, const std::string& path);

// Bind-mounts the directory open at `fd` on `target`, an existing empty directory.
Status BindDirectory(int fd, const std::string& target);

// Detaches whatever is mounted on `target` (nothing is fine), then removes the directory if it
// is empty. Never removes anything inside a mount: a failed unmount leaves the directory.
Status UnbindDirectory(const std::string& target);

}  // namespace corral::agent
