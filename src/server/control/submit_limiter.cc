#include "server/control/submit_limiter.h"

#include <algorithm>
#include <iterator>

namespace corral::server {

namespace {

// "1 job", "5 jobs".
std::string Jobs(int64_t n) { return std::to_string(n) + (n == 1 ? " job" : " jobs"); }

}  // namespace

void SubmitLimiter::Refusal::Never(std::string why) {
  if (!never_) first_ = std::move(why);
  never_ = true;
}

void SubmitLimiter::Refusal::Later(std::string why, Seconds retry_after) {
  if (first_.empty()) first_ = std::move(why);
  retry_after_ = std::max(retry_after_, retry_after);
}

Status SubmitLimiter::Refusal::ToStatus() const {
  if (first_.empty()) return Status::Ok();
  if (never_) return InvalidArgument(first_);
  return ResourceExhausted(first_, retry_after_);
}

void SubmitLimiter::SetUserLimits(const std::string& name, const model::SubmitLimits& limits) {
  std::lock_guard lock(mu_);
  SetLimitsLocked(users_, name, limits);
}

void SubmitLimiter::SetProjectLimits(const std::string& name, const model::SubmitLimits& limits) {
  std::lock_guard lock(mu_);
  SetLimitsLocked(projects_, name, limits);
}

void SubmitLimiter::SetLimitsLocked(Accounts& accounts, const std::string& name,
                                    const model::SubmitLimits& limits) {
  Account& account = accounts[name];
  account.limits = limits;
  if (!limits.max_submits_per_minute) {  // nothing counts the rate any more
    account.window.clear();
    account.in_window = 0;
  }
  DropIfIdleLocked(accounts, name);
}

void SubmitLimiter::DropIfIdleLocked(Accounts& accounts, const std::string& name) {
  auto it = accounts.find(name);
  if (it != accounts.end() && it->second.Idle()) accounts.erase(it);
}

void SubmitLimiter::PruneLocked(Account& account, Seconds now) {
  while (!account.window.empty() &&
         account.window.front().first <= now.value() - kRateWindow.value()) {
    account.in_window -= account.window.front().second;
    account.window.pop_front();
  }
}

void SubmitLimiter::CheckLocked(Account& account, const std::string& who, int64_t jobs, Seconds now,
                                Refusal& refusal) {
  const std::string adds = "; this submission adds " + std::to_string(jobs);
  if (const auto& cap = account.limits.max_pending_jobs) {
    if (jobs > *cap) {
      refusal.Never("this submission adds " + Jobs(jobs) + ", more than " + who +
                    " may ever have pending (max_pending_jobs is " + std::to_string(*cap) + ")");
    } else if (account.pending + jobs > *cap) {
      refusal.Later(who + " may have at most " + Jobs(*cap) +
                        " pending (max_pending_jobs) and has " + std::to_string(account.pending) +
                        adds,
                    kPendingRetryAfter);
    }
  }
  if (const auto& cap = account.limits.max_submits_per_minute) {
    PruneLocked(account, now);
    if (jobs > *cap) {
      refusal.Never("this submission adds " + Jobs(jobs) + ", more than " + who +
                    " may submit in a minute (max_submits_per_minute is " + std::to_string(*cap) +
                    ")");
    } else if (account.in_window + jobs > *cap) {
      // The oldest seconds leave the window first: wait until enough of them have.
      int64_t left = account.in_window;
      Seconds retry_after = kRateWindow;
      for (const auto& [second, count] : account.window) {
        left -= count;
        if (left + jobs <= *cap) {
          retry_after = Seconds(second + kRateWindow.value() - now.value());
          break;
        }
      }
      refusal.Later(who + " may submit at most " + Jobs(*cap) +
                        " a minute (max_submits_per_minute) and submitted " +
                        std::to_string(account.in_window) + " in the last " +
                        std::to_string(kRateWindow.value()) + " s" + adds,
                    std::max(retry_after, Seconds(1)));
    }
  }
}

Result<SubmitLimiter::Taken> SubmitLimiter::Take(const std::string& user,
                                                 const std::string& project, int64_t jobs,
                                                 Seconds now) {
  std::lock_guard lock(mu_);
  Refusal refusal;
  if (jobs > max_pending_jobs_) {
    refusal.Never("this submission adds " + Jobs(jobs) +
                  ", more than the cluster may ever hold pending (corral server "
                  "--max-pending-jobs is " +
                  std::to_string(max_pending_jobs_) + ")");
  } else if (pending_ + jobs > max_pending_jobs_) {
    refusal.Later("the cluster may hold at most " + Jobs(max_pending_jobs_) +
                      " pending (corral server --max-pending-jobs) and holds " +
                      std::to_string(pending_) + "; this submission adds " + std::to_string(jobs),
                  kPendingRetryAfter);
  }
  // Looked up without creating: accounts without limits need no checks.
  auto project_it = projects_.find(project);
  if (project_it != projects_.end()) {
    CheckLocked(project_it->second, "project '" + project + "'", jobs, now, refusal);
  }
  auto user_it = users_.find(user);
  if (user_it != users_.end()) {
    CheckLocked(user_it->second, "user '" + user + "'", jobs, now, refusal);
  }
  CORRAL_RETURN_IF_ERROR(refusal.ToStatus());
  pending_ += jobs;
  for (Account* account : {&users_[user], &projects_[project]}) {
    account->pending += jobs;
    AddToWindowLocked(*account, now, jobs);
  }
  return Taken{user, project, jobs, now};
}

void SubmitLimiter::AddToWindowLocked(Account& account, Seconds at, int64_t jobs) {
  if (!account.limits.max_submits_per_minute) return;
  // In order of time: a recovered job may be older than the newest second counted.
  auto it = account.window.end();
  while (it != account.window.begin() && std::prev(it)->first > at.value()) --it;
  if (it != account.window.begin() && std::prev(it)->first == at.value()) {
    std::prev(it)->second += jobs;
  } else {
    account.window.emplace(it, at.value(), jobs);
  }
  account.in_window += jobs;
}

void SubmitLimiter::AddSubmitted(const std::string& user, const std::string& project, Seconds at,
                                 Seconds now) {
  if (at.value() <= now.value() - kRateWindow.value()) return;
  std::lock_guard lock(mu_);
  for (Accounts* accounts : {&users_, &projects_}) {
    auto it = accounts->find(accounts == &users_ ? user : project);
    if (it != accounts->end()) AddToWindowLocked(it->second, at, 1);
  }
}

void SubmitLimiter::GiveBack(const Taken& taken) {
  std::lock_guard lock(mu_);
  pending_ -= taken.jobs;
  for (auto [accounts, name] : {std::pair{&users_, &taken.user}, {&projects_, &taken.project}}) {
    auto it = accounts->find(*name);
    if (it == accounts->end()) continue;
    Account& account = it->second;
    account.pending -= taken.jobs;
    // The second it was counted in, unless it has left the window already.
    for (auto& [second, count] : account.window) {
      if (second != taken.at.value()) continue;
      const int64_t back = std::min(count, taken.jobs);
      count -= back;
      account.in_window -= back;
    }
    DropIfIdleLocked(*accounts, *name);
  }
}

void SubmitLimiter::AddPending(const std::string& user, const std::string& project, int64_t delta) {
  std::lock_guard lock(mu_);
  pending_ += delta;
  users_[user].pending += delta;
  projects_[project].pending += delta;
  DropIfIdleLocked(users_, user);
  DropIfIdleLocked(projects_, project);
}

int64_t SubmitLimiter::PendingJobs() const {
  std::lock_guard lock(mu_);
  return pending_;
}

int64_t SubmitLimiter::PendingJobsOfUser(const std::string& user) const {
  std::lock_guard lock(mu_);
  auto it = users_.find(user);
  return it == users_.end() ? 0 : it->second.pending;
}

int64_t SubmitLimiter::PendingJobsOfProject(const std::string& project) const {
  std::lock_guard lock(mu_);
  auto it = projects_.find(project);
  return it == projects_.end() ? 0 : it->second.pending;
}

}  // namespace corral::server
