// Test support shared by the agent's tests: the rendezvous of one part of a two-part job.
#pragma once

#include "agent/task_setup.h"
#include "model/launcher.h"

namespace corral::agent {

// Part 1 of a job of 2 parts with `procs` processes each (ranks procs..2·procs−1), on
// 10.77.0.2 (part 0, the master) and 10.77.0.3, port 29500.
inline Distributed SecondOfTwoParts(model::Launcher launcher, int procs) {
  return Distributed{.launcher = launcher,
                     .procs_per_node = procs,
                     .node_rank = 1,
                     .nodes = 2,
                     .master_addr = "10.77.0.2",
                     .port = 29500,
                     .hosts = {"10.77.0.2", "10.77.0.3"}};
}

}  // namespace corral::agent
