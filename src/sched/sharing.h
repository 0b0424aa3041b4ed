// How projects share a cluster: guaranteed quotas that others may borrow while idle, hard limits,
// and fair-share accounting of past use (docs/policies.md).
//
//  - Quota: GPUs (milli-GPU) a project is guaranteed, of any model, or of one model. Use beyond
//    the quota is borrowed: it runs only on capacity nobody else is entitled to, and may be
//    preempted when the quota's owner wants it back. Use inside the quota is never preempted by
//    another project.
//  - Limit: a hard cap on what a project runs at once, borrowed or not.
//  - Fair share: each project's usage is the integral of its dominant resource share (DRF: the
//    largest of its GPU, CPU and memory shares of the cluster) with exponential decay (half-life
//    H), plus its current dominant share × H / ln 2 (what its current allocation would add if it
//    ran on), so starting a job counts at once. The fair-share factor is
//    F = 2^(-(U / ΣU) / (w / Σw)) as in Slurm's classic fair-share factor: 1 for a project that
//    used nothing, 0.5 for one that used exactly its weight's share, towards 0 above it.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/ids.h"
#include "common/status.h"
#include "common/units.h"

namespace corral::sched {

// Bounds that keep the arithmetic finite (Validate enforces them).
inline constexpr double kMinWeight = 1e-3, kMaxWeight = 1e6;
inline constexpr int64_t kMaxGpuMilli = 1'000'000'000;  // one million GPUs

struct ProjectPolicy {
  double weight = 1.0;      // fair-share weight, > 0
  int64_t quota_milli = 0;  // guaranteed GPUs of any model, in milli-GPU
  // Guaranteed GPUs of one model (a job that can only run on that model counts against it).
  std::map<std::string, int64_t> model_quota_milli;
  std::optional<int64_t> limit_milli;       // hard cap on GPUs running at once; none if unset
  std::optional<int64_t> user_limit_milli;  // the same cap for each user of the project
};

struct FairShareConfig {
  Seconds half_life{7 * 24 * 3600};  // past usage counts half after this long
  double fair_share_weight = 1000;   // score of a project that used nothing (F = 1)
  double age_weight = 100;           // score per age_unit waited; unbounded, so waits are bounded
  Seconds age_unit{24 * 3600};
};

struct SharingConfig {
  std::map<std::string, ProjectPolicy> projects;  // projects not named: weight 1, no quota
  FairShareConfig fair_share;
  bool reclaim = true;  // preempt borrowed work for a project back under its quota
};

// Names the field: "project 'vision': field 'weight': must be > 0".
Status Validate(const SharingConfig& config);

// The quota bucket a job's use counts against: its one GPU model when the project has a quota
// for that model, else "" (the any-model quota). Refers into `gpu_models` (or to a static empty
// string): valid while `gpu_models` is.
const std::string& QuotaBucket(const ProjectPolicy& policy,
                               const std::vector<std::string>& gpu_models);

// A project's account in a FairShareLedger: dense (0, 1, ... in order of first sight) and stable
// for the ledger's life, so callers index their own per-project arrays by it.
struct ProjectIdTag {};
using ProjectId = Id<ProjectIdTag>;

// Decayed dominant-share usage per project. Pure: time comes from the caller.
class FairShareLedger {
 public:
  explicit FairShareLedger(const FairShareConfig& config) : config_(config) {}
  // Another half-life from now on (usage so far is kept).
  void SetConfig(const FairShareConfig& config) {
    config_ = config;
    Recount();
  }

  void SetCapacity(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib);
  // The id of `project`'s account, opened empty on first sight (an account never charged counts
  // as no use and is not among Projects()). The id forms below cost no lookup by name: the
  // scheduler calls them once per project per step of a pass.
  ProjectId Intern(const std::string& project);
  // The name `project` was interned with (a valid id from Intern).
  const std::string& NameOf(ProjectId project) const;
  // Ids handed out so far: every id is below this.
  size_t ProjectCount() const { return accounts_.size(); }
  // An allocation of `project` started (sign +1) or ended (-1).
  void Charge(ProjectId project, int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib,
              int sign);
  void Charge(const std::string& project, int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib,
              int sign) {
    Charge(Intern(project), gpu_milli, cpu_milli, memory_mib, sign);
  }
  // Integrates every project's current share over [last time, now] into its decayed usage.
  void AdvanceTo(Seconds now);
  // The fair-share factor F in (0, 1] of `project` (a valid id) with weight `weight` (see the
  // file comment); `total_weight` is the sum over the projects that compete.
  double Factor(ProjectId project, double weight, double total_weight) const;
  // U: decayed usage plus the current allocation's share, in share-seconds.
  double EffectiveUsage(const std::string& project) const;
  // Of U, the decayed usage alone (the past, up to the last AdvanceTo), in share-seconds.
  double DecayedUsage(const std::string& project) const;
  double DominantShare(const std::string& project) const;
  // The projects it has an account for (charged at least once), by name.
  std::set<std::string> Projects() const;

 private:
  struct Account {
    std::string name;
    bool charged = false;  // Charge was called for it at least once
    double decayed = 0;    // share-seconds, decayed to last_
    int64_t gpu = 0, cpu = 0, memory = 0;
  };
  FairShareConfig config_;
  int64_t cap_gpu_ = 0, cap_cpu_ = 0, cap_memory_ = 0;
  std::vector<Account> accounts_;                         // by ProjectId
  std::unordered_map<std::string, ProjectId> ids_;        // name -> index into accounts_
  const Account* Find(const std::string& project) const;  // nullptr when never interned
  double total_effective_ = 0;                            // Σ EffectiveUsage, kept current
  std::optional<int64_t> last_;
  void Recount();
  double ShareOf(const Account& account) const;  // DominantShare of an account
  // EffectiveUsage of an account: Recount sums the same doubles the orders compare.
  double EffectiveUsageOf(const Account& account) const;
};

}  // namespace corral::sched
