// Each project's fair-share standing: past use against its weight's due part, in GPU-hours,
// and the cluster's next in line.
#include "sched/fair_share_standing.h"

#include <gtest/gtest.h>

#include <cmath>

#include "sched/sharing.h"

namespace corral::sched {
namespace {

TEST(FairShareStandings, PastUseAgainstTheWeightsPartInGpuHours) {
  // 8 GPUs; a used 3600 share-seconds (8 GPU-hours), b 1800 (4), c nothing; weights 1, 1, 2.
  // All past use 12 GPU-hours: due a 3, b 3, c 6.
  const auto s = FairShareStandings({{.project = "a", .weight = 1, .past = 3600, .effective = 3600},
                                     {.project = "b", .weight = 1, .past = 1800, .effective = 1800},
                                     {.project = "c", .weight = 2, .past = 0, .effective = 0}},
                                    8);
  ASSERT_EQ(s.size(), 3u);
  EXPECT_EQ(s[0].standing, ShareStanding::kOver);
  EXPECT_NEAR(s[0].gpu_hours_from_share, 5, 1e-9);
  EXPECT_EQ(s[1].standing, ShareStanding::kOver);
  EXPECT_NEAR(s[1].gpu_hours_from_share, 1, 1e-9);
  EXPECT_EQ(s[2].standing, ShareStanding::kUnder);
  EXPECT_NEAR(s[2].gpu_hours_from_share, -6, 1e-9);
  EXPECT_FALSE(s[0].next_in_line);
  EXPECT_FALSE(s[1].next_in_line);
  EXPECT_TRUE(s[2].next_in_line);  // the lowest usage per weight
}

TEST(FairShareStandings, WhatRunsNowCountsForTheOrderNotForTheWords) {
  // a just started the whole cluster: no past use, but the order counts its allocation, so b
  // (which used a little before) is next in line; a's words stay about the past.
  FairShareConfig config;
  config.half_life = Seconds(3600);
  FairShareLedger ledger(config);
  ledger.SetCapacity(4000, 0, 0);
  ledger.AdvanceTo(Seconds(0));
  ledger.Charge("b", 1000, 0, 0, +1);
  ledger.AdvanceTo(Seconds(60));
  ledger.Charge("b", 1000, 0, 0, -1);
  ledger.Charge("a", 4000, 0, 0, +1);
  std::vector<FairShareUse> uses;
  for (const char* p : {"a", "b"}) {
    uses.push_back({.project = p,
                    .weight = 1,
                    .past = ledger.DecayedUsage(p),
                    .effective = ledger.EffectiveUsage(p)});
  }
  EXPECT_DOUBLE_EQ(uses[0].past, 0);
  EXPECT_GT(uses[0].effective, uses[1].effective);
  const auto s = FairShareStandings(uses, 4);
  EXPECT_EQ(s[0].standing, ShareStanding::kUnder);  // it used nothing before
  EXPECT_FALSE(s[0].next_in_line);
  EXPECT_EQ(s[1].standing, ShareStanding::kOver);
  EXPECT_TRUE(s[1].next_in_line);
}

TEST(FairShareStandings, AtItsShareWithinTwoPercentAndBeforeAnyUse) {
  auto s = FairShareStandings({{.project = "a", .weight = 1, .past = 1000, .effective = 1000},
                               {.project = "b", .weight = 1, .past = 1030, .effective = 1030}},
                              8);
  EXPECT_EQ(s[0].standing, ShareStanding::kAt);  // 15 of 2030 share-seconds from its due part
  EXPECT_EQ(s[1].standing, ShareStanding::kAt);
  EXPECT_TRUE(s[0].next_in_line);
  s = FairShareStandings({{.project = "b", .weight = 1}, {.project = "a", .weight = 1}}, 8);
  for (const FairShareStanding& one : s) {
    EXPECT_EQ(one.standing, ShareStanding::kAt);
    EXPECT_EQ(one.gpu_hours_from_share, 0);
    EXPECT_FALSE(one.next_in_line);  // nothing used: nobody is next
  }
  // Equal usage per weight: the first by name.
  s = FairShareStandings({{.project = "b", .weight = 2, .past = 20, .effective = 20},
                          {.project = "a", .weight = 1, .past = 10, .effective = 10}},
                         8);
  EXPECT_FALSE(s[0].next_in_line);
  EXPECT_TRUE(s[1].next_in_line);
  // No GPUs: nothing to count in GPU-hours.
  s = FairShareStandings({{.project = "a", .weight = 1, .past = 10, .effective = 10}}, 0);
  EXPECT_EQ(s[0].gpu_hours_from_share, 0);
}

}  // namespace
}  // namespace corral::sched
