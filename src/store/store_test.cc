// The store suite: every TEST_P runs against SQLite and against PostgreSQL (see
// store_test_fixture.h). Batcher, throughput and crash tests are in submission_batcher_test.cc.
#include "store/store.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <set>
#include <thread>

#include "model/node.h"
#include "store/migrations.h"
#include "store/postgres_connection.h"
#include "store/store_test_fixture.h"

namespace corral::store {
namespace {

using model::JobState;
using model::NodeState;
using model::TaskState;
using ::testing::HasSubstr;
using ::testing::Not;

// A lowercase hex string of 64 characters, as a SHA-256 would print; `c` makes it distinct.
std::string FakeHash(char c) { return std::string(63, 'a') + c; }

std::vector<std::string> Names(const std::vector<JobRecord>& jobs) {
  std::vector<std::string> names;
  for (const auto& j : jobs) names.push_back(j.name);
  return names;
}

INSTANTIATE_TEST_SUITE_P(Sqlite, StoreTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, StoreTest, ::testing::Values(Backend::kPostgres), BackendName);

TEST_P(StoreTest, UsersAreUniqueByName) {
  auto alice = store_->CreateUser("alice", false, Seconds(10));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  auto root = store_->CreateUser("root", true, Seconds(11));
  ASSERT_TRUE(root.ok());
  EXPECT_LT(alice->id, root->id);

  auto again = store_->CreateUser("alice", true, Seconds(12));
  EXPECT_EQ(again.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(again.status().message(), HasSubstr("user 'alice' already exists"));
  EXPECT_EQ(store_->CreateUser("", false, Seconds(1)).status().code(),
            StatusCode::kInvalidArgument);

  auto found = store_->FindUser("root");
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->id, root->id);
  EXPECT_TRUE(found->admin);
  EXPECT_EQ(found->created_at, Seconds(11));
  EXPECT_EQ(store_->FindUser("carol").status().code(), StatusCode::kNotFound);

  auto users = store_->ListUsers();
  ASSERT_TRUE(users.ok());
  ASSERT_EQ(users->size(), 2u);
  EXPECT_EQ((*users)[0].name, "alice");
  EXPECT_FALSE((*users)[0].admin);
  EXPECT_EQ((*users)[1].name, "root");
}

TEST_P(StoreTest, TokensAreStoredAsHashesAndCanBeRevoked) {
  auto alice = store_->CreateUser("alice", false, Seconds(10));
  auto bob = store_->CreateUser("bob", false, Seconds(10));
  ASSERT_TRUE(alice.ok() && bob.ok());

  // Anything but a hex SHA-256 is refused, and the refusal does not echo what was passed.
  auto secret =
      store_->CreateToken(alice->id, "laptop", "corral_secret_abc", Seconds(20), std::nullopt);
  EXPECT_EQ(secret.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(secret.status().message(), Not(HasSubstr("corral_secret_abc")));
  EXPECT_EQ(store_->CreateToken(alice->id, "x", std::string(64, 'A'), Seconds(20), std::nullopt)
                .status()
                .code(),
            StatusCode::kInvalidArgument);

  auto laptop = store_->CreateToken(alice->id, "laptop", FakeHash('1'), Seconds(20), std::nullopt);
  ASSERT_TRUE(laptop.ok()) << laptop.status().ToString();
  auto ci = store_->CreateToken(alice->id, "ci", FakeHash('2'), Seconds(21), std::nullopt);
  ASSERT_TRUE(ci.ok());
  auto bobs = store_->CreateToken(bob->id, "bob", FakeHash('3'), Seconds(22), std::nullopt);
  ASSERT_TRUE(bobs.ok());
  EXPECT_EQ(
      store_->CreateToken(bob->id, "dup", FakeHash('1'), Seconds(23), std::nullopt).status().code(),
      StatusCode::kAlreadyExists);
  EXPECT_EQ(
      store_->CreateToken(9999, "ghost", FakeHash('4'), Seconds(23), std::nullopt).status().code(),
      StatusCode::kNotFound);

  auto owner = store_->FindTokenOwner(FakeHash('2'));
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  EXPECT_EQ(owner->user.name, "alice");
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('9')).status().code(), StatusCode::kNotFound);

  // Revocation: only the owner's token, idempotent, keeps the first time.
  EXPECT_EQ(store_->RevokeToken(bob->id, laptop->id, Seconds(30)).code(), StatusCode::kNotFound);
  ASSERT_TRUE(store_->RevokeToken(alice->id, laptop->id, Seconds(30)).ok());
  ASSERT_TRUE(store_->RevokeToken(alice->id, laptop->id, Seconds(31)).ok());
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('1')).status().code(), StatusCode::kNotFound);
  EXPECT_TRUE(store_->FindTokenOwner(FakeHash('2')).ok());

  auto tokens = store_->ListTokens(alice->id);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].name, "laptop");
  EXPECT_EQ((*tokens)[0].hash, FakeHash('1'));
  EXPECT_EQ((*tokens)[0].created_at, Seconds(20));
  EXPECT_EQ((*tokens)[0].revoked_at, Seconds(30));
  EXPECT_EQ((*tokens)[1].name, "ci");
  EXPECT_EQ((*tokens)[1].revoked_at, std::nullopt);
}

TEST_P(StoreTest, ATokensExpiryIsKeptWithItAndReadBackWithItsOwner) {
  auto alice = store_->CreateUser("alice", false, Seconds(10));
  ASSERT_TRUE(alice.ok());
  auto ci = store_->CreateToken(alice->id, "ci", FakeHash('1'), Seconds(20), Seconds(1000));
  ASSERT_TRUE(ci.ok()) << ci.status().ToString();
  EXPECT_EQ(ci->expires_at, Seconds(1000));
  ASSERT_TRUE(
      store_->CreateToken(alice->id, "laptop", FakeHash('2'), Seconds(20), std::nullopt).ok());
  auto carol = store_->CreateUserWithToken("carol", false, {}, "initial", FakeHash('3'),
                                           Seconds(30), Seconds(2000));
  ASSERT_TRUE(carol.ok()) << carol.status().ToString();

  Reopen();
  // The store keeps an expired token's owner: telling "expired" from "unknown" is the server's.
  auto owner = store_->FindTokenOwner(FakeHash('1'));
  ASSERT_TRUE(owner.ok()) << owner.status().ToString();
  EXPECT_EQ(owner->user.name, "alice");
  EXPECT_EQ(owner->expires_at, Seconds(1000));
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('2'))->expires_at, std::nullopt);
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('3'))->expires_at, Seconds(2000));
  auto tokens = store_->ListTokens(alice->id);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 2u);
  EXPECT_EQ((*tokens)[0].expires_at, Seconds(1000));
  EXPECT_EQ((*tokens)[1].expires_at, std::nullopt);
  EXPECT_EQ((*store_->ListTokens(carol->id))[0].expires_at, Seconds(2000));
}

TEST_P(StoreTest, SubmitLimitsOfUsersAndProjectsAreKeptUntilReplaced) {
  int64_t alice = Seed();  // alice, bob, vision, nlp
  ASSERT_TRUE(store_->CreateToken(alice, "ci", FakeHash('1'), Seconds(20), std::nullopt).ok());
  ASSERT_TRUE(store_->AddMember("vision", alice).ok());
  EXPECT_EQ(store_->FindUser("alice")->submit_limits, model::SubmitLimits{});
  EXPECT_EQ((*store_->ListProjects())[0].submit_limits, model::SubmitLimits{});

  ASSERT_TRUE(store_->SetUserSubmitLimits("alice", {.max_pending_jobs = 5}).ok());
  ASSERT_TRUE(
      store_
          ->SetProjectSubmitLimits("vision", {.max_pending_jobs = 0, .max_submits_per_minute = 60})
          .ok());
  Reopen();
  const model::SubmitLimits five{.max_pending_jobs = 5};
  EXPECT_EQ(store_->FindUser("alice")->submit_limits, five);
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('1'))->user.submit_limits, five);
  EXPECT_EQ((*store_->ListUsers())[0].submit_limits, five);
  EXPECT_EQ((*store_->MembersOf("vision"))[0].submit_limits, five);
  EXPECT_EQ(store_->FindUser("bob")->submit_limits, model::SubmitLimits{});
  auto projects = store_->ListProjects();
  ASSERT_TRUE(projects.ok());
  EXPECT_EQ((*projects)[0].name, "nlp");
  EXPECT_EQ((*projects)[0].submit_limits, model::SubmitLimits{});
  EXPECT_EQ((*projects)[1].submit_limits,
            (model::SubmitLimits{.max_pending_jobs = 0, .max_submits_per_minute = 60}));

  // Replaced whole: none clears a limit.
  ASSERT_TRUE(store_->SetUserSubmitLimits("alice", {.max_submits_per_minute = 7}).ok());
  EXPECT_EQ(store_->FindUser("alice")->submit_limits,
            (model::SubmitLimits{.max_submits_per_minute = 7}));

  auto ghost = store_->SetUserSubmitLimits("ghost", {});
  EXPECT_EQ(ghost.code(), StatusCode::kNotFound);
  EXPECT_THAT(ghost.message(), HasSubstr("user 'ghost' does not exist"));
  EXPECT_EQ(store_->SetProjectSubmitLimits("robotics", {}).code(), StatusCode::kNotFound);
  auto negative = store_->SetProjectSubmitLimits("nlp", {.max_pending_jobs = -1});
  EXPECT_EQ(negative.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(negative.message(), HasSubstr("field 'max_pending_jobs': must be in 0..1000000000"));
  EXPECT_EQ(
      store_->SetUserSubmitLimits("bob", {.max_submits_per_minute = model::kMaxSubmitLimit + 1})
          .code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ((*store_->ListProjects())[0].submit_limits, model::SubmitLimits{});
}

TEST_P(StoreTest, ProjectsAndMembers) {
  auto alice = store_->CreateUser("alice", false, Seconds(1));
  auto bob = store_->CreateUser("bob", false, Seconds(1));
  ASSERT_TRUE(alice.ok() && bob.ok());
  ASSERT_TRUE(store_->CreateProject("vision", "image models", Seconds(5)).ok());
  ASSERT_TRUE(store_->CreateProject("nlp", "", Seconds(6)).ok());
  auto dup = store_->CreateProject("nlp", "again", Seconds(7));
  EXPECT_EQ(dup.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(dup.status().message(), HasSubstr("project 'nlp' already exists"));

  auto projects = store_->ListProjects();
  ASSERT_TRUE(projects.ok());
  ASSERT_EQ(projects->size(), 2u);
  EXPECT_EQ((*projects)[0].name, "nlp");
  EXPECT_EQ((*projects)[1].name, "vision");
  EXPECT_EQ((*projects)[1].description, "image models");
  EXPECT_EQ((*projects)[1].created_at, Seconds(5));

  ASSERT_TRUE(store_->AddMember("vision", alice->id).ok());
  ASSERT_TRUE(store_->AddMember("vision", alice->id).ok());  // idempotent
  ASSERT_TRUE(store_->AddMember("nlp", alice->id).ok());
  ASSERT_TRUE(store_->AddMember("vision", bob->id).ok());
  Status unknown_project = store_->AddMember("robotics", alice->id);
  EXPECT_EQ(unknown_project.code(), StatusCode::kNotFound);
  EXPECT_THAT(unknown_project.message(), HasSubstr("project 'robotics' does not exist"));
  EXPECT_EQ(store_->AddMember("vision", 4242).code(), StatusCode::kNotFound);

  EXPECT_EQ(*store_->ProjectsOf(alice->id), (std::vector<std::string>{"nlp", "vision"}));
  EXPECT_EQ(*store_->ProjectsOf(bob->id), (std::vector<std::string>{"vision"}));
  auto members = store_->MembersOf("vision");
  ASSERT_TRUE(members.ok());
  ASSERT_EQ(members->size(), 2u);
  EXPECT_EQ((*members)[0].name, "alice");
  EXPECT_EQ((*members)[1].name, "bob");
  EXPECT_EQ(store_->MembersOf("robotics").status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, EnvironmentVersionsAreImmutableAndOwned) {
  auto v1 = store_->AddEnvironmentVersion("torch", "alice", R"({"name":"torch"})", Seconds(1));
  ASSERT_TRUE(v1.ok()) << v1.status().ToString();
  EXPECT_EQ(v1->version, 1);
  auto v2 = store_->AddEnvironmentVersion("torch", "alice", R"({"name":"torch","image":"x"})",
                                          Seconds(2));
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->version, 2);
  auto taken = store_->AddEnvironmentVersion("torch", "bob", R"({"name":"torch"})", Seconds(3));
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.status().message(), HasSubstr("is taken by another user"));
  auto builtin =
      store_->AddEnvironmentVersion("cuda-base", "", R"({"name":"cuda-base"})", Seconds(4));
  ASSERT_TRUE(builtin.ok());
  EXPECT_THAT(
      store_->AddEnvironmentVersion("cuda-base", "bob", "{}", Seconds(5)).status().message(),
      HasSubstr("is taken by a built-in"));

  // The first version is unchanged by the second: a job pinned to torch@1 keeps it.
  auto first = store_->GetEnvironment("torch", 1);
  ASSERT_TRUE(first.ok());
  EXPECT_EQ(first->spec_json, R"({"name":"torch"})");
  EXPECT_EQ(first->owner, "alice");
  EXPECT_EQ(first->created_at, Seconds(1));
  auto latest = store_->GetEnvironment("torch", std::nullopt);
  ASSERT_TRUE(latest.ok());
  EXPECT_EQ(latest->version, 2);
  EXPECT_EQ(store_->GetEnvironment("torch", 3).status().code(), StatusCode::kNotFound);
  EXPECT_THAT(store_->GetEnvironment("nope", std::nullopt).status().message(),
              HasSubstr("environment 'nope' not found"));

  auto all = store_->ListEnvironments();
  ASSERT_TRUE(all.ok());
  ASSERT_EQ(all->size(), 2u);
  EXPECT_EQ((*all)[0].name, "cuda-base");
  EXPECT_EQ((*all)[1].name, "torch");
  EXPECT_EQ((*all)[1].version, 2);
}

TEST_P(StoreTest, EnvironmentSharesCoverEveryVersion) {
  ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
  ASSERT_TRUE(store_->AddEnvironmentVersion("torch", "alice", "{}", Seconds(1)).ok());
  ASSERT_TRUE(store_->ShareEnvironment("torch", "vision").ok());
  ASSERT_TRUE(store_->ShareEnvironment("torch", "vision").ok());  // idempotent
  EXPECT_THAT(store_->ShareEnvironment("torch", "robotics").message(),
              HasSubstr("project 'robotics' does not exist"));
  EXPECT_EQ(store_->ShareEnvironment("nope", "vision").code(), StatusCode::kNotFound);
  auto v2 = store_->AddEnvironmentVersion("torch", "alice", "{}", Seconds(2));
  ASSERT_TRUE(v2.ok());
  EXPECT_EQ(v2->projects, (std::vector<std::string>{"vision"}));
  EXPECT_EQ(store_->GetEnvironment("torch", 1)->projects, (std::vector<std::string>{"vision"}));
  EXPECT_EQ((*store_->ListEnvironments())[0].projects, (std::vector<std::string>{"vision"}));
}

TEST_P(StoreTest, InsertGetAndListJobs) {
  Seed();
  JobRecord first = MakeJob("train-1", "vision", "alice", 1000);
  first.spec_json = R"({"argv":["python3","train.py","--name=\"ü\""],"gpus":2})";
  first.priority = 7;
  first.reason = "submitted by the CLI";
  auto id1 = store_->InsertJob(first);
  ASSERT_TRUE(id1.ok()) << id1.status().ToString();
  auto id2 = store_->InsertJob(MakeJob("tok-1", "nlp", "bob", 1001));
  auto id3 = store_->InsertJob(MakeJob("train-2", "vision", "bob", 1002));
  ASSERT_TRUE(id2.ok() && id3.ok());
  EXPECT_LT(*id1, *id2);
  EXPECT_LT(*id2, *id3);

  auto got = store_->GetJob(*id1);
  ASSERT_TRUE(got.ok());
  EXPECT_EQ(got->id, *id1);
  EXPECT_EQ(got->name, "train-1");
  EXPECT_EQ(got->user, "alice");
  EXPECT_EQ(got->project, "vision");
  EXPECT_EQ(got->spec_json, first.spec_json);
  EXPECT_EQ(got->state, JobState::kPending);
  EXPECT_EQ(got->priority, 7);
  EXPECT_EQ(got->restarts, 0);
  EXPECT_EQ(got->submit_time, Seconds(1000));
  EXPECT_EQ(got->start_time, std::nullopt);
  EXPECT_EQ(got->end_time, std::nullopt);
  EXPECT_EQ(got->reason, "submitted by the CLI");
  EXPECT_EQ(store_->GetJob(*id2)->reason, "submitted");
  EXPECT_EQ(store_->GetJob(JobId(987654)).status().code(), StatusCode::kNotFound);

  ASSERT_TRUE(
      store_
          ->TransitionJob(*id3, JobState::kPending, JobState::kCancelled, "by user", Seconds(1100))
          .ok());

  EXPECT_EQ(Names(*store_->ListJobs({})),
            (std::vector<std::string>{"train-1", "tok-1", "train-2"}));
  EXPECT_EQ(Names(*store_->ListJobs({.projects = {"vision"}})),
            (std::vector<std::string>{"train-1", "train-2"}));
  EXPECT_EQ(Names(*store_->ListJobs({.states = {JobState::kPending}})),
            (std::vector<std::string>{"train-1", "tok-1"}));
  EXPECT_EQ(
      Names(*store_->ListJobs({.projects = {"vision", "nlp"}, .states = {JobState::kCancelled}})),
      (std::vector<std::string>{"train-2"}));
  EXPECT_EQ(Names(*store_->ListJobs({.users = {"bob"}})),
            (std::vector<std::string>{"tok-1", "train-2"}));
  EXPECT_EQ(Names(*store_->ListJobs({.limit = 2})), (std::vector<std::string>{"train-1", "tok-1"}));
  EXPECT_TRUE(store_->ListJobs({.projects = {"robotics"}})->empty());
}

TEST_P(StoreTest, ListJobsNewestFirstPagesWithACursor) {
  Seed();
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 7; ++i) jobs.push_back(MakeJob(std::string("j").append(std::to_string(i))));
  jobs[2].project = jobs[5].project = "nlp";
  auto ids = store_->InsertJobs(jobs);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();

  const JobFilter newest{.direction = SortDirection::kDescending, .limit = 3};
  EXPECT_EQ(Names(*store_->ListJobs(newest)), (std::vector<std::string>{"j6", "j5", "j4"}));
  // Each page starts after the previous page's last id; that job itself is excluded.
  JobFilter page = newest;
  page.after = JobListPosition{std::nullopt, (*ids)[4]};
  EXPECT_EQ(Names(*store_->ListJobs(page)), (std::vector<std::string>{"j3", "j2", "j1"}));
  page.after = JobListPosition{std::nullopt, (*ids)[1]};
  EXPECT_EQ(Names(*store_->ListJobs(page)), (std::vector<std::string>{"j0"}));
  page.after = JobListPosition{std::nullopt, (*ids)[0]};
  EXPECT_TRUE(store_->ListJobs(page)->empty());
  // The position combines with the other filters, and the default order stays oldest first.
  EXPECT_EQ(Names(*store_->ListJobs({.projects = {"vision"},
                                     .direction = SortDirection::kDescending,
                                     .after = JobListPosition{std::nullopt, (*ids)[5]}})),
            (std::vector<std::string>{"j4", "j3", "j1", "j0"}));
  EXPECT_EQ(
      Names(*store_->ListJobs({.after = JobListPosition{std::nullopt, (*ids)[3]}, .limit = 2})),
      (std::vector<std::string>{"j4", "j5"}));
  EXPECT_EQ(Names(*store_->ListJobs({.direction = SortDirection::kDescending, .limit = 0})).size(),
            7u);
}

TEST_P(StoreTest, CreateUserWithTokenIsAllOrNothing) {
  Seed();  // alice, bob, vision, nlp
  auto carol = store_->CreateUserWithToken("carol", true, {"vision", "nlp", "vision"}, "initial",
                                           FakeHash('c'), Seconds(50), std::nullopt);
  ASSERT_TRUE(carol.ok()) << carol.status().ToString();
  EXPECT_EQ(carol->name, "carol");
  EXPECT_TRUE(carol->admin);
  EXPECT_EQ(carol->created_at, Seconds(50));
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('c'))->user.id, carol->id);
  EXPECT_EQ(*store_->ProjectsOf(carol->id), (std::vector<std::string>{"nlp", "vision"}));
  auto tokens = store_->ListTokens(carol->id);
  ASSERT_TRUE(tokens.ok());
  ASSERT_EQ(tokens->size(), 1u);
  EXPECT_EQ((*tokens)[0].name, "initial");

  // Every failure leaves nothing behind: no user, no membership, no token.
  auto unknown_project = store_->CreateUserWithToken(
      "dave", false, {"vision", "robotics"}, "initial", FakeHash('d'), Seconds(51), std::nullopt);
  EXPECT_EQ(unknown_project.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(unknown_project.status().message(), HasSubstr("project 'robotics' does not exist"));
  auto taken = store_->CreateUserWithToken("alice", false, {}, "initial", FakeHash('e'),
                                           Seconds(51), std::nullopt);
  EXPECT_EQ(taken.status().code(), StatusCode::kAlreadyExists);
  EXPECT_THAT(taken.status().message(), HasSubstr("user 'alice' already exists"));
  auto taken_hash = store_->CreateUserWithToken("erin", false, {"nlp"}, "initial", FakeHash('c'),
                                                Seconds(51), std::nullopt);
  EXPECT_EQ(taken_hash.status().code(), StatusCode::kAlreadyExists);
  auto secret = store_->CreateUserWithToken("frank", false, {"nlp"}, "initial", "crl_secret",
                                            Seconds(51), std::nullopt);
  EXPECT_EQ(secret.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(secret.status().message(), Not(HasSubstr("crl_secret")));
  EXPECT_EQ(
      store_
          ->CreateUserWithToken("", false, {}, "initial", FakeHash('g'), Seconds(51), std::nullopt)
          .status()
          .code(),
      StatusCode::kInvalidArgument);

  for (const char* name : {"dave", "erin", "frank"}) {
    EXPECT_EQ(store_->FindUser(name).status().code(), StatusCode::kNotFound) << name;
  }
  EXPECT_EQ(store_->ListUsers()->size(), 3u);  // alice, bob, carol
  EXPECT_EQ(store_->MembersOf("nlp")->size(), 1u);
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('d')).status().code(), StatusCode::kNotFound);
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('e')).status().code(), StatusCode::kNotFound);
  // A failed attempt does not poison the name: it can be created afterwards.
  EXPECT_TRUE(store_
                  ->CreateUserWithToken("dave", false, {"vision"}, "initial", FakeHash('d'),
                                        Seconds(52), std::nullopt)
                  .ok());
}

TEST_P(StoreTest, InsertJobRejectsUnknownOwnersAndNonPendingStates) {
  Seed();
  auto no_project = store_->InsertJob(MakeJob("x", "robotics"));
  EXPECT_EQ(no_project.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_project.status().message(), HasSubstr("project 'robotics' does not exist"));
  auto no_user = store_->InsertJob(MakeJob("x", "vision", "mallory"));
  EXPECT_EQ(no_user.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(no_user.status().message(), HasSubstr("user 'mallory' does not exist"));
  JobRecord running = MakeJob("x");
  running.state = JobState::kRunning;
  EXPECT_EQ(store_->InsertJob(running).status().code(), StatusCode::kInvalidArgument);
  EXPECT_TRUE(store_->InsertJob(MakeJob("y")).ok());
  EXPECT_EQ(store_->ListJobs({})->size(), 1u);
}

TEST_P(StoreTest, InsertJobsReturnsIdsInOrderAndIsAllOrNothing) {
  Seed();
  std::vector<JobRecord> jobs;
  for (int i = 0; i < 150; ++i) {  // more than one PostgreSQL pipeline chunk
    jobs.push_back(MakeJob("job-" + std::to_string(i), i % 2 ? "nlp" : "vision"));
  }
  auto ids = store_->InsertJobs(jobs);
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    if (i > 0) {
      EXPECT_LT((*ids)[i - 1], (*ids)[i]);
    }
    auto got = store_->GetJob((*ids)[i]);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->name, jobs[i].name);
    auto events = store_->JobEvents((*ids)[i]);
    ASSERT_TRUE(events.ok());
    ASSERT_EQ(events->size(), 1u);
    EXPECT_EQ((*events)[0].to_state, JobState::kPending);
    EXPECT_EQ((*events)[0].reason, "submitted");
  }

  std::vector<JobRecord> mixed = {MakeJob("good-1"), MakeJob("bad", "robotics"), MakeJob("good-2")};
  auto failed = store_->InsertJobs(mixed);
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(failed.status().message(), HasSubstr("robotics"));
  EXPECT_EQ(store_->ListJobs({.limit = 0})->size(), jobs.size());  // nothing of the batch
  EXPECT_TRUE(store_->InsertJobs({})->empty());
}

// `n` elements of an array with indices 0, 2, 4, ... and running limit `max_running`.
std::vector<JobRecord> ArrayOf(int n, std::optional<int> max_running, std::string project) {
  std::vector<JobRecord> elements;
  for (int i = 0; i < n; ++i) {
    JobRecord e;
    e.name = "sweep";
    e.user = "alice";
    e.project = project;
    e.spec_json = "{}";
    e.submit_time = Seconds(1000);
    e.array_index = 2 * i;
    e.array_max_running = max_running;
    elements.push_back(e);
  }
  return elements;
}

TEST_P(StoreTest, InsertArrayNamesTheArrayAfterItsFirstJobAndIsAllOrNothing) {
  Seed();
  ASSERT_TRUE(store_->InsertJob(MakeJob("before")).ok());
  auto ids = store_->InsertArray(ArrayOf(150, 8, "vision"));  // more than one pipeline chunk
  ASSERT_TRUE(ids.ok()) << ids.status().ToString();
  ASSERT_EQ(ids->size(), 150u);
  for (size_t i = 0; i < ids->size(); ++i) {
    if (i > 0) EXPECT_LT((*ids)[i - 1], (*ids)[i]);
    auto got = store_->GetJob((*ids)[i]);
    ASSERT_TRUE(got.ok());
    EXPECT_EQ(got->array_id, ids->front());
    EXPECT_EQ(got->array_index, static_cast<int>(2 * i));
    EXPECT_EQ(got->array_max_running, 8);
    EXPECT_EQ(got->state, JobState::kPending);
    EXPECT_EQ((*store_->JobEvents((*ids)[i]))[0].reason, "submitted");
  }
  auto plain = store_->GetJob(JobId(ids->front().value() - 1));
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ(plain->array_id, std::nullopt);
  EXPECT_EQ(plain->array_index, std::nullopt);
  // Without a limit; the array survives a reopen.
  auto free_ids = store_->InsertArray(ArrayOf(2, std::nullopt, "nlp"));
  ASSERT_TRUE(free_ids.ok()) << free_ids.status().ToString();
  Reopen();
  EXPECT_EQ(store_->GetJob(free_ids->back())->array_id, free_ids->front());
  EXPECT_EQ(store_->GetJob(free_ids->back())->array_max_running, std::nullopt);

  const size_t stored = store_->ListJobs({.limit = 0})->size();
  std::vector<JobRecord> bad = ArrayOf(3, 2, "vision");
  bad[2].project = "robotics";
  auto failed = store_->InsertArray(bad);
  EXPECT_EQ(failed.status().code(), StatusCode::kNotFound);
  EXPECT_THAT(failed.status().message(), HasSubstr("robotics"));
  bad = ArrayOf(3, 2, "vision");
  bad[2].array_index = 0;
  failed = store_->InsertArray(bad);
  EXPECT_EQ(failed.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(failed.status().message(), HasSubstr("jobs[2]: field 'array_index': 0 is repeated"));
  bad = ArrayOf(3, 2, "vision");
  bad[1].array_max_running = 3;
  EXPECT_THAT(store_->InsertArray(bad).status().message(), HasSubstr("jobs[1]"));
  bad = ArrayOf(1, 2, "vision");
  bad[0].array_index.reset();
  EXPECT_THAT(store_->InsertArray(bad).status().message(), HasSubstr("array_index"));
  bad = ArrayOf(1, 2, "vision");
  bad[0].array_id = JobId(1);
  EXPECT_THAT(store_->InsertArray(bad).status().message(), HasSubstr("array_id"));
  EXPECT_EQ(store_->InsertArray({}).status().code(), StatusCode::kInvalidArgument);
  // Elements go through InsertArray only.
  auto element = store_->InsertJob(ArrayOf(1, 2, "vision")[0]);
  EXPECT_EQ(element.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(element.status().message(), HasSubstr("InsertArray"));
  EXPECT_EQ(store_->ListJobs({.limit = 0})->size(), stored);  // nothing of the failed ones
}

TEST_P(StoreTest, ListJobsFiltersByArray) {
  Seed();
  auto first = store_->InsertArray(ArrayOf(5, 2, "vision"));
  ASSERT_TRUE(store_->InsertJob(MakeJob("between")).ok());
  auto second = store_->InsertArray(ArrayOf(2, std::nullopt, "vision"));
  ASSERT_TRUE(first.ok() && second.ok());
  auto ids_of = [](const Result<std::vector<JobRecord>>& jobs) {
    std::vector<JobId> ids;
    for (const auto& j : *jobs) ids.push_back(j.id);
    return ids;
  };
  EXPECT_EQ(ids_of(store_->ListJobs({.array = first->front()})), *first);
  EXPECT_EQ(ids_of(store_->ListJobs({.array = second->front()})), *second);
  EXPECT_TRUE(store_->ListJobs({.array = (*first)[1]})->empty());  // not an array's id
  ASSERT_TRUE(store_
                  ->TransitionJob((*first)[0], JobState::kPending, JobState::kCancelled, "by user",
                                  Seconds(1100))
                  .ok());
  // With the other filters and the newest-first paging of the API.
  EXPECT_EQ(ids_of(store_->ListJobs({.states = {JobState::kPending},
                                     .array = first->front(),
                                     .direction = SortDirection::kDescending,
                                     .after = JobListPosition{std::nullopt, (*first)[4]},
                                     .limit = 2})),
            (std::vector<JobId>{(*first)[3], (*first)[2]}));
  EXPECT_TRUE(store_->ListJobs({.users = {"bob"}, .array = first->front()})->empty());
}

TEST_P(StoreTest, ListJobsFiltersByEndTime) {
  Seed();
  auto ended = store_->InsertJob(MakeJob("ended"));
  auto live = store_->InsertJob(MakeJob("live"));
  ASSERT_TRUE(ended.ok() && live.ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(*ended, JobState::kPending, JobState::kCancelled, "by user",
                                  Seconds(1100))
                  .ok());
  auto ids = [&](int64_t since) {
    std::vector<JobId> out;
    auto jobs = store_->ListJobs({.live_since = Seconds(since)});
    for (const auto& j : *jobs) out.push_back(j.id);
    return out;
  };
  EXPECT_EQ(ids(1100), (std::vector<JobId>{*ended, *live}));
  EXPECT_EQ(ids(1101), (std::vector<JobId>{*live}));
}

TEST_P(StoreTest, TransitionJobsMovesAllOrNone) {
  Seed();
  auto ids = store_->InsertArray(ArrayOf(3, 1, "vision"));
  ASSERT_TRUE(ids.ok());
  ASSERT_TRUE(
      store_
          ->TransitionJob((*ids)[1], JobState::kPending, JobState::kCancelled, "one", Seconds(1100))
          .ok());
  Status refused =
      store_->TransitionJobs(*ids, JobState::kPending, JobState::kCancelled, "all", Seconds(1200));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(),
              HasSubstr("job " + std::to_string((*ids)[1].value()) + " is cancelled, not pending"));
  EXPECT_EQ(store_->GetJob((*ids)[0])->state, JobState::kPending);  // rolled back
  EXPECT_EQ(store_->JobEvents((*ids)[0])->size(), 1u);
  const std::vector<JobId> rest = {(*ids)[0], (*ids)[2]};
  ASSERT_TRUE(
      store_->TransitionJobs(rest, JobState::kPending, JobState::kCancelled, "all", Seconds(1200))
          .ok());
  for (JobId id : rest) {
    auto job = store_->GetJob(id);
    EXPECT_EQ(job->state, JobState::kCancelled);
    EXPECT_EQ(job->end_time, Seconds(1200));
    EXPECT_EQ(job->reason, "all");
    EXPECT_EQ(store_->JobEvents(id)->back().to_state, JobState::kCancelled);
  }
  EXPECT_TRUE(
      store_->TransitionJobs({}, JobState::kPending, JobState::kCancelled, "none", Seconds(1300))
          .ok());
  EXPECT_EQ(store_
                ->TransitionJobs({JobId(987654)}, JobState::kPending, JobState::kCancelled, "x",
                                 Seconds(1))
                .code(),
            StatusCode::kNotFound);
}

TEST_P(StoreTest, TransitionsKeepEveryEventWithTimeAndReason) {
  Seed();
  auto id = store_->InsertJob(MakeJob("train", "vision", "alice", 1000));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kPending, JobState::kStarting, "placed", Seconds(1001))
          .ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(*id, JobState::kStarting, JobState::kRunning, "agent started",
                                  Seconds(1002))
                  .ok());
  auto running = store_->GetJob(*id);
  EXPECT_EQ(running->start_time, Seconds(1002));
  EXPECT_EQ(running->reason, "agent started");
  // Preempted: back to pending, which counts a restart and clears the times.
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kRunning, JobState::kPending, "preempted", Seconds(1003))
          .ok());
  auto requeued = store_->GetJob(*id);
  EXPECT_EQ(requeued->restarts, 1);
  EXPECT_EQ(requeued->start_time, std::nullopt);
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kPending, JobState::kStarting, "placed", Seconds(1004))
          .ok());
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kStarting, JobState::kRunning, "started", Seconds(1005))
          .ok());
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kRunning, JobState::kSucceeded, "exit 0", Seconds(1010))
          .ok());

  auto done = store_->GetJob(*id);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done->state, JobState::kSucceeded);
  EXPECT_EQ(done->start_time, Seconds(1005));
  EXPECT_EQ(done->end_time, Seconds(1010));
  EXPECT_EQ(done->restarts, 1);
  EXPECT_EQ(done->reason, "exit 0");

  auto events = store_->JobEvents(*id);
  ASSERT_TRUE(events.ok());
  std::vector<std::tuple<int64_t, std::string, std::string, std::string>> got;
  for (const JobEvent& e : *events) {
    EXPECT_EQ(e.job, *id);
    got.emplace_back(e.time.value(), e.from_state ? model::ToString(*e.from_state) : "",
                     model::ToString(e.to_state), e.reason);
  }
  using E = std::tuple<int64_t, std::string, std::string, std::string>;
  EXPECT_EQ(got, (std::vector<E>{{1000, "", "pending", "submitted"},
                                 {1001, "pending", "starting", "placed"},
                                 {1002, "starting", "running", "agent started"},
                                 {1003, "running", "pending", "preempted"},
                                 {1004, "pending", "starting", "placed"},
                                 {1005, "starting", "running", "started"},
                                 {1010, "running", "succeeded", "exit 0"}}));
  EXPECT_EQ(store_->JobEvents(JobId(55555)).status().code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, EveryJobStateIsAcceptedByTheSchema) {
  Seed();
  for (JobState to : model::kJobStates) {
    if (to == JobState::kPending) continue;
    const std::string name(model::ToString(to));
    auto id = store_->InsertJob(MakeJob(name));
    ASSERT_TRUE(id.ok());
    Status s = store_->TransitionJob(*id, JobState::kPending, to, "", Seconds(5));
    EXPECT_TRUE(s.ok()) << name << ": " << s.ToString();
    // Read back as written; a final state sets the end time.
    auto job = store_->GetJob(*id);
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(job->state, to);
    EXPECT_EQ(job->end_time.has_value(), model::IsFinal(to)) << name;
    EXPECT_EQ(store_->ListJobs({.states = {to}})->size(), 1u) << name;
    EXPECT_EQ(store_->JobEvents(*id)->back().to_state, to);
  }
  // The database itself refuses a name that is no state (its CHECK), whoever writes it.
  auto id = store_->InsertJob(MakeJob("bad"));
  ASSERT_TRUE(id.ok());
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(
      conn->Execute("UPDATE jobs SET state = 'paused' WHERE id = ?", {id->value()}).status().code(),
      StatusCode::kInvalidArgument);
  EXPECT_EQ(
      store_->TransitionJob(*id, JobState::kPending, JobState::kPending, "", Seconds(5)).code(),
      StatusCode::kInvalidArgument);
}

TEST_P(StoreTest, CompareAndSetLosesWithFailedPrecondition) {
  Seed();
  auto id = store_->InsertJob(MakeJob("train"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kPending, JobState::kCancelled, "by user", Seconds(2))
          .ok());
  Status lost =
      store_->TransitionJob(*id, JobState::kPending, JobState::kStarting, "placed", Seconds(3));
  EXPECT_EQ(lost.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(lost.message(), HasSubstr("is cancelled, not pending"));
  EXPECT_EQ(store_->GetJob(*id)->state, JobState::kCancelled);
  EXPECT_EQ(store_->JobEvents(*id)->size(), 2u);  // the losing attempt left no event
  EXPECT_EQ(
      store_->TransitionJob(JobId(777777), JobState::kPending, JobState::kStarting, "", Seconds(3))
          .code(),
      StatusCode::kNotFound);
}

TEST_P(StoreTest, ConcurrentTransitionsFromOneStateHaveOneWinner) {
  Seed();
  std::vector<JobRecord> jobs(40, MakeJob("race"));
  auto ids = store_->InsertJobs(jobs);
  ASSERT_TRUE(ids.ok());
  constexpr int kThreads = 8;
  std::vector<int> wins(kThreads, 0), losses(kThreads, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (JobId id : *ids) {
        Status s = store_->TransitionJob(id, JobState::kPending,
                                         t % 2 ? JobState::kStarting : JobState::kCancelled,
                                         "thread " + std::to_string(t), Seconds(10));
        if (s.ok()) {
          ++wins[t];
        } else if (s.code() == StatusCode::kFailedPrecondition) {
          ++losses[t];
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  int total_wins = 0, total_losses = 0;
  for (int t = 0; t < kThreads; ++t) {
    total_wins += wins[t];
    total_losses += losses[t];
  }
  EXPECT_EQ(total_wins, static_cast<int>(ids->size()));
  EXPECT_EQ(total_losses, static_cast<int>(ids->size()) * (kThreads - 1));
  for (JobId id : *ids) EXPECT_EQ(store_->JobEvents(id)->size(), 2u);
}

// A task of a gang on `node`: GPU `index`, whole, with some CPU and memory.
TaskAssignment MakeTask(int index, std::string node) {
  TaskAssignment t;
  t.task_index = index;
  t.node = std::move(node);
  t.allocation.gpus = {{index, MilliGpu(1000)}};
  t.allocation.cpu = CpuMilli(4000);
  t.allocation.memory = MemoryMib(16384);
  return t;
}

std::vector<int64_t> AllocationIds(const std::vector<TaskRecord>& tasks) {
  std::vector<int64_t> ids;
  for (const auto& t : tasks) ids.push_back(t.allocation_id);
  return ids;
}

TEST_P(StoreTest, AssignGangWritesAllTasksOrNone) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  ASSERT_TRUE(store_->UpsertNode({"n2", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto id = store_->InsertJob(MakeJob("gang"));
  ASSERT_TRUE(id.ok());
  auto unchanged = [&] {
    EXPECT_EQ(store_->GetJob(*id)->state, JobState::kPending);
    EXPECT_TRUE(store_->TasksOfJob(*id)->empty());
    EXPECT_EQ(store_->JobEvents(*id)->size(), 1u);
    EXPECT_TRUE(store_->ActiveTasks()->empty());
  };

  // The middle task's node is unknown: the database refuses its row after the job moved, the ids
  // were taken and the first row was written. All of it rolls back.
  auto ghost = store_->AssignGang(*id, {MakeTask(0, "n1"), MakeTask(1, "n9"), MakeTask(2, "n2")},
                                  Seconds(50));
  ASSERT_FALSE(ghost.ok());
  EXPECT_EQ(ghost.status().code(), StatusCode::kNotFound) << ghost.status().ToString();
  EXPECT_THAT(ghost.status().message(), HasSubstr("node 'n9' is not registered"));
  unchanged();

  // Invalid input is refused before the database is touched, naming the field.
  EXPECT_EQ(store_->AssignGang(*id, {}, Seconds(50)).status().code(), StatusCode::kInvalidArgument);
  auto repeated = store_->AssignGang(*id, {MakeTask(0, "n1"), MakeTask(0, "n1")}, Seconds(50));
  EXPECT_THAT(repeated.status().message(), HasSubstr("field 'tasks[1].task_index'"));
  TaskAssignment zero = MakeTask(1, "n2");
  zero.allocation.gpus[0].milli = MilliGpu(0);
  auto bad = store_->AssignGang(*id, {MakeTask(0, "n1"), zero}, Seconds(50));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(),
              HasSubstr("field 'tasks[1].allocation.gpus[0].milli': must be in 1..1000, got 0"));
  unchanged();

  TaskAssignment with_ports = MakeTask(1, "n2");
  with_ports.allocation.rendezvous = model::Rendezvous{"n1", 29500, {"n1", "n2"}};
  auto gang = store_->AssignGang(*id, {MakeTask(0, "n1"), with_ports}, Seconds(60));
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  // The failed attempts took no ids: the first gang gets 1 and 2.
  EXPECT_EQ(AllocationIds(*gang), (std::vector<int64_t>{1, 2}));
  auto job = store_->GetJob(*id);
  EXPECT_EQ(job->state, JobState::kStarting);
  EXPECT_EQ(job->reason, "assigned to n1, n2");
  auto events = store_->JobEvents(*id);
  ASSERT_EQ(events->size(), 2u);
  EXPECT_EQ((*events)[1].from_state, JobState::kPending);
  EXPECT_EQ((*events)[1].to_state, JobState::kStarting);
  EXPECT_EQ((*events)[1].time, Seconds(60));
  auto tasks = store_->TasksOfJob(*id);
  ASSERT_EQ(tasks->size(), 2u);
  for (size_t i = 0; i < 2; ++i) {  // what was returned is what was stored
    EXPECT_EQ((*tasks)[i].task_index, (*gang)[i].task_index);
    EXPECT_EQ((*tasks)[i].allocation_id, (*gang)[i].allocation_id);
    EXPECT_EQ((*tasks)[i].generation, 1);
    EXPECT_EQ((*gang)[i].generation, 1);
    EXPECT_EQ((*tasks)[i].node, (*gang)[i].node);
    EXPECT_EQ((*tasks)[i].state, TaskState::kAssigned);
    EXPECT_EQ((*gang)[i].state, TaskState::kAssigned);
    EXPECT_EQ((*tasks)[i].allocation, (*gang)[i].allocation);
  }
  EXPECT_EQ((*tasks)[0].allocation, MakeTask(0, "n1").allocation);
  EXPECT_EQ((*tasks)[1].allocation, with_ports.allocation);
  EXPECT_EQ((*tasks)[1].node, "n2");

  auto twice = store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(70));
  EXPECT_EQ(twice.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(twice.status().message(), HasSubstr("is starting, not pending"));
  EXPECT_EQ(store_->AssignGang(JobId(424242), {MakeTask(0, "n1")}, Seconds(70)).status().code(),
            StatusCode::kNotFound);
}

// An elastic job's resize: a new generation of task rows while the job stays as it is, with
// the event; all or nothing; refused for a job that is not started.
TEST_P(StoreTest, ResizeGangWritesANewGenerationAndKeepsTheState) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  ASSERT_TRUE(store_->UpsertNode({"n2", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto id = store_->InsertJob(MakeJob("elastic"));
  ASSERT_TRUE(id.ok());
  auto pending = store_->ResizeGang(*id, {MakeTask(0, "n1")}, "resized", Seconds(5));
  EXPECT_EQ(pending.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(pending.status().message(), HasSubstr("is pending"));
  auto first = store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(10));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_TRUE(
      store_->TransitionJob(*id, JobState::kStarting, JobState::kRunning, "up", Seconds(11)).ok());

  // An unknown node rolls everything back: no generation, no event, no ids taken.
  auto ghost = store_->ResizeGang(*id, {MakeTask(0, "n1"), MakeTask(1, "n9")}, "r", Seconds(20));
  EXPECT_EQ(ghost.status().code(), StatusCode::kNotFound) << ghost.status().ToString();
  EXPECT_EQ(store_->GetJob(*id)->restarts, 0);
  EXPECT_EQ(store_->JobEvents(*id)->size(), 3u);

  auto grown = store_->ResizeGang(*id, {MakeTask(0, "n1"), MakeTask(1, "n2")},
                                  "resized from 1 to 2 nodes: idle GPUs", Seconds(30));
  ASSERT_TRUE(grown.ok()) << grown.status().ToString();
  EXPECT_EQ(AllocationIds(*grown), (std::vector<int64_t>{2, 3}));
  auto job = store_->GetJob(*id);
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->restarts, 1);
  EXPECT_EQ(job->start_time, Seconds(11));  // the run goes on
  auto events = store_->JobEvents(*id);
  ASSERT_EQ(events->size(), 4u);
  EXPECT_EQ(events->back().from_state, JobState::kRunning);
  EXPECT_EQ(events->back().to_state, JobState::kRunning);
  EXPECT_EQ(events->back().reason, "resized from 1 to 2 nodes: idle GPUs");
  auto tasks = store_->TasksOfJob(*id);
  ASSERT_EQ(tasks->size(), 3u);  // the old generation's row stays
  for (const auto& g : *grown) {
    EXPECT_EQ(g.generation, 2);
    EXPECT_EQ(g.state, TaskState::kAssigned);
  }
}

// A scheduling pass's starts in one commit: every gang or none.
TEST_P(StoreTest, AssignGangsCommitsAPassInOneTransaction) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  ASSERT_TRUE(store_->UpsertNode({"n2", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto a = store_->InsertJob(MakeJob("a"));
  auto b = store_->InsertJob(MakeJob("b"));
  auto c = store_->InsertJob(MakeJob("c"));
  ASSERT_TRUE(a.ok() && b.ok() && c.ok());

  // The second gang names an unknown node: the first gang's writes roll back with it, and the
  // error names the job that failed.
  auto ghost = store_->AssignGangs(
      {{*a, {MakeTask(0, "n1")}}, {*b, {MakeTask(0, "n9")}}, {*c, {MakeTask(0, "n2")}}},
      Seconds(50));
  ASSERT_FALSE(ghost.ok());
  EXPECT_EQ(ghost.status().code(), StatusCode::kNotFound) << ghost.status().ToString();
  EXPECT_THAT(ghost.status().message(), HasSubstr("assign job " + std::to_string(b->value())));
  EXPECT_THAT(ghost.status().message(), HasSubstr("node 'n9' is not registered"));
  for (JobId id : {*a, *b, *c}) {
    EXPECT_EQ(store_->GetJob(id)->state, JobState::kPending);
    EXPECT_TRUE(store_->TasksOfJob(id)->empty());
  }
  // A bad field is refused before the database is touched, naming the job and the field.
  TaskAssignment zero = MakeTask(0, "n2");
  zero.allocation.gpus[0].milli = MilliGpu(0);
  auto bad = store_->AssignGangs({{*a, {MakeTask(0, "n1")}}, {*c, {zero}}}, Seconds(50));
  EXPECT_EQ(bad.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("assign job " + std::to_string(c->value()) +
                                                ": field 'tasks[0].allocation.gpus[0].milli'"));

  const int64_t commits = store_->Commits();
  const int64_t trips = store_->RoundTrips();
  auto pass = store_->AssignGangs(
      {{*c, {MakeTask(0, "n2")}}, {*a, {MakeTask(0, "n1"), MakeTask(1, "n2")}}}, Seconds(60));
  ASSERT_TRUE(pass.ok()) << pass.status().ToString();
  EXPECT_EQ(store_->Commits(), commits + 1);  // one transaction for the whole pass
  // PostgreSQL: one round trip for the pass (its statement was prepared by the first attempt).
  EXPECT_EQ(store_->RoundTrips() - trips, GetParam() == Backend::kPostgres ? 1 : 0);
  ASSERT_EQ(pass->size(), 2u);
  // Ids in the order of the gangs (the failed attempts took none).
  EXPECT_EQ(AllocationIds((*pass)[0]), (std::vector<int64_t>{1}));
  EXPECT_EQ(AllocationIds((*pass)[1]), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(store_->GetJob(*a)->state, JobState::kStarting);
  EXPECT_EQ(store_->GetJob(*a)->reason, "assigned to n1, n2");
  EXPECT_EQ(store_->GetJob(*b)->state, JobState::kPending);
  EXPECT_EQ(store_->GetJob(*c)->state, JobState::kStarting);
  EXPECT_EQ(store_->TasksOfJob(*a)->size(), 2u);
  EXPECT_EQ(store_->JobEvents(*c)->back().to_state, JobState::kStarting);
}

// Allocation ids are the fencing token agents key tasks by: never reused, also across restarts,
// requeues and concurrent assignments; each gang's are consecutive in task order.
TEST_P(StoreTest, AllocationIdsAreUniqueAndGrowAcrossRestarts) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto a = store_->InsertJob(MakeJob("a"));
  ASSERT_TRUE(a.ok());
  auto first = store_->AssignGang(*a, {MakeTask(0, "n1"), MakeTask(1, "n1")}, Seconds(2));
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(AllocationIds(*first), (std::vector<int64_t>{1, 2}));

  // A requeued job's next run: new ids and the next generation.
  ASSERT_TRUE(
      store_->TransitionJob(*a, JobState::kStarting, JobState::kPending, "node lost", Seconds(3))
          .ok());
  Reopen();
  auto second = store_->AssignGang(*a, {MakeTask(0, "n1"), MakeTask(1, "n1")}, Seconds(4));
  ASSERT_TRUE(second.ok()) << second.status().ToString();
  EXPECT_EQ(AllocationIds(*second), (std::vector<int64_t>{3, 4}));
  EXPECT_EQ((*second)[0].generation, 2);
  EXPECT_EQ(store_->TasksOfJob(*a)->size(), 4u);

  // Gangs assigned from several threads at once: every id once, each gang's consecutive.
  constexpr int kThreads = 4, kGangsPerThread = 5, kTasks = 3;
  std::vector<JobId> jobs;
  for (int i = 0; i < kThreads * kGangsPerThread; ++i) {
    jobs.push_back(*store_->InsertJob(MakeJob("g" + std::to_string(i))));
  }
  std::vector<std::vector<int64_t>> got(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int g = 0; g < kGangsPerThread; ++g) {
        auto gang = store_->AssignGang(jobs[t * kGangsPerThread + g],
                                       {MakeTask(0, "n1"), MakeTask(1, "n1"), MakeTask(2, "n1")},
                                       Seconds(5));
        ASSERT_TRUE(gang.ok()) << gang.status().ToString();
        const auto ids = AllocationIds(*gang);
        EXPECT_EQ(ids.back() - ids.front(), kTasks - 1);
        got[t].insert(got[t].end(), ids.begin(), ids.end());
      }
    });
  }
  for (auto& th : threads) th.join();
  std::set<int64_t> all;
  for (const auto& g : got) {
    EXPECT_TRUE(std::is_sorted(g.begin(), g.end()));  // a thread's later gang: larger ids
    all.insert(g.begin(), g.end());
  }
  EXPECT_EQ(all.size(), static_cast<size_t>(kThreads * kGangsPerThread * kTasks));
  EXPECT_EQ(*all.begin(), 5);
  EXPECT_EQ(*all.rbegin(), 4 + kThreads * kGangsPerThread * kTasks);
}

TEST_P(StoreTest, UpdateTaskAndActiveTasks) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto a = store_->InsertJob(MakeJob("a"));
  auto b = store_->InsertJob(MakeJob("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto ta = store_->AssignGang(*a, {MakeTask(0, "n1")}, Seconds(5));
  auto tb = store_->AssignGang(*b, {MakeTask(0, "n1"), MakeTask(1, "n1")}, Seconds(5));
  ASSERT_TRUE(ta.ok() && tb.ok());
  auto active = store_->ActiveTasks();
  ASSERT_TRUE(active.ok());
  EXPECT_EQ(AllocationIds(*active), (std::vector<int64_t>{1, 2, 3}));

  TaskRecord running = (*ta)[0];
  running.state = TaskState::kRunning;
  running.start_time = Seconds(6);
  ASSERT_TRUE(store_->UpdateTask(running).ok());
  TaskRecord exited = (*tb)[0];
  exited.state = TaskState::kExited;
  exited.exit_code = 3;
  exited.start_time = Seconds(6);
  exited.end_time = Seconds(9);
  ASSERT_TRUE(store_->UpdateTask(exited).ok());
  TaskRecord killed = (*tb)[1];
  killed.state = TaskState::kKilled;
  killed.signal = 9;
  killed.end_time = Seconds(9);
  ASSERT_TRUE(store_->UpdateTask(killed).ok());

  active = store_->ActiveTasks();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].allocation_id, 1);
  EXPECT_EQ((*active)[0].state, TaskState::kRunning);
  EXPECT_EQ((*active)[0].start_time, Seconds(6));
  EXPECT_EQ((*active)[0].end_time, std::nullopt);
  EXPECT_EQ((*active)[0].allocation, MakeTask(0, "n1").allocation);

  auto tasks = store_->TasksOfJob(*b);
  ASSERT_EQ(tasks->size(), 2u);
  EXPECT_EQ((*tasks)[0].state, TaskState::kExited);
  EXPECT_EQ((*tasks)[0].exit_code, 3);
  EXPECT_EQ((*tasks)[0].signal, std::nullopt);
  EXPECT_EQ((*tasks)[0].end_time, Seconds(9));
  EXPECT_EQ((*tasks)[1].signal, 9);
  EXPECT_EQ((*tasks)[1].exit_code, std::nullopt);

  TaskRecord unknown = running;
  unknown.allocation_id = 99;
  EXPECT_EQ(store_->UpdateTask(unknown).code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, ApplyWritesABatchInOneCommitAllOrNone) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto a = store_->InsertJob(MakeJob("a"));
  auto b = store_->InsertJob(MakeJob("b"));
  ASSERT_TRUE(a.ok() && b.ok());
  auto ta = store_->AssignGang(*a, {MakeTask(0, "n1"), MakeTask(1, "n1")}, Seconds(5));
  auto tb = store_->AssignGang(*b, {MakeTask(0, "n1")}, Seconds(5));
  ASSERT_TRUE(ta.ok() && tb.ok());

  // Both of a's tasks run, and a starts running: one commit.
  WriteBatch batch;
  for (TaskRecord t : *ta) {
    t.state = TaskState::kRunning;
    t.start_time = Seconds(6);
    batch.tasks.push_back(t);
  }
  batch.transitions.push_back({*a, JobState::kStarting, JobState::kRunning, "all tasks running"});
  const int64_t before = store_->Commits();
  ASSERT_TRUE(store_->Apply(batch, Seconds(6)).ok());
  EXPECT_EQ(store_->Commits(), before + 1);
  EXPECT_EQ(store_->GetJob(*a)->state, JobState::kRunning);
  EXPECT_EQ(store_->GetJob(*a)->start_time, Seconds(6));
  EXPECT_EQ(store_->JobEvents(*a)->back().reason, "all tasks running");
  auto a_tasks = store_->TasksOfJob(*a);
  ASSERT_TRUE(a_tasks.ok());
  for (const TaskRecord& t : *a_tasks) EXPECT_EQ(t.state, TaskState::kRunning);

  // A transition that no longer holds (b is starting, not running) fails the whole batch: b's
  // task update before it is not kept either, and the error names the job.
  TaskRecord b_task = (*tb)[0];
  b_task.state = TaskState::kExited;
  b_task.exit_code = 0;
  b_task.end_time = Seconds(7);
  WriteBatch wrong{.tasks = {b_task},
                   .transitions = {{*b, JobState::kRunning, JobState::kSucceeded, "done"}}};
  Status refused = store_->Apply(wrong, Seconds(7));
  EXPECT_EQ(refused.code(), StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.message().find("job " + std::to_string(b->value())), std::string::npos)
      << refused.message();
  EXPECT_EQ((*store_->TasksOfJob(*b))[0].state, TaskState::kAssigned);
  EXPECT_EQ(store_->GetJob(*b)->state, JobState::kStarting);

  // An unknown task fails it too, named.
  TaskRecord ghost = b_task;
  ghost.allocation_id = 99;
  Status unknown = store_->Apply({.tasks = {ghost}}, Seconds(7));
  EXPECT_EQ(unknown.code(), StatusCode::kNotFound);
  EXPECT_NE(unknown.message().find("allocation 99"), std::string::npos) << unknown.message();

  // Nothing to write: no commit.
  const int64_t idle = store_->Commits();
  EXPECT_TRUE(store_->Apply({}, Seconds(8)).ok());
  EXPECT_EQ(store_->Commits(), idle);
}

TEST_P(StoreTest, CancelRequestOfAStartedJobIsKeptWithAnEvent) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto id = store_->InsertJob(MakeJob("train"));
  ASSERT_TRUE(id.ok());
  // Not started yet: nothing to request (a pending job is simply cancelled).
  EXPECT_EQ(store_->RequestCancel(*id, "cancelled by alice", Seconds(2)).code(),
            StatusCode::kFailedPrecondition);
  ASSERT_TRUE(store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(3)).ok());
  ASSERT_TRUE(store_->RequestCancel(*id, "cancelled by alice", Seconds(4)).ok());
  Reopen();
  auto job = store_->GetJob(*id);
  EXPECT_EQ(job->state, JobState::kStarting);
  EXPECT_EQ(job->cancel_reason, std::optional<std::string>("cancelled by alice"));
  auto events = store_->JobEvents(*id);
  EXPECT_EQ(events->back().reason, "cancelling: cancelled by alice");
  EXPECT_EQ(store_->RequestCancel(JobId(777777), "x", Seconds(5)).code(), StatusCode::kNotFound);
  auto plain = store_->InsertJob(MakeJob("plain"));
  EXPECT_FALSE(store_->GetJob(*plain)->cancel_reason.has_value());
}

TEST_P(StoreTest, AnEventWithoutATransitionKeepsTheStateAndTimes) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto id = store_->InsertJob(MakeJob("session"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(2)).ok());
  ASSERT_TRUE(store_
                  ->TransitionJob(*id, JobState::kStarting, JobState::kRunning, "all tasks running",
                                  Seconds(3))
                  .ok());
  ASSERT_TRUE(store_->AddJobEvent(*id, "session idle for 60 s", Seconds(70)).ok());
  Reopen();
  auto job = store_->GetJob(*id);
  EXPECT_EQ(job->state, JobState::kRunning);
  EXPECT_EQ(job->start_time, std::optional<Seconds>(Seconds(3)));
  auto events = store_->JobEvents(*id);
  ASSERT_TRUE(events.ok());
  EXPECT_EQ(events->back().from_state, JobState::kRunning);
  EXPECT_EQ(events->back().to_state, JobState::kRunning);
  EXPECT_EQ(events->back().reason, "session idle for 60 s");
  EXPECT_EQ(events->back().time, Seconds(70));
  EXPECT_EQ(store_->AddJobEvent(JobId(777777), "x", Seconds(5)).code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, ProjectSharingIsStoredAndListed) {
  ASSERT_TRUE(store_->CreateProject("vision", "", Seconds(1)).ok());
  EXPECT_EQ(store_->ListProjects()->at(0).sharing_json, "{}");
  ASSERT_TRUE(store_->SetProjectSharing("vision", R"({"gpus":8})").ok());
  Reopen();
  EXPECT_EQ(store_->ListProjects()->at(0).sharing_json, R"({"gpus":8})");
  EXPECT_EQ(store_->SetProjectSharing("nope", "{}").code(), StatusCode::kNotFound);
}

TEST_P(StoreTest, NodesAreUpsertedByName) {
  ASSERT_TRUE(store_->UpsertNode({"gpu-2", R"({"gpus":8})", NodeState::kReady, Seconds(10)}).ok());
  ASSERT_TRUE(store_->UpsertNode({"gpu-1", R"({"gpus":4})", NodeState::kReady, Seconds(11)}).ok());
  ASSERT_TRUE(
      store_
          ->UpsertNode({"gpu-2", R"({"gpus":7})", NodeState::kCordoned, Seconds(12), FakeHash('9')})
          .ok());
  EXPECT_EQ(store_->UpsertNode({"", "{}", NodeState::kReady, Seconds(12)}).code(),
            StatusCode::kInvalidArgument);
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].name, "gpu-1");
  EXPECT_EQ((*nodes)[1].name, "gpu-2");
  EXPECT_EQ((*nodes)[1].inventory_json, R"({"gpus":7})");
  EXPECT_EQ((*nodes)[1].state, NodeState::kCordoned);
  EXPECT_EQ((*nodes)[1].last_heartbeat, Seconds(12));
  EXPECT_EQ((*nodes)[1].node_id_hash, FakeHash('9'));
  EXPECT_EQ((*nodes)[0].node_id_hash, "");
}

GpuMetricRow MetricRow(int resolution_s, int64_t start_s, const std::string& node, int gpu,
                       int permille, std::optional<JobId> job) {
  return {resolution_s, start_s, node, gpu, permille, 4096, 250000, 61, 2, job};
}

TEST_P(StoreTest, GpuMetricsAreStoredReplacedReadAndPruned) {
  ASSERT_TRUE(store_
                  ->AddGpuMetrics({MetricRow(10, 1000, "gpu-1", 0, 975, JobId(7)),
                                   MetricRow(10, 1010, "gpu-1", 0, 500, JobId(7)),
                                   MetricRow(10, 1000, "gpu-1", 1, 0, std::nullopt),
                                   MetricRow(10, 1000, "gpu-2", 0, 100, JobId(8)),
                                   MetricRow(300, 900, "gpu-1", 0, 737, JobId(7))})
                  .ok());
  // The same interval again (a flush repeated after a restart) replaces it.
  ASSERT_TRUE(store_->AddGpuMetrics({MetricRow(10, 1010, "gpu-1", 0, 600, JobId(7))}).ok());
  auto all = store_->GpuMetrics(10, 0, 2000, "", std::nullopt);
  ASSERT_TRUE(all.ok()) << all.status().ToString();
  ASSERT_EQ(all->size(), 4u);
  EXPECT_EQ((*all)[0].node, "gpu-1");
  EXPECT_EQ((*all)[0].utilization_permille, 975);
  EXPECT_EQ((*all)[0].memory_used_mib, 4096);
  EXPECT_EQ((*all)[0].power_mw, 250000);
  EXPECT_EQ((*all)[0].temperature_c, 61);
  EXPECT_EQ((*all)[0].samples, 2);
  EXPECT_EQ((*all)[0].job, JobId(7));
  EXPECT_EQ((*all)[1].utilization_permille, 600);
  EXPECT_FALSE((*all)[2].job.has_value());
  auto job7 = store_->GpuMetrics(10, 0, 2000, "", JobId(7));
  ASSERT_EQ(job7->size(), 2u);
  EXPECT_EQ(store_->GpuMetrics(10, 1005, 2000, "gpu-1", std::nullopt)->size(), 1u);
  EXPECT_EQ(store_->GpuMetrics(300, 0, 2000, "", std::nullopt)->size(), 1u);
  // Out of range: refused whole.
  EXPECT_EQ(store_->AddGpuMetrics({MetricRow(10, 2000, "gpu-1", 0, 1001, std::nullopt)}).code(),
            StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GpuMetrics(10, 0, 3000, "", std::nullopt)->size(), 4u);

  // In batches of 2 rows: 2 of 5 intervals of gpu-3, then the other 2 before 450.
  ASSERT_TRUE(store_
                  ->AddGpuMetrics({MetricRow(10, 100, "gpu-3", 0, 1, std::nullopt),
                                   MetricRow(10, 200, "gpu-3", 0, 1, std::nullopt),
                                   MetricRow(10, 300, "gpu-3", 0, 1, std::nullopt),
                                   MetricRow(10, 400, "gpu-3", 0, 1, std::nullopt),
                                   MetricRow(10, 500, "gpu-3", 0, 1, std::nullopt)})
                  .ok());
  auto early = store_->PruneGpuMetrics(10, 450, 2);
  ASSERT_TRUE(early.ok()) << early.status().ToString();
  EXPECT_EQ(early->rows, 4);
  EXPECT_EQ(early->batches, 2);
  EXPECT_EQ(store_->GpuMetrics(10, 0, 3000, "gpu-3", std::nullopt)->size(), 1u);
  // Batches of 2 where 3 share a start time (1000): gpu-3's last one (500), then those 3.
  auto pruned = store_->PruneGpuMetrics(10, 1010, 2);
  ASSERT_TRUE(pruned.ok()) << pruned.status().ToString();
  EXPECT_EQ(pruned->rows, 4);
  EXPECT_EQ(pruned->batches, 2);
  auto none_left = store_->PruneGpuMetrics(10, 1010, 2);
  ASSERT_TRUE(none_left.ok());
  EXPECT_EQ(none_left->rows, 0);
  EXPECT_EQ(none_left->batches, 0);
  EXPECT_EQ(store_->PruneGpuMetrics(10, 1010, 0).status().code(), StatusCode::kInvalidArgument);
  EXPECT_EQ(store_->GpuMetrics(10, 0, 3000, "", std::nullopt)->size(), 1u);
  EXPECT_EQ(store_->GpuMetrics(300, 0, 3000, "", std::nullopt)->size(), 1u);  // other resolution
}

TEST_P(StoreTest, GpuUsageAddsUpPerDayUserAndProject) {
  ASSERT_TRUE(store_
                  ->AddGpuUsage({{"2026-12-01", "alice", "vision", 3600000, 1800000},
                                 {"2026-12-02", "alice", "vision", 1000, 500},
                                 {"2026-12-02", "bob", "nlp", 2000, 0}})
                  .ok());
  ASSERT_TRUE(store_->AddGpuUsage({{"2026-12-02", "alice", "vision", 1000, 700}}).ok());
  auto usage = store_->GpuUsage("2026-12-02", "2026-12-31");
  ASSERT_TRUE(usage.ok()) << usage.status().ToString();
  ASSERT_EQ(usage->size(), 2u);
  EXPECT_EQ((*usage)[0].user, "alice");
  EXPECT_EQ((*usage)[0].allocated_gpu_ms, 2000);
  EXPECT_EQ((*usage)[0].used_gpu_ms, 1200);
  EXPECT_EQ((*usage)[1].project, "nlp");
  EXPECT_EQ(store_->GpuUsage("2026-11-01", "2026-12-01")->size(), 1u);
  EXPECT_EQ((*store_->GpuUsage("2026-11-01", "2026-12-01"))[0].allocated_gpu_ms, 3600000);
}

TEST_P(StoreTest, EverythingSurvivesAReopen) {
  int64_t alice = Seed();
  ASSERT_TRUE(store_->AddMember("vision", alice).ok());
  ASSERT_TRUE(store_->CreateToken(alice, "laptop", FakeHash('7'), Seconds(3), std::nullopt).ok());
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(4)}).ok());
  auto id = store_->InsertJob(MakeJob("durable"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(6)).ok());

  Reopen();
  EXPECT_EQ(store_->FindTokenOwner(FakeHash('7'))->user.name, "alice");
  EXPECT_EQ(*store_->ProjectsOf(alice), (std::vector<std::string>{"vision"}));
  EXPECT_EQ(store_->ListNodes()->size(), 1u);
  EXPECT_EQ(store_->GetJob(*id)->state, JobState::kStarting);
  EXPECT_EQ(store_->JobEvents(*id)->size(), 2u);
  EXPECT_EQ(store_->ActiveTasks()->size(), 1u);
  // Ids continue after the ones already used.
  auto next = store_->InsertJob(MakeJob("after"));
  ASSERT_TRUE(next.ok());
  EXPECT_GT(*next, *id);
}

TEST_P(StoreTest, MigrationsRunOnceAcrossReopens) {
  Reopen();
  Reopen();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ(*SchemaVersion(*conn), static_cast<int>(StoreMigrations().size()));
  auto rows = conn->Query("SELECT version FROM schema_version ORDER BY version", {});
  ASSERT_TRUE(rows.ok()) << rows.status().ToString();
  ASSERT_EQ(rows->size(), StoreMigrations().size());
  for (size_t i = 0; i < rows->size(); ++i) EXPECT_EQ((*rows)[i].Int(0), static_cast<int>(i) + 1);
  // The seeded allocation counter row was inserted once.
  auto counters = conn->Query("SELECT COUNT(*) FROM counters", {});
  EXPECT_EQ((*counters)[0].Int(0), 1);
}

// SqlConnection::QueryManyAndCommit, on both drivers: the runs and the commit at once; a run's
// error names the run, and nothing of the transaction is left; a compare-and-set checked by the
// database (migration 15's corral_expect_one, PostgreSQL) is refused as FailedPrecondition.
TEST_P(StoreTest, QueryManyAndCommitCommitsAllOrNamesTheRunThatFailed) {
  Seed();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const std::string insert =
      "INSERT INTO projects (name, description, created_at) VALUES (?, '', 1)";
  auto count = [&] {
    auto rows = conn->Query("SELECT COUNT(*) FROM projects WHERE name LIKE 'qm%'", {});
    return rows.ok() ? (*rows)[0].Int(0) : -1;
  };
  ASSERT_TRUE(conn->Begin().ok());
  // The second run repeats the first's primary key.
  CommitOutcome refused = conn->QueryManyAndCommit({{insert, {std::string("qm1")}},
                                                    {insert, {std::string("qm1")}},
                                                    {insert, {std::string("qm2")}}});
  EXPECT_EQ(refused.rows.status().code(), StatusCode::kAlreadyExists)
      << refused.rows.status().ToString();
  EXPECT_EQ(refused.failed_run, 1u);
  ASSERT_TRUE(conn->Rollback().ok());
  EXPECT_EQ(count(), 0);

  ASSERT_TRUE(conn->Begin().ok());
  CommitOutcome done = conn->QueryManyAndCommit(
      {{insert, {std::string("qm1")}},
       {insert, {std::string("qm2")}},
       {"SELECT name FROM projects WHERE name = ?", {std::string("qm2")}}});
  ASSERT_TRUE(done.rows.ok()) << done.rows.status().ToString();
  ASSERT_EQ(done.rows->size(), 3u);
  EXPECT_EQ((*done.rows)[2].at(0).Text(0), "qm2");  // each run sees the ones before it
  EXPECT_EQ(count(), 2);

  if (GetParam() == Backend::kPostgres) {
    ASSERT_TRUE(conn->Begin().ok());
    CommitOutcome unchanged = conn->QueryManyAndCommit(
        {{insert, {std::string("qm3")}},
         {"WITH changed AS (UPDATE projects SET description = 'x' WHERE name = ? RETURNING 1) "
          "SELECT corral_expect_one(count(*)) FROM changed",
          {std::string("no-such-project")}}});
    EXPECT_EQ(unchanged.rows.status().code(), StatusCode::kFailedPrecondition)
        << unchanged.rows.status().ToString();
    EXPECT_EQ(unchanged.failed_run, 1u);
    ASSERT_TRUE(conn->Rollback().ok());
    EXPECT_EQ(count(), 2);
  }
}

TEST_P(StoreTest, OlderSchemaIsMigratedAndNewerIsRefused) {
  Seed();
  ASSERT_TRUE(store_->InsertJob(MakeJob("kept")).ok());
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);

  // A later corral with a second migration opens this (older) store: only version 2 runs, and
  // the data stays.
  std::vector<Migration> newer = StoreMigrations();
  newer.push_back({static_cast<int>(newer.size()) + 1, "test: job labels",
                   "CREATE TABLE job_labels (job_id BIGINT NOT NULL REFERENCES jobs (id), "
                   "label TEXT NOT NULL); CREATE INDEX job_labels_by_job ON job_labels (job_id)"});
  Status migrated = ApplyMigrations(*conn, newer);
  ASSERT_TRUE(migrated.ok()) << migrated.ToString();
  EXPECT_EQ(*SchemaVersion(*conn), static_cast<int>(newer.size()));
  EXPECT_TRUE(conn->Query("SELECT job_id, label FROM job_labels", {}).ok());
  EXPECT_EQ((*conn->Query("SELECT COUNT(*) FROM jobs", {}))[0].Int(0), 1);
  ASSERT_TRUE(ApplyMigrations(*conn, newer).ok());  // idempotent
  EXPECT_EQ((*conn->Query("SELECT COUNT(*) FROM schema_version", {}))[0].Int(0),
            static_cast<int64_t>(newer.size()));

  // A failing migration changes nothing (one transaction).
  std::vector<Migration> broken = newer;
  broken.push_back({static_cast<int>(broken.size()) + 1, "test: broken",
                    "CREATE TABLE half (x INTEGER); CREATE TABLE half (x INTEGER)"});
  EXPECT_FALSE(ApplyMigrations(*conn, broken).ok());
  EXPECT_EQ(*SchemaVersion(*conn), static_cast<int>(newer.size()));
  EXPECT_FALSE(conn->Query("SELECT x FROM half", {}).ok());

  // This binary knows fewer migrations than the store has: refused, with both versions named.
  auto refused = OpenStore(url_);
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("schema version " + std::to_string(newer.size()) +
                        " is newer than this "
                        "corral knows (" +
                        std::to_string(StoreMigrations().size()) + ")"));
}

TEST_P(StoreTest, TheClusterIdIsMadeOnceAndSharedByEveryOpener) {
  const std::string id = store_->ClusterId();
  EXPECT_TRUE(model::ValidateClusterId(id).ok()) << id;
  // A second server on the same store, and a restart: the same id.
  auto other = Open();
  ASSERT_NE(other, nullptr);
  EXPECT_EQ(other->ClusterId(), id);
  Reopen();
  EXPECT_EQ(store_->ClusterId(), id);
  // One row, never a second.
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  EXPECT_EQ((*conn->Query("SELECT COUNT(*) FROM cluster", {}))[0].Int(0), 1);
  EXPECT_FALSE(conn->Execute("INSERT INTO cluster (singleton, id) VALUES (2, 'x')", {}).ok());
  // Another store is another cluster.
  char dir[] = "/tmp/corral-store-test-XXXXXX";
  ASSERT_NE(mkdtemp(dir), nullptr);
  auto another = OpenStore("sqlite:" + std::string(dir) + "/other.db");
  ASSERT_TRUE(another.ok()) << another.status().ToString();
  EXPECT_NE((*another)->ClusterId(), id);
  another->reset();
  std::filesystem::remove_all(dir);
}

// Empties the database and writes its schema as a corral that knew only the first `version`
// migrations did (migrations never change once released). Returns a raw connection to it.
void WriteOldSchema(SqlConnection& conn, bool sqlite, int version) {
  auto tables = conn.Query(sqlite ? "SELECT name FROM sqlite_master WHERE type = 'table' AND "
                                    "name NOT LIKE 'sqlite_%'"
                                  : "SELECT tablename FROM pg_tables WHERE schemaname = "
                                    "current_schema()",
                           {});
  EXPECT_TRUE(tables.ok()) << tables.status().ToString();
  if (sqlite) EXPECT_TRUE(conn.ExecuteScript("PRAGMA foreign_keys = OFF").ok());
  for (size_t i = 0; tables.ok() && i < tables->size(); ++i) {
    EXPECT_TRUE(
        conn.ExecuteScript("DROP TABLE " + (*tables)[i].Text(0) + (sqlite ? "" : " CASCADE")).ok());
  }
  if (sqlite) EXPECT_TRUE(conn.ExecuteScript("PRAGMA foreign_keys = ON").ok());
  const std::vector<Migration> before(StoreMigrations().begin(),
                                      StoreMigrations().begin() + version);
  EXPECT_EQ(before.back().version, version);
  EXPECT_TRUE(ApplyMigrations(conn, before).ok());
}

// The store as corral 0.x before cluster ids (schema version 7) wrote it, with a running job:
// opening it adds a cluster id and keeps everything, the running task included.
TEST_P(StoreTest, AStoreWrittenBeforeClusterIdsGetsOneAndKeepsItsData) {
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  // The database as the last corral without cluster ids wrote it: its schema and its rows.
  WriteOldSchema(*conn, GetParam() == Backend::kSqlite, 7);
  ASSERT_FALSE(::testing::Test::HasFailure());
  ASSERT_TRUE(
      conn->ExecuteScript(
              "INSERT INTO users (name, admin, created_at) VALUES ('alice', 0, 1);"
              "INSERT INTO projects (name, description, created_at) VALUES ('vision', '', 1);"
              "INSERT INTO nodes (name, inventory_json, state, last_heartbeat) "
              "VALUES ('n1', '{}', 'ready', 2);"
              "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, "
              "submit_time, start_time) VALUES ('old', 'alice', 'vision', '{}', 'running', 0, "
              "3, 4);"
              "INSERT INTO tasks VALUES (1, 1, 1, 0, 'n1', "
              "'{\"node\":\"n1\",\"gpus\":[],\"cpu_milli\":0,\"memory_mib\":0}', 'running', "
              "NULL, NULL, 4, NULL);"
              "UPDATE counters SET value = 1 WHERE name = 'allocation_id'")
          .ok());
  conn.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  const std::string id = store_->ClusterId();
  EXPECT_TRUE(model::ValidateClusterId(id).ok()) << id;
  auto check = Connect();
  EXPECT_EQ(*SchemaVersion(*check), static_cast<int>(StoreMigrations().size()));
  EXPECT_EQ(store_->GetJob(JobId(1))->state, JobState::kRunning);
  auto active = store_->ActiveTasks();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].node, "n1");
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(5)}).ok());
  auto next = store_->InsertJob(MakeJob("new"));
  ASSERT_TRUE(next.ok());
  EXPECT_EQ((*store_->AssignGang(*next, {MakeTask(0, "n1")}, Seconds(6)))[0].allocation_id, 2);
  Reopen();
  EXPECT_EQ(store_->ClusterId(), id);
}

// The store as corral before the timeout and oom states (schema version 8, today's main at the
// time) wrote it, with a job in each of its seven states, an array and a running task: opening
// it keeps every row and id (SQLite rebuilds the jobs table), and the new states can be written.
TEST_P(StoreTest, AStoreWrittenBeforeTimeoutAndOomKeepsItsJobs) {
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const bool sqlite = GetParam() == Backend::kSqlite;
  WriteOldSchema(*conn, sqlite, 8);
  ASSERT_FALSE(::testing::Test::HasFailure());
  const std::vector<std::string> old_states = {"pending", "starting",  "running", "succeeded",
                                               "failed",  "cancelled", "lost"};
  std::string rows =
      "INSERT INTO users (name, admin, created_at) VALUES ('alice', 0, 1);"
      "INSERT INTO projects (name, description, created_at) VALUES ('vision', '', 1);"
      "INSERT INTO nodes (name, inventory_json, state, last_heartbeat) "
      "VALUES ('n1', '{}', 'ready', 2);"
      "INSERT INTO cluster (singleton, id) VALUES (1, '0123456789abcdef');";
  for (const std::string& state : old_states) {
    rows +=
        "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, submit_time, "
        "reason) VALUES ('" +
        state + "', 'alice', 'vision', '{}', '" + state +
        "', 0, 3, "
        "'was " +
        state +
        "');"
        "INSERT INTO job_events (job_id, time, from_state, to_state, reason) VALUES ((SELECT "
        "MAX(id) FROM jobs), 3, '', 'pending', 'submitted');";
  }
  // Jobs 8 and 9: an array (its id is its first element's).
  rows +=
      "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, submit_time, "
      "array_id, array_index, array_max_running) VALUES ('a', 'alice', 'vision', '{}', "
      "'pending', 0, 4, NULL, 0, 1);"
      "UPDATE jobs SET array_id = 8 WHERE id = 8;"
      "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, submit_time, "
      "array_id, array_index, array_max_running) VALUES ('a', 'alice', 'vision', '{}', "
      "'pending', 0, 4, 8, 1, 1);"
      // Migration 1's column order: allocation_id, generation, job_id, task_index, node, the
      // allocation, state, exit_code, signal, start_time, end_time.
      "INSERT INTO tasks VALUES (1, 1, 3, 0, 'n1', "
      "'{\"cpu_milli\":0,\"gpus\":[],\"memory_mib\":0,\"node\":\"n1\"}', 'running', NULL, "
      "NULL, 4, NULL);"
      "UPDATE counters SET value = 1 WHERE name = 'allocation_id';";
  // Ids 10..20 were handed out once (SQLite remembers the highest in sqlite_sequence).
  if (sqlite) rows += "UPDATE sqlite_sequence SET seq = 20 WHERE name = 'jobs';";
  ASSERT_TRUE(conn->ExecuteScript(rows).ok());
  conn.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*SchemaVersion(*Connect()), static_cast<int>(StoreMigrations().size()));
  EXPECT_EQ(store_->ClusterId(), "0123456789abcdef");
  for (size_t i = 0; i < old_states.size(); ++i) {
    auto job = store_->GetJob(JobId(static_cast<int64_t>(i) + 1));
    ASSERT_TRUE(job.ok()) << job.status().ToString();
    EXPECT_EQ(model::ToString(job->state), old_states[i]);
    EXPECT_EQ(job->reason, "was " + old_states[i]);
    EXPECT_EQ(store_->JobEvents(job->id)->size(), 1u);
  }
  auto array = store_->ListJobs({.array = JobId(8)});
  ASSERT_TRUE(array.ok());
  ASSERT_EQ(array->size(), 2u);
  EXPECT_EQ((*array)[1].array_index, 1);
  auto active = store_->ActiveTasks();
  ASSERT_TRUE(active.ok());
  ASSERT_EQ(active->size(), 1u);
  EXPECT_EQ((*active)[0].job, JobId(3));
  EXPECT_EQ((*active)[0].end_cause, std::nullopt);

  // New states and end causes are stored and read back.
  ASSERT_TRUE(store_
                  ->TransitionJob(JobId(3), JobState::kRunning, JobState::kTimeout,
                                  "task 0 was killed by signal 15: time limit of 60 s reached",
                                  Seconds(70))
                  .ok());
  TaskRecord ended = (*active)[0];
  ended.state = TaskState::kKilled;
  ended.signal = 15;
  ended.end_time = Seconds(70);
  ended.end_cause = model::TaskEndCause::kTimeLimit;
  ASSERT_TRUE(store_->UpdateTask(ended).ok());
  EXPECT_EQ((*store_->TasksOfJob(JobId(3)))[0].end_cause, model::TaskEndCause::kTimeLimit);
  ASSERT_TRUE(
      store_->TransitionJob(JobId(1), JobState::kPending, JobState::kOom, "", Seconds(71)).ok());
  Reopen();
  EXPECT_EQ(store_->GetJob(JobId(3))->state, JobState::kTimeout);
  EXPECT_EQ(store_->GetJob(JobId(3))->end_time, Seconds(70));
  EXPECT_EQ(store_->GetJob(JobId(1))->state, JobState::kOom);
  EXPECT_EQ(store_->ListJobs({.states = {JobState::kTimeout, JobState::kOom}})->size(), 2u);

  // Ids are never reused, and the foreign keys still hold on the (rebuilt) jobs table.
  auto next = store_->InsertJob(MakeJob("new"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(*next, JobId(sqlite ? 21 : 10));
  auto check = Connect();
  EXPECT_EQ(check
                ->Execute("INSERT INTO job_events (job_id, time, from_state, to_state, reason) "
                          "VALUES (999, 1, '', 'pending', '')")
                .status()
                .code(),
            StatusCode::kNotFound);
  EXPECT_EQ(check->Execute("UPDATE jobs SET array_id = 999 WHERE id = 9").status().code(),
            StatusCode::kNotFound);
  EXPECT_EQ(check->Execute("UPDATE jobs SET state = 'paused' WHERE id = 9").status().code(),
            StatusCode::kInvalidArgument);
}

// ---- The job listing's total GPUs (issue 17, point 4): migration 13 ----

// A store as the last corral before the job listing (schema version 12) wrote it, with jobs whose
// specs hold every shape migration 13 meets: opened by this corral, each job has its total GPUs
// in milli-GPU (tasks × gpus × gpu_milli), and a spec that is not JSON, or holds a count that is
// not a small JSON integer, gives 0 instead of failing the migration, alike on both databases.
TEST_P(StoreTest, AStoreWrittenBeforeTheJobListingGetsEachJobsTotalGpus) {
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  const bool sqlite = GetParam() == Backend::kSqlite;
  WriteOldSchema(*conn, sqlite, 12);
  ASSERT_FALSE(::testing::Test::HasFailure());
  struct OldJob {
    std::string spec;
    int64_t total_gpu_milli;
  };
  const std::vector<OldJob> jobs = {
      {R"({"resources":{"gpus":2,"gpu_milli":500,"cpu_milli":0},"tasks":3})", 3000},
      {R"({"resources":{"gpus":1}})", 1000},  // gpu_milli 1000, tasks 1
      {R"({"resources":{"gpus":1,"gpu_milli":null},"tasks":null})", 1000},
      {R"({"name":"cpu-only","command":["true"]})", 0},        // no resources
      {R"({"resources":{"gpus":2,)", 0},                       // not JSON
      {"", 0},                                                 // not JSON
      {R"({"resources":{"gpus":1.5}})", 0},                    // not an integer
      {R"({"resources":{"gpus":"2"}})", 0},                    // a string
      {R"({"resources":{"gpus":1e3}})", 0},                    // an exponent
      {R"({"resources":{"gpus":-1}})", 0},                     // negative
      {R"({"resources":{"gpus":1},"tasks":99999999999})", 0},  // too large
      {R"({"resources":"all"})", 0},
      {R"([1,2])", 0},
      {R"({"resources":{"gpus":8,"gpu_milli":1000},"tasks":4096})", 32768000},
  };
  std::string rows =
      "INSERT INTO cluster (singleton, id) VALUES (1, '0123456789abcdef');"
      "INSERT INTO users (name, admin, created_at) VALUES ('alice', 0, 1);"
      "INSERT INTO projects (name, description, created_at) VALUES ('vision', '', 1);";
  for (size_t i = 0; i < jobs.size(); ++i) {
    rows +=
        "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, submit_time) "
        "VALUES ('j" +
        std::to_string(i) + "', 'alice', 'vision', '" + jobs[i].spec + "', 'pending', 0, 3);";
  }
  ASSERT_TRUE(conn->ExecuteScript(rows).ok());
  conn.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  auto check = Connect();
  EXPECT_EQ(*SchemaVersion(*check), static_cast<int>(StoreMigrations().size()));
  auto totals = check->Query("SELECT spec_json, total_gpu_milli FROM jobs ORDER BY id", {});
  ASSERT_TRUE(totals.ok()) << totals.status().ToString();
  ASSERT_EQ(totals->size(), jobs.size());
  for (size_t i = 0; i < jobs.size(); ++i) {
    EXPECT_EQ((*totals)[i].Text(0), jobs[i].spec);
    EXPECT_EQ((*totals)[i].Int(1), jobs[i].total_gpu_milli) << jobs[i].spec;
  }
  // The migration left nothing behind but the column and indexes.
  if (!sqlite) {
    auto functions =
        check->Query("SELECT proname FROM pg_proc WHERE proname LIKE 'corral_migration%'", {});
    ASSERT_TRUE(functions.ok()) << functions.status().ToString();
    EXPECT_TRUE(functions->empty());
  }
}

// ---- Retention of finished jobs (issue 17, point 5): migration 14 ----

// A store as the last corral before retention (schema version 13) wrote it, with an array of two
// ended elements and a running job: opened by this corral, the ended jobs can be purged (their
// demand kept per hour), the running one stays, and the next id is above every old one.
TEST_P(StoreTest, AStoreWrittenBeforeRetentionCanBePurged) {
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  WriteOldSchema(*conn, GetParam() == Backend::kSqlite, 13);
  ASSERT_FALSE(::testing::Test::HasFailure());
  ASSERT_TRUE(
      conn->ExecuteScript(
              "INSERT INTO cluster (singleton, id) VALUES (1, '0123456789abcdef');"
              "INSERT INTO users (name, admin, created_at) VALUES ('alice', 0, 1);"
              "INSERT INTO projects (name, description, created_at) VALUES ('vision', '', 1);"
              "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, "
              "submit_time, start_time, end_time, array_index, array_max_running, "
              "total_gpu_milli) VALUES ('a', 'alice', 'vision', '{}', 'succeeded', 0, 3600, "
              "3600, 7200, 0, 1, 1000);"
              "UPDATE jobs SET array_id = id;"
              "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, "
              "submit_time, start_time, end_time, array_id, array_index, array_max_running, "
              "total_gpu_milli) SELECT 'a', 'alice', 'vision', '{}', 'failed', 0, 3600, 3600, "
              "5400, id, 1, 1, 2000 FROM jobs;"
              "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, "
              "submit_time, start_time, total_gpu_milli) VALUES ('r', 'alice', 'vision', '{}', "
              "'running', 0, 3600, 3600, 1000);"
              "INSERT INTO job_events (job_id, time, from_state, to_state, reason) "
              "SELECT id, 3600, '', 'pending', 'submitted' FROM jobs")
          .ok());
  conn.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*SchemaVersion(*Connect()), static_cast<int>(StoreMigrations().size()));
  auto purgeable = store_->PurgeableJobs(Seconds(100000), 10);
  ASSERT_TRUE(purgeable.ok()) << purgeable.status().ToString();
  EXPECT_EQ(*purgeable, std::vector<JobId>{JobId(2)});  // the array's first element goes last
  EXPECT_EQ(*store_->PurgeJobs(*purgeable, Seconds(100000)), std::vector<JobId>{JobId(2)});
  EXPECT_EQ(*store_->PurgeJobs({JobId(1), JobId(3)}, Seconds(100000)),
            std::vector<JobId>{JobId(1)});
  EXPECT_EQ(store_->GetJob(JobId(3))->state, JobState::kRunning);
  EXPECT_EQ(store_->JobEvents(JobId(3))->size(), 1u);
  EXPECT_EQ(*store_->PurgedDemand(Seconds(0), Seconds(100000)),
            (std::vector<DemandHour>{{3600, 1000 * 3600 + 2000 * 1800}}));
  auto next = store_->InsertJob(MakeJob("new"));
  ASSERT_TRUE(next.ok()) << next.status().ToString();
  EXPECT_EQ(next->value(), 4);
}

// ---- Typed allocations (issue 14, point 4): migration 10 ----

// A store as the last corral before typed allocations (schema version 8) wrote it, with a
// running distributed gang and a running session: opened by this corral, its tasks read back as
// typed allocations, and new gangs get ids after the old ones.
TEST_P(StoreTest, AStoreWrittenBeforeTypedAllocationsReadsItsTasksTyped) {
  store_.reset();
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  WriteOldSchema(*conn, GetParam() == Backend::kSqlite, 8);
  ASSERT_FALSE(::testing::Test::HasFailure());
  // The allocation texts are exactly what that corral's controller wrote (AllocationJson(), then
  // the rendezvous or session it added). Task rows follow migration 1's column order.
  ASSERT_TRUE(
      conn->ExecuteScript(
              "INSERT INTO cluster (singleton, id) VALUES (1, '0123456789abcdef');"
              "INSERT INTO users (name, admin, created_at) VALUES ('alice', 0, 1);"
              "INSERT INTO projects (name, description, created_at) VALUES ('vision', '', 1);"
              "INSERT INTO nodes (name, inventory_json, state, last_heartbeat) "
              "VALUES ('n1', '{}', 'ready', 2), ('n2', '{}', 'ready', 2);"
              "INSERT INTO jobs (name, user_name, project, spec_json, state, priority, "
              "submit_time, start_time) VALUES ('ddp', 'alice', 'vision', '{}', 'running', 0, "
              "3, 4), ('lab', 'alice', 'vision', '{}', 'running', 0, 3, 4);"
              "INSERT INTO tasks VALUES (7, 1, 1, 0, 'n1', '{\"cpu_milli\":8000,\"gpus\":"
              "[{\"index\":0,\"milli\":1000},{\"index\":1,\"milli\":1000}],\"memory_mib\":65536,"
              "\"node\":\"n1\",\"rendezvous\":{\"hosts\":[\"10.0.0.1\",\"10.0.0.2\"],"
              "\"master_addr\":\"10.0.0.1\",\"port\":29500}}', 'running', NULL, NULL, 4, NULL);"
              "INSERT INTO tasks VALUES (8, 1, 1, 1, 'n2', '{\"cpu_milli\":8000,\"gpus\":"
              "[{\"index\":0,\"milli\":1000},{\"index\":1,\"milli\":1000}],\"memory_mib\":65536,"
              "\"node\":\"n2\",\"rendezvous\":{\"hosts\":[\"10.0.0.1\",\"10.0.0.2\"],"
              "\"master_addr\":\"10.0.0.1\",\"port\":29500}}', 'running', NULL, NULL, 4, NULL);"
              "INSERT INTO tasks VALUES (9, 1, 2, 0, 'n1', '{\"cpu_milli\":0,\"gpus\":"
              "[{\"index\":2,\"milli\":250}],\"memory_mib\":0,\"node\":\"n1\",\"session\":"
              "{\"address\":\"10.0.0.1\",\"port\":29501}}', 'running', NULL, NULL, 4, NULL);"
              "UPDATE counters SET value = 9 WHERE name = 'allocation_id'")
          .ok());
  conn.reset();

  store_ = Open();
  ASSERT_NE(store_, nullptr);
  EXPECT_EQ(*SchemaVersion(*Connect()), static_cast<int>(StoreMigrations().size()));
  auto ddp = store_->TasksOfJob(JobId(1));
  ASSERT_TRUE(ddp.ok()) << ddp.status().ToString();
  ASSERT_EQ(ddp->size(), 2u);
  model::Allocation part;
  part.gpus = {{0, MilliGpu(1000)}, {1, MilliGpu(1000)}};
  part.cpu = CpuMilli(8000);
  part.memory = MemoryMib(65536);
  part.rendezvous = model::Rendezvous{"10.0.0.1", 29500, {"10.0.0.1", "10.0.0.2"}};
  EXPECT_EQ((*ddp)[0].allocation, part);
  EXPECT_EQ((*ddp)[1].allocation, part);
  EXPECT_EQ((*ddp)[1].node, "n2");
  EXPECT_EQ((*ddp)[1].allocation_id, 8);
  auto active = store_->ActiveTasks();
  ASSERT_TRUE(active.ok()) << active.status().ToString();
  ASSERT_EQ(active->size(), 3u);
  const model::Allocation& lab = (*active)[2].allocation;
  EXPECT_EQ(lab.gpus, (std::vector<model::GpuShare>{{2, MilliGpu(250)}}));
  EXPECT_EQ(lab.session, (model::SessionEndpoint{"10.0.0.1", 29501}));
  EXPECT_FALSE(lab.rendezvous.has_value());

  auto next = store_->InsertJob(MakeJob("new"));
  ASSERT_TRUE(next.ok());
  auto gang = store_->AssignGang(*next, {MakeTask(0, "n2")}, Seconds(6));
  ASSERT_TRUE(gang.ok()) << gang.status().ToString();
  EXPECT_EQ((*gang)[0].allocation_id, 10);
  Reopen();
  EXPECT_EQ(store_->TasksOfJob(*next)->at(0).allocation, MakeTask(0, "n2").allocation);
}

// A row this corral cannot read fails the read, naming the task and the field, rather than
// adopting a task with a made-up allocation.
TEST_P(StoreTest, AnUnreadableAllocationNamesTheTask) {
  Seed();
  ASSERT_TRUE(store_->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  auto id = store_->InsertJob(MakeJob("a"));
  ASSERT_TRUE(id.ok());
  ASSERT_TRUE(store_->AssignGang(*id, {MakeTask(0, "n1")}, Seconds(2)).ok());
  auto conn = Connect();
  ASSERT_NE(conn, nullptr);
  ASSERT_TRUE(conn->ExecuteScript("UPDATE tasks SET allocation = '{\"gpus\":[{\"index\":0}],"
                                  "\"cpu_milli\":0,\"memory_mib\":0}'")
                  .ok());
  auto tasks = store_->ActiveTasks();
  ASSERT_FALSE(tasks.ok());
  EXPECT_EQ(tasks.status().code(), StatusCode::kInternal);
  EXPECT_THAT(tasks.status().message(),
              HasSubstr("task allocation 1 generation 1: allocation: field 'gpus[0].milli': "
                        "is required"));
}

// ---- end of typed allocations ----

// PostgreSQL only: a server-side disconnect (restart, failover, idle kill) costs at most the
// call that meets it; the next call reconnects. (SQLite has no connection to lose.)
TEST_P(StoreTest, PostgresReconnectsAfterTheServerDropsTheConnection) {
  if (GetParam() != Backend::kPostgres) GTEST_SKIP() << "PostgreSQL only";
  Seed();
  auto id = store_->InsertJob(MakeJob("before"));
  ASSERT_TRUE(id.ok());
  auto admin = PostgresConnection::Open(std::getenv("CORRAL_TEST_POSTGRES_URL"));
  ASSERT_TRUE(admin.ok());
  // The fixture names this test's store connections after its schema.
  auto killed = (*admin)->Query(
      "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = ?",
      {schema_});
  ASSERT_TRUE(killed.ok()) << killed.status().ToString();
  ASSERT_FALSE(killed->empty());
  auto first = store_->GetJob(*id);  // may fail: it meets the dropped connection
  if (!first.ok()) {
    EXPECT_EQ(first.status().code(), StatusCode::kIoError);
    EXPECT_THAT(first.status().message(), HasSubstr("get job"));
  }
  auto again = store_->GetJob(*id);
  ASSERT_TRUE(again.ok()) << again.status().ToString();
  EXPECT_EQ(again->name, "before");
  EXPECT_TRUE(store_->InsertJob(MakeJob("after")).ok());
}

TEST(OpenStore, CreatesTheSqliteFileReadableByItsOwnerOnly) {
  char pattern[] = "/tmp/corral-store-mode-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  std::string path = std::string(pattern) + "/corral.db";
  {
    auto store = OpenStore("sqlite:" + path);
    ASSERT_TRUE(store.ok()) << store.status().ToString();
    ASSERT_TRUE((*store)->CreateUser("alice", false, Seconds(1)).ok());
  }
  auto perms = std::filesystem::status(path).permissions();
  EXPECT_EQ(perms & std::filesystem::perms::all,
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  std::filesystem::remove_all(pattern);
}

TEST(OpenStore, RejectsUnknownSchemesAndNamesThem) {
  auto mysql = OpenStore("mysql://root:hunter2@db/corral");
  ASSERT_FALSE(mysql.ok());
  EXPECT_EQ(mysql.status().code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(mysql.status().message(), HasSubstr("unknown scheme 'mysql'"));
  EXPECT_THAT(mysql.status().message(), Not(HasSubstr("hunter2")));
  EXPECT_THAT(OpenStore("corral.db").status().message(), HasSubstr("has no scheme"));
  EXPECT_EQ(OpenStore("sqlite:").status().code(), StatusCode::kInvalidArgument);
  auto no_dir = OpenStore("sqlite:/nonexistent-dir-for-corral/x.db");
  EXPECT_EQ(no_dir.status().code(), StatusCode::kIoError);
  EXPECT_THAT(no_dir.status().message(), HasSubstr("/nonexistent-dir-for-corral/x.db"));
}

TEST(OpenStore, PostgresErrorsNeverShowThePassword) {
  // Port 1 on loopback: nothing listens, the connection is refused at once.
  auto store = OpenStore("postgres://corral:s3cretpw@127.0.0.1:1/corral?connect_timeout=2");
  ASSERT_FALSE(store.ok());
  EXPECT_EQ(store.status().code(), StatusCode::kIoError);
  EXPECT_THAT(store.status().message(), HasSubstr("postgres://corral:***@127.0.0.1:1/corral"));
  EXPECT_THAT(store.status().message(), Not(HasSubstr("s3cretpw")));
  auto query_password = OpenStore("postgresql://127.0.0.1:1/corral?password=s3cretpw");
  ASSERT_FALSE(query_password.ok());
  EXPECT_THAT(query_password.status().message(), Not(HasSubstr("s3cretpw")));
}

TEST(StoreUrl, RedactsPasswords) {
  EXPECT_EQ(RedactUrl("postgres://u:p%40ss@h:5432/db"), "postgres://u:***@h:5432/db");
  EXPECT_EQ(RedactUrl("postgres://u@h/db"), "postgres://u@h/db");
  EXPECT_EQ(RedactUrl("postgres://h/db?sslmode=require&password=x&user=u"),
            "postgres://h/db?sslmode=require&password=***&user=u");
  EXPECT_EQ(RedactUrl("postgres://u:a@h/db?password=b"), "postgres://u:***@h/db?password=***");
  EXPECT_EQ(RedactUrl("sqlite:/var/lib/corral/corral.db"), "sqlite:/var/lib/corral/corral.db");
}

TEST(PostgresPlaceholders, NumbersQuestionMarksOutsideQuotes) {
  EXPECT_EQ(ToPostgresPlaceholders("SELECT a FROM t WHERE b = ? AND c IN (?, ?)"),
            "SELECT a FROM t WHERE b = $1 AND c IN ($2, $3)");
  EXPECT_EQ(ToPostgresPlaceholders("SELECT '?', \"a?\", ? FROM t WHERE x = 'it''s?' AND y = ?"),
            "SELECT '?', \"a?\", $1 FROM t WHERE x = 'it''s?' AND y = $2");
  EXPECT_EQ(ToPostgresPlaceholders("SELECT 1"), "SELECT 1");
}

}  // namespace
}  // namespace corral::store
