// Test helpers for job specs, shared by the protocol's and the server's tests.
#pragma once

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "protocol/job_spec.h"

namespace corral::protocol::spec_testing {

// A spec running `true` with `resources`, `procs_per_node` and `tasks`.
inline nlohmann::json Spec(nlohmann::json resources, int procs_per_node = 1, int tasks = 1) {
  return {{"command", {"true"}},
          {"resources", std::move(resources)},
          {"procs_per_node", procs_per_node},
          {"tasks", tasks}};
}

// `spec` parsed; a test failure (and an empty spec) when the codec refuses it.
inline JobSpec Parse(const nlohmann::json& spec) {
  auto parsed = ParseJobSpec(spec);
  EXPECT_TRUE(parsed.ok()) << parsed.status().ToString();
  return parsed.ok() ? *parsed : JobSpec{};
}

}  // namespace corral::protocol::spec_testing
