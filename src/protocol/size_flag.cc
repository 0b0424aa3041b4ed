#include "protocol/size_flag.h"

#include <charconv>

namespace corral::protocol {

namespace {

std::optional<int> WholeNumber(std::string_view text) {
  int n = 0;
  auto [end, err] = std::from_chars(text.data(), text.data() + text.size(), n);
  if (err != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return n;
}

}  // namespace

Result<SizeFlag> ParseSizeFlag(std::string_view text, const std::string& flag) {
  const std::string shown(text);
  // A dash after the first character separates MIN and MAX; a leading one is a sign.
  const size_t dash = text.size() > 1 ? text.find('-', 1) : std::string_view::npos;
  if (dash == std::string_view::npos) {
    const std::optional<int> n = WholeNumber(text);
    if (!n) return InvalidArgument(flag + ": expected N or MIN-MAX, got '" + shown + "'");
    return SizeFlag{*n, *n};
  }
  const std::optional<int> min = WholeNumber(text.substr(0, dash));
  const std::optional<int> max = WholeNumber(text.substr(dash + 1));
  if (!min || !max) return InvalidArgument(flag + ": expected N or MIN-MAX, got '" + shown + "'");
  if (*min > *max) return InvalidArgument(flag + ": " + shown + ": MIN must not exceed MAX");
  if (*min < 1 || *max > model::kMaxElasticSize) {
    return InvalidArgument(flag + ": " + shown + ": a range must lie within 1-" +
                           std::to_string(model::kMaxElasticSize));
  }
  return SizeFlag{*min, *max};
}

}  // namespace corral::protocol
