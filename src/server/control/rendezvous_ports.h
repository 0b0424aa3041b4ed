// Ports handed to distributed jobs (docs/distributed.md): a job gets one block of consecutive
// ports of model::kFirstRendezvousPort..kLastRendezvousPort, free on every node it runs on, which
// its processes bind (MASTER_PORT, TensorFlow workers, the JAX coordinator). corral does not bind
// them itself; it keeps two live jobs on one node from being handed the same ports. Not thread-safe
// (the controller's lock guards it).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/launcher.h"

namespace corral::server {

class RendezvousPorts {
 public:
  // Reserves for `job` the lowest block of `count` (≥ 1) ports free on all `nodes`.
  // Errors: ResourceExhausted when no block is free; AlreadyExists when the job holds one.
  Result<int> Reserve(JobId job, const std::vector<std::string>& nodes, int count);
  // Records a block handed out before (the server rebuilding its state after a restart).
  // Errors: a block outside the range or overlapping another job's, or the job already
  // holding one.
  Status Restore(JobId job, const std::vector<std::string>& nodes, int base, int count);
  // Frees the job's block (nothing when it holds none).
  void Release(JobId job);

 private:
  struct Block {
    int base = 0;
    int count = 0;
    std::vector<std::string> nodes;
  };
  void Take(JobId job, Block block);

  std::map<JobId, Block> by_job_;
  std::map<std::string, std::map<int, int>> by_node_;  // node → block base → count
};

}  // namespace corral::server
