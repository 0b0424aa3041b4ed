// Honest estimates (docs/prediction.md, "Estimated starts"): a running job's expected end never
// slides with the clock; queued jobs' estimated starts respect arrays' and projects' limits and
// change only when something happens; and a replay of a known queue measures how far the
// estimates are from the actual starts.

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "sched/scheduler.h"

namespace corral::sched {
namespace {

// A job of one GPU per task; `time_limit` 0: none.
model::Job EtaJob(int64_t id, int gpus, int64_t submit, int64_t time_limit = 0,
                  const std::string& project = "vision") {
  model::Job j;
  j.id = JobId(id);
  j.user = "alice";
  j.project = project;
  j.submit_time = Seconds(submit);
  j.resources = model::MakeResources(gpus, 1000, 1000, 1024);
  if (time_limit > 0) j.time_limit = Seconds(time_limit);
  return j;
}

// A scheduler on one node of `gpus` GPUs whose estimate of job i is `estimates[i]`.
std::unique_ptr<Scheduler> EtaScheduler(int gpus, const std::map<int64_t, int64_t>* estimates,
                                        Blocking blocking = Blocking::kSkip,
                                        SharingConfig sharing = {}) {
  SchedulerConfig config{"bestfit", QueueOrder::kFifo, blocking};
  config.sharing = std::move(sharing);
  config.estimate = [estimates](const model::Job& j) {
    return Seconds(estimates->at(j.id.value()));
  };
  auto s = Scheduler::Create(config, {});
  EXPECT_TRUE(s.ok());
  EXPECT_TRUE(
      (*s)->AddNode(model::MakeNode("n1", "V100M32", gpus, CpuMilli(64000), MemoryMib(262144)))
          .ok());
  return std::move(s).value();
}

std::map<int64_t, std::optional<int64_t>> Etas(Scheduler& s, int64_t now) {
  std::map<int64_t, std::optional<int64_t>> out;
  for (const QueueEntry& e : s.Queue(Seconds(now), 1000)) {
    out[e.job.value()] =
        e.estimated_start ? std::optional(e.estimated_start->value()) : std::nullopt;
  }
  return out;
}

TEST(ExpectedEndOf, PlannedThenTimeLimitThenDoublingNeverBeforeNow) {
  const Seconds start(1000);
  // Within its plan: start + plan.
  ExpectedEnd e = ExpectedEndOf(start, Seconds(5), Seconds(900), Seconds(1003));
  EXPECT_EQ(e.end, Seconds(1005));
  EXPECT_EQ(e.basis, EndBasis::kPlanned);
  // Outlived its plan (a `sleep 600` predicted at 5 s): its limit, whenever it is asked.
  for (int64_t now : {1005, 1010, 1300, 1899}) {
    e = ExpectedEndOf(start, Seconds(5), Seconds(900), Seconds(now));
    EXPECT_EQ(e.end, Seconds(1900)) << now;
    EXPECT_EQ(e.basis, EndBasis::kTimeLimit);
  }
  // In the grace after its limit, or with no limit: the bound doubles when crossed.
  EXPECT_EQ(ExpectedEndOf(start, Seconds(5), Seconds(900), Seconds(1900)).end, Seconds(2800));
  EXPECT_EQ(ExpectedEndOf(start, Seconds(5), Seconds(900), Seconds(1900)).basis,
            EndBasis::kDoubling);
  EXPECT_EQ(ExpectedEndOf(start, Seconds(5), std::nullopt, Seconds(1005)).end, Seconds(1010));
  EXPECT_EQ(ExpectedEndOf(start, Seconds(5), std::nullopt, Seconds(1031)).end, Seconds(1040));
  // A plan capped at the limit (PlannedRun) goes straight to doubling it.
  EXPECT_EQ(ExpectedEndOf(start, Seconds(900), Seconds(900), Seconds(1900)).end, Seconds(2800));
}

TEST(ExpectedEndOf, MovesOnlyWhenCrossed) {
  const Seconds start(0);
  for (std::optional<Seconds> limit : {std::optional<Seconds>(), std::optional(Seconds(700))}) {
    Seconds last = ExpectedEndOf(start, Seconds(3), limit, Seconds(0)).end;
    for (int64_t now = 1; now < 5000; ++now) {
      const Seconds end = ExpectedEndOf(start, Seconds(3), limit, Seconds(now)).end;
      EXPECT_GT(end, Seconds(now));
      // Either the same bound, or the old one was crossed this second.
      if (end != last) {
        EXPECT_EQ(last, Seconds(now)) << now;
      }
      last = end;
    }
  }
}

// The case: a job predicted at a few seconds runs far longer; the job queued behind it
// is estimated at its limit, however late one asks, and not at "as much again from now".
TEST(EstimatedStart, BehindAJobThatOutlivedItsPredictionItIsTheLimitAndStays) {
  std::map<int64_t, int64_t> estimates = {{1, 2}, {2, 2}};
  auto s = EtaScheduler(1, &estimates);
  ASSERT_TRUE(s->Submit(EtaJob(1, 1, 0, 900)).ok());
  ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s->Submit(EtaJob(2, 1, 1, 900)).ok());
  s->Schedule(Seconds(1));
  EXPECT_EQ(Etas(*s, 1)[2], 2);  // its prediction holds yet
  for (int64_t now : {2, 10, 26, 34, 600, 899}) EXPECT_EQ(Etas(*s, now)[2], 900) << now;
}

TEST(EstimatedStart, ArrayElementsStartOneAfterAnotherUnderTheirLimit) {
  std::map<int64_t, int64_t> estimates;
  auto s = EtaScheduler(8, &estimates);
  for (int64_t i = 0; i < 4; ++i) {
    model::Job j = EtaJob(10 + i, 1, 0, 100);
    j.array_id = JobId(10);
    j.array_max_running = 1;
    estimates[j.id.value()] = 50;
    ASSERT_TRUE(s->Submit(j).ok());
  }
  ASSERT_EQ(s->Schedule(Seconds(5)).starts.size(), 1u);  // %1: element 10 only
  auto etas = Etas(*s, 5);
  EXPECT_EQ(etas[11], 55);  // after element 10's planned end
  EXPECT_EQ(etas[12], 105);
  EXPECT_EQ(etas[13], 155);
}

TEST(EstimatedStart, AProjectAtItsHardLimitWaitsForItsOwnJobsToEnd) {
  std::map<int64_t, int64_t> estimates = {{1, 100}, {2, 30}, {3, 10}};
  SharingConfig sharing;
  sharing.projects["vision"].limit_milli = 2000;
  auto s = EtaScheduler(8, &estimates, Blocking::kSkip, sharing);
  ASSERT_TRUE(s->Submit(EtaJob(1, 2, 0)).ok());
  ASSERT_EQ(s->Schedule(Seconds(0)).starts.size(), 1u);
  ASSERT_TRUE(s->Submit(EtaJob(2, 1, 1)).ok());
  ASSERT_TRUE(s->Submit(EtaJob(3, 1, 1, 0, "other")).ok());  // no limit: fits now
  s->Schedule(Seconds(1));
  auto etas = Etas(*s, 7);
  EXPECT_EQ(etas.count(3), 0u);  // started
  EXPECT_EQ(etas[2], 100);       // not "now": its project is at its limit until job 1 ends
  // A job beyond its project's limit even alone has no estimate, and condemns no other job of
  // its shape.
  ASSERT_TRUE(s->Submit(EtaJob(4, 3, 8)).ok());
  ASSERT_TRUE(s->Submit(EtaJob(5, 3, 8, 0, "other")).ok());
  estimates[4] = estimates[5] = 10;
  s->Schedule(Seconds(8));
  etas = Etas(*s, 8);
  EXPECT_FALSE(etas[4].has_value());
  EXPECT_EQ(etas.count(5), 0u);  // started
}

struct ReplaySpec {
  int64_t id, submit, gpus, run, estimate, limit;  // limit 0: none
};

struct EtaError {
  size_t jobs = 0;  // that waited: estimated at their arrival
  double mae_s = 0;
};

// Replays `specs` (ids 1..n in order) on virtual time on 4 GPUs with backfill. At every second
// the estimates are asked for; they may change only at an event (an arrival, a start, an end)
// or when a running job crosses its expected end; running jobs' expected ends always lie after
// now. Each job's estimate when it arrived is compared with its actual start.
EtaError ReplayEtas(const std::vector<ReplaySpec>& specs) {
  using Spec = ReplaySpec;
  std::map<int64_t, int64_t> estimates;
  for (const Spec& j : specs) estimates[j.id] = j.estimate;
  auto s = EtaScheduler(4, &estimates, Blocking::kBackfill);
  std::map<int64_t, int64_t> started, ends;  // id -> time
  std::map<int64_t, int64_t> eta_at_submit;
  std::map<int64_t, std::optional<int64_t>> last;
  for (int64_t now = 0; now < 2000 && started.size() < specs.size(); ++now) {
    bool event = false;
    for (const Spec& j : specs) {
      if (ends.count(j.id) && ends[j.id] == now) {
        EXPECT_TRUE(s->Finish(JobId(j.id)).ok());
        event = true;
      }
      if (j.submit == now) {
        EXPECT_TRUE(s->Submit(EtaJob(j.id, j.gpus, j.submit, j.limit)).ok());
        event = true;
      }
    }
    for (const JobStart& st : s->Schedule(Seconds(now)).starts) {
      const Spec& j = specs[st.job.value() - 1];
      started[j.id] = now;
      ends[j.id] = now + j.run;
      event = true;
    }
    // Crossings: a running job's expected end reached this second (its plan, its limit, a
    // doubling).
    bool crossed = false;
    for (const auto& [id, start] : started) {
      const Spec& j = specs[id - 1];
      if (ends[id] <= now) continue;
      const std::optional<Seconds> limit =
          j.limit > 0 ? std::optional(Seconds(j.limit)) : std::nullopt;
      auto end_at = [&](int64_t t) {
        return ExpectedEndOf(Seconds(start), PlannedRun(Seconds(j.estimate), limit), limit,
                             Seconds(t))
            .end;
      };
      EXPECT_GT(end_at(now), Seconds(now));
      if (now > start && end_at(now) != end_at(now - 1)) crossed = true;
    }
    auto etas = Etas(*s, now);
    for (const auto& [id, eta] : etas) {
      if (eta) {
        EXPECT_GE(*eta, now) << "job " << id << " at " << now;
      }
      if (!event && !crossed && last.count(id)) {
        EXPECT_EQ(eta, last[id]) << "job " << id << " slid at " << now;
      }
      if (!eta_at_submit.count(id) && eta) eta_at_submit[id] = *eta;
    }
    last = etas;
  }
  EXPECT_EQ(started.size(), specs.size());
  double error = 0;
  for (const auto& [id, eta] : eta_at_submit) {
    std::cout << "job " << id << ": estimated " << eta << ", started " << started[id] << "\n";
    error += std::abs(eta - started[id]);
  }
  const double mae = error / static_cast<double>(eta_at_submit.size());
  std::cout << "estimated start at arrival vs actual start: " << eta_at_submit.size()
            << " jobs that waited, mean absolute error " << mae << " s\n";
  return {eta_at_submit.size(), mae};
}

// Run times known (estimate = run) and mispredicted both ways (a job predicted at 5 s runs
// 90 s, one predicted at 100 s runs 25 s), otherwise the same queue. The errors are pinned: an
// estimate change that makes them worse must say so. With exact run times the whole error is
// backfill's: a job that waits is estimated after every job ahead of it (docs/prediction.md).
TEST(EstimatedStart, ReplayOfAKnownQueueIsStableAndMeasured) {
  std::vector<ReplaySpec> specs = {
      {1, 0, 2, 40, 40, 100},  {2, 0, 2, 90, 5, 120}, {3, 3, 4, 30, 60, 100},
      {4, 5, 1, 20, 20, 50},   {5, 8, 2, 60, 30, 90}, {6, 12, 3, 10, 10, 30},
      {7, 20, 4, 25, 100, 0},  {8, 21, 1, 5, 2, 0},   {9, 30, 2, 45, 45, 60},
      {10, 31, 4, 15, 15, 40},
  };
  const EtaError mispredicted = ReplayEtas(specs);
  EXPECT_EQ(mispredicted.jobs, 8u);
  EXPECT_LE(mispredicted.mae_s, 140.0);
  for (ReplaySpec& j : specs) j.estimate = j.run;
  const EtaError exact = ReplayEtas(specs);
  EXPECT_EQ(exact.jobs, 8u);
  EXPECT_LE(exact.mae_s, 49.4);
}

}  // namespace
}  // namespace corral::sched
