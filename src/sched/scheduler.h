// The scheduler: a queue of pending jobs, the cluster state, and one placement policy. The
// server and the simulator drive it with the same calls — nodes come and go, jobs are submitted,
// cancelled and finish — and ask it for decisions with Schedule(). Pure and deterministic: the
// same calls with the same seed give the same decisions, byte for byte.
//
// Queue: jobs are considered in order (FIFO, or priority with FIFO inside a priority). By
// default a job that does not fit is skipped and later jobs may start; with Blocking::kStrict
// the first job that does not fit stops the pass (head-of-line blocking).
//
// Gang: a job's tasks are placed one by one; if one fails, the ones placed are released and
// the job waits (all or nothing).
//
// Cost: pending jobs are grouped by shape (task resources and count). Within a pass the state
// only fills up, so once a shape fails, later jobs of that shape are not tried; across passes a
// failed shape is not retried until capacity has been freed. A pass therefore costs
// O(shapes + jobs started), not O(pending jobs).
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <tuple>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/rng.h"
#include "model/job.h"
#include "sched/cluster_state.h"
#include "sched/pending_reason.h"
#include "sched/placement_policy.h"
#include "sched/placer.h"

namespace corral::sched {

enum class QueueOrder { kFifo, kPriority };
enum class Blocking { kSkip, kStrict };

Result<QueueOrder> ParseQueueOrder(std::string_view name);  // "fifo" | "priority"

struct SchedulerConfig {
  std::string policy = "fgd";
  QueueOrder order = QueueOrder::kFifo;
  Blocking blocking = Blocking::kSkip;
  uint64_t seed = 0;
};

// A job the scheduler decided to start: one allocation per task, in task-index order.
struct JobStart {
  JobId job;
  std::vector<Allocation> tasks;
};

class Scheduler {
 public:
  // Errors: unknown policy name.
  static Result<std::unique_ptr<Scheduler>> Create(const SchedulerConfig& config,
                                                   const PolicyContext& context);

  Result<NodeIndex> AddNode(const model::Node& node);
  // Removes a node; every job with a task there is released entirely (all its tasks) and
  // returned, in id order, for the caller to requeue or fail. Errors: unknown node.
  Result<std::vector<JobId>> RemoveNode(std::string_view name);
  // Cordon (false) or uncordon (true) a node. Errors: unknown node.
  Status SetSchedulable(std::string_view name, bool schedulable);

  // Queues a validated job. Errors: invalid job, duplicate id.
  Status Submit(const model::Job& job);
  // Removes a pending job, or releases a running one. Errors: unknown job.
  Status Cancel(JobId job);
  // A running job ended: releases its allocations. Errors: unknown or not running.
  Status Finish(JobId job);
  // Re-establishes a job that is already running with the allocations it holds (the server
  // rebuilding its state after a restart). Errors: invalid job, known id, an allocation that
  // does not fit (nothing is applied then).
  Status Adopt(const model::Job& job, const std::vector<Allocation>& tasks);

  // One scheduling pass: the jobs to start now, in the order they were decided.
  std::vector<JobStart> Schedule();

  // Why a pending job waits, explained against the current state (the count of gang tasks that
  // fitted is from the last attempt); nullopt if not pending.
  std::optional<PendingReason> PendingReasonOf(JobId job) const;
  // Pending jobs in queue order.
  std::vector<JobId> PendingInOrder() const;
  const std::vector<Allocation>* AllocationsOf(JobId job) const;

  const ClusterState& state() const { return state_; }
  size_t pending_count() const { return pending_count_; }
  size_t running_count() const { return running_.size(); }

 private:
  using OrderKey = std::tuple<int64_t, int64_t, int64_t>;  // (-priority|0, submit, id)
  struct Shape {
    model::TaskResources resources;
    int tasks = 1;
    TaskRequest request;
    int request_models = -1;         // ModelCount() when `request` was resolved
    std::set<OrderKey> queue;        // pending jobs of this shape, in order
    int64_t failed_generation = -1;  // capacity generation of the last failure
    int placed_at_failure = 0;       // gang tasks that fitted before one did not
    // The reason explained at `reason_version` of the cluster state (recomputed lazily).
    mutable PendingReason reason;
    mutable int64_t reason_version = -1;
  };
  struct Running {
    std::vector<Allocation> tasks;
  };
  struct PendingJob {
    int shape = -1;
    OrderKey key;
  };

  Scheduler(const SchedulerConfig& config, std::unique_ptr<PlacementPolicy> policy);
  OrderKey KeyOf(const model::Job& job) const;
  int ShapeOf(const model::Job& job);
  const TaskRequest& RequestOf(Shape& shape);
  // Places every task of one job of `shape` or none; returns the allocations on success.
  std::optional<std::vector<Allocation>> PlaceGang(Shape& shape);
  void ReleaseAll(const std::vector<Allocation>& tasks);

  SchedulerConfig config_;
  std::unique_ptr<PlacementPolicy> policy_;
  ClusterState state_;
  SeededRng rng_;
  Placer placer_;
  std::vector<Shape> shapes_;
  std::map<std::tuple<int64_t, int, int64_t, int64_t, int, std::string>, int> shape_ids_;
  std::unordered_map<JobId, PendingJob> pending_;
  std::unordered_map<JobId, Running> running_;
  size_t pending_count_ = 0;
  // Bumped whenever capacity is freed or added; a shape that failed at the current generation
  // would fail again.
  int64_t generation_ = 0;
  // Bumped on every change of the cluster state (placements too): cached reasons are stale.
  int64_t state_version_ = 0;
  std::optional<JobId> blocked_head_;
};

}  // namespace corral::sched
