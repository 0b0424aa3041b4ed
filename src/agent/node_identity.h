// The node's identity towards the server: a random secret created once per work dir and sent
// with every registration. The server binds a live node name to it, so that holding the join
// token is not enough to take over another node's name; a restarted agent (same work dir)
// proves it is the same node.
#pragma once

#include <string>

#include "common/status.h"

namespace corral::agent {

// Reads <work_dir>/node.id, or creates it (32 lowercase hex characters from /dev/urandom and a
// newline; mode 0600, written to a temp file and renamed, so a crash leaves no partial id) when
// it does not exist. `work_dir` must exist. Errors name the path: a malformed file is
// InvalidArgument (never replaced: the id is this node's identity), I/O failures IoError.
Result<std::string> LoadOrCreateNodeId(const std::string& work_dir);

}  // namespace corral::agent
