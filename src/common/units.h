// Units are types: a quantity of GPUs, milli-GPU, CPU milli, MiB or seconds cannot be mixed up
// with another across an interface. Each is a thin wrapper over int64 with the arithmetic that
// makes sense for a quantity (sum, difference, scaling by a plain count, comparison).
#pragma once

#include <compare>
#include <cstdint>

namespace corral {

template <typename Tag>
class Quantity {
 public:
  constexpr Quantity() = default;
  constexpr explicit Quantity(int64_t value) : value_(value) {}

  constexpr int64_t value() const { return value_; }

  constexpr auto operator<=>(const Quantity&) const = default;
  constexpr Quantity operator+(Quantity o) const { return Quantity(value_ + o.value_); }
  constexpr Quantity operator-(Quantity o) const { return Quantity(value_ - o.value_); }
  constexpr Quantity operator*(int64_t k) const { return Quantity(value_ * k); }
  constexpr Quantity& operator+=(Quantity o) {
    value_ += o.value_;
    return *this;
  }
  constexpr Quantity& operator-=(Quantity o) {
    value_ -= o.value_;
    return *this;
  }

 private:
  int64_t value_ = 0;
};

struct GpuCountTag {};
struct MilliGpuTag {};
struct CpuMilliTag {};
struct MemoryMibTag {};
struct SecondsTag {};

using GpuCount = Quantity<GpuCountTag>;    // whole GPUs
using MilliGpu = Quantity<MilliGpuTag>;    // a share of one GPU; 1000 = one whole GPU
using CpuMilli = Quantity<CpuMilliTag>;    // 1000 = one CPU core
using MemoryMib = Quantity<MemoryMibTag>;  // mebibytes
using Seconds = Quantity<SecondsTag>;      // a duration or a point on a (virtual) clock

inline constexpr MilliGpu kWholeGpu{1000};

}  // namespace corral
