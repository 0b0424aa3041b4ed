#include "sched/sharing.h"

#include <algorithm>
#include <cmath>

namespace corral::sched {

Status Validate(const SharingConfig& config) {
  for (const auto& [name, p] : config.projects) {
    const std::string where = "project '" + name + "': field '";
    if (!(p.weight >= kMinWeight && p.weight <= kMaxWeight)) {
      return InvalidArgument(where + "weight': must be from 0.001 to 1000000");
    }
    if (p.quota_milli < 0 || p.quota_milli > kMaxGpuMilli) {
      return InvalidArgument(where + "quota': must be from 0 to 1000000 GPUs");
    }
    for (const auto& [model, q] : p.model_quota_milli) {
      if (model.empty()) return InvalidArgument(where + "model_quota': a model name is empty");
      if (q < 0 || q > kMaxGpuMilli) {
        return InvalidArgument(where + "model_quota." + model + "': must be from 0 to 1000000");
      }
    }
    if (p.limit_milli && (*p.limit_milli < 0 || *p.limit_milli > kMaxGpuMilli)) {
      return InvalidArgument(where + "limit': must be from 0 to 1000000 GPUs");
    }
    if (p.user_limit_milli && (*p.user_limit_milli < 0 || *p.user_limit_milli > kMaxGpuMilli)) {
      return InvalidArgument(where + "user_limit': must be from 0 to 1000000 GPUs");
    }
  }
  const FairShareConfig& f = config.fair_share;
  if (f.half_life.value() <= 0) return InvalidArgument("field 'half_life': must be > 0 seconds");
  if (f.age_unit.value() <= 0) return InvalidArgument("field 'age_unit': must be > 0 seconds");
  if (!(f.fair_share_weight >= 0) || !(f.age_weight >= 0)) {
    return InvalidArgument("fields 'fair_share_weight' and 'age_weight': must be >= 0");
  }
  return Status::Ok();
}

const std::string& QuotaBucket(const ProjectPolicy& policy,
                               const std::vector<std::string>& gpu_models) {
  static const std::string kWholeQuota;
  if (gpu_models.size() == 1 && policy.model_quota_milli.count(gpu_models[0])) {
    return gpu_models[0];
  }
  return kWholeQuota;
}

void FairShareLedger::SetCapacity(int64_t gpu_milli, int64_t cpu_milli, int64_t memory_mib) {
  cap_gpu_ = gpu_milli;
  cap_cpu_ = cpu_milli;
  cap_memory_ = memory_mib;
  Recount();
}

ProjectId FairShareLedger::Intern(const std::string& project) {
  auto [it, added] = ids_.try_emplace(project, ProjectId(static_cast<int64_t>(accounts_.size())));
  if (added) accounts_.push_back(Account{.name = project});
  return it->second;
}

const std::string& FairShareLedger::NameOf(ProjectId project) const {
  return accounts_[project.value()].name;
}

const FairShareLedger::Account* FairShareLedger::Find(const std::string& project) const {
  auto it = ids_.find(project);
  return it == ids_.end() ? nullptr : &accounts_[it->second.value()];
}

void FairShareLedger::Charge(ProjectId project, int64_t gpu_milli, int64_t cpu_milli,
                             int64_t memory_mib, int sign) {
  Account& a = accounts_[project.value()];
  a.charged = true;
  a.gpu += sign * gpu_milli;
  a.cpu += sign * cpu_milli;
  a.memory += sign * memory_mib;
  Recount();
}

double FairShareLedger::DominantShare(const std::string& project) const {
  const Account* a = Find(project);
  return a ? ShareOf(*a) : 0;
}

double FairShareLedger::ShareOf(const Account& a) const {
  auto share = [](int64_t used, int64_t cap) {
    return cap > 0 ? static_cast<double>(used) / static_cast<double>(cap) : 0.0;
  };
  return std::max({share(a.gpu, cap_gpu_), share(a.cpu, cap_cpu_), share(a.memory, cap_memory_)});
}

void FairShareLedger::AdvanceTo(Seconds now) {
  const int64_t t = now.value();
  if (last_ && t > *last_) {
    const double h = static_cast<double>(config_.half_life.value());
    const double dt = static_cast<double>(t - *last_);
    const double keep = std::exp2(-dt / h);
    // ∫ share · 2^(-(t - s) / h) ds over [last, t] for a constant share.
    const double gained = h / std::log(2.0) * (1 - keep);
    for (Account& a : accounts_) a.decayed = a.decayed * keep + ShareOf(a) * gained;
  }
  if (!last_ || t > *last_) last_ = t;
  Recount();
}

std::set<std::string> FairShareLedger::Projects() const {
  std::set<std::string> out;
  for (const Account& a : accounts_) {
    if (a.charged) out.insert(a.name);
  }
  return out;
}

double FairShareLedger::EffectiveUsage(const std::string& project) const {
  const Account* a = Find(project);
  return a ? EffectiveUsageOf(*a) : 0;
}

double FairShareLedger::EffectiveUsageOf(const Account& a) const {
  const double h = static_cast<double>(config_.half_life.value());
  return a.decayed + ShareOf(a) * h / std::log(2.0);
}

double FairShareLedger::DecayedUsage(const std::string& project) const {
  const Account* a = Find(project);
  return a ? a->decayed : 0;
}

void FairShareLedger::Recount() {
  // EffectiveUsage of each account, without looking each up again (this runs per start).
  total_effective_ = 0;
  for (const Account& a : accounts_) total_effective_ += EffectiveUsageOf(a);
}

double FairShareLedger::Factor(ProjectId project, double weight, double total_weight) const {
  if (total_effective_ <= 0 || total_weight <= 0 || weight <= 0) return 1.0;
  const double usage = EffectiveUsageOf(accounts_[project.value()]) / total_effective_;
  const double shares = weight / total_weight;
  if (!(usage > 0) || !(shares > 0)) return 1.0;  // also keeps NaN out of the queue order
  return std::exp2(-usage / shares);
}

}  // namespace corral::sched
