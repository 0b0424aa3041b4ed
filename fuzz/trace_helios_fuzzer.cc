// Fuzzes the simulator's reader of Helios / Philly-style traces (sim/trace.h, ReadHelios:
// `corral sim replay --trace jobs.csv --format helios`), through sim/csv.h's CSV reader.
//
// What must hold, for any input: no crash, no uncaught exception, no leak, no ASan or UBSan
// report, and bounded time.
#include <cstddef>
#include <cstdint>

#include "input_file.h"
#include "sim/trace.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static corral::fuzz::InputFile input(".csv");
  (void)corral::sim::ReadHelios(input.Write(data, size));
  return 0;
}
