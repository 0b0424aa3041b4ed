// The scheduler: a queue of pending jobs, the cluster state, and one placement policy. The
// server and the simulator drive it with the same calls — nodes come and go, jobs are submitted,
// cancelled and finish — and ask it for decisions with Schedule(now). Pure and deterministic: the
// same calls with the same seed give the same decisions, byte for byte. Time only enters through
// the `now` arguments.
//
// Order (QueueOrder): FIFO; priority (FIFO within a priority); fair share (priority classes
// first, then the score fair_share_weight × F(project) + age_weight × waited / age_unit, see
// sched/sharing.h); SJF (shortest expected_duration first: an oracle in traces); QSSF (smallest
// estimated service first: estimated duration × GPUs, estimates from config.estimate); 2D-LAS
// (Tiresias: jobs in queues by the GPU-seconds they attained in earlier runs, least first, FIFO
// within a queue, discretised by las_thresholds_gpu_s; preemptive: a waiting job preempts
// running jobs whose attained service, counting their current run, puts them in a later
// queue; the victims keep their attained service and are queued again); SRTF (shortest
// remaining run time first: the estimate of what is left, an oracle with the simulator's
// recorded durations) and SRSF (smallest remaining service first: that remaining time × GPUs),
// both preemptive: a waiting job preempts running jobs expected to need more than it does
// (RemainingOf), the most first; victims are queued again with what they have left to run.
// SRTF and SRSF assume a preempted job resumes without loss, so they are simulator-only
// (docs/decisions.md): the server's policy file refuses them.
//
// Passing (Blocking): with kSkip a job that does not fit is skipped and later jobs may start;
// with kStrict the first job that does not fit stops the pass; with kBackfill (EASY backfill) the
// first job that does not fit gets a reservation at the earliest time it could start if running
// jobs ended at their expected ends (ExpectedEndOf: one that outlived its estimate at its time
// limit, or at the next doubling of its run), and later jobs start now only if they do not delay
// it: they end (by their estimate) before the reservation, or use none of its nodes.
//
// Sharing passes: jobs within their project's quota go first; jobs that would borrow (run beyond
// their quota) are considered only after, so capacity freed in a pass goes to quota owners
// before it is lent.
//
// Sharing (SharingConfig): a project past its hard limit waits; use beyond its quota is marked
// borrowed. With reclaim on, a job of a project whose quota has room but which does not fit
// preempts borrowed jobs of other projects — lowest priority, most over quota, most recently
// started first, and only those needed — which go back to the queue (Decisions::preemptions).
//
// Elastic jobs (model::Job::elastic, docs/elastic.md): a pending one asks for its MIN (a
// preempted one is queued again at MIN); Resize changes a running one's size; only its MIN
// counts against its project's quota, its GPUs above MIN being borrowed (BorrowedJobs).
//
// Arrays: the elements of an array with a running limit (model::Job::array_max_running) never
// run more than that many at once; the others wait with kReasonArrayLimit.
//
// Gang: a job's tasks are placed one by one; if one fails, the ones placed are released and
// the job waits (all or nothing).
//
// Cost: pending jobs are grouped by (project, shape), and the elements of an array with a running
// limit by (project, shape, array), so that an array at its limit holds back only itself. Within a
// pass the state only fills up, so once a shape fails, later jobs of that shape are not tried;
// across passes a failed shape is not retried until capacity has been freed (unless a reservation
// or a reclaim may need it). A pass therefore costs O(groups + jobs started) placements, plus, when
// blocked with kBackfill, one shadow run over the running jobs.
#pragma once

#include <deque>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "common/ids.h"
#include "common/rng.h"
#include "model/job.h"
#include "sched/cluster_state.h"
#include "sched/gang_placement.h"
#include "sched/pending_reason.h"
#include "sched/placement_policy.h"
#include "sched/placer.h"
#include "sched/sharing.h"

namespace corral::sched {

enum class QueueOrder { kFifo, kPriority, kFairShare, kSjf, kQssf, kLas, kSrtf, kSrsf };
enum class Blocking { kSkip, kStrict, kBackfill };

// "fifo" | "priority" | "fairshare" | "sjf" | "qssf" | "las" | "srtf" | "srsf"
Result<QueueOrder> ParseQueueOrder(std::string_view name);
std::string_view QueueOrderName(QueueOrder order);
// Whether an order preempts running jobs by their expected remaining run (kSrtf, kSrsf).
bool PreemptsByRemaining(QueueOrder order);
// "skip" | "strict" | "backfill"
Result<Blocking> ParseBlocking(std::string_view name);

// How reclaim picks its victims among the borrowed jobs of other projects.
enum class VictimOrder {
  kPriority,  // lowest priority, then most over quota, then most recently started
  // Lowest priority, then least work lost per GPU freed (LostWorkOf / GPUs: the time since the
  // last checkpoint), then most recent: victims are taken until the job fits, so the cheapest
  // GPUs go first.
  kLeastLostWork,
};
// "priority" | "least-lost-work"
Result<VictimOrder> ParseVictimOrder(std::string_view name);
std::string_view VictimOrderName(VictimOrder order);

// How long a job will run once started (> 0). Must be deterministic.
using DurationEstimator = std::function<Seconds(const model::Job&)>;
// The default estimate: the job's time limit, else its expected_duration, else one hour.
Seconds DefaultEstimate(const model::Job& job);

struct SchedulerConfig {
  std::string policy = "fgd";
  QueueOrder order = QueueOrder::kFifo;
  Blocking blocking = Blocking::kSkip;
  uint64_t seed = 0;
  SharingConfig sharing;
  DurationEstimator estimate;  // empty: DefaultEstimate; capped by the job's time limit
  // 2D-LAS (kLas): ascending attained-service thresholds in GPU-seconds; k thresholds make k+1
  // queues, queue 0 (least service) first.
  std::vector<int64_t> las_thresholds_gpu_s = {3600};
  GangPlacement gang_placement = GangPlacement::kTogether;  // see sched/gang_placement.h
  VictimOrder victims = VictimOrder::kPriority;
  // A running job is no reclaim victim before it has run this long (since its start or resize).
  Seconds min_run_before_preemption{0};
  // Re-packing: a job that fits no node now may move running one-node jobs, started before
  // this pass, off the nodes it could use (model, runtime, size, taking work) that hold the
  // fewest GPUs, until it fits; the jobs it then does not need stay, and every job it needs
  // must fit elsewhere at once (else nothing moves), without delaying a backfill reservation.
  // A moved job keeps its run (start, place in the start order that quotas count, expected
  // end) and is no victim for the rest of the pass. A move is reported as a Preemption and a
  // JobStart of the same job in one Decisions: free only where a stopped job resumes without
  // loss. Create does not check that: the caller must guarantee it (the simulator refuses
  // --repack without --resume). Tried before the order's own preemptions, once per shape and
  // pass.
  bool repack = false;
};

// A job the scheduler decided to start: one allocation per task, in task-index order.
struct JobStart {
  JobId job;
  std::vector<Allocation> tasks;
  bool borrowed = false;  // beyond its project's quota when it started: preemptible
};

// How every Preemption::reason starts ("preempted for job 12 of project ...").
inline constexpr char kPreemptedReasonPrefix[] = "preempted for job ";

// A running job stopped to give its GPUs back to a project under its quota. The scheduler has
// already released its allocations and queued it again (same submit time).
struct Preemption {
  JobId job;
  JobId for_job;
  std::string reason;
  double lost_work_gpu_s = 0;  // the victim's LostWorkOf when it was stopped
};

struct Decisions {
  std::vector<Preemption> preemptions;  // to stop before the starts that need their GPUs
  std::vector<JobStart> starts;
};

// One pending job in queue order, with why it waits and when it is expected to start.
struct QueueEntry {
  JobId job;
  PendingReason reason;
  std::optional<Seconds> estimated_start;  // none when it cannot start even on an idle cluster
};

// The run time a job is planned for from its `predicted` one: at least 1 s, and never beyond its
// `time_limit` when it has one (> 0). The scheduler's plans and the job view's prediction both
// use it.
Seconds PlannedRun(Seconds predicted, std::optional<Seconds> time_limit);

// What a running job's expected end rests on (ExpectedEndOf).
enum class EndBasis {
  kPlanned,    // start + its planned run: it has not outlived it
  kTimeLimit,  // it outlived its planned run: start + its time limit
  kDoubling,   // it outlived its planned run and its limit (or has none): start + the longer of
               // the two, doubled as often as needed to lie after now
};

struct ExpectedEnd {
  Seconds end{0};  // always after the `now` it was computed at
  EndBasis basis = EndBasis::kPlanned;
};

// When a job running since `start`, planned to run `planned` (PlannedRun), is expected to end,
// seen at `now` (>= start). Always after `now`, so no reservation rests on a job ending this
// instant; and it never slides with the clock: it changes only when `now` crosses it, and then
// to a later bound that holds until crossed in turn (docs/prediction.md, "Estimated starts").
// The scheduler's plans and the job view's run-time estimate both use it.
ExpectedEnd ExpectedEndOf(Seconds start, Seconds planned, std::optional<Seconds> time_limit,
                          Seconds now);

class Scheduler {
 public:
  // Errors: unknown policy name, invalid sharing config.
  static Result<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config,
                                                   const PolicyContext& context);

  // Applies another order, blocking mode, sharing config and estimator; the placement policy
  // and seed stay. Pending jobs are re-ordered, running jobs keep running (their quota buckets
  // are recomputed). Errors: invalid sharing config, another placement policy (nothing changes).
  Status Reconfigure(const SchedulerConfig& config);
  // Replaces the placement policy's typical tasks (fgd's and best's workload profile); the rest
  // of the context given to Create (BestParams) stays. A new policy of the same name replaces
  // the old one and every cached score is dropped, so later placements score against
  // `typical_tasks`; running jobs stay where they are. Cost: the policy's construction
  // (O(typical tasks)) and one score per (node class, task shape) as they are met again.
  // Errors (nothing changes): Internal when the new policy's NeedsTaskKinds or
  // ScoreFallsWithFreeCapacity differs from the old one's (the cluster state was built for
  // them, placer.h).
  Status SetTypicalTasks(std::vector<TypicalTask> typical_tasks);
  // Whether the placement policy scores against typical tasks (PolicyUsesWorkloadProfile: fgd,
  // best): when not, SetTypicalTasks changes no decision.
  bool UsesWorkloadProfile() const;
  // The context the policy places with: Create's, with the last SetTypicalTasks's tasks.
  const PolicyContext& policy_context() const { return context_; }

  Result<NodeIndex> AddNode(const model::Node& node);
  // Removes a node (its allocations go with it) and returns, in id order, the running jobs that
  // had a task there, for the caller to stop, then Finish (which releases their other tasks:
  // those may run on until stopped). Errors: unknown node.
  Result<std::vector<JobId>> RemoveNode(std::string_view name);
  // Cordon (false) or uncordon (true) a node. Errors: unknown node.
  Status SetSchedulable(std::string_view name, bool schedulable);
  // Sets the CPU and memory a node offers, its running tasks staying
  // (ClusterState::ResizeNode's errors; NotFound naming an unknown node).
  Status ResizeNode(std::string_view name, CpuMilli cpu, MemoryMib memory);

  // Queues a validated job; the scheduler keeps it (pass an rvalue to spare a copy). Errors:
  // invalid job, duplicate id.
  Status Submit(model::Job job);
  // Removes a pending job, or releases a running one. Errors: unknown job.
  Status Cancel(JobId job);
  // A running job ended: releases its allocations. Errors: unknown or not running.
  Status Finish(JobId job);
  // A running job saved a checkpoint at `at`: what it would lose if preempted later counts
  // from then (LostWorkOf). Errors: not running.
  Status NoteCheckpoint(JobId job, Seconds at);
  // GPU-seconds a running job would lose if stopped at `now` without another checkpoint: its
  // GPUs × the time since its last checkpoint, or since its start when it never made one
  // since. 0 for a job not running.
  double LostWorkOf(JobId job, Seconds now) const;
  // Restarts a running elastic job (model::Job::elastic) at size `to` in its unit, as a new
  // generation (sched/elastic_plan.h decides when):
  //  - kGpus, on the same node: a shrink keeps its lowest-indexed GPUs, a growth adds the
  //    node's lowest-indexed wholly free ones;
  //  - kNodes, `to` tasks: a shrink keeps tasks 0..to-1 and releases the rest; a growth keeps
  //    them all and places tasks old..to-1, all or none, with the same per-task resources, each
  //    on a node holding no task of the job (the policy picks each node in turn, as for a lone
  //    task).
  // Its copy of the job gets the new size (resources.gpus or tasks); it keeps its place in
  // quota order; its run (estimates, lost work, min-run-before-preemption) starts at `now`.
  // Errors: NotFound (not running), InvalidArgument (not elastic, or `to` outside its range),
  // ResourceExhausted (a growth that does not fit; nothing changes).
  Status Resize(JobId job, int to, Seconds now);
  // Resize in two steps, for a caller that must do more before the resize may happen:
  // PlanResize returns the allocations Resize would give the job (its errors), changing
  // nothing; ApplyResize makes them the job's as Resize does, and must be given what
  // PlanResize returned with nothing changed in the scheduler since. Not applying a plan
  // leaves the run as it was (its allocations, start and checkpoint). ApplyResize's errors:
  // NotFound (not running), InvalidArgument (not elastic, no tasks).
  Result<std::vector<Allocation>> PlanResize(JobId job, int to);
  Status ApplyResize(JobId job, std::vector<Allocation> tasks, Seconds now);
  // Re-establishes a job that is already running since `started` with the allocations it holds
  // (the server rebuilding its state after a restart). Errors: invalid job, known id, an
  // allocation that does not fit (nothing is applied then).
  Status Adopt(const model::Job& job, const std::vector<Allocation>& tasks, Seconds started);

  // Notes that the estimator's answers may have changed (the run-time predictor learned one
  // more duration). QSSF orders by estimates, so a pass re-keys the pending jobs with what is
  // known then, once one change per kRekeyShare pending jobs has been noted: re-keying costs
  // one estimate per pending job, so this stays O(kRekeyShare) estimates per change. Running
  // jobs keep the estimated ends they started with. Other orders ignore it.
  void NoteEstimatesChanged() { ++estimate_changes_; }
  static constexpr size_t kRekeyShare = 64;
  // Re-packing clears at most a job's task count plus this many nodes for it.
  static constexpr size_t kRepackSpareNodes = 2;

  // One scheduling pass at time `now` (never earlier than a previous pass): preemptions and
  // starts, in the order they were decided.
  Decisions Schedule(Seconds now);

  // The pending jobs in queue order at `now` (at most `limit`), with reasons and estimated
  // starts: the time each would start if the jobs ahead of it started first, hard limits and
  // arrays' running limits held, and running jobs ended at their expected ends (ExpectedEndOf);
  // backfill can only make it earlier; new arrivals ahead of it or longer runs make it later.
  // One shadow run of the queue gives them all. An estimate is `now` only for a job that fits
  // now; the others change only when something happens (a submission, a start, an end, a
  // cancel, a node change, a new estimate) or when `now` crosses a running job's expected end.
  // Changes nothing.
  std::vector<QueueEntry> Queue(Seconds now, size_t limit);

  // Why a pending job waits: its own limit or a reservation it would delay (as the last pass
  // found), the head a strict pass stopped at, else its shape explained against the current
  // state (ExplainUnplaced: kReasonFitsNow when capacity was freed since); nullopt if not
  // pending.
  std::optional<PendingReason> PendingReasonOf(JobId job) const;
  const std::vector<Allocation>* AllocationsOf(JobId job) const;
  // GPUs (milli) a project runs now, borrowed or not.
  int64_t ProjectUsage(const std::string& project) const;
  // The running jobs beyond their projects' quotas (preemptible by reclaim), in id order. An
  // elastic job counts its MIN here (and in WouldBorrow): its GPUs above MIN are borrowed
  // whatever the quota, and the caller takes them back by shrinking (sched/elastic_plan.h),
  // so it is preempted only when its MIN is beyond the quota.
  std::vector<JobId> BorrowedJobs() const;
  const FairShareLedger& fair_share() const { return fair_share_; }
  // The job the last pass reserved capacity for (kBackfill) and when it is expected to start.
  std::optional<std::pair<JobId, Seconds>> ReservedStart() const;
  // Per node slot, whether that reservation holds the node (all false when there is none):
  // capacity elastic growth must leave alone (sched/elastic_plan.h, PlanAfterPass).
  std::vector<bool> ReservedNodes() const;

  const ClusterState& state() const { return state_; }
  size_t pending_count() const { return pending_count_; }
  size_t running_count() const { return running_.size(); }

 private:
  // (static primary: 0 | -priority | estimated service | remaining run, submit time, id)
  using OrderKey = std::tuple<int64_t, int64_t, int64_t>;
  // What the pass orders by: (primary, dynamic score (fair share, lower first), static key).
  using PassKey = std::tuple<int64_t, double, OrderKey>;
  struct Shape {
    model::TaskResources resources;
    int tasks = 1;
    TaskRequest request;
    int request_models = -1;         // ModelCount() + RuntimeCount() when `request` was resolved
    int64_t failed_generation = -1;  // capacity generation of the last failure
    int64_t tried_pass = -1;         // the last pass (passes_) that tried it on free capacity
    // ReclaimVersion() when a reclaim for this shape last could not make room.
    std::pair<int64_t, int64_t> reclaim_failed_at{-1, -1};
    int64_t never_fits_generation = -1;  // ... when it did not fit even an idle cluster
    // The reason explained at `reason_version` of the cluster state (recomputed lazily).
    mutable PendingReason reason;
    mutable int64_t reason_version = -1;
  };
  struct Group {
    ProjectId project;  // fair_share_'s id of the project's name (InternProject)
    int shape = -1;
    std::set<OrderKey> queue;  // pending jobs of this project and shape, in order
    // Set when the group waited in the last pass for a reason of its own (hard limit, a
    // reservation it would delay), cleared when it was tried for capacity.
    std::optional<PendingReason> waits;
    int queued_at = -1;  // its place in queued_groups_ while `queue` is not empty
  };
  struct PendingJob {
    int group = -1;
    OrderKey key;
    std::unique_ptr<model::Job> job;  // never null; moves to Running when the job starts
    int64_t queued_before_pass = 0;   // passes_ when it was queued: the next pass sees it first
  };
  struct Running {
    std::unique_ptr<model::Job> job;  // never null; the PendingJob's (a start copies no Job)
    std::vector<Allocation> tasks;
    Seconds start{0};
    Seconds estimated_end{0};
    int64_t start_seq = 0;  // order of starts, for quotas (earliest use is inside the quota)
    ProjectId project;      // its job's project (InternProject)
    std::string bucket;     // the quota bucket its use counts against
    std::optional<Seconds> checkpoint;  // its last checkpoint in this run (NoteCheckpoint)
  };
  struct Reservation {
    JobId job;
    Seconds start{0};
    std::set<NodeIndex> nodes;
  };
  // The running use that projects' hard limits and arrays' running limits count: the
  // scheduler's own, and a copy that ShadowStarts moves through shadow time.
  // Use per (project, user) or (project, bucket): found by std::tie of the two names, without
  // copying them (AddUse, UseOf).
  using PairUse = std::map<std::tuple<std::string, std::string>, int64_t, std::less<>>;
  struct LimitUse {
    std::unordered_map<std::string, int64_t> project;  // running milli-GPU per project
    PairUse user;                                      // (project, user) milli-GPU
    std::unordered_map<JobId, int> array;              // running elements per array (while > 0)
    void Add(const model::Job& job);                   // `job` started
    void Remove(const model::Job& job);                // `job` ended
  };

  Scheduler(const SchedulerConfig& config, PolicyContext context,
            std::unique_ptr<PlacementPolicy> policy);
  OrderKey KeyOf(const model::Job& job) const;
  // The key of a job of `project` with static key `key`; `total_weight` from TotalWeight().
  PassKey PassKeyOf(ProjectId project, const OrderKey& key, Seconds now, double total_weight) const;
  int GroupOf(const model::Job& job);
  const TaskRequest& RequestOf(Shape& shape);
  const ProjectPolicy& PolicyOf(const std::string& project) const;
  const ProjectPolicy& PolicyOf(ProjectId project) const { return *policies_[project.value()]; }
  // The project's id in fair_share_, with policies_ covering every id the ledger has given.
  ProjectId InternProject(const std::string& project);
  // Extends the per-project arrays (policies_, bucket_usage_) to every id fair_share_ has given.
  void CoverProjects();
  Seconds EstimateOf(const model::Job& job) const;  // PlannedRun of the configured estimate
  // Places every task of one job of `shape` or none; returns the allocations on success.
  std::optional<std::vector<Allocation>> PlaceGang(Shape& shape);
  void ReleaseAll(const std::vector<Allocation>& tasks);
  void Enqueue(model::Job&& job);
  // Adds `key` to / removes it (there) from group `g`'s queue, keeping queued_groups_ in step.
  void QueueInsert(int g, const OrderKey& key);
  void QueueErase(int g, const OrderKey& key);
  bool UsesPersistentHeads() const;  // the rule for persistent_heads_, from config_
  // Records `job` as running on `tasks` from `now`; `project` is InternProject(job->project),
  // which the caller has at hand (a start's group carries it).
  void StartRunning(std::unique_ptr<model::Job> job, ProjectId project,
                    std::vector<Allocation> tasks, Seconds now);
  // Resize's new allocations for `run` at `gpus` GPUs (kGpus) or `tasks` tasks (kNodes), not
  // applied; nullopt when a growth does not fit.
  std::optional<std::vector<Allocation>> ResizedGpus(const Running& run, int gpus) const;
  std::optional<std::vector<Allocation>> ResizedNodes(const Running& run, int tasks);
  // Forgets a running job, releasing its allocations unless the caller already did.
  Running StopRunning(JobId job, bool release = true);
  // In the three below, `project` is the job's project's id (InternProject(job.project)).
  // Why the job may not start under its project's hard limits (project or per user) or its
  // array's running limit, with `use` running (now: use_).
  std::optional<PendingReason> LimitReason(const model::Job& job, ProjectId project,
                                           const LimitUse& use) const;
  // True when starting the job now would take its project beyond its quota.
  bool WouldBorrow(const model::Job& job, ProjectId project) const;
  bool AnyQuota() const;  // some project has a quota
  // True when the job's project has quota room for it (so reclaim may make room).
  bool QuotaHasRoom(const model::Job& job, ProjectId project) const;
  // Frees GPUs for `job` by preempting borrowed jobs of other projects and places it; the
  // victims are queued again. Nothing changes when it cannot.
  std::optional<std::vector<Allocation>> Reclaim(Shape& shape, const model::Job& job, Seconds now,
                                                 std::vector<Preemption>& preemptions);
  // What ReleaseToPlace freed: the waiting job's allocations (applied) and the candidates it
  // needed, by id (their allocations released; still in running_).
  struct Released {
    std::vector<Allocation> placed;
    std::vector<JobId> jobs;
  };
  // Releases `candidates`' allocations in order until `shape` fits and places it; then
  // allocates again, the last released first, each candidate whose tasks all fit back. Nothing
  // changes (generation_ included) when it does not fit even with all released.
  std::optional<Released> ReleaseToPlace(Shape& shape, const std::vector<JobId>& candidates);
  // Places `job` by ReleaseToPlace, then stops and queues again the candidates it needed
  // (victims, reported with `why`). Nothing changes when it cannot fit even with all released.
  std::optional<std::vector<Allocation>> PreemptFor(Shape& shape, const model::Job& job,
                                                    const std::vector<JobId>& candidates,
                                                    const std::string& why, Seconds now,
                                                    std::vector<Preemption>& preemptions);
  // True when job `id` (running as `run`) started or was moved in the current pass: it is no
  // victim in it (no preemption, reclaim or move).
  bool PlacedInPass(JobId id, const Running& run) const;
  // Per node holding running jobs, for re-packing: the GPU milli they hold, their ids (sorted),
  // and whether all may move (one-task jobs not placed in this pass).
  struct RepackNode {
    int64_t milli = 0;
    bool movable = true;
    std::vector<JobId> jobs;
  };
  // repack_nodes_, rebuilt from running_ when a pass began or a job started, stopped or moved
  // since it was built (so shapes of one pass share it).
  const std::unordered_map<NodeIndex, RepackNode>& RepackNodes();
  // Re-packing (SchedulerConfig::repack): places `job` by moving running jobs, appending the
  // moves to `out` (a Preemption and a JobStart each); nothing changes when it cannot.
  std::optional<std::vector<Allocation>> Repack(Shape& shape, const model::Job& job, Seconds now,
                                                Decisions& out);
  // When `run` is expected to end, seen at `now` (ExpectedEndOf).
  Seconds ExpectedEndAt(const Running& run, Seconds now) const;
  // GPU-seconds `run` attained in its current run until `now`.
  int64_t AttainedIn(const Running& run, Seconds now) const;
  int LasQueueOf(int64_t attained_gpu_s) const;
  std::vector<JobId> LasCandidates(const model::Job& job, Seconds now) const;
  // SRTF / SRSF: what a running job is expected to need from `now` on, in the unit of its
  // order's key (seconds, or GPU-seconds under SRSF; at least 1).
  int64_t RemainingOf(const Running& run, Seconds now) const;
  // Running jobs started before this pass whose RemainingOf exceeds a waiting job's `key`, the
  // largest first (then the most recently started).
  std::vector<JobId> RemainingCandidates(const OrderKey& key, Seconds now) const;
  // Shadow time: the earliest times `jobs` (in order) could start, each after the ones before
  // it and within its limits (LimitReason), if running jobs ended at their expected ends; the
  // first job's nodes in `first_nodes`. Leaves the state as it found it.
  std::vector<std::optional<Seconds>> ShadowStarts(const std::vector<JobId>& jobs, Seconds now,
                                                   std::set<NodeIndex>* first_nodes);
  // True when a job placed at `placed` now, running `estimate`, would hold capacity the
  // reservation needs: it ends after the reserved start, on one of the reserved nodes.
  bool DelaysReservation(const std::vector<Allocation>& placed, Seconds now,
                         Seconds estimate) const;
  // Σ weights of the projects that compete now (with pending or running work); 0 unless the
  // order is fair share, the only one whose keys use it.
  double TotalWeight() const;
  // Recomputes the pending jobs' order keys with the current estimator (see
  // NoteEstimatesChanged).
  void RekeyPending();

  SchedulerConfig config_;
  PolicyContext context_;  // what policy_ was made with
  std::unique_ptr<PlacementPolicy> policy_;
  ClusterState state_;
  SeededRng rng_;
  Placer placer_;
  FairShareLedger fair_share_;
  // Deques: a pass holds references to a shape and a group while a reclaim may queue a victim
  // of a new shape (an elastic job at its MIN), which appends; appending keeps them valid.
  std::deque<Shape> shapes_;
  // (cpu, GPUs, GPU milli, memory, tasks, GPU models, runtimes) -> shape; found by a
  // ShapeKeyView of a job's own fields.
  using ShapeKey = std::tuple<int64_t, int64_t, int64_t, int64_t, int, std::vector<std::string>,
                              std::vector<std::string>>;
  using ShapeKeyView = std::tuple<int64_t, int64_t, int64_t, int64_t, int,
                                  const std::vector<std::string>&, const std::vector<std::string>&>;
  std::map<ShapeKey, int, std::less<>> shape_ids_;
  std::deque<Group> groups_;
  // (project id, shape, array id with a running limit or -1) -> group
  std::map<std::tuple<int64_t, int, int64_t>, int> group_ids_;
  // Per ProjectId: its policy in config_.sharing (or the default), resolved when the project is
  // interned and again by Reconfigure; a pass reads it per step without a search by name.
  std::vector<const ProjectPolicy*> policies_;
  // The groups with pending jobs, in no order (a pass walks these, not every group ever made).
  std::vector<int> queued_groups_;
  // Whether passes read group heads from head_order_ instead of heaping every queued group's
  // head: set by Create and Reconfigure for strict passes under an order whose keys do not move
  // between passes by themselves (FIFO, priority, SJF, QSSF, which re-keys in RekeyPending) and
  // that preempt nothing (no 2D-LAS, SRTF, SRSF, nor reclaim with quotas). A strict pass stops
  // at its first misfit: it then costs the heads it tries, not every group.
  bool persistent_heads_ = false;
  // (first key, group) of every group with pending jobs, in pass order, while persistent_heads_.
  std::set<std::pair<OrderKey, int>> head_order_;
  // A pass's heaps of group heads (OrderKey, group) per bucket (see Schedule), cleared when a
  // pass begins and kept from pass to pass for their capacity.
  using Head = std::pair<OrderKey, int>;
  std::map<ProjectId, std::vector<Head>> pass_heads_;
  std::unordered_map<JobId, PendingJob> pending_;
  std::unordered_map<JobId, Running> running_;
  LimitUse use_;
  std::unordered_map<JobId, int64_t> attained_;  // GPU-seconds of earlier runs (preempted jobs)
  // Per ProjectId: milli-GPU running per quota bucket (QuotaBucket: "" or a model).
  std::vector<std::map<std::string, int64_t, std::less<>>> bucket_usage_;
  size_t pending_count_ = 0;
  size_t estimate_changes_ = 0;  // NoteEstimatesChanged() calls since the last re-keying
  int64_t start_seq_ = 0;
  // Bumped whenever capacity is freed or added; a shape that failed at the current generation
  // would fail again.
  int64_t generation_ = 0;
  // Bumped on every change of the cluster state (placements too): cached reasons are stale.
  int64_t state_version_ = 0;
  int64_t passes_ = 0;  // Schedule() calls so far
  // The job a strict pass stopped at (kStrict): every job queued before that pass waits behind
  // it, whatever the order's keys say now.
  std::optional<JobId> blocked_head_;
  std::optional<Reservation> reservation_;  // of the last pass (kBackfill)
  int64_t pass_first_seq_ = 0;              // start_seq_ when the current pass began
  int64_t borrowed_starts_ = 0;             // jobs started beyond their quota, ever
  bool reclaim_final_ = true;  // the last Reclaim considered every candidate it may ever have
  // What a failed reclaim depends on: freed capacity and new borrowed work.
  std::pair<int64_t, int64_t> ReclaimVersion() const { return {generation_, borrowed_starts_}; }
  std::optional<std::vector<JobId>> borrowed_;  // BorrowedJobs() of this pass, computed once
  std::unordered_set<JobId> moved_in_pass_;     // jobs re-packing moved in the current pass
  std::unordered_map<NodeIndex, RepackNode> repack_nodes_;  // RepackNodes()
  // (passes_, generation_, start_seq_) when repack_nodes_ was built.
  std::tuple<int64_t, int64_t, int64_t> repack_nodes_key_{-1, -1, -1};
};

}  // namespace corral::sched
