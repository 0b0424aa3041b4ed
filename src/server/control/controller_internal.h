// Helpers shared by the parts of the Controller (controller.cc, controller_*.cc); not for use
// outside src/server/control/. Each part brings them in with `using namespace
// controller_internal;`; helpers used by one part only stay in that part's unnamed namespace.
#pragma once

#include <string>

#include "model/states.h"

namespace corral::server::controller_internal {

using model::JobState;
using model::NodeState;
using model::TaskState;

// A state's name, for JSON and messages.
std::string Name(auto state) { return std::string(model::ToString(state)); }

}  // namespace corral::server::controller_internal
