// Test support shared by the simulator's tests: where their input files are.
#pragma once

#include <string>

namespace corral::sim {

// The path of `name` in src/sim/testdata/ (CORRAL_SIM_TESTDATA, which the test targets define).
inline std::string TestData(const std::string& name) {
  return std::string(CORRAL_SIM_TESTDATA) + "/" + name;
}

}  // namespace corral::sim
