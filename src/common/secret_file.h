// Files that hold secrets (tokens): written with mode 0600 from the start.
#pragma once

#include <string>

#include "common/status.h"

namespace corral {

// Creates or replaces `path` with `content`, mode 0600. Errors name the path.
Status WriteSecretFile(const std::string& path, const std::string& content);

}  // namespace corral
