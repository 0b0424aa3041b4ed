// What the controller's reads answer from without its lock (docs/control-plane.md, "What takes
// the controller's lock, and what does not"): a ReadView, built under the lock from memory and
// published whole; immutable once published. A reader copies the pointer (ReadViewSlot::Get,
// a leaf mutex held for the copy only) and reads at leisure: it never waits for a scheduling
// pass, a heartbeat or a commit, and nothing it reads changes under it.
//
// Two parts, of two costs and two paces (Controller::PublishLocked):
//  - PendingPart, O(pending jobs): every pending job's reason and the first kQueueRows jobs'
//    queue rows with their estimated starts, all from the same scheduling pass. Built after a
//    pass, at most once per ControllerConfig::pending_view_interval from the loop (Tick builds
//    it every time).
//  - the rest, O(nodes + started jobs): nodes, the jobs held on unreachable nodes, the started
//    elastic jobs' sizes, the cluster
//    summary (the queue's length from the scheduler, the started jobs counted by state), the
//    projects' use, the rules, and the queued
//    jobs that left the queue since the pending part was built. Built after every round and
//    after every change a read must see at once (registrations, admin node actions, cancels,
//    a project's sharing).
// Submissions do not wait for either: a job committed after a part was built is in the
// controller's list of unviewed submissions (Controller::unviewed_) until a pending part counts
// it, and the reads add it from there (QueueView, ClusterSummary). `drained` says where a part
// stops: the submissions numbered up to it were in memory when it was built.
#pragma once

#include <algorithm>
#include <deque>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "common/clock.h"
#include "common/ids.h"
#include "model/states.h"
#include "protocol/api_cluster.h"
#include "protocol/api_job.h"
#include "protocol/api_node.h"
#include "protocol/api_project.h"
#include "protocol/api_scheduling.h"

namespace corral::server {

// The element of `sorted` (a vector ordered by `key`, ascending) whose key is `id`; null when
// none is. Const or not as `sorted` is.
template <typename Sorted, typename Key>
auto FindSorted(Sorted& sorted, JobId id, Key key) -> decltype(&*sorted.begin()) {
  auto it = std::lower_bound(sorted.begin(), sorted.end(), id,
                             [&](const auto& e, JobId i) { return key(e) < i; });
  return it != sorted.end() && key(*it) == id ? &*it : nullptr;
}

// Why a pending job waits, and when it is expected to start, as one pass found.
struct PendingJobView {
  JobId id;
  protocol::PendingReason reason;
  std::optional<Seconds> estimated_start;  // none past the queue's first kQueueRows jobs
};

struct PendingPart {
  static constexpr int kQueueRows = 1000;  // queue rows (and estimated starts) it keeps
  Seconds built_at{0};
  int64_t drained = 0;       // the submissions (numbered from 1) in memory when it was built
  int64_t queue_length = 0;  // the jobs in the scheduler's queue then (past the rows kept too)
  std::vector<PendingJobView> jobs;       // every job pending then, by id
  std::vector<protocol::QueueRow> queue;  // the first kQueueRows in queue order, every project's

  // The job's entry; null when it was not pending at the pass (or submitted since).
  const PendingJobView* Find(JobId id) const;
  PendingJobView* Find(JobId id);
};

// A task of a starting or running job on one GPU, with its owner always (a read hides the
// owner from callers who may not see its project: Controller::Nodes).
struct GpuTaskView {
  protocol::TaskOwner owner;
  MilliGpu milli{0};
};

struct NodeEntryView {
  protocol::NodeView row;                           // gpu_tasks left empty: see gpu_tasks
  std::vector<std::vector<GpuTaskView>> gpu_tasks;  // per GPU index
  protocol::NodeInventory inventory;
};

inline const PendingJobView* PendingPart::Find(JobId id) const {
  return FindSorted(jobs, id, [](const PendingJobView& j) { return j.id; });
}
inline PendingJobView* PendingPart::Find(JobId id) {
  return FindSorted(jobs, id, [](const PendingJobView& j) { return j.id; });
}

// A project's share of the cluster now (Controller::ProjectsView adds what the store keeps).
struct ProjectUseView {
  std::string name;
  protocol::ProjectSharing sharing;
  MilliGpu running{0};
  MilliGpu borrowed{0};
  double fair_share_usage = 0;  // U, share-seconds (sched::FairShareLedger::EffectiveUsage)
  double fair_share_past = 0;   // of U, the decayed past use alone
};

// A started elastic job's size now and resizes (Controller::LiveJob's elastic_now, resizes).
struct ElasticRunView {
  JobId id;
  int now = 0;
  int resizes = 0;
};

struct ReadView {
  std::shared_ptr<const PendingPart> pending;  // never null once published
  // Jobs in the pending part's queue rows, or submitted since, that are no longer pending
  // (cancelled, started): the queue leaves them out until the next pending part, and counts
  // the positions of the rows behind them without them. By id.
  std::vector<JobId> left_queue;
  int64_t left_part_rows = 0;        // of left_queue, the pending part's queue rows
  std::vector<NodeEntryView> nodes;  // by name
  // Jobs with a task on an unreachable node: what their views say instead of their record's
  // reason (Controller::UnreachableReasonLocked), by id.
  std::vector<std::pair<JobId, std::string>> unreachable;
  std::vector<ElasticRunView> elastic;  // the started elastic jobs, by id
  protocol::ClusterSummary summary;     // its jobs_pending: the submissions up to `drained`
  int64_t drained = 0;                  // the submissions in memory when it was built
  // The summaries recorded once a minute, oldest first (shared between views: it changes
  // once a minute).
  std::shared_ptr<const std::deque<protocol::ClusterSummary>> history;
  protocol::PolicyView policy;
  std::vector<ProjectUseView> projects;  // every project with a policy or running work, by name

  const std::string* UnreachableReason(JobId id) const {
    const auto* entry = FindSorted(unreachable, id, [](const auto& u) { return u.first; });
    return entry ? &entry->second : nullptr;
  }
  const ElasticRunView* Elastic(JobId id) const {
    return FindSorted(elastic, id, [](const ElasticRunView& e) { return e.id; });
  }
  bool LeftQueue(JobId id) const {
    return std::binary_search(left_queue.begin(), left_queue.end(), id);
  }
};

// The published view: one pointer behind a leaf mutex (never held while anything else is
// taken, nor for more than a pointer copy).
class ReadViewSlot {
 public:
  std::shared_ptr<const ReadView> Get() const {
    std::lock_guard lock(mu_);
    return view_;
  }
  void Set(std::shared_ptr<const ReadView> view) {
    std::lock_guard lock(mu_);
    view_.swap(view);
    // (the old view, if this held its last reference, is freed outside this slot's lock, but
    // under whatever lock the caller holds: PublishLocked drops its own reference first)
  }

 private:
  mutable std::mutex mu_;
  std::shared_ptr<const ReadView> view_;
};

}  // namespace corral::server
