// Replay: jobs arrive at their submit time, wait in the scheduler's queue, run for their
// recorded duration and release their GPUs. A discrete-event loop on a virtual clock around the
// same sched::Scheduler the server uses; no sleeps, no wall clock in the results except wall_ms.
//
// Order, blocking, sharing (quotas, limits, weights, fair share, reclaim) are the scheduler's own
// (sched/scheduler.h); the replay supplies the run-time estimates the scheduler asks for
// (EstimateSource) and plays out its decisions:
//  - Preemption (reclaim, 2D-LAS): the scheduler has already released the victim and queued it
//    again. By default the victim loses its run: when started again it runs its whole duration
//    from scratch, and the GPU-seconds of the lost run are counted as lost. With
//    ReplayConfig::resume it keeps its progress (as if checkpointed at the preemption, which
//    Tiresias assumes) and runs only what is left. Either way the completion planned for the
//    lost run is cancelled: each run has an attempt number, and a completion of an older attempt
//    is ignored.
//  - Fairness is measured against each project's entitlement: its weighted max-min fair share
//    of the cluster's GPUs given what every project wants now (running + pending milli-GPU).
//    Two projects of equal weight that both want more than half are each entitled to half; one
//    that wants less is entitled to what it wants and the rest goes to the other.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "common/status.h"
#include "model/node.h"
#include "predict/runtime_predictor.h"
#include "sched/elastic.h"
#include "sched/scheduler.h"
#include "sim/trace.h"

namespace corral::sim {

// Where the scheduler's run-time estimates (SchedulerConfig::estimate: QSSF keys at submit,
// reservations and backfill at start) come from.
enum class EstimateSource {
  kOracle,     // the job's recorded duration (what is left of it after a resumed preemption)
  kPredicted,  // a predict::RuntimePredictor that observes each job's run time when it ends
  // What a live cluster knows without history: sched::DefaultEstimate of the job's time limit,
  // else its one-hour default. The trace's expected_duration is hidden from this estimate: the
  // readers set it to the recorded duration, an oracle. (SJF still orders by it: SJF is the
  // oracle order by definition.)
  kNone,
};

// "oracle" | "predicted" | "none"
Result<EstimateSource> ParseEstimateSource(std::string_view name);
std::string_view EstimateSourceName(EstimateSource source);

struct ReplayConfig {
  std::string policy = "fgd";
  sched::QueueOrder order = sched::QueueOrder::kFifo;
  sched::Blocking blocking = sched::Blocking::kSkip;
  // Quotas, limits, weights, fair-share parameters and reclaim. The default has no quotas, so
  // nothing is borrowed or reclaimed.
  sched::SharingConfig sharing;
  EstimateSource estimate = EstimateSource::kOracle;
  // 2D-LAS queue thresholds (sched::SchedulerConfig::las_thresholds_gpu_s).
  std::vector<int64_t> las_thresholds_gpu_s = sched::SchedulerConfig{}.las_thresholds_gpu_s;
  sched::GangPlacement gang_placement = sched::GangPlacement::kTogether;
  predict::PredictorConfig predictor;  // for EstimateSource::kPredicted
  // A preempted job keeps its progress (true) or restarts from scratch (false, the default).
  // Required by the orders that preempt by remaining run (sched::PreemptsByRemaining): oracle
  // SRTF and SRSF resume preempted jobs without penalty (issue 21).
  bool resume = false;
  // Re-packing (sched::SchedulerConfig::repack): running jobs move between nodes to make room.
  // A move is a preemption whose victim starts again in the same pass, so it needs `resume`.
  bool repack = false;
  // Besides a pass at every arrival and every end, one pass this often (seconds) while jobs
  // wait; 0: only at arrivals and ends. The server passes at least every second. A pass without
  // an arrival or an end can still decide something: a reclaim of GPUs that the previous pass
  // itself had lent (the scheduler does not preempt jobs in the pass that started them), a
  // 2D-LAS preemption of a job whose service crossed a threshold since.
  int64_t pass_interval_s = 0;
  uint64_t seed = 0;
  // Number of timeline samples over the trace's arrival span (the timeline has one row per
  // sample interval in which anything happened).
  int timeline_points = 500;
  // Track fragmentation over time (costs a FragmentationMeter evaluation per changed node).
  bool track_fragmentation = true;
  // Measure estimated starts (ReplayResult::eta): after each pass with arrivals, the estimated
  // start (sched::Scheduler::Queue) of every arrival still pending among the queue's first
  // `eta_queue_rows` jobs, as the server shows them; 0: not measured. Each measuring pass costs
  // one shadow run over that many jobs.
  int64_t eta_queue_rows = 0;

  // Elastic jobs and checkpoints (issue 20, docs/elastic.md).
  // This share of the one-task jobs asking >= 1 whole GPU, drawn with `seed`, is elastic: MIN =
  // max(1, request / 2), MAX = 2 × request capped at the largest node's GPUs. It is submitted
  // at MIN, sized at its start to what the pass left idle, grown into idle GPUs and shrunk for
  // pending jobs (sched/elastic.h); its recorded duration is its work at the requested size,
  // and it runs at (GPUs / request)^alpha of that speed. Multi-task jobs stay rigid.
  double elastic_share = 0;
  sched::ResizeRules resize;  // alpha, growth hysteresis, restart cost, budget
  // Every job saves a checkpoint this often (seconds of its run); 0: never. A preempted job
  // keeps its progress up to its last checkpoint and loses the rest (lost_gpu_s); `resume`
  // still keeps everything.
  int64_t checkpoint_interval_s = 0;
  // A victim told to checkpoint before it stops (checkpoint-aware preemption): it keeps all its
  // progress and the GPUs it holds for the save, at most this long, count as lost. 0: today's
  // SIGTERM and kill, which saves nothing.
  int64_t checkpoint_grace_s = 0;
  sched::VictimOrder victims = sched::VictimOrder::kPriority;
  int64_t min_run_before_preemption_s = 0;
};

// Mean and nearest-rank percentiles of a sample, in seconds.
struct Distribution {
  double mean = 0, p50 = 0, p90 = 0, p95 = 0, p99 = 0;
};
Distribution Summarize(std::vector<double> values);

// The cluster at one point of virtual time.
struct ReplaySample {
  int64_t time_s = 0;
  double gpu_alloc_pct = 0;  // allocated milli-GPU, % of capacity
  double frag_pct = 0;       // fragmented free milli-GPU, % of capacity
  int64_t pending = 0;
  int64_t running = 0;
  // Per project, in ReplayResult::projects order: allocated milli-GPU and entitlement, % of
  // capacity.
  std::vector<double> project_alloc_pct;
  std::vector<double> project_entitled_pct;
};

// One job's outcome. Times are seconds of virtual time; -1 when it did not happen.
struct ReplayJob {
  JobId id;
  int project = 0;  // index into ReplayResult::projects
  int64_t submit_s = 0;
  int64_t first_start_s = -1;
  int64_t start_s = -1;  // of the last run (the one that completed, if any)
  int64_t end_s = -1;
  int preemptions = 0;
  // The earliest start a backfill reservation promised it (sched::Scheduler::ReservedStart()
  // after any pass); none if it never held the reservation.
  std::optional<int64_t> reserved_start_s;
  // Its estimated start just after it arrived, when it had to wait and got one
  // (ReplayConfig::eta_queue_rows).
  std::optional<int64_t> estimated_start_s;
};

// How far estimated starts were from the actual ones (ReplayConfig::eta_queue_rows): each job
// that waited after its arrival's pass, its estimate then against its first start.
struct EtaResult {
  int64_t waited = 0;            // jobs still pending after the pass at their arrival
  int64_t estimated = 0;         // ... that got an estimate (within the rows, fits the cluster)
  int64_t scored = 0;            // ... and started
  Distribution abs_error_s;      // |estimated − first start|, over the scored jobs: mean = MAE
  double started_early_pct = 0;  // scored jobs that started before their estimate, %
};

// What one project got. gpu_s and lost_gpu_s are GPU-seconds (milli-GPU × s / 1000).
struct ProjectResult {
  std::string project;
  double weight = 1;
  int64_t jobs = 0;
  int64_t completed = 0;
  Distribution jct_s;    // end − submit, completed jobs
  Distribution queue_s;  // first start − submit, started jobs
  double gpu_s = 0;      // allocated, lost runs included
  int64_t preemptions = 0;
  double lost_gpu_s = 0;  // allocated to runs that preemption threw away (0 with resume)
  // Seconds from its first submit to the first moment (after a scheduling pass) at which it
  // held >= 90% of its entitlement; none if that never happened.
  std::optional<int64_t> entitlement_90_s;
  // Its allocation / entitlement, time-weighted over the contended time (see FairnessResult)
  // in which it wanted GPUs; 0 if it never did.
  double share_of_entitlement_mean = 0;
};

// Fairness under contention: the time in which at least two projects want GPUs and together
// want more than the cluster has.
struct FairnessResult {
  int64_t contended_s = 0;
  // Jain's index (Σx)² / (n Σx²) of x = allocation / entitlement over the n projects that want
  // GPUs, time-weighted over the contended time: 1 when every project holds the same fraction of
  // its entitlement, 1/n when one holds everything. 0 when there was no contention.
  double jain_mean = 0;
  double gpu_alloc_pct_mean = 0;  // the cluster's allocation during the contended time
};

struct ReplayResult {
  std::string policy;
  int64_t jobs = 0;
  int64_t completed = 0;
  int64_t unfinished = 0;         // still pending when nothing else could happen (never fit)
  Distribution jct_s;             // end − submit, completed jobs
  Distribution queue_s;           // first start − submit, started jobs
  int64_t makespan_s = 0;         // last end − first submit
  double gpu_alloc_pct_mean = 0;  // time-weighted over the makespan
  // Time-weighted from the first to the last arrival, while work keeps coming (the makespan's
  // mean also covers the drain at the end, where the longest jobs run alone); 0 when all jobs
  // arrive at once.
  double gpu_alloc_pct_arrivals = 0;
  // Time-weighted over the makespan; none when ReplayConfig::track_fragmentation is off.
  std::optional<double> frag_pct_mean;
  double gpu_s = 0;  // GPU-seconds allocated, lost runs included
  int64_t preemptions = 0;
  double lost_gpu_s = 0;
  // Over the completed jobs: their mean recorded run time (a floor no order can beat on mean
  // JCT), and the mean delay, jct_s.mean − run_s_mean: time waiting, preempted included (an
  // elastic job's speed-up or slow-down counts here too).
  double run_s_mean = 0;
  double delay_s_mean = 0;
  // Elastic jobs (ReplayConfig::elastic_share): how many, and their resizes (growth into idle
  // GPUs, shrinks for pending jobs; sizes chosen at a start are not resizes).
  double elastic_share = 0;  // as configured, and the alpha it ran with
  double elastic_alpha = 0;
  int64_t elastic_jobs = 0;
  int64_t grows = 0;
  int64_t shrinks = 0;
  // Starts of multi-task jobs (gangs): how many, the nodes they spanned on average, and how
  // many had every task under one rack label (nodes without one count as racks of their own).
  int64_t gang_starts = 0;
  double gang_nodes_mean = 0;
  int64_t gang_starts_one_rack = 0;
  // In order of first appearance in the trace; their sums are the totals above.
  std::vector<ProjectResult> projects;
  FairnessResult fairness;
  std::optional<EtaResult> eta;         // when ReplayConfig::eta_queue_rows > 0
  std::vector<ReplayJob> job_outcomes;  // in trace order
  std::vector<ReplaySample> timeline;
  double wall_ms = 0;
};

// The rules between a config's fields that RunReplay checks first, named by their CLI flags:
// an order that preempts by remaining run (srtf, srsf), and `repack`, need `resume`.
Status CheckReplayConfig(const ReplayConfig& config);

// Runs one replay. Errors: unknown policy, invalid sharing config or LAS thresholds, invalid
// nodes, duplicate job ids, CheckReplayConfig's; Internal if the scheduler preempts a job that is
// not running.
Result<ReplayResult> RunReplay(const std::vector<model::Node>& nodes, const Trace& trace,
                               const ReplayConfig& config);

// Scales a cluster by `factor`: below 1 keeps round(factor × n) nodes chosen by a seeded draw
// (in their original order); above 1 adds copies named "<name>-c<k>". Errors: factor not in
// (0, 1000], or more than 1,000,000 nodes.
Result<std::vector<model::Node>> ScaleNodes(const std::vector<model::Node>& nodes, double factor,
                                            uint64_t seed);

}  // namespace corral::sim
