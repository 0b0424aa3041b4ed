// Small file helpers shared by the agent's parts (internal to src/agent).
#pragma once

#include <string>

#include "common/status.h"

namespace corral::agent {

// The whole file. NotFound if it does not exist, IoError otherwise; messages name the path.
Result<std::string> ReadFile(const std::string& path);

// Replaces `path` atomically: writes `path`.tmp, fsyncs it, renames it over `path`. A reader
// sees the old content or the new, never a part.
Status WriteFileAtomic(const std::string& path, const std::string& content);

// Writes `content` to an existing file (cgroup control files); IoError naming path and errno.
Status WriteExisting(const std::string& path, const std::string& content);

// strerror(errno_value) for messages, thread-safe.
std::string ErrnoText(int errno_value);

}  // namespace corral::agent
