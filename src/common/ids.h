// Strong ids: a JobId cannot be passed where a NodeId is expected.
#pragma once

#include <compare>
#include <cstdint>
#include <functional>

namespace corral {

template <typename Tag>
class Id {
 public:
  constexpr Id() = default;
  constexpr explicit Id(int64_t value) : value_(value) {}
  constexpr int64_t value() const { return value_; }
  constexpr auto operator<=>(const Id&) const = default;

 private:
  int64_t value_ = -1;
};

struct JobIdTag {};
using JobId = Id<JobIdTag>;

}  // namespace corral

template <typename Tag>
struct std::hash<corral::Id<Tag>> {
  size_t operator()(corral::Id<Tag> id) const { return std::hash<int64_t>()(id.value()); }
};
