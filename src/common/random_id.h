// Random identifiers from the kernel's cryptographic generator: node ids (agent/node_identity.h),
// cluster ids (store/store.h). Not a Rng (rng.h): these must differ on every machine and run,
// never be reproducible.
#pragma once

#include <cstddef>
#include <string>

#include "common/status.h"

namespace corral {

// `bytes` random bytes (1..64) as 2 × bytes lowercase hex characters, from getrandom(2).
// IoError when the kernel cannot give them (never a weaker fallback).
Result<std::string> RandomHexId(size_t bytes);

// True when `text` is exactly 2 × bytes lowercase hex characters (what RandomHexId returns).
bool IsHexId(const std::string& text, size_t bytes);

}  // namespace corral
