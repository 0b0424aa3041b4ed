// Seeded randomness. Nothing in corral uses global random state: whoever needs randomness is
// handed an Rng, so that the same seed gives the same run, byte for byte, on every machine
// (the standard distributions are implementation-defined, so we do not use them).
#pragma once

#include <cstddef>
#include <cstdint>
#include <utility>
#include <vector>

namespace corral {

// Interface so that tests can script the draws.
class Rng {
 public:
  virtual ~Rng() = default;
  // A uniformly distributed 64-bit value.
  virtual uint64_t Next() = 0;

  // Uniform integer in [0, n); n must be > 0. Unbiased (rejection sampling).
  uint64_t Uniform(uint64_t n);
  // Uniform double in [0, 1).
  double UniformDouble();

  // Fisher-Yates shuffle driven by Uniform().
  template <typename T>
  void Shuffle(std::vector<T>& items) {
    for (size_t i = items.size(); i > 1; --i) {
      size_t j = Uniform(i);
      std::swap(items[i - 1], items[j]);
    }
  }
};

// SplitMix64 feeding xoshiro256**: fast, small state, good statistical quality.
class SeededRng final : public Rng {
 public:
  explicit SeededRng(uint64_t seed);
  uint64_t Next() override;

 private:
  uint64_t s_[4];
};

// One step of SplitMix64: a good 64-bit mixing function for seeded hashing.
uint64_t SplitMix64(uint64_t x);
// FNV-1a of a string; combined with SplitMix64 it gives seeded, order-independent ranks.
uint64_t HashString(const char* data, size_t size);

}  // namespace corral
