// The elastic decisions of one scheduling pass (issue 20, docs/elastic.md), over a cluster
// state: which running elastic jobs to shrink before the pass so that pending jobs can start,
// and which to grow after it into the GPUs the pass left idle. Pure: the caller (the simulator,
// the server's controller) holds the running elastic jobs, applies each Resize through
// Scheduler::Resize in the order returned, and restarts the job's tasks at the new size.
//
// Both callers share these functions, so the simulator measures the server's rules:
//  - Before a pass, PlanRoom: GPUs above MIN are borrowed and come back whenever a pending job
//    could then start, before the pass would preempt anyone. Never below MIN, never held back
//    by the hysteresis.
//  - After a pass, PlanAfterPass: the jobs the pass started take the size the idle GPUs allow
//    (their size is chosen, not resized: no hysteresis, not counted), then the others grow under
//    ResizeRules (sched/elastic.h).
#pragma once

#include <vector>

#include "common/units.h"
#include "model/job.h"
#include "sched/cluster_state.h"
#include "sched/elastic.h"

namespace corral::sched {

// How many pending jobs, in the caller's order, PlanRoom looks at: bounds a pass's cost.
inline constexpr int kShrinkLookahead = 64;

// Wholly free GPUs per node slot (0 on nodes absent or cordoned: they take no new work).
std::vector<int> WholeFreeGpus(const ClusterState& state);

// Per node slot, whether one task of `job` may run there: present, schedulable, with GPUs of a
// model the job accepts, and its CPU and memory free. GPUs are not checked (WholeFreeGpus).
std::vector<bool> NodesAccepting(const ClusterState& state, const model::Job& job);

// True when some run holds more than its MIN: only then can PlanRoom shrink anything.
bool AnyBorrowed(const std::vector<ElasticRun>& runs);

// Before a pass: the shrinks that make room for `pending` (in the caller's order, the first
// kShrinkLookahead looked at; jobs asking no whole GPU are skipped). Each pending job in turn
// gets PlanShrink's plan for its tasks of whole GPUs (an elastic one needs its MIN: MIN GPUs
// of one task, or MIN tasks), seeing the cluster as the plans before it left it (GPUs; CPU and
// memory as they are before any shrink); a job with no plan is passed over (the pass may
// preempt for it). kNodes runs give back whole tasks above MIN (PlanShrink). Returns the resizes in
// the order decided, reason kPendingJob; a job shrunk for two pending jobs appears twice (its
// second `from` is the first `to`): apply them in order, or merge them into one from the first
// `from` to the last `to`. Empty when no run holds more than its MIN.
std::vector<Resize> PlanRoom(const ClusterState& state, std::vector<ElasticRun> runs,
                             const std::vector<model::Job>& pending);

// After a pass: `fresh` are the elastic jobs the pass started (at their MIN), `others` the rest
// of the running elastic jobs. Each job grows at most once: first the fresh ones (at_start: the
// size they start at, no hysteresis, not a resize), then the others in what is still free,
// under `rules` (grown: reason kIdleGpus). kGpus runs grow on their node into wholly free GPUs
// (PlanGrowth); then kNodes runs, smallest first (ties by id), by whole tasks on nodes that hold
// no task of the job, have GPUs of the model of its task 0's node, and room for one task's
// whole GPUs, CPU and memory (ElasticRun::task_*), to the largest size of the ladder those
// nodes allow. The pass has placed every pending job that could start, so no pending job could
// use what growth takes, except a job that waits for a limit of its own and the head job of a
// backfill reservation: growth leaves the nodes of `reserved` (per node slot, as
// Scheduler::ReservedNodes; empty: none) alone, so that it never delays the reserved start.
// Scheduler::Resize picks the nodes of a kNodes growth itself: it
// finds as many, but a later resize of the same plan may then find less (ResourceExhausted:
// the caller skips it).
struct GrowthPlan {
  std::vector<Resize> at_start;
  std::vector<Resize> grown;
};
GrowthPlan PlanAfterPass(const ClusterState& state, const std::vector<ElasticRun>& fresh,
                         const std::vector<ElasticRun>& others, const ResizeRules& rules,
                         Seconds now, const std::vector<bool>& reserved = {});

}  // namespace corral::sched
