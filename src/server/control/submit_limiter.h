// The submit limits in force (docs/control-plane.md, "Submit limits"): the cluster's cap on
// pending jobs (corral server --max-pending-jobs) and the caps admins set on users and projects
// (model::SubmitLimits): pending jobs at once, and jobs submitted in any 60 seconds. An array's
// elements count one by one. The controller asks Take before it commits a submission and says
// when jobs become pending or stop being pending otherwise; the counts live here, in memory
// (the controller rebuilds them from the store at recovery), so a submission costs a few map
// lookups, never a scan of the jobs.
//
// Contracts:
//  - Take is all or nothing: the jobs of a submission fit every cap together or nothing is
//    taken (no partial arrays). Takes are serialised: concurrent submissions never overshoot a
//    cap, whatever their commits do later.
//  - What Take took counts at once as pending, and as submitted in the rates; GiveBack returns
//    both when the submission was not committed.
//  - Jobs that become pending without a submission (recovered at a restart, requeued) count as
//    pending but are never refused: a cap holds back new work only. A pending count may so
//    stand above its cap for a while.
//  - Rates are counted per second over the last kRateWindow, only for users and projects with a
//    rate limit: a limit set now counts submissions from now on. After a restart they count the
//    recovered jobs submitted within the window (AddSubmitted): those that ended meanwhile are
//    forgiven.
//
// Thread safety: every method may be called from any thread (one mutex, never held for I/O).
// The controller calls AddPending with its own lock held: this lock comes after it.
#pragma once

#include <cstdint>
#include <deque>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

#include "common/status.h"
#include "common/units.h"
#include "model/submit_limits.h"

namespace corral::server {

class SubmitLimiter {
 public:
  // What the rates count over.
  static constexpr Seconds kRateWindow{60};
  // When a refusal for pending jobs says to try again: how soon jobs start or end is unknown.
  static constexpr Seconds kPendingRetryAfter{10};
  // The cluster's cap unless the server says otherwise (--max-pending-jobs).
  static constexpr int64_t kDefaultMaxPendingJobs = 1'000'000;

  // `max_pending_jobs`: the cluster's cap on pending jobs (>= 0).
  explicit SubmitLimiter(int64_t max_pending_jobs) : max_pending_jobs_(max_pending_jobs) {}

  // The limits of user (project) `name` from now on; none set: no limits.
  void SetUserLimits(const std::string& name, const model::SubmitLimits& limits);
  void SetProjectLimits(const std::string& name, const model::SubmitLimits& limits);

  // What one Take took, for GiveBack.
  struct Taken {
    std::string user;
    std::string project;
    int64_t jobs = 0;
    Seconds at{0};
  };
  // Takes `jobs` (>= 1) new pending jobs of `user` in `project`, submitted at `now`, or refuses
  // naming the first cap they would pass (the cluster's, the project's, then the user's) and its
  // value: ResourceExhausted with retry_after (for a rate, when enough of the window has passed;
  // for pending jobs, kPendingRetryAfter) when they may fit later; InvalidArgument when they
  // never can (more jobs than the cap itself).
  Result<Taken> Take(const std::string& user, const std::string& project, int64_t jobs,
                     Seconds now);
  // The submission Take admitted was not committed: gives back its pending jobs and its place in
  // the rates.
  void GiveBack(const Taken& taken);
  // `delta` jobs of `user` in `project` became pending without a submission (> 0: recovered,
  // requeued) or stopped being pending (< 0: started, cancelled, failed).
  void AddPending(const std::string& user, const std::string& project, int64_t delta);
  // A job of `user` in `project` submitted at `at` (recovered at a restart) counts in the rates
  // until `at` + kRateWindow; nothing when that is before `now`. Never refused.
  void AddSubmitted(const std::string& user, const std::string& project, Seconds at, Seconds now);

  // Pending jobs counted now: in the cluster, of one user, of one project.
  int64_t PendingJobs() const;
  int64_t PendingJobsOfUser(const std::string& user) const;
  int64_t PendingJobsOfProject(const std::string& project) const;

 private:
  // One user's or project's limits and counts.
  struct Account {
    model::SubmitLimits limits;
    int64_t pending = 0;
    std::deque<std::pair<int64_t, int64_t>> window;  // (second, jobs), oldest first
    int64_t in_window = 0;                           // the jobs of `window`
    bool Idle() const {
      return pending == 0 && window.empty() && !limits.max_pending_jobs &&
             !limits.max_submits_per_minute;
    }
  };
  using Accounts = std::unordered_map<std::string, Account>;

  // The caps a Take passes, gathered: the first refusal names its cap; a submission that
  // never fits wins over one that fits later; Retry-After is the longest wait of them all.
  class Refusal {
   public:
    void Never(std::string why);
    void Later(std::string why, Seconds retry_after);
    // OK when nothing was refused.
    Status ToStatus() const;

   private:
    std::string first_;
    bool never_ = false;
    Seconds retry_after_{0};
  };

  static void SetLimitsLocked(Accounts& accounts, const std::string& name,
                              const model::SubmitLimits& limits);
  static void DropIfIdleLocked(Accounts& accounts, const std::string& name);
  // Forgets the window's seconds that are kRateWindow or more before `now`.
  static void PruneLocked(Account& account, Seconds now);
  // Counts `jobs` submitted at `at` in the window of `account` when it has a rate limit.
  static void AddToWindowLocked(Account& account, Seconds at, int64_t jobs);
  // Adds to `refusal` the caps of `account` (`who`: "user 'alice'") that `jobs` more would pass.
  static void CheckLocked(Account& account, const std::string& who, int64_t jobs, Seconds now,
                          Refusal& refusal);

  const int64_t max_pending_jobs_;
  mutable std::mutex mu_;
  int64_t pending_ = 0;  // guarded by mu_
  Accounts users_;       // guarded by mu_; entries with limits, pending jobs or a window
  Accounts projects_;    // guarded by mu_; as users_
};

}  // namespace corral::server
