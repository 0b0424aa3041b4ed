// Where each project stands against its fair share, in the terms the projects page shows
// (docs/policies.md, "Fair share"; docs/decisions.md, "Fair-share standing"). Pure: the caller
// gives every project of the cluster with the fair-share ledger's numbers for it.
//
//  - A project's past use is its decayed usage alone (FairShareLedger::DecayedUsage), not what
//    it runs now projected over the half-life: shown as GPU-hours, that projection would say a
//    project that started one GPU a minute ago is far over its share.
//  - Its due part is its weight's part of all the projects' past use; the difference, in
//    GPU-hours (share-seconds × the cluster's GPUs / 3600), is gpu_hours_from_share (> 0: over).
//  - Within 2 % of all the past use (or a GPU-second) of its due part a project is "at" its
//    share; with no past use anywhere every project is "at" it.
//  - Next in line: the project the fair-share order serves first, the lowest effective usage
//    (FairShareLedger::EffectiveUsage, which counts what runs now) per weight, ties to the first
//    by name; none while nothing was used at all.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace corral::sched {

enum class ShareStanding { kUnder, kAt, kOver };

// One project's fair-share numbers, as the ledger has them.
struct FairShareUse {
  std::string project;
  double weight = 1.0;   // its fair-share weight (> 0; 0 or less: never next in line)
  double past = 0;       // decayed usage, share-seconds
  double effective = 0;  // decayed usage plus what it runs now over the half-life / ln 2
};

struct FairShareStanding {
  ShareStanding standing = ShareStanding::kAt;
  double gpu_hours_from_share = 0;  // past use beyond its due part (< 0: short of it)
  bool next_in_line = false;
};

// The standing of each of `uses` (every project that shares the cluster, by name), in the
// same order; `cluster_gpus`: the cluster's GPUs (0: every difference is 0 GPU-hours).
std::vector<FairShareStanding> FairShareStandings(const std::vector<FairShareUse>& uses,
                                                  int64_t cluster_gpus);

}  // namespace corral::sched
