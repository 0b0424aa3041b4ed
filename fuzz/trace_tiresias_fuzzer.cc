// Fuzzes the simulator's reader of Tiresias traces (sim/trace.h, ReadTiresias: `corral sim
// replay --trace jobs.csv --format tiresias`), through sim/csv.h's CSV reader, with gangs split
// at 8 GPUs per task (a cluster of 8-GPU nodes) and at 3 (which most GPU counts do not divide).
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
  (void)corral::sim::ReadTiresias(path, 8);
  (void)corral::sim::ReadTiresias(path, 3);
  return 0;
}
