#include "server/control/workload_profile.h"

#include <gtest/gtest.h>

namespace corral::server {
namespace {

model::TaskResources Gpus(int gpus) { return model::MakeResources(gpus, 1000, 4000, 1024); }

TEST(WorkloadProfile, NoProfileBelowMinJobsThenTheFirstAtOnce) {
  WorkloadProfile p(
      {.capacity = 10, .min_jobs = 3, .refresh_jobs = 100, .refresh_interval = Seconds(600)});
  EXPECT_FALSE(p.Due(Seconds(0)));  // nothing observed
  p.Observe(Gpus(1));
  p.Observe(Gpus(1));
  EXPECT_FALSE(p.Due(Seconds(10000)));  // 2 < min_jobs, however long it has been
  p.Observe(Gpus(1));
  ASSERT_TRUE(p.Due(Seconds(1)));
  const auto typical = p.Refresh(Seconds(1));
  ASSERT_EQ(typical.size(), 1u);
  EXPECT_EQ(typical[0].gpus, 1);
  EXPECT_EQ(typical[0].count, 3);
  EXPECT_EQ(p.profile_jobs(), 3u);
  EXPECT_FALSE(p.Due(Seconds(1)));  // nothing new
}

TEST(WorkloadProfile, RefreshedAfterNJobsOrTWithANewJob) {
  WorkloadProfile p(
      {.capacity = 100, .min_jobs = 1, .refresh_jobs = 5, .refresh_interval = Seconds(600)});
  p.Observe(Gpus(1));
  (void)p.Refresh(Seconds(0));
  for (int i = 0; i < 4; ++i) p.Observe(Gpus(2));
  EXPECT_FALSE(p.Due(Seconds(599)));
  EXPECT_TRUE(p.Due(Seconds(600)));  // T passed, with new jobs
  p.Observe(Gpus(2));
  EXPECT_TRUE(p.Due(Seconds(1)));  // N new jobs
  (void)p.Refresh(Seconds(1));
  EXPECT_FALSE(p.Due(Seconds(100000)));  // T passed, but nothing new
}

TEST(WorkloadProfile, TheRingKeepsTheLastCapacityJobs) {
  WorkloadProfile p(
      {.capacity = 4, .min_jobs = 4, .refresh_jobs = 1, .refresh_interval = Seconds(600)});
  for (int i = 0; i < 4; ++i) p.Observe(Gpus(1));
  EXPECT_EQ(p.Refresh(Seconds(0))[0].gpus, 1);
  for (int i = 0; i < 3; ++i) p.Observe(Gpus(8));
  auto typical = p.Refresh(Seconds(1));  // three 8-GPU jobs and one 1-GPU job
  ASSERT_FALSE(typical.empty());
  EXPECT_EQ(typical[0].gpus, 8);
  EXPECT_EQ(typical[0].count, 3);
  p.Observe(Gpus(8));
  typical = p.Refresh(Seconds(2));  // the 1-GPU jobs are forgotten
  ASSERT_EQ(typical.size(), 1u);
  EXPECT_EQ(typical[0].count, 4);
  EXPECT_EQ(p.remembered(), 4u);
  EXPECT_EQ(p.profile_jobs(), 4u);
}

}  // namespace
}  // namespace corral::server
