// Controller, scheduling: a scheduling round and its decisions (placements, rendezvous ports,
// preemptions), and a job's lifecycle after placement (evaluation of its tasks, requeue, end).

#include <algorithm>

#include "model/allocation.h"
#include "model/session.h"
#include "server/control/controller.h"
#include "server/control/controller_internal.h"
#include "server/control/environment_runnable.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

// --- Scheduling ------------------------------------------------------------------------------

void Controller::ScheduleLocked() {
  SettleWritesLocked();  // the pass decides against every change decided before it
  const Seconds now = clock_.Now();
  SettleDependenciesLocked(now);  // jobs whose dependencies were met since join the queue
  ++passes_;
  MakeRoomLocked(now);  // borrowed GPUs of elastic jobs come back before anyone is preempted
  sched::Decisions decisions = scheduler_->Schedule(now);
  for (const sched::Preemption& p : decisions.preemptions) PreemptLocked(p);
  const std::vector<sched::Resize> grown = SizeStartsLocked(decisions.starts, now);
  AssignStartsLocked(decisions.starts, now);
  GrowLocked(grown, now);
}

void Controller::AssignStartsLocked(const std::vector<sched::JobStart>& starts, Seconds now) {
  // The pass's starts that got their ports, committed together (one transaction) before any
  // agent hears of them.
  std::vector<store::GangAssignment> gangs;
  for (const sched::JobStart& start : starts) {
    auto it = jobs_.find(start.job);
    if (it == jobs_.end()) continue;
    LiveJob& job = it->second;
    store::GangAssignment gang{start.job, {}};
    for (size_t i = 0; i < start.tasks.size(); ++i) {
      gang.tasks.push_back({static_cast<int>(i), scheduler_->state().node(start.tasks[i].node).name,
                            AllocationOf(start.tasks[i])});
    }
    Status ports = Status::Ok();
    if (IsDistributed(job.spec)) ports = AddRendezvousLocked(job, gang.tasks);
    if (ports.ok() && job.spec.session) ports = AddSessionPortLocked(job, gang.tasks);
    if (!ports.ok()) {
      UnstartLocked(job);
      continue;
    }
    gangs.push_back(std::move(gang));
  }
  if (gangs.empty()) return;
  auto assigned = store_.AssignGangs(gangs, now);
  if (assigned.ok()) {
    for (size_t i = 0; i < gangs.size(); ++i) {
      StartedLocked(jobs_.at(gangs[i].job), std::move((*assigned)[i]));
    }
    return;
  }
  // A failure of the store itself (I/O, a lost connection, a fenced leader) fails every gang
  // alike: all go back to the queue for the next pass.
  const StatusCode code = assigned.status().code();
  if (code != StatusCode::kFailedPrecondition && code != StatusCode::kNotFound &&
      code != StatusCode::kInvalidArgument) {
    for (const store::GangAssignment& gang : gangs) UnstartLocked(jobs_.at(gang.job));
    return;
  }
  // One gang's failure (its job not pending in the store, a node the store lost) fails the
  // transaction: each alone, so that the others start.
  for (const store::GangAssignment& gang : gangs) {
    LiveJob& job = jobs_.at(gang.job);
    auto tasks = store_.AssignGang(gang.job, gang.tasks, now);
    if (tasks.ok()) {
      StartedLocked(job, std::move(tasks).value());
    } else {
      UnstartLocked(job);
    }
  }
}

void Controller::UnstartLocked(LiveJob& job) {
  ports_.Release(job.record.id);
  (void)scheduler_->Finish(job.record.id);
  QueueInSchedulerLocked(job);
}

void Controller::StartedLocked(LiveJob& job, std::vector<store::TaskRecord> tasks) {
  job.record.state = JobState::kStarting;
  submit_limits_.AddPending(job.record.user, job.record.project, -1);
  job.tasks = std::move(tasks);
  IndexAllocationsLocked(job);
  NoteElasticStartLocked(job);
  NotifyNodesLocked(job);
  NoteDependencyEventLocked(job);  // `after` is met
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
  if (victim_it == jobs_.end()) return;
  LiveJob& victim = victim_it->second;
  const Seconds now = clock_.Now();
  reconcile::PreemptDecision d = reconcile::Preempt(
      victim.end, victim.preemptions, {victim.tasks, victim.launched, victim.notes}, now);
  if (auto for_it = jobs_.find(p.for_job); for_it != jobs_.end()) {
    for (const reconcile::TaskOnNode& wait : d.waits) {
      for_it->second.waits_for.insert(wait);
      waiting_on_node_[wait.first].insert(p.for_job);
    }
  }
  if (d.verdict == reconcile::PreemptVerdict::kStopGoesOn) {
    (void)scheduler_->Cancel(victim.record.id);  // its stop settles it, not the queue
    return;
  }
  // The scheduler queued it again already; the store follows. (On a store error the job is
  // pending here and running there: its next assignment is refused and retried.)
  (void)store_.TransitionJob(victim.record.id, victim.record.state, JobState::kPending,
                             p.reason + "; " + protocol::LostWorkText(p.lost_work_gpu_s) +
                                 " since its last checkpoint at risk",
                             now);
  // The run is forgotten below: only the store keeps these.
  for (const store::TaskRecord& killed : d.killed) (void)store_.UpdateTask(killed);
  // Their next heartbeats report the tasks, now stale: stopped with the job's grace, time to
  // save a checkpoint; what they lose is recorded as they end.
  NoteStoppingLocked(victim, StopGraceLocked(victim), p.reason, p.lost_work_gpu_s);
  NotifyNodesLocked(victim);
  ForgetRunLocked(victim);
  victim.preemptions = d.preemptions;
}

void Controller::ForgetRunLocked(LiveJob& job) {
  ForgetAllocationsLocked(job);
  job.tasks.clear();
  job.launched.clear();
  job.notes.clear();
  job.record.state = JobState::kPending;
  submit_limits_.AddPending(job.record.user, job.record.project, 1);
  ++job.record.restarts;        // the next run is a new generation
  job.gpus_idle_noted = false;  // its GPUs are another run's
  job.elastic_now = 0;
}

void Controller::ReleaseWaitsLocked(const std::string& node,
                                    const std::function<bool(int64_t)>& stopped) {
  ForgetResizeStopsLocked(node, stopped);
  ForgetStoppedLocked(node, stopped);
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
  // The nodes that can run its environment (environment_runnable.h); none asked: any node.
  if (job.environment) out.resources.runtimes = EnvironmentNeeds(job.environment->spec);
  // An elastic job with a run is its current size (pending, it asks its MIN).
  return job.elastic_now > 0 ? model::WithElasticSize(std::move(out), job.elastic_now) : out;
}

void Controller::EndedLocked(LiveJob& job, JobState state, Seconds now) {
  if (state == JobState::kSucceeded && job.record.start_time) {
    std::lock_guard predictor(predictor_mu_);
    predictor_.Observe(predict::RuntimePredictor::FeaturesOf(ToModelJob(job.spec, job.record)),
                       Seconds(now.value() - job.record.start_time->value()));
    scheduler_->NoteEstimatesChanged();
  }
  ForgetJobLocked(job);
}

void Controller::ForgetJobLocked(LiveJob& job) {
  const JobId id = job.record.id;
  if (job.record.state == JobState::kPending) {
    (void)scheduler_->Cancel(id);
    submit_limits_.AddPending(job.record.user, job.record.project, -1);
  } else {
    (void)scheduler_->Finish(id);  // releases the allocations of the started job
  }
  ForgetAllocationsLocked(job);
  NoteDependencyEventLocked(job);
  ForgetDependentLocked(job);
  SetHeldLocked(job, std::nullopt);
  // No event of an ended job follows; an array's id stays for its other elements' events.
  if (job.record.array_id != id) dependents_.erase(id);
  unsettled_.erase(id);
  jobs_.erase(id);
  sessions_.erase(id);
  // Its GPUs, or its place in the queue, are free: the next scheduling round should not wait
  // for the loop's tick (the caller notifies changed_).
  WakeLoop();
}

void Controller::IndexAllocationsLocked(const LiveJob& job) {
  for (const auto& t : job.tasks) {
    job_of_allocation_[t.allocation_id] = job.record.id;
    jobs_on_node_[t.node].insert(job.record.id);
    logs_.Open(t.allocation_id, {job.record.id, t.task_index, t.generation, t.node});
  }
  if (job.spec.elastic && !job.tasks.empty()) elastic_started_.insert(job.record.id);
}

void Controller::ForgetAllocationsLocked(const LiveJob& job) {
  ports_.Release(job.record.id);
  elastic_started_.erase(job.record.id);
  for (const auto& t : job.tasks) {
    job_of_allocation_.erase(t.allocation_id);
    if (auto on = jobs_on_node_.find(t.node); on != jobs_on_node_.end()) {
      on->second.erase(job.record.id);
      if (on->second.empty()) jobs_on_node_.erase(on);
    }
    logs_.Close(t.allocation_id);  // output can arrive after the end is known
  }
}

void Controller::RequeuedLocked(LiveJob& job) {
  const JobId id = job.record.id;
  (void)scheduler_->Finish(id);
  ForgetRunLocked(job);
  job.end = {};
  unsettled_.erase(id);
  QueueInSchedulerLocked(job);
  WakeLoop();
}

}  // namespace corral::server
