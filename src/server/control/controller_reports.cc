// Controller, reports: the heartbeat path (docs/control-plane.md, "The heartbeat path") and how
// a job's run is settled after its tasks change.
//
// A change to a run is decided first (a RunPlan: the reconcile core's decisions, with the task
// records and job transitions they imply), written second (one write of the write group for all
// the plans of one heartbeat, committed with whatever other writes wait, without the lock), and
// applied to memory and the scheduler last, only once durable. A heartbeat's output is on disk
// before its report is decided.

#include <algorithm>
#include <chrono>

#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

// --- Run plans --------------------------------------------------------------------------------

reconcile::RunFacts Controller::FactsOf(const LiveJob& job, JobState state) const {
  return {state,           job.spec.launcher, job.spec.max_restarts,        job.record.restarts,
          job.preemptions, job.resizes,       job.spec.elastic.has_value(), config_.resize_budget};
}

Controller::RunPlan Controller::PlanFor(const LiveJob& job) {
  RunPlan plan;
  plan.job = job.record.id;
  plan.state = job.record.state;
  plan.tasks = job.tasks;
  plan.notes = job.notes;
  plan.end = job.end;
  return plan;
}

void Controller::ChangeTasks(RunPlan& plan, const std::vector<store::TaskRecord>& updates) {
  ReplaceTasks(plan.tasks, updates);
  plan.writes.tasks.insert(plan.writes.tasks.end(), updates.begin(), updates.end());
}

void Controller::TakeReported(RunPlan& plan, const std::vector<store::TaskRecord>& updates) {
  ChangeTasks(plan, updates);
  plan.reported.insert(plan.reported.end(), updates.begin(), updates.end());
}

void Controller::EvaluatePlanLocked(const LiveJob& job, RunPlan& plan, Seconds now) const {
  reconcile::RunDecision d = reconcile::EvaluateRun(FactsOf(job, plan.state), plan.end,
                                                    {plan.tasks, job.launched, plan.notes}, now);
  plan.end = std::move(d.end);
  ChangeTasks(plan, d.stop);
  plan.notify_nodes |= d.notify_nodes;
  JobState to = plan.state;
  switch (d.verdict) {
    case reconcile::RunVerdict::kGoOn:
      return;
    case reconcile::RunVerdict::kStartRunning:
      to = JobState::kRunning;
      plan.started = true;
      break;
    case reconcile::RunVerdict::kRequeue:
      to = JobState::kPending;
      break;
    case reconcile::RunVerdict::kEnd:
      to = d.end_state;
      break;
  }
  plan.writes.transitions.push_back({plan.job, plan.state, to, d.reason});
  plan.state = to;
  plan.verdict = d.verdict;
}

void Controller::ApplyPlanLocked(LiveJob& job, RunPlan plan, Seconds now) {
  job.tasks = std::move(plan.tasks);
  job.notes = std::move(plan.notes);
  job.end = std::move(plan.end);
  if (plan.notify_nodes) NotifyNodesLocked(job);  // the rest of the gang is stopped
  unsettled_.erase(job.record.id);
  if (plan.started) {
    job.record.state = JobState::kRunning;
    job.record.start_time = now;
    job.last_activity = now;        // a session's start counts as use
    job.app_last_activity.reset();  // what the app of an earlier run said
    job.idle_notice_at.reset();
  }
  if (plan.verdict == reconcile::RunVerdict::kRequeue) {
    RequeuedLocked(job);
  } else if (plan.verdict == reconcile::RunVerdict::kEnd) {
    EndedLocked(job, plan.state, now);  // erases `job`
  }
}

void Controller::EvaluateJobLocked(LiveJob& job) {
  const Seconds now = clock_.Now();
  RunPlan plan = PlanFor(job);
  EvaluatePlanLocked(job, plan, now);
  if (!store_.Apply(plan.writes, now).ok()) {
    // Nothing changed: the next tick decides again from the same memory and writes again.
    unsettled_.insert(job.record.id);
    return;
  }
  ApplyPlanLocked(job, std::move(plan), now);
}

// --- The heartbeat path -------------------------------------------------------------------------

std::optional<uint64_t> Controller::AuthenticateNode(const std::string& name,
                                                     const std::string& token) const {
  return credentials_.Authenticate(name, token);
}

std::map<JobId, Controller::RunPlan> Controller::PlanReportLocked(
    const std::string& name, const protocol::Report& report, const std::set<int64_t>& reported,
    std::vector<protocol::StopOrder>& kills, Seconds now) {
  std::map<JobId, RunPlan> plans;  // by job: applied in this order
  auto plan_of = [&](const LiveJob& job) -> RunPlan& {
    auto it = plans.find(job.record.id);
    if (it == plans.end()) it = plans.emplace(job.record.id, PlanFor(job)).first;
    return it->second;
  };
  // The tasks it reports, each decided against its run as the report's earlier entries left it
  // (an allocation listed twice is decided the second time against the first's outcome).
  for (const protocol::TaskStatus& s : report.tasks) {
    auto owner = job_of_allocation_.find(s.key.allocation.value());
    const LiveJob* job = owner == job_of_allocation_.end() ? nullptr : &jobs_.at(owner->second);
    const auto planned = job ? plans.find(job->record.id) : plans.end();
    const std::vector<store::TaskRecord>* tasks =
        planned != plans.end() ? &planned->second.tasks : (job ? &job->tasks : nullptr);
    reconcile::ReportDecision d = reconcile::DecideReport(tasks, name, s, now);
    if (d.action == reconcile::ReportAction::kKill) {
      kills.push_back(StaleStopLocked(s.key, d.kill_reason));
    }
    if (d.action != reconcile::ReportAction::kUpdate) continue;
    RunPlan& plan = plan_of(*job);
    if (d.note) plan.notes[s.key.allocation.value()] = std::move(*d.note);
    TakeReported(plan, {d.updated});
  }
  for (auto& [id, plan] : plans) EvaluatePlanLocked(jobs_.at(id), plan, now);
  // The tasks a full report left out, once the reported ones are settled (a failure reported
  // here stops the rest of its gang).
  if (!report.partial) {
    if (auto on = jobs_on_node_.find(name); on != jobs_on_node_.end()) {
      for (JobId id : on->second) {
        const LiveJob& job = jobs_.at(id);
        // The run as the reported tasks left it; a plan only for a job that changes (a quiet
        // heartbeat of a busy node copies nothing).
        const auto planned = plans.find(id);
        const RunPlan* plan = planned == plans.end() ? nullptr : &planned->second;
        const bool stopping = plan ? plan->end.Stopping() : job.Stopping();
        std::vector<store::TaskRecord> ended;
        for (const store::TaskRecord& t : plan ? plan->tasks : job.tasks) {
          if (t.node != name || reported.count(t.allocation_id)) continue;
          if (auto e = reconcile::DecideUnreported(t, job.launched.count(t.allocation_id) > 0,
                                                   stopping, now)) {
            ended.push_back(std::move(*e));
          }
        }
        if (ended.empty()) continue;
        RunPlan& changed = plan_of(job);
        TakeReported(changed, ended);
        EvaluatePlanLocked(job, changed, now);
      }
    }
  }
  return plans;
}

void Controller::TakeOlderRunsLocked(const std::string& name, const protocol::Report& report) {
  if (report.partial || unreported_nodes_.erase(name) == 0) return;
  bool waits = false;
  for (const protocol::TaskStatus& s : report.tasks) {
    const int64_t alloc = s.key.allocation.value();
    auto older = older_runs_.find(alloc);
    if (s.state != protocol::ProcessState::kRunning || older == older_runs_.end() ||
        job_of_allocation_.count(alloc)) {
      continue;
    }
    auto job = jobs_.find(older->second);
    if (job == jobs_.end()) continue;
    // Its stop order gives it the job's grace, as before the restart; its GPUs are waited for.
    // Its loss is not charged: when its run stopped is not known here (docs/decisions.md).
    stopping_tasks_[alloc] = {
        older->second, name, 0, clock_.Now(), StopGraceLocked(job->second), "stale generation"};
    resize_stopping_[name].insert(alloc);
    waits = true;
  }
  if (auto on = jobs_on_node_.find(name); waits && on != jobs_on_node_.end()) {
    for (JobId id : on->second) WaitForResizeStopsLocked(jobs_.at(id));
  }
  if (unreported_nodes_.empty()) older_runs_.clear();
}

Status Controller::FinishReportLocked(std::map<JobId, RunPlan>& plans, const Status& committed,
                                      Seconds now) {
  // A plan whose settling was not written: what the agent reported is kept (written already),
  // and the job is settled again at the next tick.
  auto keep_reported = [&](LiveJob& job, RunPlan& plan) {
    ReplaceTasks(job.tasks, plan.reported);
    job.notes = std::move(plan.notes);
    unsettled_.insert(job.record.id);
  };
  if (!committed.ok() && store::IsStoreWide(committed)) {
    // The store refused the whole (I/O, a lost connection, a broken table): one more try with
    // only what the agent reported, for every job at once; failing that, nothing is applied
    // and the agent sends its report again.
    store::WriteBatch reported;
    for (const auto& [id, plan] : plans) {
      reported.tasks.insert(reported.tasks.end(), plan.reported.begin(), plan.reported.end());
    }
    CORRAL_RETURN_IF_ERROR(store_.Apply(reported, now));
    for (auto& [id, plan] : plans) keep_reported(jobs_.at(id), plan);
    return Status::Ok();
  }
  // Applying a plan erases no other plan's job. One job's refused write (a transition whose job
  // is not in the state expected) holds back no other: each is written alone.
  Status first_error;
  for (auto& [id, plan] : plans) {
    LiveJob& job = jobs_.at(id);
    if (committed.ok() || store_.Apply(plan.writes, now).ok()) {
      ApplyPlanLocked(job, std::move(plan), now);
    } else if (Status s = store_.Apply({.tasks = plan.reported}, now); s.ok()) {
      keep_reported(job, plan);
    } else if (first_error.ok()) {
      // Nothing of this job is applied (other jobs' plans may be): the agent sends its report
      // again, and what was applied is not changed by it twice.
      first_error = Status(StatusCode::kInternal, s.message());
    }
  }
  return first_error;
}

bool Controller::ReportMeetsPendingWriteLocked(const std::string& name,
                                               const protocol::Report& report) const {
  if (pending_writes_.empty()) return false;
  if (NodeHasPendingWriteLocked(name)) return true;
  for (const protocol::TaskStatus& s : report.tasks) {
    auto owner = job_of_allocation_.find(s.key.allocation.value());
    if (owner != job_of_allocation_.end() && JobHasPendingWriteLocked(owner->second)) return true;
  }
  if (auto on = jobs_on_node_.find(name); on != jobs_on_node_.end() && !report.partial) {
    for (JobId id : on->second) {
      if (JobHasPendingWriteLocked(id)) return true;
    }
  }
  return false;
}

Status Controller::TakeReportLocked(std::unique_lock<std::mutex>& lock, const std::string& name,
                                    uint64_t registration, const protocol::Report& report,
                                    ReportedAllocations allocations,
                                    std::vector<protocol::StopOrder>& kills) {
  const Seconds now = clock_.Now();
  // What the apply needs, kept until it runs (after the commit, maybe on another thread).
  struct Taken {
    std::map<JobId, RunPlan> plans;
    ReportedAllocations allocations;
    Status outcome;
  };
  auto taken = std::make_shared<Taken>();
  TakeOlderRunsLocked(name, report);
  taken->plans = PlanReportLocked(name, report, allocations.reported, kills, now);
  taken->allocations = std::move(allocations);
  PendingWrite write;
  store::WriteBatch all;  // one write for the whole report
  for (const auto& [id, plan] : taken->plans) {
    write.jobs.push_back(id);
    all.tasks.insert(all.tasks.end(), plan.writes.tasks.begin(), plan.writes.tasks.end());
    all.transitions.insert(all.transitions.end(), plan.writes.transitions.begin(),
                           plan.writes.transitions.end());
  }
  write.node = name;
  write.apply = [this, taken, name, registration, seq = report.seq, partial = report.partial,
                 now](const Status& committed) {
    taken->outcome = FinishReportLocked(taken->plans, committed, now);
    auto it = nodes_.find(name);
    if (!taken->outcome.ok() || it == nodes_.end() || it->second.registration != registration ||
        it->second.state == NodeState::kLost) {
      return;  // not taken, or for a registration that is gone
    }
    LiveNode& node = it->second;
    ReportedAllocations& a = taken->allocations;
    node.reports.starting = std::move(a.starting);
    // Only the tasks a partial report lists: the others keep their states, the waits on them
    // and their stop orders.
    auto stopped = [&](int64_t alloc) {
      return partial ? a.ended.count(alloc) > 0 : a.running.count(alloc) == 0;
    };
    ReleaseWaitsLocked(name, stopped);
    node.reports.last_seq = seq;
  };
  AwaitWriteLocked(lock, WriteLocked(std::move(all), now, std::move(write)));
  return taken->outcome;
}

Result<protocol::ReportAnswer> Controller::Heartbeat(const std::string& name, uint64_t registration,
                                                     const protocol::Report& report) {
  // GPU metrics are an aside: a malformed report of them (refused by the codec) is counted and
  // dropped, and the task reports (which must be acknowledged) go on.
  if (!report.gpu_metrics_error.empty()) ++rejected_gpu_reports_;
  const int wait_ms = std::clamp(report.wait_ms, 0, protocol::kMaxWaitMs);
  std::set<int64_t> starting;
  for (const protocol::TaskKey& k : report.starting) starting.insert(k.allocation.value());
  // Output first, and outside the lock: a task's last lines are on disk before the report that
  // ends it is applied, and a slow disk holds up no one else.
  logs_.Write(name, report.logs);
  auto lock = LockState();
  // Lost, or registered again since this request was authenticated (or while it waited).
  auto registered = [&]() -> LiveNode* {
    auto it = nodes_.find(name);
    if (it == nodes_.end() || it->second.state == NodeState::kLost ||
        it->second.registration != registration) {
      return nullptr;
    }
    return &it->second;
  };
  // A report of this node, or one that changes the same jobs, whose write is pending: applied
  // first, so that this one is decided against it (and its sequence number is known).
  if (ReportMeetsPendingWriteLocked(name, report)) SettleWritesLocked();
  LiveNode* registered_node = registered();
  if (!registered_node) return NotFound("node '" + name + "' is not registered");
  registered_node->last_heartbeat = clock_.Now();
  // What the nodes' view must show at once (the rest, its time and tasks, at the next round).
  bool seen_at_once = false;
  if (registered_node->unreachable) {
    SettleWritesLocked();  // its jobs get events, written directly (nothing unlocks meanwhile)
    ReachableAgainLocked(name, *registered_node);
    seen_at_once = true;
  }
  if (!report.gpu_metrics_error.empty() &&
      registered_node->gpu_metrics_error != report.gpu_metrics_error) {
    registered_node->gpu_metrics_error = report.gpu_metrics_error;
    seen_at_once = true;
  }
  if (seen_at_once) PublishLocked(PendingRebuild::kKeep);
  if (report.gpu_metrics) {
    const std::vector<ReportedGpu> gpus = ReportedGpus(*report.gpu_metrics);
    GpuMonitor::NodeGpus identity{registered_node->inventory.gpu_model, {}};
    for (const protocol::InventoryGpu& g : registered_node->inventory.gpus) {
      identity.gpus.push_back({g.uuid, g.memory.value()});
    }
    gpu_monitor_.Record(name, identity, gpus, GpuHoldersLocked(name, gpus),
                        registered_node->last_heartbeat.value() * 1000);
  }
  std::vector<protocol::StopOrder> kills;
  // Two reports of one agent may be in flight at once (a push overtaking a heartbeat): one older
  // than a report already taken from this registration says nothing the server may act on, and
  // taking it could undo what the newer one said (mark a task it started lost).
  const bool stale = report.seq <= registered_node->reports.last_seq;
  if (!stale) {
    ReportedAllocations a;
    a.reported = starting;  // accepted: not lost, not resent
    for (const protocol::TaskStatus& s : report.tasks) {
      const int64_t alloc = s.key.allocation.value();
      a.reported.insert(alloc);
      (s.state == protocol::ProcessState::kRunning ? a.running : a.ended).insert(alloc);
    }
    a.starting = std::move(starting);
    CORRAL_RETURN_IF_ERROR(TakeReportLocked(lock, name, registration, report, std::move(a), kills));
    // The lock was released while the report's write committed.
    registered_node = registered();
    if (!registered_node) return NotFound("node '" + name + "' is not registered");
  }
  LiveNode& node = *registered_node;
  // What every answer says about the report: whether it was stale, and the newest report taken.
  auto about_report = [&](protocol::ReportAnswer& answer) {
    answer.stale_report = stale;
    answer.taken_seq = node.reports.last_seq;
  };
  protocol::ReportAnswer response = ResponseForLocked(name);
  auto quiet = [&] { return response.run.empty() && response.kill.empty() && kills.empty(); };
  if (quiet() && wait_ms > 0 && waiting_heartbeats_ >= kMaxWaitingHeartbeats) {
    // Every waiting heartbeat holds an HTTP thread: past the cap, answer now and let the agent
    // pause instead, so that API requests always find a thread.
    response.retry_after_ms = wait_ms;
    about_report(response);
    return response;
  }
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::milliseconds(wait_ms);
  ++waiting_heartbeats_;
  while (quiet() && !stopping_) {
    const uint64_t seen = node.version;
    const bool moved =
        changed_.wait_until(lock, deadline, [&] { return stopping_ || node.version != seen; });
    DrainInboxLocked();  // the wait took mu_ again: queue what was submitted meanwhile
    if (!moved) break;
    if (node.registration != registration || node.state == NodeState::kLost) {
      // Registered again (or lost) while this request waited: what there is to say now is for
      // the new registration's requests, not this one.
      --waiting_heartbeats_;
      return NotFound("node '" + name + "' is not registered");
    }
    response = ResponseForLocked(name);
  }
  --waiting_heartbeats_;
  for (auto& k : kills) response.kill.push_back(std::move(k));
  about_report(response);
  return response;
}

}  // namespace corral::server
