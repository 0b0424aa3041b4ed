// For the server's tests: a fresh SQLite store in a temporary directory named after the running
// test (and the process), removed with it.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include "store/store.h"

namespace corral::server {

class TestStore {
 public:
  // `prefix` names the kind of test ("controller", "gpu-history"). A store that cannot be opened
  // is a test failure (store() is then null).
  explicit TestStore(const std::string& prefix)
      : dir_(std::filesystem::temp_directory_path() /
             ("corral-" + prefix + "-" + std::to_string(::getpid()) + "-" +
              ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto store = store::OpenStore("sqlite:" + db_path());
    EXPECT_TRUE(store.ok()) << store.status().ToString();
    if (store.ok()) store_ = std::move(store).value();
  }
  ~TestStore() {
    store_.reset();
    std::filesystem::remove_all(dir_);
  }
  TestStore(const TestStore&) = delete;
  TestStore& operator=(const TestStore&) = delete;

  store::Store* store() { return store_.get(); }
  // The directory, for other files a test needs (policy files).
  const std::filesystem::path& dir() const { return dir_; }
  std::string db_path() const { return (dir_ / "corral.db").string(); }

 private:
  std::filesystem::path dir_;
  std::unique_ptr<store::Store> store_;
};

}  // namespace corral::server
