// Environment assets (docs/environments.md) on the server: the spec and its codec are the
// protocol's (protocol/environment_spec.h); the server loads its built-ins from a directory.
#pragma once

#include <string>
#include <vector>

#include "common/status.h"
#include "protocol/environment_ref.h"
#include "protocol/environment_spec.h"

namespace corral::server {

using protocol::CheckContainerEnv;
using protocol::EnvironmentSpec;
using protocol::ParseEnvironmentSpec;

// A job's "environment" field names one as protocol::ParseEnvironmentRef reads it.
using protocol::EnvironmentRef;
using protocol::ParseEnvironmentRef;
using protocol::ToString;

// The built-in environments: every *.yaml, *.yml and *.json file of `dir`, sorted by file name,
// each a spec. An error names the file (and the field); two files with one name are an error.
Result<std::vector<EnvironmentSpec>> LoadEnvironmentDir(const std::string& dir);

}  // namespace corral::server
