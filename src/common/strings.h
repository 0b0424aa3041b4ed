// Small text helpers that every module needs and the standard library lacks. ASCII only: they are
// for protocol text (HTTP headers, cookies, engine output), never for people's names.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace corral {

// `text` without leading and trailing blanks (space, tab, CR, LF).
std::string Trim(std::string_view text);
// `text` with A-Z lowered (other bytes unchanged).
std::string Lower(std::string text);
// The parts of `text` between occurrences of `separator` ("a,,b" -> "a", "", "b"; "" -> "").
std::vector<std::string> Split(std::string_view text, char separator);
// The parts joined with `separator` between them ("" for none).
std::string Join(const std::vector<std::string>& parts, std::string_view separator);
// Of `names`, the one closest to `word` by edit distance (insertions, deletions, substitutions
// and swaps of two neighbours each cost 1), for "did you mean" on a mistyped command or flag:
// only one at most max(1, size of `word` / 3) edits away; the first listed of equally close
// ones; "" when none is that close.
std::string NearestName(std::string_view word, const std::vector<std::string>& names);

}  // namespace corral
