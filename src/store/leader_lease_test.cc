// The leader's lease and fencing (store.h, "Leadership"), on SQLite and PostgreSQL: who may
// take the lease, that its expiry is the database's, and that a store whose epoch was taken
// over changes nothing through any of its write paths. And SQLite's one-server lock.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <future>
#include <thread>

#include "store/single_server_lock.h"
#include "store/store.h"
#include "store/store_test_fixture.h"
#include "store/submission_batcher.h"
#include "store/write_batcher.h"

namespace corral::store {
namespace {

using model::JobState;
using model::NodeState;
using model::TaskState;
using ::testing::HasSubstr;

std::string Hash(char c) { return std::string(63, 'b') + c; }

// Waits (up to 10 s) until `done` holds.
bool WaitFor(const std::function<bool()>& done) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
  while (!done()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  return true;
}

class LeaseTest : public StoreTest {
 protected:
  // Waits until the lease lapsed by the database's clock.
  void WaitUntilLapsed() {
    ASSERT_TRUE(WaitFor([&] {
      auto lease = store_->CurrentLease();
      return lease.ok() && lease->remaining_ms <= 0;
    }));
  }

  // Every row of every table a write of the store may touch, as text: what "changed nothing"
  // compares.
  std::string Contents() {
    auto conn = Connect();
    std::string out;
    for (const char* table : {"users", "tokens", "projects", "project_members", "jobs",
                              "job_events", "tasks", "nodes", "environments", "environment_shares",
                              "gpu_metrics", "gpu_usage", "cluster", "counters", "leader_epoch"}) {
      auto rows = conn->Query(std::string("SELECT * FROM ") + table + " ORDER BY 1, 2", {});
      EXPECT_TRUE(rows.ok()) << table << ": " << rows.status().ToString();
      if (!rows.ok()) continue;
      out += std::string(table) + ":\n";
      for (const SqlRow& row : *rows) {
        for (size_t i = 0; i < row.size(); ++i) out += row.Text(i) + "|";
        out += "\n";
      }
    }
    return out;
  }
};

INSTANTIATE_TEST_SUITE_P(Sqlite, LeaseTest, ::testing::Values(Backend::kSqlite), BackendName);
INSTANTIATE_TEST_SUITE_P(Postgres, LeaseTest, ::testing::Values(Backend::kPostgres), BackendName);

TEST_P(LeaseTest, OneServerHoldsTheLeaseUntilItLapsesThenTheNextTakesItWithTheNextEpoch) {
  auto none = store_->CurrentLease();
  ASSERT_TRUE(none.ok()) << none.status().ToString();
  EXPECT_EQ(none->holder, "");
  EXPECT_EQ(none->epoch, 0);

  auto a = store_->AcquireLease("server-a", "http://10.0.0.1:8080", 60000);
  ASSERT_TRUE(a.ok()) << a.status().ToString();
  EXPECT_EQ(a->epoch, 1);
  EXPECT_EQ(a->holder, "server-a");

  // Another server (another store on the same database) is refused while it holds, and told who.
  auto other = Open();
  auto refused = other->AcquireLease("server-b", "http://10.0.0.2:8080", 60000);
  EXPECT_EQ(refused.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.status().message(),
              HasSubstr("held by server server-a (http://10.0.0.1:8080) for another"));
  auto read = other->CurrentLease();
  ASSERT_TRUE(read.ok());
  EXPECT_EQ(read->holder, "server-a");
  EXPECT_EQ(read->url, "http://10.0.0.1:8080");
  EXPECT_EQ(read->epoch, 1);
  EXPECT_GT(read->remaining_ms, 50000);
  EXPECT_LE(read->remaining_ms, 60000);

  // Its holder acquires it again: extended, same epoch; and renews it.
  auto again = store_->AcquireLease("server-a", "http://10.0.0.1:8080", 60000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->epoch, 1);
  EXPECT_TRUE(store_->RenewLease("server-a", 60000).ok());
  // Only the store that acquired it renews it.
  EXPECT_EQ(other->RenewLease("server-b", 1000).code(), StatusCode::kFailedPrecondition);

  // Renewed to 1 ms, it lapses by the database's clock; the next server takes it over.
  ASSERT_TRUE(store_->RenewLease("server-a", 1).ok());
  WaitUntilLapsed();
  auto b = other->AcquireLease("server-b", "http://10.0.0.2:8080", 60000);
  ASSERT_TRUE(b.ok()) << b.status().ToString();
  EXPECT_EQ(b->epoch, 2);
  EXPECT_EQ(store_->CurrentLease()->holder, "server-b");

  // The old holder's renewal fails and says why.
  Status lost = store_->RenewLease("server-a", 60000);
  EXPECT_EQ(lost.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(lost.message(), HasSubstr("taken over by server server-b (http://10.0.0.2:8080)"));
}

TEST_P(LeaseTest, ALapsedLeaseIsNotRenewedEvenWhenNobodyTookIt) {
  ASSERT_TRUE(store_->AcquireLease("server-a", "http://a", 1).ok());
  WaitUntilLapsed();
  Status lapsed = store_->RenewLease("server-a", 60000);
  EXPECT_EQ(lapsed.code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(lapsed.message(), HasSubstr("lapsed"));
  // Acquiring it again is a takeover (a new epoch): the server may have missed writes meanwhile.
  auto again = store_->AcquireLease("server-a", "http://a", 60000);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->epoch, 2);
}

TEST_P(LeaseTest, AFencedStoreChangesNothingThroughAnyWritePath) {
  // The old leader's data: a user, a project, a node, a pending and a running job, a token.
  auto old_leader = Open();
  ASSERT_TRUE(old_leader->AcquireLease("server-a", "http://a", 1).ok());
  auto alice = old_leader->CreateUser("alice", false, Seconds(1));
  ASSERT_TRUE(alice.ok()) << alice.status().ToString();
  ASSERT_TRUE(old_leader->CreateProject("vision", "", Seconds(1)).ok());
  ASSERT_TRUE(old_leader->AddMember("vision", alice->id).ok());
  auto token = old_leader->CreateToken(alice->id, "t", Hash('1'), Seconds(1), std::nullopt);
  ASSERT_TRUE(token.ok());
  ASSERT_TRUE(old_leader->UpsertNode({"n1", "{}", NodeState::kReady, Seconds(1)}).ok());
  ASSERT_TRUE(old_leader->AddEnvironmentVersion("torch", "alice", "{}", Seconds(1)).ok());
  JobRecord job = MakeJob("j");
  auto pending = old_leader->InsertJob(job);
  auto running = old_leader->InsertJob(job);
  ASSERT_TRUE(pending.ok() && running.ok());
  TaskAssignment t;
  t.node = "n1";
  t.allocation.gpus = {{0, MilliGpu(1000)}};
  auto tasks = old_leader->AssignGang(*running, {t}, Seconds(2));
  ASSERT_TRUE(tasks.ok()) << tasks.status().ToString();
  ASSERT_TRUE(old_leader->AddGpuMetrics({{10, 1000, "n1", 0, 500, 1, 1, 1, 1, *running}}).ok());

  // A new leader takes over.
  WaitUntilLapsed();
  auto taken = store_->AcquireLease("server-b", "http://b", 60000);
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  ASSERT_EQ(taken->epoch, 2);
  const std::string before = Contents();

  TaskRecord task = tasks->front();
  task.state = TaskState::kRunning;
  WriteBatch batch;
  batch.tasks.push_back(task);
  batch.transitions.push_back({*running, JobState::kStarting, JobState::kRunning, "running"});
  JobRecord element = MakeJob("e");
  element.array_index = 0;
  const std::vector<std::pair<std::string, std::function<Status()>>> writes = {
      {"CreateUser", [&] { return old_leader->CreateUser("mallory", false, Seconds(3)).status(); }},
      {"CreateToken",
       [&] {
         return old_leader->CreateToken(alice->id, "u", Hash('2'), Seconds(3), std::nullopt)
             .status();
       }},
      {"CreateUserWithToken",
       [&] {
         return old_leader
             ->CreateUserWithToken("eve", false, {"vision"}, "t", Hash('3'), Seconds(3),
                                   std::nullopt)
             .status();
       }},
      {"RevokeToken", [&] { return old_leader->RevokeToken(alice->id, token->id, Seconds(3)); }},
      {"SetUserSubmitLimits",
       [&] {
         return old_leader->SetUserSubmitLimits("alice", {1, 1});
       }},
      {"CreateProject", [&] { return old_leader->CreateProject("nlp", "", Seconds(3)).status(); }},
      {"SetProjectSharing", [&] { return old_leader->SetProjectSharing("vision", "{\"w\":1}"); }},
      {"SetProjectSubmitLimits",
       [&] {
         return old_leader->SetProjectSubmitLimits("vision", {1, 1});
       }},
      {"AddMember", [&] { return old_leader->AddMember("vision", alice->id + 0); }},
      {"InsertJob", [&] { return old_leader->InsertJob(MakeJob("k")).status(); }},
      {"InsertJobs", [&] { return old_leader->InsertJobs({MakeJob("k")}).status(); }},
      {"InsertArray", [&] { return old_leader->InsertArray({element}).status(); }},
      {"TransitionJob",
       [&] {
         return old_leader->TransitionJob(*pending, JobState::kPending, JobState::kCancelled, "x",
                                          Seconds(3));
       }},
      {"TransitionJobs",
       [&] {
         return old_leader->TransitionJobs({*pending}, JobState::kPending, JobState::kCancelled,
                                           "x", Seconds(3));
       }},
      {"RequestCancel", [&] { return old_leader->RequestCancel(*running, "x", Seconds(3)); }},
      {"AddJobEvent", [&] { return old_leader->AddJobEvent(*running, "x", Seconds(3)); }},
      {"AssignGang", [&] { return old_leader->AssignGang(*pending, {t}, Seconds(3)).status(); }},
      {"UpdateTask", [&] { return old_leader->UpdateTask(task); }},
      {"Apply", [&] { return old_leader->Apply(batch, Seconds(3)); }},
      {"ApplyGroup",
       [&] {
         return old_leader->ApplyGroup({{batch, Seconds(3)}});
       }},
      {"WriteBatcher",
       [&] {
         WriteBatcher batcher(old_leader.get());
         return batcher.Enqueue(batch, Seconds(3)).get();
       }},
      {"AddEnvironmentVersion",
       [&] {
         return old_leader->AddEnvironmentVersion("torch", "alice", "{}", Seconds(3)).status();
       }},
      {"ShareEnvironment", [&] { return old_leader->ShareEnvironment("torch", "vision"); }},
      {"UpsertNode",
       [&] {
         return old_leader->UpsertNode({"n2", "{}", NodeState::kReady, Seconds(3)});
       }},
      {"AddGpuMetrics",
       [&] {
         return old_leader->AddGpuMetrics({{10, 1010, "n1", 0, 500, 1, 1, 1, 1, {}}});
       }},
      {"PruneGpuMetrics", [&] { return old_leader->PruneGpuMetrics(10, 5000, 100).status(); }},
      {"AddGpuUsage",
       [&] {
         return old_leader->AddGpuUsage({{"2026-01-01", "alice", "vision", 1, 1}});
       }},
      {"ShareClusterSecret",
       [&] {
         return old_leader->ShareClusterSecret(ClusterSecret::kJoinTokenHash, Hash('4')).status();
       }},
      {"SubmissionBatcher",
       [&] {
         SubmissionBatcher batcher(old_leader.get());
         return batcher.Submit(MakeJob("b")).status();
       }},
  };
  const int64_t commits = old_leader->Commits();
  for (const auto& [name, write] : writes) {
    Status s = write();
    // Unavailable with a Retry-After: nothing was done, so clients send it again (HTTP 503).
    EXPECT_EQ(s.code(), StatusCode::kUnavailable) << name << ": " << s.ToString();
    EXPECT_EQ(s.retry_after(), Seconds(1)) << name;
    EXPECT_THAT(s.message(),
                HasSubstr("fenced: this server's epoch 1 is no longer the leader's (now 2)"))
        << name;
  }
  EXPECT_EQ(old_leader->Commits(), commits);
  EXPECT_EQ(Contents(), before);

  // The new leader writes; the old one cannot renew.
  EXPECT_TRUE(store_->CreateUser("bob", false, Seconds(4)).ok());
  EXPECT_EQ(old_leader->RenewLease("server-a", 60000).code(), StatusCode::kFailedPrecondition);
}

TEST_P(LeaseTest, ATakeoverWaitsForTheOldLeadersWriteInFlight) {
  if (GetParam() != Backend::kPostgres) {
    GTEST_SKIP() << "SQLite serves one server: its write transactions exclude each other";
  }
  ASSERT_TRUE(store_->AcquireLease("server-a", "http://a", 1).ok());
  // The old leader's transaction in flight, as CheckEpoch starts it: the epoch row held FOR
  // SHARE, a row written, not yet committed.
  auto in_flight = Connect();
  ASSERT_TRUE(in_flight->Begin().ok());
  auto epoch = in_flight->Query("SELECT epoch FROM leader_epoch WHERE singleton = 1 FOR SHARE", {});
  ASSERT_TRUE(epoch.ok()) << epoch.status().ToString();
  ASSERT_EQ((*epoch)[0].Int(0), 1);
  ASSERT_TRUE(
      in_flight
          ->Execute("INSERT INTO projects (name, description, created_at) VALUES (?, '', 1)",
                    {std::string("late")})
          .ok());
  WaitUntilLapsed();

  auto new_leader = Open();
  auto takeover = std::async(
      std::launch::async, [&] { return new_leader->AcquireLease("server-b", "http://b", 60000); });
  // The takeover waits on the row lock: its backend shows up waiting for a lock.
  auto admin = Connect();
  ASSERT_TRUE(WaitFor([&] {
    auto waiting = admin->Query(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' AND "
        "application_name = ?",
        {schema_});
    return waiting.ok() && (*waiting)[0].Int(0) > 0;
  }));
  EXPECT_EQ(takeover.wait_for(std::chrono::seconds(0)), std::future_status::timeout);
  ASSERT_TRUE(in_flight->Commit().ok());
  auto taken = takeover.get();
  ASSERT_TRUE(taken.ok()) << taken.status().ToString();
  EXPECT_EQ(taken->epoch, 2);
  // The write that committed before the takeover stands; the old leader's next one is fenced.
  auto projects = new_leader->ListProjects();
  ASSERT_TRUE(projects.ok());
  ASSERT_EQ(projects->size(), 1u);
  EXPECT_EQ(projects->front().name, "late");
  EXPECT_THAT(store_->CreateProject("later", "", Seconds(5)).status().message(),
              HasSubstr("fenced"));
}

// A leader frozen (SIGSTOP) in the middle of a write holds the epoch row FOR SHARE: the takeover
// gives up after half its lease instead of waiting for ever, and succeeds once PostgreSQL ends
// the frozen session's idle transaction; the frozen write is gone.
TEST_P(LeaseTest, AFrozenLeadersTransactionHoldsOffATakeoverOnlyForSeconds) {
  if (GetParam() != Backend::kPostgres) {
    GTEST_SKIP() << "SQLite serves one server: its write transactions exclude each other";
  }
  ASSERT_TRUE(store_->AcquireLease("server-a", "http://a", 1).ok());
  auto frozen = Connect();
  ASSERT_TRUE(frozen->Begin().ok());
  ASSERT_TRUE(
      frozen->Query("SELECT epoch FROM leader_epoch WHERE singleton = 1 FOR SHARE", {}).ok());
  ASSERT_TRUE(
      frozen
          ->Execute("INSERT INTO projects (name, description, created_at) VALUES (?, '', 1)",
                    {std::string("frozen")})
          .ok());
  WaitUntilLapsed();
  auto new_leader = Open();
  const auto start = std::chrono::steady_clock::now();
  auto refused = new_leader->AcquireLease("server-b", "http://b", 1000);
  EXPECT_FALSE(refused.ok());  // the lock timeout: half the lease
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(4));
  ASSERT_TRUE(WaitFor([&] { return new_leader->AcquireLease("server-b", "http://b", 1000).ok(); }));
  EXPECT_FALSE(frozen->Commit().ok());  // its session was ended
  auto projects = new_leader->ListProjects();
  ASSERT_TRUE(projects.ok());
  EXPECT_TRUE(projects->empty());
}

TEST_P(LeaseTest, ClusterSecretsAreTheFirstOffer) {
  auto first = store_->ShareClusterSecret(ClusterSecret::kJoinTokenHash, "");
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  EXPECT_EQ(*first, "");  // none yet: reading stores nothing
  EXPECT_EQ(*store_->ShareClusterSecret(ClusterSecret::kJoinTokenHash, Hash('1')), Hash('1'));
  auto other = Open();
  EXPECT_EQ(*other->ShareClusterSecret(ClusterSecret::kJoinTokenHash, Hash('2')), Hash('1'));
  EXPECT_EQ(*other->ShareClusterSecret(ClusterSecret::kJoinTokenHash, ""), Hash('1'));
  // Each secret on its own.
  EXPECT_EQ(*other->ShareClusterSecret(ClusterSecret::kSessionKeyCheck, Hash('3')), Hash('3'));
  EXPECT_EQ(*store_->ShareClusterSecret(ClusterSecret::kSessionKeyCheck, ""), Hash('3'));
}

TEST_P(LeaseTest, NodesKeepTheirTokenHash) {
  NodeRecord node{"n1", "{}", NodeState::kReady, Seconds(1), Hash('1'), Hash('2')};
  ASSERT_TRUE(store_->UpsertNode(node).ok());
  Reopen();
  auto nodes = store_->ListNodes();
  ASSERT_TRUE(nodes.ok());
  ASSERT_EQ(nodes->size(), 1u);
  EXPECT_EQ(nodes->front().node_token_hash, Hash('2'));
  // The token itself is refused, and not echoed.
  node.node_token_hash = "the-token-in-clear";
  Status refused = store_->UpsertNode(node);
  EXPECT_EQ(refused.code(), StatusCode::kInvalidArgument);
  EXPECT_THAT(refused.message(), ::testing::Not(HasSubstr("the-token-in-clear")));
}

}  // namespace
}  // namespace corral::store

namespace corral::store {
namespace {

TEST(SingleServerLock, ASecondServerOnOneSqliteFileIsRefusedNamingTheFileAndThePid) {
  char pattern[] = "/tmp/corral-lock-test-XXXXXX";
  ASSERT_NE(mkdtemp(pattern), nullptr);
  const std::string db = std::string(pattern) + "/corral.db";
  auto first = SingleServerLock::Acquire("sqlite:" + db);
  ASSERT_TRUE(first.ok()) << first.status().ToString();
  ASSERT_NE(*first, nullptr);
  auto second = SingleServerLock::Acquire("sqlite://" + db);
  EXPECT_EQ(second.status().code(), StatusCode::kFailedPrecondition);
  EXPECT_THAT(second.status().message(), HasSubstr(db));
  EXPECT_THAT(second.status().message(), HasSubstr("(pid " + std::to_string(getpid()) + ")"));
  EXPECT_THAT(second.status().message(), HasSubstr("use PostgreSQL for more than one server"));
  // Released with its holder: the next server starts.
  first->reset();
  auto third = SingleServerLock::Acquire("sqlite:" + db);
  EXPECT_TRUE(third.ok()) << third.status().ToString();
  std::filesystem::remove_all(pattern);
}

TEST(SingleServerLock, PostgresStoresTakeNone) {
  auto none = SingleServerLock::Acquire("postgres://corral@db/corral");
  ASSERT_TRUE(none.ok());
  EXPECT_EQ(*none, nullptr);
}

}  // namespace
}  // namespace corral::store
