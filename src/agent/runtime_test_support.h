// Test support shared by the agent's runtime tests: waiting for a task's status or output by
// polling a Runtime, failing the test (not throwing) at a deadline.
#pragma once

#include <gtest/gtest.h>

#include <chrono>
#include <functional>
#include <string>
#include <thread>

#include "agent/runtime.h"

namespace corral::agent {

// The cluster and node the runtime tests' runtimes serve, and where that puts their files under
// the work dir (process_runtime.h).
inline constexpr char kTestClusterId[] = "0123456789abcdef";
inline constexpr char kTestNodeName[] = "node-a";
inline std::string TestHome(const std::string& work_dir) {
  return work_dir + "/clusters/" + kTestClusterId + "/" + kTestNodeName;
}

// Polls until `done` holds for the task's status; fails the test naming `what` at the deadline.
// Returns the last status seen.
inline TaskStatus WaitForStatus(Runtime& runtime, const TaskKey& key,
                                const std::function<bool(const TaskStatus&)>& done,
                                const std::string& what, std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  TaskStatus last;
  while (std::chrono::steady_clock::now() < deadline) {
    for (const TaskStatus& s : runtime.Poll()) {
      if (s.key == key) last = s;
    }
    if (last.key == key && done(last)) return last;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "timed out waiting for " << what << "; last state "
                << ProcessStateName(last.state) << " message '" << last.message << "'";
  return last;
}

// Waits until the task's stdout contains `text` (e.g. "ready" after a trap is installed); fails
// the test when the task ends first or at the deadline.
inline void WaitForStdout(Runtime& runtime, const TaskKey& key, const std::string& text,
                          std::chrono::seconds within) {
  const auto deadline = std::chrono::steady_clock::now() + within;
  while (std::chrono::steady_clock::now() < deadline) {
    auto out = runtime.ReadLog(key, LogStream::kStdout, 0, 1 << 20);
    if (out.ok() && out->find(text) != std::string::npos) return;
    for (const TaskStatus& s : runtime.Poll()) {
      if (s.key == key && IsTerminal(s.state)) {
        auto err = runtime.ReadLog(key, LogStream::kStderr, 0, 1 << 20);
        ADD_FAILURE() << "the task ended (" << s.message << ") before printing '" << text
                      << "'; stderr: " << (err.ok() ? *err : "");
        return;
      }
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  ADD_FAILURE() << "timed out waiting for '" << text << "' in the task's stdout";
}

}  // namespace corral::agent
