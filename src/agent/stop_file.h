// The stop request a task can see (CORRAL_STOP_FILE, docs/in-job.md): whenever the agent stops a
// task (a kill order: cancel, preemption, drain, fencing; or the task's time limit) it first
// writes this file, then sends SIGTERM, so that a job polling the file (or handling SIGTERM and
// reading it) knows why and how long it has to write its checkpoint.
#pragma once

#include <string>

#include "common/status.h"
#include "common/units.h"

namespace corral::agent {

// What the file says: {"reason": "...", "grace_s": N, "deadline": unix seconds}.
struct StopRequest {
  std::string reason;   // the kill's reason ("cancelled by alice", "time limit of 60 s reached")
  Seconds grace{0};     // from the request to the SIGKILL
  Seconds deadline{0};  // Unix seconds of the SIGKILL
};

std::string StopFileJson(const StopRequest& request);

// Writes the request to `path` atomically (path.tmp then a rename in the same folder: a reader
// sees no file or the whole of it), mode 0440: its folder's group (the task user's: the folder
// is setgid) reads it, nobody writes it. The folder must exist. IoError naming the path.
Status WriteStopFile(const std::string& path, const StopRequest& request);

}  // namespace corral::agent
