// Fuzzes the job spec's JSON codec (protocol/job_spec.h) as the server reads it: the body of
// POST /api/v1/jobs and /api/v1/sessions (ParseJson with the API's limits, then ParseJobSpec as
// submitted), a job view an older CLI reads (shown), and a spec read back from the store
// (stored).
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time (libFuzzer's -timeout); and for a spec the codec accepts: its array
// elements can be made, and the spec as stored (ToJson) dumps and, read back as a stored spec,
// is accepted and stored the same (the server reads back what it wrote).
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <nlohmann/json.hpp>
#include <string>
#include <string_view>

#include "common/json_parse.h"
#include "protocol/job_spec.h"

namespace {

using corral::protocol::SpecOrigin;

// Prints why the round trip failed and aborts (libFuzzer keeps the input).
[[noreturn]] void Fail(const nlohmann::json& stored, const std::string& why) {
  fprintf(stderr, "job_spec_json_fuzzer: the stored spec %s %s\n", stored.dump().c_str(),
          why.c_str());
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto json = corral::ParseJson(text, "request body");
  if (!json.ok()) return 0;
  for (SpecOrigin origin : {SpecOrigin::kSubmitted, SpecOrigin::kShown, SpecOrigin::kStored}) {
    auto spec = corral::protocol::ParseJobSpec(*json, origin);
    if (!spec.ok()) continue;
    (void)corral::protocol::ArrayElements(*spec);
    const nlohmann::json stored = corral::protocol::ToJson(*spec);
    (void)stored.dump();
    if (origin != SpecOrigin::kStored) continue;
    auto again = corral::protocol::ParseJobSpec(stored, SpecOrigin::kStored);
    if (!again.ok()) Fail(stored, "is refused: " + again.status().ToString());
    if (corral::protocol::ToJson(*again) != stored) {
      Fail(stored, "reads back as " + corral::protocol::ToJson(*again).dump());
    }
  }
  return 0;
}
