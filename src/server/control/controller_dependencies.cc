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

// The store clears a requeued job's start time; its restarts say it started once.
model::DependencyTarget TargetOf(const store::JobRecord& record) {
  return {record.state, record.start_time.has_value() || record.restarts > 0};
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

Result<std::vector<model::DependencyTarget>> Controller::DependencyTargets(
    JobId named, DependencyTargetCache* cache) const {
  if (cache) {
    if (auto known = cache->find(named); known != cache->end()) return known->second;
  }
  std::vector<store::JobRecord> records;  // the job, or every element of the array it names
  auto record = store_.GetJob(named);
  if (!record.ok() && record.status().code() != StatusCode::kNotFound) return record.status();
  if (record.ok() && record->array_id == named) {
    store::JobFilter elements;
    elements.array = named;
    elements.limit = 0;
    auto listed = store_.ListJobs(elements);
    if (!listed.ok()) return listed.status();
    records = std::move(listed).value();
  } else if (record.ok()) {
    records.push_back(std::move(record).value());
  }
  std::vector<model::DependencyTarget> targets;
  targets.reserve(records.size());
  for (const store::JobRecord& r : records) targets.push_back(TargetOf(r));
  if (cache) (*cache)[named] = targets;
  return targets;
}

Result<std::vector<model::DependencyCheck>> Controller::CheckDependencies(
    const std::vector<model::Dependency>& dependencies, DependencyTargetCache* cache) const {
  std::vector<model::DependencyCheck> checks;
  checks.reserve(dependencies.size());
  for (const model::Dependency& d : dependencies) {
    auto targets = DependencyTargets(d.job, cache);
    if (!targets.ok()) return targets.status();
    model::DependencyCheck check{d, model::StatusOf(d.type, *targets), std::nullopt};
    if (check.status == model::DependencyStatus::kNeverMet) {
      for (const model::DependencyTarget& t : *targets) {
        if (model::StatusOf(d.type, {t}) == model::DependencyStatus::kNeverMet) {
          check.settled_by = t.state;
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
    SetHeldLocked(
        job, model::DependencyWait{model::DependencyStatus::kWaiting,
                                   "dependencies not checked yet: " + checks.status().message()});
    dependency_checks_.insert(id);
    WakeLoop();
    return;
  }
  SetHeldLocked(job, model::WaitOf(*checks));
  if (!job.held) {
    QueueInSchedulerLocked(job);
    return;
  }
  if (job.held->status == model::DependencyStatus::kNeverMet && job.spec.kill_on_invalid_dep) {
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

void Controller::ForgetDependentLocked(const LiveJob& job) {
  for (const model::Dependency& d : job.spec.dependencies) {
    auto it = dependents_.find(d.job);
    if (it == dependents_.end()) continue;
    it->second.erase(job.record.id);
    if (it->second.empty()) dependents_.erase(it);
  }
}

size_t Controller::IndexedDependents() {
  std::lock_guard lock(mu_);
  size_t n = 0;
  for (const auto& [named, held] : dependents_) n += held.size();
  return n;
}

void Controller::SettleDependenciesLocked(Seconds now) {
  // Each job or array named is read once a pass, however many held jobs name it: a change to it
  // since is an event that checks them again (NoteDependencyEventLocked).
  DependencyTargetCache targets;
  std::set<JobId> later;  // a cancel of theirs is being written: checked at the next pass
  while (!dependency_checks_.empty()) {
    const JobId id = *dependency_checks_.begin();
    dependency_checks_.erase(dependency_checks_.begin());
    auto it = jobs_.find(id);
    if (it == jobs_.end() || !it->second.held) continue;
    if (JobHasPendingWriteLocked(id)) {
      later.insert(id);
      continue;
    }
    LiveJob& job = it->second;
    auto checks = CheckDependencies(job.spec.dependencies, &targets);
    if (!checks.ok()) {  // the store is unreachable: the next pass checks again
      dependency_checks_.insert(id);
      break;
    }
    SetHeldLocked(job, model::WaitOf(*checks));
    if (!job.held) {
      QueueInSchedulerLocked(job);
      continue;
    }
    if (job.held->status != model::DependencyStatus::kNeverMet || !job.spec.kill_on_invalid_dep) {
      continue;
    }
    // Slurm's --kill-on-invalid-dep: it ends cancelled, its reason saying why, written as a
    // user's cancel is (Cancel): whichever is decided first ends it, the other finds it ended.
    PendingWrite write;
    write.jobs = {id};
    store::WriteBatch batch;
    batch.transitions.push_back({id, JobState::kPending, JobState::kCancelled, job.held->message});
    write.apply = [this, id, now](const Status& committed) {
      auto live = jobs_.find(id);
      if (live == jobs_.end()) return;
      if (!committed.ok()) {  // as above: the next pass tries again
        dependency_checks_.insert(id);
        WakeLoop();
        return;
      }
      EndedLocked(live->second, JobState::kCancelled, now);  // notes its own dependents
    };
    (void)WriteLocked(std::move(batch), now, std::move(write));
  }
  dependency_checks_.insert(later.begin(), later.end());
}

}  // namespace corral::server
