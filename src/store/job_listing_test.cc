// The job listing (Store::ListJobSummaries, ListJobs): every filter, every sort in both
// directions, pages that chain to exactly the whole listing (ties on the key, jobs without a
// start or end time), and the query plans the common pages get. Runs on SQLite and PostgreSQL.

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>
#include <tuple>

#include "store/store_test_fixture.h"

namespace corral::store {
namespace {

using model::JobState;
using ::testing::HasSubstr;
using ::testing::Not;

constexpr JobSortKey kSorts[] = {JobSortKey::kId, JobSortKey::kSubmitTime, JobSortKey::kStartTime,
                                 JobSortKey::kEndTime, JobSortKey::kGpus};
constexpr SortDirection kDirections[] = {SortDirection::kAscending, SortDirection::kDescending};

std::vector<JobId> IdsOf(const std::vector<JobSummary>& jobs) {
  std::vector<JobId> ids;
  for (const auto& j : jobs) ids.push_back(j.id);
  return ids;
}

std::string Describe(JobSortKey sort, SortDirection direction, int page) {
  return "sort " + std::to_string(static_cast<int>(sort)) +
         (direction == SortDirection::kAscending ? " asc" : " desc") + ", page size " +
         std::to_string(page);
}

// What the listing must return: `jobs` ordered by the key (unset keys last, by id), ties by id.
std::vector<JobId> ExpectedOrder(std::vector<JobSummary> jobs, JobSortKey sort,
                                 SortDirection direction) {
  const bool asc = direction == SortDirection::kAscending;
  std::sort(jobs.begin(), jobs.end(), [&](const JobSummary& a, const JobSummary& b) {
    const JobListPosition pa = PositionOf(a, sort), pb = PositionOf(b, sort);
    if (sort != JobSortKey::kId && pa.key.has_value() != pb.key.has_value()) {
      return pa.key.has_value();  // unset keys last, in both directions
    }
    if (pa.key != pb.key) return asc ? *pa.key < *pb.key : *pa.key > *pb.key;
    return asc ? a.id < b.id : b.id < a.id;
  });
  return IdsOf(jobs);
}

class JobListingTest : public StoreTest {
 protected:
  // 40 jobs of alice and bob in vision and nlp: submit times with ties (10 distinct), GPUs with
  // ties (0, 500, 1000, 8000), a third never started, another third started but not ended.
  void SeedJobs() {
    Seed();
    for (int i = 0; i < 40; ++i) {
      JobRecord j = MakeJob((i % 2 ? "train-" : "eval_") + std::to_string(i),
                            i % 3 ? "vision" : "nlp", i % 4 ? "alice" : "bob", 1000 + i / 4);
      j.total_gpu_milli = MilliGpu(std::vector<int64_t>{0, 500, 1000, 8000}[i % 4]);
      auto id = store_->InsertJob(j);
      ASSERT_TRUE(id.ok()) << id.status().ToString();
      ids_.push_back(*id);
      if (i % 3 == 0) continue;  // never started
      // Start times with ties, not in id order.
      ASSERT_TRUE(store_
                      ->TransitionJob(*id, JobState::kPending, JobState::kRunning, "started",
                                      Seconds(2000 + (i * 7) % 5))
                      .ok());
      if (i % 3 == 1) continue;  // still running
      ASSERT_TRUE(store_
                      ->TransitionJob(*id, JobState::kRunning, JobState::kSucceeded, "done",
                                      Seconds(3000 + (i * 11) % 6))
                      .ok());
    }
  }

  // Every page of `filter` with `page_size` jobs, following each page's last position; fails
  // the test on a page longer than asked or a chain that does not end.
  std::vector<JobId> AllPages(JobFilter filter, int page_size) {
    std::vector<JobId> out;
    filter.limit = page_size;
    for (int pages = 0; pages < 1000; ++pages) {
      auto page = store_->ListJobSummaries(filter);
      EXPECT_TRUE(page.ok()) << page.status().ToString();
      if (!page.ok() || page->empty()) return out;
      EXPECT_LE(page->size(), static_cast<size_t>(page_size));
      for (const auto& j : *page) out.push_back(j.id);
      filter.after = PositionOf(page->back(), filter.sort);
    }
    ADD_FAILURE() << "pages do not end";
    return out;
  }

  std::vector<JobId> ids_;
};

TEST_P(JobListingTest, EverySortBothWaysPagesToExactlyTheWholeListing) {
  SeedJobs();
  ASSERT_FALSE(HasFailure());
  auto all = store_->ListJobSummaries({.limit = 0});
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 40u);
  for (JobSortKey sort : kSorts) {
    for (SortDirection direction : kDirections) {
      const std::vector<JobId> expected = ExpectedOrder(*all, sort, direction);
      const JobFilter filter{.sort = sort, .direction = direction};
      // One page, and pages of several sizes (1: every boundary; 7: pages that cross from the
      // jobs with a start time to those without).
      for (int page_size : {100, 1, 3, 7}) {
        EXPECT_EQ(AllPages(filter, page_size), expected) << Describe(sort, direction, page_size);
      }
      // Whole records come in the same order.
      auto records = store_->ListJobs({.sort = sort, .direction = direction, .limit = 0});
      ASSERT_TRUE(records.ok());
      std::vector<JobId> record_ids;
      for (const auto& r : *records) record_ids.push_back(r.id);
      EXPECT_EQ(record_ids, expected) << Describe(sort, direction, 0);
    }
  }
}

TEST_P(JobListingTest, PagesOfAFilteredListingChainToo) {
  SeedJobs();
  ASSERT_FALSE(HasFailure());
  const JobFilter vision_alice{.projects = {"vision"}, .users = {"alice"}, .limit = 0};
  auto all = store_->ListJobSummaries(vision_alice);
  ASSERT_TRUE(all.ok());
  ASSERT_FALSE(all->empty());
  for (JobSortKey sort : kSorts) {
    for (SortDirection direction : kDirections) {
      JobFilter filter = vision_alice;
      filter.sort = sort;
      filter.direction = direction;
      EXPECT_EQ(AllPages(filter, 2), ExpectedOrder(*all, sort, direction))
          << Describe(sort, direction, 2);
    }
  }
}

TEST_P(JobListingTest, SummariesCarryTheListingsFields) {
  Seed();
  JobRecord j = MakeJob("train", "nlp", "bob", 1234);
  j.total_gpu_milli = MilliGpu(16000);
  j.priority = 5;
  auto id = store_->InsertJob(j);
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kPending, JobState::kRunning, "go", Seconds(1300)).ok());
  auto listed = store_->ListJobSummaries({});
  ASSERT_TRUE(listed.ok());
  ASSERT_EQ(listed->size(), 1u);
  const JobSummary& s = (*listed)[0];
  EXPECT_EQ(s.name, "train");
  EXPECT_EQ(s.user, "bob");
  EXPECT_EQ(s.project, "nlp");
  EXPECT_EQ(s.state, JobState::kRunning);
  EXPECT_EQ(s.priority, 5);
  EXPECT_EQ(s.total_gpu_milli, MilliGpu(16000));
  EXPECT_EQ(s.submit_time, Seconds(1234));
  EXPECT_EQ(s.start_time, Seconds(1300));
  EXPECT_EQ(s.end_time, std::nullopt);
  EXPECT_EQ(s.reason, "go");
  // The same as the whole record says.
  EXPECT_EQ(s, SummaryOf(*store_->GetJob(*id)));
  j.total_gpu_milli = MilliGpu(-1);
  EXPECT_THAT(store_->InsertJob(j).status().message(), HasSubstr("total_gpu_milli"));
}

TEST_P(JobListingTest, EachFilterNarrows) {
  SeedJobs();
  ASSERT_FALSE(HasFailure());
  auto all = *store_->ListJobSummaries({.limit = 0});
  auto expect = [&](const JobFilter& filter, auto pred, const std::string& what) {
    std::vector<JobId> want;
    for (const auto& j : all) {
      if (pred(j)) want.push_back(j.id);
    }
    auto got = store_->ListJobSummaries(filter);
    ASSERT_TRUE(got.ok()) << what << ": " << got.status().ToString();
    EXPECT_EQ(IdsOf(*got), want) << what;
    EXPECT_FALSE(want.empty()) << what << ": the case tests nothing";
  };
  expect(
      {.users = {"bob"}, .limit = 0}, [](auto& j) { return j.user == "bob"; }, "user");
  expect(
      {.projects = {"nlp"}, .limit = 0}, [](auto& j) { return j.project == "nlp"; }, "project");
  expect(
      {.states = {JobState::kRunning, JobState::kPending}, .limit = 0},
      [](auto& j) { return j.state == JobState::kRunning || j.state == JobState::kPending; },
      "states");
  expect(
      {.name_prefix = "train-1", .limit = 0},
      [](auto& j) { return j.name.rfind("train-1", 0) == 0; }, "name prefix");
  expect(
      {.submitted_since = Seconds(1007), .limit = 0},
      [](auto& j) { return j.submit_time >= Seconds(1007); }, "since");
  expect(
      {.projects = {"vision"}, .users = {"alice"}, .name_prefix = "eval", .limit = 0},
      [](auto& j) {
        return j.project == "vision" && j.user == "alice" && j.name.rfind("eval", 0) == 0;
      },
      "combined");
}

TEST_P(JobListingTest, ANamePrefixIsExactBytesNotAPattern) {
  Seed();
  for (const char* name : {"a_b", "axb", "a%b", "A_b", "a_", "a", "b", "a_b_c"}) {
    ASSERT_TRUE(store_->InsertJob(MakeJob(name)).ok()) << name;
  }
  auto names = [&](const std::string& prefix) {
    std::set<std::string> out;
    auto listed = store_->ListJobSummaries({.name_prefix = prefix});
    EXPECT_TRUE(listed.ok()) << listed.status().ToString();
    if (listed.ok()) {
      for (const auto& j : *listed) out.insert(j.name);
    }
    return out;
  };
  // '_' and '%' are LIKE's wildcards: here they are themselves; case counts.
  EXPECT_EQ(names("a_"), (std::set<std::string>{"a_b", "a_", "a_b_c"}));
  EXPECT_EQ(names("a%"), (std::set<std::string>{"a%b"}));
  EXPECT_EQ(names("A"), (std::set<std::string>{"A_b"}));
  EXPECT_EQ(names("a_b"), (std::set<std::string>{"a_b", "a_b_c"}));
  EXPECT_TRUE(names("c").empty());
}

TEST_P(JobListingTest, APositionMustFitTheSort) {
  Seed();
  ASSERT_TRUE(store_->InsertJob(MakeJob("j")).ok());
  EXPECT_THAT(store_
                  ->ListJobSummaries(
                      {.sort = JobSortKey::kGpus, .after = JobListPosition{std::nullopt, JobId(1)}})
                  .status()
                  .message(),
              HasSubstr("after"));
  EXPECT_THAT(store_->ListJobSummaries({.after = JobListPosition{5, JobId(1)}}).status().message(),
              HasSubstr("after"));
  // A start time may be unset: then the page continues among the jobs without one.
  EXPECT_TRUE(store_
                  ->ListJobSummaries({.sort = JobSortKey::kStartTime,
                                      .after = JobListPosition{std::nullopt, JobId(1)}})
                  .ok());
}

// The common pages are read through an index, without sorting the table (docs/control-plane.md,
// "Listing jobs", says what the plans are).
TEST_P(JobListingTest, CommonPagesUseAnIndexAndNoSort) {
  SeedJobs();
  ASSERT_FALSE(HasFailure());
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const bool sqlite = GetParam() == Backend::kSqlite;
  if (!sqlite) {
    // A table this small would be scanned whatever its indexes: ask for the plan with scans off.
    // Bitmap scans too: one of a few rows and a sort can cost less than walking an index in
    // order, depending on the sampled statistics (the test failed 1 run in 3 under load).
    ASSERT_TRUE(
        conn->ExecuteScript("ANALYZE jobs; SET enable_seqscan = off; SET enable_bitmapscan = off")
            .ok());
  }
  auto plan = [&](const std::string& where_order) {
    const std::string sql = "SELECT id, name FROM jobs " + where_order + " LIMIT 1001";
    auto rows = conn->Query((sqlite ? "EXPLAIN QUERY PLAN " : "EXPLAIN ") + sql, {});
    EXPECT_TRUE(rows.ok()) << rows.status().ToString();
    std::string text;
    for (const auto& r : *rows) text += r.Text(r.size() - 1) + "\n";
    return text;
  };
  const std::string sort_node = sqlite ? "USE TEMP B-TREE FOR ORDER BY" : "Sort";
  // By id, SQLite walks the table itself (its rowid is the id): no index, and no sort either.
  for (const std::string& query :
       {std::string("ORDER BY id DESC"), std::string("WHERE id < 30 ORDER BY id DESC")}) {
    const std::string text = plan(query);
    EXPECT_THAT(text, Not(HasSubstr(sort_node))) << query << "\n" << text;
  }
  for (const std::string& query :
       {std::string("WHERE submit_time <= 1005 AND (submit_time < 1005 OR id < 20) ORDER BY "
                    "submit_time DESC, id DESC"),
        std::string("WHERE start_time IS NOT NULL ORDER BY start_time ASC, id ASC"),
        std::string("WHERE end_time IS NULL AND id > 3 ORDER BY id ASC"),
        std::string("WHERE total_gpu_milli >= 500 AND (total_gpu_milli > 500 OR id > 2) ORDER BY "
                    "total_gpu_milli ASC, id ASC"),
        std::string("WHERE user_name IN ('alice') ORDER BY id DESC")}) {
    const std::string text = plan(query);
    EXPECT_THAT(text, Not(HasSubstr(sort_node))) << query << "\n" << text;
    EXPECT_THAT(text, HasSubstr(sqlite ? "USING" : "Index")) << query << "\n" << text;
  }
  const std::string name = sqlite ? "name" : "name COLLATE \"C\"";
  const std::string text = plan("WHERE " + name + " >= 'train-1' AND " + name + " < 'train-2'");
  EXPECT_THAT(text, HasSubstr("jobs_by_name")) << text;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, JobListingTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, JobListingTest, ::testing::Values(Backend::kPostgres),
                         BackendName);

}  // namespace
}  // namespace corral::store
