// Fair-share accounting, and the scheduler's sharing features: queue orders, project limits,
// quotas with borrowing and reclaim, EASY backfill and estimated starts.
#include "sched/sharing.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <map>

#include "common/rng.h"
#include "sched/scheduler.h"

namespace corral::sched {
namespace {

using ::testing::HasSubstr;

TEST(FairShareLedger, FactorFallsWithUseAndRecoversWithDecay) {
  FairShareConfig config;
  config.half_life = Seconds(100);
  FairShareLedger ledger(config);
  ledger.SetCapacity(8000, 64000, 1 << 20);
  ledger.AdvanceTo(Seconds(0));
  EXPECT_EQ(ledger.Factor(ledger.Intern("a"), 1, 2), 1.0);  // nobody used anything
  ledger.Charge("a", 4000, 1000, 1024, +1);                 // half the GPUs: dominant share 0.5
  EXPECT_DOUBLE_EQ(ledger.DominantShare("a"), 0.5);
  // Counted at once: a holds all usage, b none.
  EXPECT_LT(ledger.Factor(ledger.Intern("a"), 1, 2), 0.3);
  EXPECT_EQ(ledger.Factor(ledger.Intern("b"), 1, 2), 1.0);
  ledger.AdvanceTo(Seconds(100));
  ledger.Charge("a", 4000, 1000, 1024, -1);
  const double after_run = ledger.EffectiveUsage("a");
  // ∫ 0.5 · 2^(-(100 - s)/100) ds over [0, 100] = 0.5 · 100 / ln 2 · (1 - 1/2)
  EXPECT_NEAR(after_run, 0.5 * 100 / std::log(2.0) * 0.5, 1e-9);
  ledger.AdvanceTo(Seconds(200));
  EXPECT_NEAR(ledger.EffectiveUsage("a"), after_run / 2, 1e-9);  // one half-life later
  // A heavier weight tolerates the same use better.
  ledger.Charge("b", 2000, 0, 0, +1);
  EXPECT_GT(ledger.Factor(ledger.Intern("a"), 3, 4), ledger.Factor(ledger.Intern("a"), 1, 4));
}

// Project ids: dense in order of first sight, stable, and an account opened by Intern alone is
// no use: not among Projects(), no usage, no effect on others' factors.
TEST(FairShareLedger, InternedIdsAreDenseAndAnUnchargedAccountIsNoUse) {
  FairShareLedger ledger(FairShareConfig{});
  ledger.SetCapacity(8000, 64000, 1 << 20);
  ledger.AdvanceTo(Seconds(0));
  const ProjectId a = ledger.Intern("a");
  const ProjectId b = ledger.Intern("b");
  EXPECT_EQ(a.value(), 0);
  EXPECT_EQ(b.value(), 1);
  EXPECT_EQ(ledger.Intern("a"), a);
  EXPECT_EQ(ledger.NameOf(b), "b");
  EXPECT_EQ(ledger.ProjectCount(), 2u);
  EXPECT_TRUE(ledger.Projects().empty());
  ledger.Charge("c", 4000, 0, 0, +1);  // by name: interned on the way
  EXPECT_EQ(ledger.ProjectCount(), 3u);
  EXPECT_EQ(ledger.Projects(), (std::set<std::string>{"c"}));
  ledger.AdvanceTo(Seconds(3600));
  EXPECT_EQ(ledger.EffectiveUsage("a"), 0.0);
  EXPECT_EQ(ledger.DecayedUsage("b"), 0.0);
  EXPECT_EQ(ledger.Factor(a, 1, 2), 1.0);
  // The factor by id is the one a ledger that never saw `a` and `b` gives.
  FairShareLedger only_c(FairShareConfig{});
  only_c.SetCapacity(8000, 64000, 1 << 20);
  only_c.AdvanceTo(Seconds(0));
  only_c.Charge("c", 4000, 0, 0, +1);
  only_c.AdvanceTo(Seconds(3600));
  EXPECT_EQ(ledger.Factor(ledger.Intern("c"), 1, 3), only_c.Factor(only_c.Intern("c"), 1, 3));
  EXPECT_LT(ledger.Factor(ledger.Intern("c"), 1, 3), 1.0);
}

TEST(SharingConfig, ValidationNamesTheField) {
  SharingConfig config;
  config.projects["vision"].weight = 0;
  EXPECT_THAT(Validate(config).message(), HasSubstr("project 'vision': field 'weight'"));
  config.projects["vision"].weight = 1;
  config.projects["vision"].limit_milli = -1;
  EXPECT_THAT(Validate(config).message(), HasSubstr("'limit'"));
  config.projects["vision"].limit_milli.reset();
  config.fair_share.half_life = Seconds(0);
  EXPECT_THAT(Validate(config).message(), HasSubstr("half_life"));
  EXPECT_FALSE(Scheduler::Create(
                   SchedulerConfig{"bestfit", QueueOrder::kFifo, Blocking::kSkip, 0, config}, {})
                   .ok());
}

model::Job Job(int64_t id, const std::string& project, int gpus, int64_t submit = 0,
               int64_t duration = 100, int tasks = 1, int priority = 0) {
  model::Job j;
  j.id = JobId(id);
  j.user = project + "-user";
  j.project = project;
  j.priority = priority;
  j.submit_time = Seconds(submit);
  j.tasks = tasks;
  j.resources = model::MakeResources(gpus, gpus > 0 ? 1000 : 0, 1000, 1024);
  j.expected_duration = Seconds(duration);
  return j;
}

std::unique_ptr<Scheduler> Make(std::vector<int> node_gpus, SchedulerConfig config) {
  auto s = Scheduler::Create(config, {});
  EXPECT_TRUE(s.ok()) << s.status().ToString();
  for (size_t i = 0; i < node_gpus.size(); ++i) {
    EXPECT_TRUE((*s)->AddNode(model::MakeNode("n" + std::to_string(i + 1), "A100", node_gpus[i],
                                              CpuMilli(64000), MemoryMib(262144)))
                    .ok());
  }
  return std::move(s).value();
}

std::vector<int64_t> Ids(const std::vector<JobStart>& starts) {
  std::vector<int64_t> ids;
  for (const auto& s : starts) ids.push_back(s.job.value());
  return ids;
}

SchedulerConfig Config(QueueOrder order, Blocking blocking = Blocking::kSkip) {
  SchedulerConfig c{"bestfit"};
  c.order = order;
  c.blocking = blocking;
  return c;
}

TEST(SchedulerOrder, FairShareAlternatesBetweenProjectsWhereFifoServesTheFlood) {
  for (QueueOrder order : {QueueOrder::kFifo, QueueOrder::kFairShare}) {
    auto s = Make({2}, Config(order));
    for (int i = 1; i <= 4; ++i) ASSERT_TRUE(s->Submit(Job(i, "flood", 1, 0)).ok());
    for (int i = 5; i <= 6; ++i) ASSERT_TRUE(s->Submit(Job(i, "other", 1, 1)).ok());
    auto started = Ids(s->Schedule(Seconds(1)).starts);
    if (order == QueueOrder::kFifo) {
      EXPECT_EQ(started, (std::vector<int64_t>{1, 2}));
    } else {
      EXPECT_EQ(started, (std::vector<int64_t>{1, 5}));  // after job 1, "flood" ranks lower
    }
  }
}

TEST(SchedulerOrder, AgeBoundsTheWaitOfAHeavyUsersJob) {
  SchedulerConfig config = Config(QueueOrder::kFairShare);
  config.sharing.fair_share.age_unit = Seconds(100);  // 100 score per 100 s waited
  auto s = Make({1}, config);
  ASSERT_TRUE(s->Submit(Job(1, "heavy", 1, 0)).ok());
  ASSERT_EQ(Ids(s->Schedule(Seconds(0)).starts), (std::vector<int64_t>{1}));
  ASSERT_TRUE(s->Submit(Job(2, "heavy", 1, 0)).ok());  // waits; "heavy" has all the usage
  ASSERT_TRUE(s->Finish(JobId(1)).ok());
  // A fresh job of a light project arrives at each pass; the heavy job's age catches up.
  int64_t t = 0;
  for (int64_t id = 3; id < 50; ++id) {
    t += 100;
    ASSERT_TRUE(s->Submit(Job(id, "light", 1, t)).ok());
    auto started = Ids(s->Schedule(Seconds(t)).starts);
    ASSERT_EQ(started.size(), 1u);
    if (started[0] == 2) break;
    ASSERT_TRUE(s->Finish(JobId(started[0])).ok());
  }
  EXPECT_LT(t, 1100) << "the heavy project's job waited without bound";
  EXPECT_EQ(s->AllocationsOf(JobId(2)) != nullptr, true);
}

TEST(SchedulerOrder, SjfByExpectedDurationAndQssfByEstimatedService) {
  auto sjf = Make({4}, Config(QueueOrder::kSjf, Blocking::kStrict));
  ASSERT_TRUE(sjf->Submit(Job(1, "p", 4, 0, 300)).ok());
  ASSERT_TRUE(sjf->Submit(Job(2, "p", 4, 1, 100)).ok());
  ASSERT_TRUE(sjf->Submit(Job(3, "p", 4, 2, 200)).ok());
  std::vector<int64_t> order;
  for (int pass = 0; pass < 3; ++pass) {
    for (int64_t id : Ids(sjf->Schedule(Seconds(10)).starts)) {
      order.push_back(id);
      ASSERT_TRUE(sjf->Finish(JobId(id)).ok());
    }
  }
  EXPECT_EQ(order, (std::vector<int64_t>{2, 3, 1}));

  // QSSF: 4 GPUs × 50 s = 200 GPU-s is more service than 1 GPU × 100 s.
  SchedulerConfig config = Config(QueueOrder::kQssf, Blocking::kStrict);
  config.estimate = [](const model::Job& j) { return Seconds(j.id.value() == 1 ? 50 : 100); };
  auto qssf = Make({4}, config);
  ASSERT_TRUE(qssf->Submit(Job(1, "p", 4, 0)).ok());
  ASSERT_TRUE(qssf->Submit(Job(2, "p", 1, 5)).ok());
  EXPECT_EQ(Ids(qssf->Schedule(Seconds(10)).starts), (std::vector<int64_t>{2}));
}

TEST(SchedulerOrder, QssfReordersPendingJobsWhenEstimatesChange) {
  // The estimator reads a table the test changes, as a learning predictor's answers change.
  std::map<int64_t, int64_t> estimate_of = {{2, 100}, {3, 200}};
  SchedulerConfig config = Config(QueueOrder::kQssf, Blocking::kStrict);
  config.estimate = [&](const model::Job& j) { return Seconds(estimate_of[j.id.value()]); };
  auto s = Make({1}, config);
  estimate_of[1] = 10;
  ASSERT_TRUE(s->Submit(Job(1, "p", 1, 0)).ok());
  ASSERT_EQ(Ids(s->Schedule(Seconds(0)).starts), (std::vector<int64_t>{1}));
  ASSERT_TRUE(s->Submit(Job(2, "p", 1, 1)).ok());
  ASSERT_TRUE(s->Submit(Job(3, "p", 1, 2)).ok());
  ASSERT_TRUE(s->Finish(JobId(1)).ok());
  estimate_of[2] = 1000;  // learned: job 2 is long, job 3 is short
  estimate_of[3] = 20;
  // Two pending jobs: one noted change is one per kRekeyShare (≥ 2) pending jobs, enough.
  s->NoteEstimatesChanged();
  EXPECT_EQ(Ids(s->Schedule(Seconds(10)).starts), (std::vector<int64_t>{3}));

  // With more pending jobs than kRekeyShare, one note is not enough to re-key; a second is.
  std::map<int64_t, int64_t>& later = estimate_of;
  auto many = Make({1}, config);
  const int64_t pending = Scheduler::kRekeyShare + 10;  // ≤ 2 × kRekeyShare
  for (int64_t id = 100; id < 100 + pending; ++id) {
    later[id] = 1000 - id;  // job 100 + pending - 1 is the shortest
    ASSERT_TRUE(many->Submit(Job(id, "p", 1, 0)).ok());
  }
  ASSERT_TRUE(many->Submit(Job(99, "p", 1, 0)).ok());
  later[99] = 1;  // submitted as the shortest, so it starts first
  ASSERT_EQ(Ids(many->Schedule(Seconds(0)).starts), (std::vector<int64_t>{99}));
  ASSERT_TRUE(many->Finish(JobId(99)).ok());
  later[100] = 1;  // learned: job 100 is now the shortest
  many->NoteEstimatesChanged();
  EXPECT_EQ(Ids(many->Schedule(Seconds(1)).starts), (std::vector<int64_t>{100 + pending - 1}));
  ASSERT_TRUE(many->Finish(JobId(100 + pending - 1)).ok());
  many->NoteEstimatesChanged();  // the second note since the last re-keying
  EXPECT_EQ(Ids(many->Schedule(Seconds(2)).starts), (std::vector<int64_t>{100}));

  // Without a note the keys stay as they were at submission.
  auto stale = Make({1}, config);
  ASSERT_TRUE(stale->Submit(Job(4, "p", 1, 0)).ok());
  ASSERT_TRUE(stale->Submit(Job(5, "p", 1, 0)).ok());
  estimate_of[4] = 10;  // unknown at submission: 0 → 1 s, the shortest
  estimate_of[5] = 5;
  EXPECT_EQ(Ids(stale->Schedule(Seconds(0)).starts), (std::vector<int64_t>{4}));
}

TEST(SchedulerSharing, HardLimitHoldsAProjectBack) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["capped"].limit_milli = 2000;
  auto s = Make({8}, config);
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(s->Submit(Job(i, "capped", 1)).ok());
  ASSERT_TRUE(s->Submit(Job(4, "free", 1)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(0)).starts), (std::vector<int64_t>{1, 2, 4}));
  auto reason = s->PendingReasonOf(JobId(3));
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->code, kReasonProjectLimit);
  EXPECT_THAT(reason->message, HasSubstr("its limit is 2"));
  ASSERT_TRUE(s->Finish(JobId(1)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(1)).starts), (std::vector<int64_t>{3}));
}

TEST(SchedulerSharing, UserLimitHoldsOneUserBackNotTheOthers) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["lab"].user_limit_milli = 2000;
  auto s = Make({8}, config);
  auto job = [](int64_t id, const std::string& user, int64_t submit) {
    model::Job j = Job(id, "lab", 1, submit);
    j.user = user;
    return j;
  };
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(s->Submit(job(i, "ann", i)).ok());
  ASSERT_TRUE(s->Submit(job(9, "bob", 9)).ok());  // same project and shape, behind ann's
  EXPECT_EQ(Ids(s->Schedule(Seconds(10)).starts), (std::vector<int64_t>{1, 2, 9}));
  auto reason = s->PendingReasonOf(JobId(3));
  ASSERT_TRUE(reason);
  EXPECT_EQ(reason->code, kReasonUserLimit);
  EXPECT_THAT(reason->message, HasSubstr("the limit per user is 2"));
  ASSERT_TRUE(s->Finish(JobId(1)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(11)).starts), (std::vector<int64_t>{3}));
}

TEST(SchedulerSharing, BorrowedGpusAreReclaimedForTheQuotaOwner) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["owner"].quota_milli = 4000;
  config.sharing.projects["borrower"].quota_milli = 4000;
  auto s = Make({4, 4}, config);
  for (int i = 1; i <= 8; ++i) ASSERT_TRUE(s->Submit(Job(i, "borrower", 1, i)).ok());
  auto first = s->Schedule(Seconds(10));
  ASSERT_EQ(first.starts.size(), 8u);
  for (const JobStart& start : first.starts) {
    EXPECT_EQ(start.borrowed, start.job.value() > 4) << start.job.value();
  }
  EXPECT_EQ(s->BorrowedJobs(), (std::vector<JobId>{JobId(5), JobId(6), JobId(7), JobId(8)}));

  ASSERT_TRUE(s->Submit(Job(20, "owner", 2, 11)).ok());
  Decisions d = s->Schedule(Seconds(12));
  ASSERT_EQ(Ids(d.starts), (std::vector<int64_t>{20}));
  EXPECT_FALSE(d.starts[0].borrowed);
  // Exactly two borrowed jobs, the most recently started, on the node the owner's job got.
  ASSERT_EQ(d.preemptions.size(), 2u);
  for (const Preemption& p : d.preemptions) {
    EXPECT_GT(p.job.value(), 4) << "a job inside its project's quota was preempted";
    EXPECT_EQ(p.for_job, JobId(20));
    EXPECT_THAT(p.reason, HasSubstr("within its quota"));
    EXPECT_EQ(s->AllocationsOf(p.job), nullptr);
    EXPECT_TRUE(s->PendingReasonOf(p.job).has_value());  // queued again
  }
  EXPECT_EQ(s->ProjectUsage("owner"), 2000);
  EXPECT_EQ(s->ProjectUsage("borrower"), 6000);

  // Beyond its quota the owner only borrows: nothing inside the borrower's quota is touched,
  // and the borrowed work is reclaimed only up to the owner's quota.
  ASSERT_TRUE(s->Submit(Job(21, "owner", 2, 13)).ok());
  ASSERT_TRUE(s->Submit(Job(22, "owner", 2, 14)).ok());
  d = s->Schedule(Seconds(15));
  EXPECT_EQ(Ids(d.starts), (std::vector<int64_t>{21}));
  EXPECT_EQ(d.preemptions.size(), 2u);
  EXPECT_EQ(s->BorrowedJobs().size(), 0u);
  d = s->Schedule(Seconds(16));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(SchedulerSharing, AQuotaOwnerGoesBeforeAnOlderBorrowerInAPass) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["owner"].quota_milli = 4000;
  auto s = Make({4}, config);
  ASSERT_TRUE(s->Submit(Job(1, "borrower", 4, 0)).ok());  // ahead in FIFO order
  ASSERT_TRUE(s->Submit(Job(2, "owner", 2, 1)).ok());
  // Started and then preempted in the same pass would launch and kill at once: the owner's
  // job, within its quota, goes first; the borrower waits for capacity nobody is owed.
  Decisions d = s->Schedule(Seconds(2));
  EXPECT_EQ(Ids(d.starts), (std::vector<int64_t>{2}));
  EXPECT_TRUE(d.preemptions.empty());
  EXPECT_TRUE(s->Schedule(Seconds(3)).starts.empty());
}

TEST(SchedulerSharing, FreedGpusGoToTheQuotaOwnerBeforeBorrowers) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["a"].quota_milli = 2000;
  config.sharing.projects["b"].quota_milli = 2000;
  auto s = Make({4}, config);
  ASSERT_TRUE(s->Submit(Job(1, "a", 1, 0)).ok());
  ASSERT_TRUE(s->Submit(Job(2, "a", 1, 0)).ok());
  ASSERT_TRUE(s->Submit(Job(11, "b", 1, 1)).ok());
  ASSERT_TRUE(s->Submit(Job(12, "b", 1, 1)).ok());
  ASSERT_EQ(s->Schedule(Seconds(2)).starts.size(), 4u);
  ASSERT_TRUE(s->Submit(Job(3, "a", 1, 3)).ok());  // older, but beyond a's quota
  ASSERT_TRUE(s->Submit(Job(4, "a", 1, 3)).ok());
  ASSERT_TRUE(s->Submit(Job(13, "b", 1, 4)).ok());  // within b's quota once 11, 12 end
  ASSERT_TRUE(s->Finish(JobId(11)).ok());
  ASSERT_TRUE(s->Finish(JobId(12)).ok());
  Decisions d = s->Schedule(Seconds(5));
  EXPECT_EQ(Ids(d.starts), (std::vector<int64_t>{13, 3}));  // the owner first, then lending
  EXPECT_EQ(s->ProjectUsage("a"), 3000);
  EXPECT_TRUE(s->Schedule(Seconds(6)).preemptions.empty());  // nothing to take back
}

TEST(SchedulerSharing, NoReclaimWhenTurnedOff) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["owner"].quota_milli = 4000;
  config.sharing.reclaim = false;
  auto s = Make({4}, config);
  for (int i = 1; i <= 4; ++i) ASSERT_TRUE(s->Submit(Job(i, "borrower", 1, i)).ok());
  ASSERT_EQ(s->Schedule(Seconds(10)).starts.size(), 4u);
  ASSERT_TRUE(s->Submit(Job(9, "owner", 1, 11)).ok());
  Decisions d = s->Schedule(Seconds(12));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preemptions.empty());
}

TEST(SchedulerBackfill, ShortJobsPassTheReservedHeadButNotLongOnes) {
  auto s = Make({4}, Config(QueueOrder::kFifo, Blocking::kBackfill));
  ASSERT_TRUE(s->Submit(Job(1, "p", 2, 0, 100)).ok());
  ASSERT_EQ(Ids(s->Schedule(Seconds(0)).starts), (std::vector<int64_t>{1}));
  ASSERT_TRUE(s->Submit(Job(2, "p", 4, 1, 100)).ok());  // head: needs the whole node
  ASSERT_TRUE(s->Submit(Job(3, "p", 2, 2, 500)).ok());  // would hold GPUs past t=100
  EXPECT_TRUE(s->Schedule(Seconds(5)).starts.empty());
  auto reserved = s->ReservedStart();
  ASSERT_TRUE(reserved);
  EXPECT_EQ(reserved->first, JobId(2));
  EXPECT_EQ(reserved->second, Seconds(100));
  EXPECT_EQ(s->PendingReasonOf(JobId(3))->code, kReasonReservation);
  EXPECT_THAT(s->PendingReasonOf(JobId(3))->message, HasSubstr("would delay job 2"));
  // A job of the same shape that ends before the reservation passes both.
  ASSERT_TRUE(s->Submit(Job(4, "p", 2, 3, 50)).ok());  // ends at 60 < 100
  EXPECT_EQ(Ids(s->Schedule(Seconds(10)).starts), (std::vector<int64_t>{4}));
  EXPECT_EQ(s->ReservedStart()->second, Seconds(100));

  // Without backfill the long job takes the GPUs and the head waits past t=100.
  auto skip = Make({4}, Config(QueueOrder::kFifo, Blocking::kSkip));
  ASSERT_TRUE(skip->Submit(Job(1, "p", 2, 0, 100)).ok());
  ASSERT_EQ(skip->Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(skip->Submit(Job(2, "p", 4, 1, 100)).ok());
  ASSERT_TRUE(skip->Submit(Job(3, "p", 2, 2, 500)).ok());
  EXPECT_EQ(Ids(skip->Schedule(Seconds(10)).starts), (std::vector<int64_t>{3}));
}

TEST(SchedulerBackfill, JobsOffTheReservedNodesMayRunLong) {
  auto s = Make({4, 4}, Config(QueueOrder::kFifo, Blocking::kBackfill));
  ASSERT_TRUE(s->Submit(Job(1, "p", 4, 0, 100)).ok());
  ASSERT_TRUE(s->Submit(Job(2, "p", 2, 0, 1000)).ok());
  ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 2u);
  ASSERT_TRUE(s->Submit(Job(3, "p", 4, 1, 100)).ok());   // reserved on the node job 1 frees
  ASSERT_TRUE(s->Submit(Job(4, "p", 2, 2, 5000)).ok());  // fits beside job 2
  EXPECT_EQ(Ids(s->Schedule(Seconds(10)).starts), (std::vector<int64_t>{4}));
  EXPECT_EQ(s->ReservedStart()->second, Seconds(100));
  // Elastic growth leaves the reserved node (job 1's) alone.
  EXPECT_EQ(s->ReservedNodes(), (std::vector<bool>{true, false}));
}

// Property: with exact estimates, a reserved job starts no later than its reservation. A pass
// runs at every arrival and every end, as in the simulator.
TEST(SchedulerBackfill, NeverDelaysTheReservedJob) {
  for (uint64_t seed = 1; seed <= 20; ++seed) {
    SeededRng rng(seed);
    auto s = Make({8, 8, 4}, Config(QueueOrder::kFifo, Blocking::kBackfill));
    std::map<int64_t, int64_t> duration, ends, promised;  // job -> seconds / end / reservation
    int64_t next_arrival = 0, next_id = 1, reservations = 0;
    while (next_id <= 200 || !ends.empty()) {
      int64_t t = next_id <= 200 ? next_arrival : INT64_MAX;
      for (const auto& [id, end] : ends) t = std::min(t, end);
      for (auto it = ends.begin(); it != ends.end();) {
        if (it->second != t) {
          ++it;
          continue;
        }
        ASSERT_TRUE(s->Finish(JobId(it->first)).ok());
        it = ends.erase(it);
      }
      if (next_id <= 200 && t == next_arrival) {
        const int gpus = std::vector<int>{1, 1, 2, 4, 8}[rng.Uniform(5)];
        duration[next_id] = 10 + static_cast<int64_t>(rng.Uniform(301));
        ASSERT_TRUE(s->Submit(Job(next_id, "p", gpus, t, duration[next_id])).ok());
        ++next_id;
        next_arrival = t + static_cast<int64_t>(rng.Uniform(31));
      }
      for (const JobStart& start : s->Schedule(Seconds(t)).starts) {
        const int64_t id = start.job.value();
        if (promised.count(id)) {
          EXPECT_LE(t, promised[id]) << "seed " << seed << ": job " << id << " was delayed";
        }
        ends[id] = t + duration[id];
      }
      if (auto r = s->ReservedStart()) {
        ++reservations;
        auto [it, fresh] = promised.emplace(r->first.value(), r->second.value());
        if (!fresh) it->second = std::min(it->second, r->second.value());
      }
    }
    EXPECT_GT(reservations, 0) << "seed " << seed << ": the workload never blocked";
  }
}

TEST(SchedulerReconfigure, NewRulesApplyToWaitingAndRunningJobs) {
  auto s = Make({2}, Config(QueueOrder::kFifo));
  ASSERT_TRUE(s->Submit(Job(1, "a", 1, 0, 300)).ok());
  ASSERT_TRUE(s->Submit(Job(2, "a", 1, 1, 100)).ok());
  ASSERT_EQ(s->Schedule(Seconds(2)).starts.size(), 2u);
  ASSERT_TRUE(s->Submit(Job(3, "a", 2, 3, 300)).ok());
  ASSERT_TRUE(s->Submit(Job(4, "a", 2, 4, 100)).ok());
  SchedulerConfig sjf = Config(QueueOrder::kSjf);
  sjf.sharing.projects["a"].quota_milli = 1000;
  ASSERT_TRUE(s->Reconfigure(sjf).ok());
  EXPECT_EQ(s->BorrowedJobs(), (std::vector<JobId>{JobId(2)}));  // quota 1 GPU, two running
  ASSERT_TRUE(s->Finish(JobId(1)).ok());
  ASSERT_TRUE(s->Finish(JobId(2)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(5)).starts), (std::vector<int64_t>{4}));  // shortest first
  SchedulerConfig other = sjf;
  other.policy = "fgd";
  EXPECT_EQ(s->Reconfigure(other).code(), StatusCode::kInvalidArgument);
  other = sjf;
  other.sharing.projects["a"].weight = -1;
  EXPECT_EQ(s->Reconfigure(other).code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerLas, LeastAttainedServiceFirstAndPreemptive) {
  SchedulerConfig config = Config(QueueOrder::kLas);
  config.las_thresholds_gpu_s = {100};
  auto s = Make({4}, config);
  ASSERT_TRUE(s->Submit(Job(1, "p", 4, 0)).ok());
  ASSERT_EQ(Ids(s->Schedule(Seconds(0)).starts), (std::vector<int64_t>{1}));
  // At t=10 job 1 has 40 GPU-s: still in queue 0 with the newcomer, which waits its turn.
  ASSERT_TRUE(s->Submit(Job(2, "p", 2, 10)).ok());
  Decisions d = s->Schedule(Seconds(10));
  EXPECT_TRUE(d.starts.empty());
  EXPECT_TRUE(d.preemptions.empty());
  // At t=50 it has 200 GPU-s, past the threshold: the newcomer (0 GPU-s) preempts it.
  d = s->Schedule(Seconds(50));
  EXPECT_EQ(Ids(d.starts), (std::vector<int64_t>{2}));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(d.preemptions[0].job, JobId(1));
  EXPECT_THAT(d.preemptions[0].reason, HasSubstr("2D-LAS"));
  // A fresh job goes before the preempted one (queue 0 before queue 1), whatever its age.
  ASSERT_TRUE(s->Submit(Job(3, "p", 2, 60)).ok());
  ASSERT_TRUE(s->Finish(JobId(2)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(70)).starts), (std::vector<int64_t>{3}));
  ASSERT_TRUE(s->Finish(JobId(3)).ok());
  EXPECT_EQ(Ids(s->Schedule(Seconds(80)).starts), (std::vector<int64_t>{1}));
  SchedulerConfig bad = config;
  bad.las_thresholds_gpu_s = {100, 50};
  EXPECT_EQ(s->Reconfigure(bad).code(), StatusCode::kInvalidArgument);
}

TEST(SchedulerQueue, EstimatedStartsFollowTheRunningJobsEnds) {
  auto s = Make({4}, Config(QueueOrder::kFifo));
  ASSERT_TRUE(s->Submit(Job(1, "p", 4, 0, 100)).ok());
  ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s->Submit(Job(2, "p", 4, 1, 50)).ok());
  ASSERT_TRUE(s->Submit(Job(4, "p", 16, 2, 10)).ok());  // never fits; must not delay the rest
  ASSERT_TRUE(s->Submit(Job(3, "p", 2, 3, 10)).ok());
  s->Schedule(Seconds(5));
  const double free_before = static_cast<double>(s->state().FreeGpuMilli());
  auto queue = s->Queue(Seconds(5), 10);
  ASSERT_EQ(queue.size(), 3u);
  EXPECT_EQ(queue[0].job, JobId(2));
  EXPECT_EQ(queue[0].estimated_start, Seconds(100));
  EXPECT_EQ(queue[1].job, JobId(4));
  EXPECT_FALSE(queue[1].estimated_start.has_value());
  EXPECT_EQ(queue[1].reason.code, kReasonNeverFits);
  EXPECT_EQ(queue[2].job, JobId(3));
  EXPECT_EQ(queue[2].estimated_start, Seconds(150));
  EXPECT_EQ(static_cast<double>(s->state().FreeGpuMilli()), free_before);  // changed nothing
  EXPECT_EQ(s->Queue(Seconds(5), 1).size(), 1u);
}

// Victim choice (issue 20): today's rule takes the most recently started borrower; least lost
// work takes the one that checkpointed last, and neither takes a job before its minimum run.
TEST(SchedulerSharing, LeastLostWorkPreemptsTheJobThatCheckpointedLast) {
  for (VictimOrder victims : {VictimOrder::kPriority, VictimOrder::kLeastLostWork}) {
    SchedulerConfig config = Config(QueueOrder::kFifo);
    config.sharing.projects["owner"].quota_milli = 2000;
    config.victims = victims;
    auto s = Make({2}, config);
    ASSERT_TRUE(s->Submit(Job(1, "borrower", 1, 0)).ok());
    ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 1u);
    ASSERT_TRUE(s->Submit(Job(2, "borrower", 1, 100)).ok());
    ASSERT_EQ(s->Schedule(Seconds(100)).starts.size(), 1u);
    ASSERT_TRUE(s->NoteCheckpoint(JobId(1), Seconds(990)).ok());
    EXPECT_DOUBLE_EQ(s->LostWorkOf(JobId(1), Seconds(1000)), 10);
    EXPECT_DOUBLE_EQ(s->LostWorkOf(JobId(2), Seconds(1000)), 900);  // never: since its start
    ASSERT_TRUE(s->Submit(Job(20, "owner", 1, 1000)).ok());
    Decisions d = s->Schedule(Seconds(1000));
    ASSERT_EQ(d.preemptions.size(), 1u);
    EXPECT_EQ(d.preemptions[0].job, JobId(victims == VictimOrder::kPriority ? 2 : 1))
        << VictimOrderName(victims);
  }
  EXPECT_EQ(*ParseVictimOrder("least-lost-work"), VictimOrder::kLeastLostWork);
  EXPECT_THAT(ParseVictimOrder("newest").status().message(), HasSubstr("priority"));
  EXPECT_EQ(Make({1}, Config(QueueOrder::kFifo))->NoteCheckpoint(JobId(9), Seconds(1)).code(),
            StatusCode::kNotFound);
}

TEST(SchedulerSharing, NoVictimBeforeItsMinimumRun) {
  SchedulerConfig config = Config(QueueOrder::kFifo);
  config.sharing.projects["owner"].quota_milli = 1000;
  config.min_run_before_preemption = Seconds(600);
  auto s = Make({1}, config);
  ASSERT_TRUE(s->Submit(Job(1, "borrower", 1, 0)).ok());
  ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s->Submit(Job(20, "owner", 1, 10)).ok());
  EXPECT_TRUE(s->Schedule(Seconds(599)).preemptions.empty());
  Decisions d = s->Schedule(Seconds(600));
  ASSERT_EQ(d.preemptions.size(), 1u);
  EXPECT_EQ(Ids(d.starts), (std::vector<int64_t>{20}));
}

}  // namespace
}  // namespace corral::sched
