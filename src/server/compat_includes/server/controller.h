// Temporary: job_spec_test.cc still includes "server/controller.h" and must not change until
// job_spec moves to src/protocol/ (the jobspec branch); delete this directory then.
#pragma once

#include "server/control/controller.h"  // IWYU pragma: export
