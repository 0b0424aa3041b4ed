// The jobs' checkpoint folders under the server's --checkpoint-root (docs/in-job.md,
// "Checkpoint folders"): <root>/<job id>, one per job, which JobRetention removes once the job
// ended longer ago than --checkpoint-retention.
//
// Safe deletion: only entries of the root named by a job id (digits), and nothing outside them:
// the root itself may be a symbolic link (followed when opened); every step below it goes through a
// file descriptor opened without following symbolic links (a link inside a folder is removed, never
// what it points to; a folder swapped for a link while it is removed fails with an error rather
// than be followed), and never onto another file system (a mount inside a folder is left, with an
// error, like rm --one-file-system). A folder's names are read before they are removed, a bounded
// batch at a time, until it is empty.
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"

namespace corral::server {

// The job ids the entries of `root` are named by (names of 1..18 digits, no leading zero),
// ascending, above `after`, at most `limit` (the lowest of those). Other entries are left out.
// NotFound when the root is missing; other errors name the root.
Result<std::vector<JobId>> CheckpointFolderJobs(const std::string& root, JobId after, size_t limit);

// Removes <root>/<job id> and everything under it (at most kMaxCheckpointDepth levels deep),
// without following symbolic links; a missing folder is no error. Errors name the path.
inline constexpr int kMaxCheckpointDepth = 64;
Status RemoveCheckpointFolder(const std::string& root, JobId job);

}  // namespace corral::server
