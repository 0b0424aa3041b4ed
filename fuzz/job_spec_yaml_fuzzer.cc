// Fuzzes what `corral submit -f FILE` does with a job file before it sends it
// (cli/commands.cc): common/config_file.h's ParseJsonOrYaml (JSON, else YAML through yaml-cpp,
// with its limits on size, depth and alias expansion), the document dumped as the request body
// it becomes, and, for a mapping, the CLI's own check with the job spec codec
// (protocol::ParseJobSpec as submitted).
//
// What must hold, for any input: no crash, no uncaught exception (yaml-cpp's and nlohmann's
// included), no leak, no ASan or UBSan report, and bounded time and memory (libFuzzer's
// -timeout and -rss_limit_mb: a document expanding past ParseJsonOrYaml's limits is refused,
// not built).
#include <cstddef>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <string>

#include "common/config_file.h"
#include "protocol/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  auto document = corral::ParseJsonOrYaml(text, "job.yaml");
  if (!document.ok()) return 0;
  (void)document->dump();  // the request body
  if (!document->is_object()) return 0;
  auto spec = corral::protocol::ParseJobSpec(*document);
  if (spec.ok()) (void)corral::protocol::ToJson(*spec).dump();
  return 0;
}
