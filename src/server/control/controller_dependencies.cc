// Controller, dependencies (docs/control-plane.md, "Dependencies"): a pending job whose
// dependencies are not met is held out of the scheduler's queue; the jobs it names starting or
// ending wake a check at the next pass, which queues it, cancels it (kill_on_invalid_dep, when
// one can never be met) or says why it still waits. The meaning of each type is
// model/dependency.h's; what a job did is read from the store, which holds the ended jobs too.

#include <algorithm>

#include "server/control/controller.h"
#include "server/control/controller_internal.h"

namespace corral::server {

using namespace controller_internal;  // NOLINT(google-build-using-namespace)

namespace {

model::DependencyTarget TargetOf(const store::JobRecord& record) {
  return {record.state, record.start_time.has_value()};
}

}  // namespace

Status Controller::CheckDependencyTargets(const Principal& who, const JobSpec& spec) const {
  std::set<JobId> checked;
  for (const model::Dependency& d : spec.dependencies) {
    if (!checked.insert(d.job).second) continue;
    auto record = store_.GetJob(d.job);
    if (!record.ok() && record.status().code() != StatusCode::kNotFound) return record.status();
    if (!record.ok() || !who.CanAccessProject(record->project)) {
      return InvalidArgument("field 'dependency': job " + std::to_string(d.job.value()) +
                             " not found");
    }
  }
  return Status::Ok();
}

Result<std::vector<model::DependencyCheck>> Controller::CheckDependencies(
    const std::vector<model::Dependency>& dependencies) const {
  std::vector<model::DependencyCheck> checks;
  checks.reserve(dependencies.size());
  for (const model::Dependency& d : dependencies) {
    std::vector<store::JobRecord> named;  // the job, or every element of the array it names
    auto record = store_.GetJob(d.job);
    if (!record.ok() && record.status().code() != StatusCode::kNotFound) return record.status();
    if (record.ok() && record->array_id == d.job) {
      store::JobFilter elements;
      elements.array = d.job;
      elements.limit = 0;
      auto listed = store_.ListJobs(elements);
      if (!listed.ok()) return listed.status();
      named = std::move(listed).value();
    } else if (record.ok()) {
      named.push_back(std::move(record).value());
    }
    std::vector<model::DependencyTarget> targets;
    targets.reserve(named.size());
    for (const store::JobRecord& r : named) targets.push_back(TargetOf(r));
    model::DependencyCheck check{d, model::StatusOf(d.type, targets), std::nullopt};
    if (check.status == model::DependencyStatus::kNeverMet) {
      for (const store::JobRecord& r : named) {
        if (model::StatusOf(d.type, {TargetOf(r)}) == model::DependencyStatus::kNeverMet) {
          check.settled_by = r.state;
          break;
        }
      }
    }
    checks.push_back(check);
  }
  return checks;
}

void Controller::QueueOrHoldLocked(LiveJob& job) {
  if (job.spec.dependencies.empty() || job.record.restarts > 0) {  // a rerun's were met
    QueueInSchedulerLocked(job);
    return;
  }
  const JobId id = job.record.id;
  for (const model::Dependency& d : job.spec.dependencies) dependents_[d.job].insert(id);
  auto checks = CheckDependencies(job.spec.dependencies);
  if (!checks.ok()) {
    // Held until a pass can read the store.
    SetHeldLocked(job, model::DependencyWait{
                           false, "dependencies not checked yet: " + checks.status().message()});
    dependency_checks_.insert(id);
    WakeLoop();
    return;
  }
  SetHeldLocked(job, model::WaitOf(*checks));
  if (!job.held) {
    QueueInSchedulerLocked(job);
    return;
  }
  if (job.held->never_met && job.spec.kill_on_invalid_dep) {
    dependency_checks_.insert(id);  // cancelled by the pass, not in the middle of a drain
    WakeLoop();
  }
}

void Controller::NoteDependencyEventLocked(const LiveJob& job) {
  bool noted = false;
  for (const std::optional<JobId>& named :
       {std::optional<JobId>(job.record.id), job.record.array_id}) {
    if (!named) continue;
    auto it = dependents_.find(*named);
    if (it == dependents_.end()) continue;
    for (auto d = it->second.begin(); d != it->second.end();) {
      auto held = jobs_.find(*d);
      if (held == jobs_.end() || !held->second.held) {
        d = it->second.erase(d);
        continue;
      }
      dependency_checks_.insert(*d);
      noted = true;
      ++d;
    }
    if (it->second.empty()) dependents_.erase(it);
  }
  if (noted) WakeLoop();
}

void Controller::SetHeldLocked(LiveJob& job, std::optional<model::DependencyWait> wait) {
  held_jobs_ += static_cast<int64_t>(wait.has_value()) - static_cast<int64_t>(job.held.has_value());
  job.held = std::move(wait);
}

void Controller::SettleDependenciesLocked(Seconds now) {
  // A cancel below ends a job, whose own dependents are noted in turn: until none is left.
  while (!dependency_checks_.empty()) {
    const JobId id = *dependency_checks_.begin();
    dependency_checks_.erase(dependency_checks_.begin());
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second.held) continue;
    LiveJob& job = it->second;
    auto checks = CheckDependencies(job.spec.dependencies);
    if (!checks.ok()) {  // the store is unreachable: the next pass checks again
      dependency_checks_.insert(id);
      return;
    }
    SetHeldLocked(job, model::WaitOf(*checks));
    if (!job.held) {
      QueueInSchedulerLocked(job);
      continue;
    }
    if (!job.held->never_met || !job.spec.kill_on_invalid_dep) continue;
    // Slurm's --kill-on-invalid-dep: it ends cancelled, its reason saying why.
    if (!store_.TransitionJob(id, JobState::kPending, JobState::kCancelled, job.held->message, now)
             .ok()) {
      dependency_checks_.insert(id);  // as above: the next pass tries again
      return;
    }
    EndedLocked(job, JobState::kCancelled, now);  // erases `job`
  }
}

}  // namespace corral::server
