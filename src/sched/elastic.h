// Elastic jobs (issue 20): a job that runs on any size of a GPU range and that the scheduler
// resizes. Pure decisions, no state of their own: the caller (the simulator today, the server
// later) holds the running elastic jobs and the free GPUs, asks which resizes to make, and
// applies them through Scheduler::Resize.
//
// The model:
//  - A range MIN..MAX (whole GPUs) and its ladder of sizes: MIN, every power of two strictly
//    between MIN and MAX, and MAX; or, with a step, MIN, MIN + step, ... and MAX.
//  - GPUs above MIN are borrowed: they go back (the job shrinks toward MIN) whenever a pending
//    job could then start, before any rigid job is preempted. MIN is protected like a rigid job.
//  - Growth takes only GPUs no pending job could use (the caller asks after its scheduling pass
//    has placed every pending job that can start). A range of GPUs (model::ElasticUnit::kGpus)
//    grows on the job's own node; a range of nodes (kNodes) by whole tasks on nodes holding no
//    task of the job. A resize restarts the job's tasks as a new generation.
//  - Throughput grows as GPUs^alpha (docs/elastic.md justifies alpha = 0.8).
//  - Hysteresis, for growth: no growth sooner than `min_interval` after the job's last resize
//    (or start), none once the job has used its `budget` of resizes, and none unless the time it
//    saves exceeds `restart_cost` (the progress a resize loses). Shrinks for a pending job are
//    never held back: borrowed GPUs must come back promptly; growth's interval bounds how often
//    a job can oscillate (at most one grow/shrink pair per interval).
#pragma once

#include <optional>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"
#include "model/job.h"
#include "sched/cluster_state.h"

namespace corral::sched {

// A range MIN..MAX (GPUs or nodes) with its ladder of sizes.
class ElasticRange {
 public:
  // step 0: powers of two between MIN and MAX. Errors (InvalidArgument naming the field):
  // min < 1, max < min, max > kMaxGpus, step < 0.
  static Result<ElasticRange> Create(int min_gpus, int max_gpus, int step = 0);
  // The range of a job's bounds (validated by model::Validate; same errors otherwise).
  static Result<ElasticRange> Of(const model::ElasticBounds& bounds);
  static constexpr int kMaxGpus = 4096;

  int min() const { return min_; }
  int max() const { return max_; }
  int step() const { return step_; }
  // The ladder, ascending: MIN first, MAX last.
  const std::vector<int>& Sizes() const { return sizes_; }
  // The largest size <= `gpus` (MIN when gpus < MIN).
  int AtMost(int gpus) const;

 private:
  ElasticRange(int min_gpus, int max_gpus, int step);
  int min_ = 1, max_ = 1, step_ = 0;
  std::vector<int> sizes_;
};

struct ResizeRules {
  double alpha = 0.8;         // throughput ∝ GPUs^alpha, in (0, 1]
  Seconds min_interval{300};  // no growth sooner after the last resize or the start
  Seconds restart_cost{60};   // progress lost per resize (the restart from a checkpoint)
  int budget = 20;            // resizes a job may make in its life (growth only stops)
};
// Names the field: "alpha: must be in (0, 1]".
Status Validate(const ResizeRules& rules);

// A running elastic job as the decisions see it. Sizes are in its unit: GPUs of its one task
// (kGpus) or tasks, one per node (kNodes).
struct ElasticRun {
  JobId job;
  ElasticRange range;
  model::ElasticUnit unit = model::ElasticUnit::kGpus;
  int size = 0;                  // its size now
  std::vector<NodeIndex> nodes;  // the node of each task, in task order (kGpus: one)
  int task_gpus = 0;             // kNodes: the whole GPUs each task holds
  Seconds last_resize{0};        // its last resize, or its start
  int resizes = 0;               // made so far
  // Seconds of work left at its current size (estimated): what growth would speed up.
  double remaining_s = 0;
  // kNodes: the CPU and memory each task holds (growth needs them free on a new node; 0: not
  // checked).
  CpuMilli task_cpu{0};
  MemoryMib task_memory{0};
};

enum class ResizeReason {
  kIdleGpus,    // grown into GPUs no pending job could use
  kPendingJob,  // shrunk so that a pending job can start
};
std::string_view ResizeReasonName(ResizeReason reason);  // "idle-gpus" | "pending-job"

// A job's size from -> to, in its unit.
struct Resize {
  JobId job;
  int from = 0, to = 0;
  ResizeReason reason = ResizeReason::kIdleGpus;
};

// One resize per job, from its first `from` to its last `to`, in the order of first mention
// (a job shrunk for two pending jobs in turn).
std::vector<Resize> MergeResizes(const std::vector<Resize>& resizes);

// Throughput at `to` GPUs relative to `from`: (to / from)^alpha.
double Speedup(int from, int to, double alpha);

// True when growing `run` to `to` GPUs at `now` passes the hysteresis: the interval since its
// last resize, the budget, and a saving (remaining × (1 − 1 / Speedup)) above the restart cost.
bool GrowthAllowed(const ElasticRun& run, int to, const ResizeRules& rules, Seconds now);

// The GPUs `run` gives back, per node, when it shrinks to `to`: kGpus, size - to on its node;
// kNodes, task_gpus on the node of each task to..size-1. As (node, GPUs) pairs.
std::vector<std::pair<NodeIndex, int>> Freed(const ElasticRun& run, int to);

// Growth into idle GPUs of the kGpus runs (kNodes runs: sched/elastic_plan.h): `free_gpus[n]`
// is the number of wholly free GPUs on node n (after the pass placed every pending job that
// can start). Jobs are served smallest first (a GPU speeds a small job up most under a concave
// curve), ties by id; each grows once, to the largest size of its ladder that its node's free
// GPUs allow and GrowthAllowed accepts. Returns the resizes in that order; `free_gpus` is not
// changed.
std::vector<Resize> PlanGrowth(const std::vector<ElasticRun>& runs, std::vector<int> free_gpus,
                               const ResizeRules& rules, Seconds now);

// Shrinks that make room for a pending job of `tasks` tasks of `need` whole GPUs each:
// `free_gpus[n]` as above, `accepts[n]` whether the job may run on node n. Task by task, picks
// the node that needs the fewest GPUs taken back (ties: the fewest freed elsewhere by kNodes
// runs shrinking, then lower index), shrinks its elastic jobs
// with the most borrowed GPUs there first, each down its ladder only as far as still needed,
// never below MIN. Borrowed GPUs on a node: a kGpus run's GPUs above MIN; a kNodes run's task
// there when its index is MIN or more (taking it shrinks the job to the ladder's size at or
// below that index, releasing every task from there on, on whatever nodes they run). nullopt when
// some task finds no node that way (the caller then falls back to preemption); no resizes when
// there is room already.
struct ShrinkPlan {
  std::vector<NodeIndex> nodes;  // per task, where it fits once the resizes are made
  std::vector<Resize> resizes;   // at most one per job, in the order decided
};
std::optional<ShrinkPlan> PlanShrink(const std::vector<ElasticRun>& runs,
                                     const std::vector<int>& free_gpus,
                                     const std::vector<bool>& accepts, int need, int tasks = 1);

}  // namespace corral::sched
