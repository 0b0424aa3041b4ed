// Ports handed to distributed jobs (docs/distributed.md): a job gets one block of consecutive
// ports of model::kFirstRendezvousPort..kLastRendezvousPort, free on every node it runs on, which
// its processes bind (MASTER_PORT, TensorFlow workers, the JAX coordinator). corral does not bind
// them itself; it keeps two live jobs on one node from being handed the same ports. Not thread-safe
// (the controller's lock guards it).
//
// Other clusters' agents may share a host (tests, `corral dev` beside a lab's cluster): each
// cluster starts its search at its own place in the range (SearchStartFor its cluster id), so
// two clusters' first jobs on one host do not both get the first block. That makes a clash
// unlikely, not impossible: nothing here sees another cluster's ports.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "model/launcher.h"

namespace corral::server {

class RendezvousPorts {
 public:
  // Where the search for a free block starts for cluster `cluster_id`: a port of the range,
  // a multiple of kSearchStep above its first, the same for every server of the cluster.
  static int SearchStartFor(const std::string& cluster_id);
  static constexpr int kSearchStep = 10;

  // Blocks are searched for from `search_start` up, then from the range's first port.
  explicit RendezvousPorts(int search_start = model::kFirstRendezvousPort);

  // Reserves for `job` the lowest block of `count` (≥ 1) ports free on all `nodes` at or
  // above the search start, else the lowest below it.
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
  // The lowest block of `count` ports at or above `from` free on all `nodes`; nullopt if none.
  std::optional<int> FirstFreeFrom(int from, const std::vector<std::string>& nodes,
                                   int count) const;

  const int search_start_;
  std::map<JobId, Block> by_job_;
  std::map<std::string, std::map<int, int>> by_node_;  // node → block base → count
};

}  // namespace corral::server
