// Controller, scheduling: a scheduling round and its decisions (placements, rendezvous ports,
// preemptions), and a job's lifecycle after placement (evaluation of its tasks, requeue, end).

#include <algorithm>

#include "model/allocation.h"
#include "model/session.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

// A task stopped at its time limit failed however it exited (Slurm's TIMEOUT): a program that
// handles SIGTERM and exits 0 did not finish its work.
bool TaskFailed(const store::TaskRecord& t) {
  return t.state == TaskState::kLost || t.end_cause == model::TaskEndCause::kTimeLimit ||
         t.signal.has_value() || t.exit_code.value_or(0) != 0 ||
         (t.state == TaskState::kKilled && !t.exit_code.has_value());
}

// "task 1 exited with code 3" ("was stopped and exited with code 0" when its agent stopped it),
// with the agent's note when it gave one ("time limit of 60 s reached").
std::string DescribeEnd(const store::TaskRecord& t, const std::string& note) {
  std::string what = "task " + std::to_string(t.task_index);
  if (t.state == TaskState::kLost) {
    what += " was lost";
  } else if (t.signal) {
    what += " was killed by signal " + std::to_string(*t.signal);
  } else if (t.exit_code && t.state == TaskState::kKilled) {
    // Stopped by its agent (a time limit, a cancellation), it exited on its own terms.
    what += " was stopped and exited with code " + std::to_string(*t.exit_code);
  } else if (t.exit_code) {
    what += " exited with code " + std::to_string(*t.exit_code);
  } else {
    what += " ended (" + Name(t.state) + ")";
  }
  return note.empty() ? what : what + ": " + note;
}

// What the scheduler gave a task, as the store keeps it (the task record names the node).
model::Allocation AllocationOf(const sched::Allocation& a) {
  model::Allocation out;
  out.gpus = a.gpus;
  out.cpu = a.cpu;
  out.memory = a.memory;
  return out;
}

}  // namespace

// --- Scheduling ------------------------------------------------------------------------------

void Controller::ScheduleLocked() {
  const Seconds now = clock_.Now();
  ++passes_;
  sched::Decisions decisions = scheduler_->Schedule(now);
  for (const sched::Preemption& p : decisions.preemptions) PreemptLocked(p);
  for (const sched::JobStart& start : decisions.starts) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    std::vector<store::TaskAssignment> gang;
    for (size_t i = 0; i < start.tasks.size(); ++i) {
      gang.push_back({static_cast<int>(i), scheduler_->state().node(start.tasks[i].node).name,
                      AllocationOf(start.tasks[i])});
    }
    Status ports = Status::Ok();
    if (IsDistributed(job.spec)) ports = AddRendezvousLocked(job, gang);
    if (ports.ok() && job.spec.session) ports = AddSessionPortLocked(job, gang);
    // Ids, rows and the job's move to starting in one commit, before any agent hears of it; on
    // failure nothing was written and the job goes back to the queue.
    Result<std::vector<store::TaskRecord>> tasks =
        ports.ok() ? store_.AssignGang(job.record.id, gang, now) : ports;
    if (!tasks.ok()) {
      ports_.Release(job.record.id);
      (void)scheduler_->Finish(job.record.id);
      (void)scheduler_->Submit(ModelJobOf(job));
      continue;
    }
    job.record.state = JobState::kStarting;
    job.tasks = std::move(tasks).value();
    IndexAllocationsLocked(job);
    NotifyNodesLocked(job);
  }
}

void Controller::RestoreRendezvousLocked(const LiveJob& job) {
  if (job.tasks.empty()) return;
  const model::Allocation& allocation = job.tasks[0].allocation;
  if (allocation.session) {
    // Stored by this server's predecessor; a failure only loses the protection.
    (void)ports_.Restore(job.record.id, {job.tasks[0].node}, allocation.session->port, 1);
    return;
  }
  if (!allocation.rendezvous) return;
  std::vector<std::string> nodes;
  for (const auto& t : job.tasks) nodes.push_back(t.node);
  // Stored by this server's predecessor, so valid; a failure only loses the protection.
  (void)ports_.Restore(job.record.id, nodes, allocation.rendezvous->port, PortsOf(job.spec));
}

std::string Controller::NodeAddressLocked(const std::string& node) const {
  auto it = nodes_.find(node);
  return it == nodes_.end() || it->second.inventory.address.empty() ? node
                                                                    : it->second.inventory.address;
}

Status Controller::AddSessionPortLocked(const LiveJob& job,
                                        std::vector<store::TaskAssignment>& tasks) {
  if (tasks.size() != 1) return InvalidArgument("a session has one task");
  store::TaskAssignment& t = tasks[0];
  // The same pool as rendezvous ports: two live jobs on one node never get the same port.
  auto port = ports_.Reserve(job.record.id, {t.node}, 1);
  if (!port.ok()) return port.status();
  t.allocation.session = model::SessionEndpoint{NodeAddressLocked(t.node), *port};
  return Status::Ok();
}

Status Controller::AddRendezvousLocked(const LiveJob& job,
                                       std::vector<store::TaskAssignment>& tasks) {
  std::vector<std::string> nodes;
  model::Rendezvous rendezvous;
  for (const auto& t : tasks) {
    nodes.push_back(t.node);
    rendezvous.hosts.push_back(NodeAddressLocked(t.node));
  }
  auto port = ports_.Reserve(job.record.id, nodes, PortsOf(job.spec));
  if (!port.ok()) return port.status();
  rendezvous.master_addr = rendezvous.hosts[0];
  rendezvous.port = *port;
  for (auto& t : tasks) t.allocation.rendezvous = rendezvous;
  return Status::Ok();
}

void Controller::PreemptLocked(const sched::Preemption& p) {
  auto victim_it = jobs_.find(p.job);
  auto for_it = jobs_.find(p.for_job);
  if (victim_it == jobs_.end()) return;
  LiveJob& victim = victim_it->second;
  const Seconds now = clock_.Now();
  // Its tasks that may run hold the GPUs the reclaiming job got: it waits for them.
  for (const auto& t : victim.tasks) {
    if (model::IsEnded(t.state)) continue;
    if (t.state == TaskState::kAssigned && !victim.launched.count(t.allocation_id)) continue;
    if (for_it != jobs_.end()) {
      for_it->second.waits_for.insert({t.node, t.allocation_id});
      waiting_on_node_[t.node].insert(p.for_job);
    }
  }
  if (victim.Stopping()) {
    // Already being cancelled or failed: that stop goes on (its tasks get kills, its end or
    // requeue follows their reports); the scheduler must not queue it a second time.
    (void)scheduler_->Cancel(victim.record.id);
    return;
  }
  // The scheduler queued it again already; the store follows. (On a store error the job is
  // pending here and running there: its next assignment is refused and retried.)
  (void)store_.TransitionJob(victim.record.id, victim.record.state, JobState::kPending, p.reason,
                             now);
  for (auto& t : victim.tasks) {
    if (model::IsEnded(t.state)) continue;
    t.state = TaskState::kKilled;  // being killed: its node's next heartbeat gets the kill
    t.end_time = now;
    (void)store_.UpdateTask(t);
  }
  NotifyNodesLocked(victim);  // their next heartbeats report the tasks, now stale: killed
  ForgetRunLocked(victim);
  ++victim.preemptions;  // preemptions do not use up max_restarts
}

void Controller::ForgetRunLocked(LiveJob& job) {
  ForgetAllocationsLocked(job);
  job.tasks.clear();
  job.launched.clear();
  job.end_notes.clear();
  job.record.state = JobState::kPending;
  ++job.record.restarts;        // the next run is a new generation
  job.gpus_idle_noted = false;  // its GPUs are another run's
}

void Controller::ReleaseWaitsLocked(const std::string& node,
                                    const std::function<bool(int64_t)>& stopped) {
  auto on = waiting_on_node_.find(node);
  if (on == waiting_on_node_.end()) return;
  for (JobId id : std::set<JobId>(on->second)) {
    auto it = jobs_.find(id);
    if (it == jobs_.end()) {
      on->second.erase(id);
      continue;
    }
    LiveJob& job = it->second;
    bool still = false;
    for (auto w = job.waits_for.begin(); w != job.waits_for.end();) {
      if (w->first == node && stopped(w->second)) {
        w = job.waits_for.erase(w);
      } else {
        still |= w->first == node;
        ++w;
      }
    }
    if (!still) on->second.erase(id);
    if (job.waits_for.empty()) NotifyNodesLocked(job);  // its launches may go out now
  }
  if (on->second.empty()) waiting_on_node_.erase(on);
}

void Controller::NotifyNodesLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    auto n = nodes_.find(t.node);
    if (n != nodes_.end()) ++n->second.version;
  }
  changed_.notify_all();
}

model::Job Controller::ModelJobOf(const LiveJob& job) {
  model::Job out = ToModelJob(job.spec, job.record);
  // Every agent offers the process runtime: only environments that cannot use it constrain.
  if (job.environment) {
    std::vector<std::string> runtimes = job.environment->spec.Runtimes();
    if (std::find(runtimes.begin(), runtimes.end(), model::kProcessRuntime) == runtimes.end()) {
      out.resources.runtimes = std::move(runtimes);
    }
  }
  return out;
}

Status Controller::EndJobLocked(LiveJob& job, JobState state, const std::string& reason) {
  const JobId id = job.record.id;
  const Seconds now = clock_.Now();
  CORRAL_RETURN_IF_ERROR(store_.TransitionJob(id, job.record.state, state, reason, now));
  if (state == JobState::kSucceeded && job.record.start_time) {
    predictor_.Observe(predict::RuntimePredictor::FeaturesOf(ToModelJob(job.spec, job.record)),
                       Seconds(now.value() - job.record.start_time->value()));
    scheduler_->NoteEstimatesChanged();
  }
  ForgetJobLocked(job);
  return Status::Ok();
}

void Controller::ForgetJobLocked(LiveJob& job) {
  const JobId id = job.record.id;
  if (job.record.state == JobState::kPending) {
    (void)scheduler_->Cancel(id);
  } else {
    (void)scheduler_->Finish(id);  // releases the allocations of the started job
  }
  ForgetAllocationsLocked(job);
  unsettled_.erase(id);
  jobs_.erase(id);
  // Its GPUs, or its place in the queue, are free: the next scheduling round should not wait
  // for the loop's tick (the caller notifies changed_).
  wake_ = true;
}

void Controller::IndexAllocationsLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    job_of_allocation_[t.allocation_id] = job.record.id;
    jobs_on_node_[t.node].insert(job.record.id);
  }
}

void Controller::ForgetAllocationsLocked(const LiveJob& job) {
  constexpr size_t kRecentAllocations = 10000;
  ports_.Release(job.record.id);
  for (const auto& t : job.tasks) {
    job_of_allocation_.erase(t.allocation_id);
    if (auto on = jobs_on_node_.find(t.node); on != jobs_on_node_.end()) {
      on->second.erase(job.record.id);
      if (on->second.empty()) jobs_on_node_.erase(on);
    }
    ended_allocations_[t.allocation_id] = {job.record.id, t.task_index, t.generation, t.node};
  }
  while (ended_allocations_.size() > kRecentAllocations) {
    ended_allocations_.erase(ended_allocations_.begin());
  }
}

Status Controller::RequeueOrEndLocked(LiveJob& job, JobState end_state, const std::string& reason) {
  if (job.record.restarts - job.preemptions >= job.spec.max_restarts || job.cancel_requested) {
    return EndJobLocked(job, end_state, reason);
  }
  const JobId id = job.record.id;
  const std::string why = reason + "; requeued (restart " +
                          std::to_string(job.record.restarts + 1) + " of " +
                          std::to_string(job.spec.max_restarts) + ")";
  CORRAL_RETURN_IF_ERROR(
      store_.TransitionJob(id, job.record.state, JobState::kPending, why, clock_.Now()));
  (void)scheduler_->Finish(id);
  ForgetRunLocked(job);
  job.failing = false;
  job.primary_done = false;
  job.failure.clear();
  job.failed_state = JobState::kFailed;
  unsettled_.erase(id);
  (void)scheduler_->Submit(ModelJobOf(job));
  wake_ = true;
  return Status::Ok();
}

Status Controller::UpdateTaskLocked(LiveJob& job, const store::TaskRecord& updated) {
  CORRAL_RETURN_IF_ERROR(store_.UpdateTask(updated));
  for (auto& t : job.tasks) {
    if (t.allocation_id == updated.allocation_id) t = updated;
  }
  return Status::Ok();
}

void Controller::StopUnlaunchedTasksLocked(LiveJob& job) {
  for (const auto& t : job.tasks) {
    if (t.state != TaskState::kAssigned || job.launched.count(t.allocation_id)) continue;
    store::TaskRecord stopped = t;
    stopped.state = TaskState::kKilled;
    stopped.end_time = clock_.Now();
    // On a store error the task stays assigned (and is never launched: its job is stopping);
    // the next evaluation tries again.
    if (!UpdateTaskLocked(job, stopped).ok()) unsettled_.insert(job.record.id);
  }
}

void Controller::EvaluateJobLocked(LiveJob& job) {
  const JobId id = job.record.id;  // `job` may be erased below
  // With mpi, part 0 runs mpirun and the other parts only hold their nodes: part 0's good end is
  // the job's, however the holders end (decided first, so that a holder stopped afterwards, or
  // seen first after a server restart, does not count as a failure).
  if (!job.Stopping() && job.spec.launcher == model::Launcher::kMpi) {
    for (const auto& t : job.tasks) {
      if (t.task_index == 0 && model::IsEnded(t.state) && !TaskFailed(t)) job.primary_done = true;
    }
  }
  if (!job.Stopping()) {
    // The failed task that explains the gang's end: after a restart the parts the server had
    // stopped because of it look failed too (killed), so one it did not stop comes first.
    const store::TaskRecord* failed = nullptr;
    for (const auto& t : job.tasks) {
      if (!model::IsEnded(t.state) || !TaskFailed(t)) continue;
      if (!failed || (failed->end_cause == model::TaskEndCause::kStopped &&
                      t.end_cause != model::TaskEndCause::kStopped)) {
        failed = &t;
      }
    }
    if (failed) {
      job.failing = true;
      auto note = job.end_notes.find(failed->allocation_id);
      job.failure = DescribeEnd(*failed, note == job.end_notes.end() ? "" : note->second);
      // Its agent's typed cause, never the note: timeout, oom or failed.
      job.failed_state = model::FailedStateFor(failed->end_cause);
    }
  }
  if (job.Stopping() && job.record.state != JobState::kPending) {
    StopUnlaunchedTasksLocked(job);
    NotifyNodesLocked(job);  // the rest of the gang is stopped
  }
  bool all_ended = !job.tasks.empty();
  bool all_running = !job.tasks.empty();
  for (const auto& t : job.tasks) {
    all_ended &= model::IsEnded(t.state);
    all_running &= t.state == TaskState::kRunning;
  }
  Status settled = Status::Ok();
  if (all_running && job.record.state == JobState::kStarting) {
    settled = store_.TransitionJob(job.record.id, JobState::kStarting, JobState::kRunning,
                                   "all tasks running", clock_.Now());
    if (settled.ok()) {
      job.record.state = JobState::kRunning;
      job.record.start_time = clock_.Now();
      job.last_activity = clock_.Now();  // a session's start counts as use
      job.app_last_activity.reset();     // what the app of an earlier run said
      job.idle_notice_at.reset();
    }
  }
  if (all_ended) {
    if (job.cancel_requested) {
      settled = EndJobLocked(job, JobState::kCancelled, job.failure);
    } else if (job.failing) {
      settled = RequeueOrEndLocked(job, job.failed_state, job.failure);
    } else if (job.primary_done) {
      settled = EndJobLocked(job, JobState::kSucceeded, "task 0 (mpirun) exited with code 0");
    } else {
      settled = EndJobLocked(job, JobState::kSucceeded, "all tasks exited with code 0");
    }
  }
  if (!settled.ok()) unsettled_.insert(id);
}

}  // namespace corral::server
