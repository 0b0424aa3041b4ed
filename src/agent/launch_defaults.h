// Constants both runtimes apply to a launch: the process runtime (process_runtime.h) on the host,
// and the container engine's command line (container_engine.h) in the image.
#pragma once

namespace corral::agent {

// The shell of a launch with `shell`: argv becomes `/bin/sh -c argv[0] argv[1..]`, the host's
// /bin/sh for a process task and the image's for a container task.
inline constexpr char kShell[] = "/bin/sh";

// The PATH the agent's children get when the agent itself has none (or an empty one): tasks of
// the process runtime, the search for their argv[0], and the container engine's processes.
inline constexpr char kDefaultPath[] =
    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

}  // namespace corral::agent
