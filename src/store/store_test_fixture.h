// Test-only: the fixture every store test runs under, once per backend. SQLite gets a fresh file
// in a temporary folder; PostgreSQL a fresh schema in the database named by
// CORRAL_TEST_POSTGRES_URL (scripts/with_postgres.sh starts a throwaway server and sets it).
#pragma once

#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "store/postgres_connection.h"
#include "store/sqlite_connection.h"
#include "store/store.h"

namespace corral::store {

enum class Backend { kSqlite, kPostgres };

inline std::string BackendName(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "Sqlite" : "Postgres";
}

// How GoogleTest prints a Backend (in test names listed by CTest).
inline void PrintTo(Backend backend, std::ostream* os) {
  *os << (backend == Backend::kSqlite ? "sqlite" : "postgres");
}

// Crash tests: forks a child that runs `child(fd)`, which writes one int64 to `fd` for each
// write it saw acknowledged (8 bytes < PIPE_BUF: each write is atomic, so values from several
// threads never interleave) and never stops on its own; SIGKILLs it once it acknowledged
// `at_least`, and returns every value it wrote before the kill (fewer: the test fails). The
// child must open its own store: no database handle crosses the fork.
inline std::vector<int64_t> AcknowledgedBeforeSigkill(size_t at_least,
                                                      const std::function<void(int fd)>& child) {
  // One int64 from fd within 30 s; false on EOF, error or timeout.
  auto read_value = [](int fd, int64_t* value) {
    char* out = reinterpret_cast<char*>(value);
    size_t got = 0;
    while (got < sizeof(*value)) {
      pollfd p{fd, POLLIN, 0};
      if (poll(&p, 1, 30000) <= 0) return false;
      ssize_t n = read(fd, out + got, sizeof(*value) - got);
      if (n <= 0) return false;
      got += static_cast<size_t>(n);
    }
    return true;
  };
  std::vector<int64_t> acknowledged;
  int fds[2];
  if (pipe(fds) != 0) {
    ADD_FAILURE() << "pipe failed";
    return acknowledged;
  }
  pid_t pid = fork();
  if (pid == 0) {
    close(fds[0]);
    child(fds[1]);
    _exit(0);
  }
  close(fds[1]);
  int64_t value = 0;
  while (pid > 0 && acknowledged.size() < at_least && read_value(fds[0], &value)) {
    acknowledged.push_back(value);
  }
  if (pid > 0) kill(pid, SIGKILL);
  while (read_value(fds[0], &value)) acknowledged.push_back(value);  // written before the kill
  close(fds[0]);
  int wstatus = 0;
  if (pid < 0 || waitpid(pid, &wstatus, 0) != pid) {
    ADD_FAILURE() << "fork or waitpid failed";
  } else if (!WIFSIGNALED(wstatus) || WTERMSIG(wstatus) != SIGKILL) {
    ADD_FAILURE() << "the child ended on its own (exit status " << WEXITSTATUS(wstatus)
                  << ") after acknowledging " << acknowledged.size();
  }
  EXPECT_GE(acknowledged.size(), at_least);
  return acknowledged;
}

class StoreTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    if (GetParam() == Backend::kSqlite) {
      char pattern[] = "/tmp/corral-store-test-XXXXXX";
      ASSERT_NE(mkdtemp(pattern), nullptr);
      dir_ = pattern;
      url_ = "sqlite:" + dir_ + "/corral.db";
    } else {
      const char* base = std::getenv("CORRAL_TEST_POSTGRES_URL");
      if (base == nullptr || *base == '\0') {
        GTEST_SKIP() << "CORRAL_TEST_POSTGRES_URL is unset; run the tests under "
                        "scripts/with_postgres.sh to test PostgreSQL";
      }
      auto admin = PostgresConnection::Open(base);
      ASSERT_TRUE(admin.ok()) << admin.status().ToString();
      admin_ = std::move(admin).value();
      static std::atomic<int> counter{0};
      schema_ = "corral_test_" + std::to_string(getpid()) + "_" + std::to_string(counter++);
      ASSERT_TRUE(admin_
                      ->ExecuteScript("DROP SCHEMA IF EXISTS " + schema_ +
                                      " CASCADE; CREATE SCHEMA " + schema_)
                      .ok());
      std::string b = base;
      url_ = b + (b.find('?') == std::string::npos ? "?" : "&") + "options=-csearch_path%3D" +
             schema_ + "&application_name=" + schema_;
    }
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  void TearDown() override {
    store_.reset();
    if (admin_) {
      EXPECT_TRUE(admin_->ExecuteScript("DROP SCHEMA " + schema_ + " CASCADE").ok());
    }
    if (!dir_.empty()) std::filesystem::remove_all(dir_);
  }

  // Opens the store at url_ (a new connection); null (with a failure) when it cannot.
  std::unique_ptr<Store> Open() {
    auto store = OpenStore(url_);
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    return store.ok() ? std::move(store).value() : nullptr;
  }

  // Closes the store and opens it again: what a restarted server sees.
  void Reopen() {
    store_.reset();
    store_ = Open();
    ASSERT_NE(store_, nullptr);
  }

  // A raw connection to the same database, for schema-level checks.
  std::unique_ptr<SqlConnection> Connect() {
    if (GetParam() == Backend::kSqlite) {
      auto c = SqliteConnection::Open(dir_ + "/corral.db");
      EXPECT_TRUE(c.ok()) << c.status().ToString();
      return c.ok() ? std::move(c).value() : nullptr;
    }
    auto c = PostgresConnection::Open(url_);
    EXPECT_TRUE(c.ok()) << c.status().ToString();
    return c.ok() ? std::move(c).value() : nullptr;
  }

  // Users alice (id returned) and bob, projects vision and nlp.
  int64_t Seed() {
    auto alice = store_->CreateUser("alice", false, Seconds(100));
    EXPECT_TRUE(alice.ok()) << alice.status().ToString();
    EXPECT_TRUE(store_->CreateUser("bob", false, Seconds(100)).ok());
    EXPECT_TRUE(store_->CreateProject("vision", "", Seconds(100)).ok());
    EXPECT_TRUE(store_->CreateProject("nlp", "", Seconds(100)).ok());
    return alice.ok() ? alice->id : 0;
  }

  static JobRecord MakeJob(std::string name, std::string project = "vision",
                           std::string user = "alice", int64_t submit = 1000) {
    JobRecord j;
    j.name = std::move(name);
    j.user = std::move(user);
    j.project = std::move(project);
    j.spec_json = R"({"tasks":1,"gpus":1})";
    j.submit_time = Seconds(submit);
    return j;
  }

  std::string url_;
  std::unique_ptr<Store> store_;
  // PostgreSQL: this test's schema, also the application_name of the store's connections.
  std::string schema_;

 private:
  std::string dir_;  // SQLite: the temporary folder
  std::unique_ptr<PostgresConnection> admin_;
};

}  // namespace corral::store
