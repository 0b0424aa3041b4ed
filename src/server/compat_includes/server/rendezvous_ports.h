// Temporary: job_spec.cc still includes "server/rendezvous_ports.h" and must not change until
// job_spec moves to src/protocol/ (the jobspec branch); delete this directory then.
#pragma once

#include "server/control/rendezvous_ports.h"  // IWYU pragma: export
