// Fuzzes the simulator's reader of Alibaba openb pod lists (sim/trace.h, ReadOpenbPods, and
// DetectTraceFormat, which tells CSV formats by their header: `corral sim replay --trace
// pods.csv`), through sim/csv.h's CSV reader.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time.
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corral::fuzz::InputFile input(".csv");
  const std::string& path = input.Write(data, size);
  (void)corral::sim::DetectTraceFormat(path);
  (void)corral::sim::ReadOpenbPods(path);
  return 0;
}
