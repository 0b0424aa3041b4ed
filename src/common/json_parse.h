// JSON from outside the process (request bodies, answers from another corral, files people
// give) parsed with limits: a document's size, and its nesting depth, both checked before the
// parser builds anything. nlohmann::json parses iteratively, but copying, dumping and comparing
// a value recurse: a body of 100,000 nested objects parsed whole would exhaust the stack of
// whatever touched it next.
// Every reader of outside JSON goes through ParseJson (docs/security.md, "Limits").
#pragma once

#include <cstddef>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/status.h"

namespace corral {

// Deepest nesting of objects and arrays accepted: a job spec needs 4, an agent report 5.
inline constexpr int kMaxJsonDepth = 64;

struct JsonLimits {
  size_t max_bytes = 1 << 20;  // 1 MiB, as the API's body limit
  int max_depth = kMaxJsonDepth;
};

// For an answer of a corral server to its agents and clients: larger (a heartbeat answer with
// 1,000 launches, a page of 1,000 jobs), as deep.
inline constexpr JsonLimits kServerAnswerLimits{size_t{256} << 20, kMaxJsonDepth};

// Parses `text` as one JSON value. Errors name `what` ("request body", a file's path) and the
// limit or the syntax error: ResourceExhausted when `text` is over max_bytes; InvalidArgument
// when it nests deeper than max_depth ("nests deeper than the limit of 64 levels (at byte
// 812)") or is not JSON ("not valid JSON: parse error at line 1, column 3: ..."), a number out
// of range included. A document over either limit is refused in one pass over its bytes,
// without allocating.
Result<nlohmann::json> ParseJson(std::string_view text, const std::string& what,
                                 const JsonLimits& limits = {});

// ParseJson for a document that is one array, read an element at a time: `each` gets each element
// (index, value; it may move from the value) as soon as the element is parsed, and the array is
// never built whole, so a long list costs the memory of its largest element rather than the
// whole tree (a 1,000-job page: one job's object instead of 1,000). Errors as ParseJson, and
// InvalidArgument "WHAT: must be a JSON array" for another document; the first error `each`
// returns is returned (the rest of the text is still checked as JSON, and not passed on).
Status ParseJsonArray(std::string_view text, const std::string& what, const JsonLimits& limits,
                      const std::function<Status(size_t, nlohmann::json&)>& each);

// ParseJson's depth check alone: InvalidArgument naming `what`, the limit and the offset of the
// first bracket or brace past it (outside strings). Also bounds the flow nesting of YAML.
Status CheckJsonDepth(std::string_view text, const std::string& what, int max_depth);

// ParseJson's value, or null when `text` is not JSON within the limits: for readers that take
// anything else as absent (a problem's detail, an optional file, a value that may be text).
nlohmann::json ParseJsonOrNull(std::string_view text, const JsonLimits& limits = {});

}  // namespace corral
