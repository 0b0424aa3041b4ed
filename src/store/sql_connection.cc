#include "store/sql_connection.h"

#include <charconv>

namespace corral::store {

std::optional<int64_t> SqlRow::OptInt(size_t i) const {
  const SqlValue& cell = cells_.at(i);
  if (const auto* v = std::get_if<int64_t>(&cell)) return *v;
  if (const auto* s = std::get_if<std::string>(&cell)) {
    int64_t v = 0;
    auto [end, ec] = std::from_chars(s->data(), s->data() + s->size(), v);
    // Every column read as an integer is declared INTEGER/BIGINT, so a parse failure is a schema
    // bug; read it as 0 rather than crash.
    if (ec != std::errc() || end != s->data() + s->size()) return 0;
    return v;
  }
  return std::nullopt;
}

int64_t SqlRow::Int(size_t i) const { return OptInt(i).value_or(0); }

std::string SqlRow::Text(size_t i) const {
  const SqlValue& cell = cells_.at(i);
  if (const auto* s = std::get_if<std::string>(&cell)) return *s;
  if (const auto* v = std::get_if<int64_t>(&cell)) return std::to_string(*v);
  return "";
}

}  // namespace corral::store
