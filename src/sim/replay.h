// Replay: jobs arrive at their submit time, wait in the scheduler's queue, run for their
// recorded duration and release their GPUs. A discrete-event loop on a virtual clock around the
// same sched::Scheduler the server uses; no sleeps, no wall clock in the results except wall_ms.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "common/status.h"
#include "model/node.h"
#include "sched/scheduler.h"
#include "sim/trace.h"

namespace corral::sim {

struct ReplayConfig {
  std::string policy = "fgd";
  sched::QueueOrder order = sched::QueueOrder::kFifo;
  sched::Blocking blocking = sched::Blocking::kSkip;
  uint64_t seed = 0;
  // Number of timeline samples over the trace's arrival span (the timeline has one row per
  // sample interval in which anything happened).
  int timeline_points = 500;
  // Track fragmentation over time (costs a FragmentationMeter evaluation per changed node).
  bool track_fragmentation = true;
};

// Mean and nearest-rank percentiles of a sample, in seconds.
struct Distribution {
  double mean = 0, p50 = 0, p95 = 0, p99 = 0;
};
Distribution Summarize(std::vector<double> values);

// The cluster at one point of virtual time.
struct ReplaySample {
  int64_t time_s = 0;
  double gpu_alloc_pct = 0;  // allocated milli-GPU, % of capacity
  double frag_pct = 0;       // fragmented free milli-GPU, % of capacity
  int64_t pending = 0;
  int64_t running = 0;
};

struct ReplayResult {
  std::string policy;
  int64_t jobs = 0;
  int64_t completed = 0;
  int64_t unfinished = 0;         // still pending when nothing else could happen (never fit)
  Distribution jct_s;             // end − submit, completed jobs
  Distribution queue_s;           // start − submit, started jobs
  int64_t makespan_s = 0;         // last end − first submit
  double gpu_alloc_pct_mean = 0;  // time-weighted over the makespan
  double frag_pct_mean = 0;       // time-weighted over the makespan
  std::vector<ReplaySample> timeline;
  double wall_ms = 0;
};

// Runs one replay. Errors: unknown policy, invalid nodes, duplicate job ids.
Result<ReplayResult> RunReplay(const std::vector<model::Node>& nodes, const Trace& trace,
                               const ReplayConfig& config);

// Scales a cluster by `factor`: below 1 keeps round(factor × n) nodes chosen by a seeded draw
// (in their original order); above 1 adds copies named "<name>-c<k>". Errors: factor not in
// (0, 1000], or more than 1,000,000 nodes.
Result<std::vector<model::Node>> ScaleNodes(const std::vector<model::Node>& nodes, double factor,
                                            uint64_t seed);

}  // namespace corral::sim
